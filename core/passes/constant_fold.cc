#include "core/passes/constant_fold.h"

#include <optional>

#include "core/scalar_arith.h"

namespace kgrad {
namespace {

std::optional<bool> ConstCondition(const AnfNode* n) {
  const Value* v = ConstantOf(n);
  if (v == nullptr) return std::nullopt;
  if (v->is_scalar()) return v->scalar().AsBool();
  if (v->is_tensor() && v->tensor().dtype() == DType::kBool && v->tensor().NumElements() == 1 &&
      v->tensor().device() == DeviceType::kCpu) {
    return v->tensor().data<bool>()[0];
  }
  return std::nullopt;
}

}  // namespace

AnfNode* ConstantFoldPass::Rewrite(CNode* c) {
  const Primitive* p = c->primitive();
  if (p == nullptr) return nullptr;
  // switch(true, a, b) => a;  switch(false, a, b) => b
  if (p->id() == PrimId::kSwitch) {
    std::optional<bool> cond = ConstCondition(In(c, 1));
    if (!cond.has_value()) return nullptr;
    return *cond ? In(c, 2) : In(c, 3);
  }
  // scalar op of constants => the constant
  if (c->num_args() == 2) {
    const Value* a = ConstantOf(In(c, 1));
    const Value* b = ConstantOf(In(c, 2));
    if (a != nullptr && b != nullptr && a->is_scalar() && b->is_scalar()) {
      // (Integer division by zero is not folded: it fails at run time.)
      absl::StatusOr<Scalar> r = ApplyScalarOp(p->id(), a->scalar(), b->scalar());
      if (IsScalarBinaryOp(p->id()) && r.ok()) return c->graph()->NewValueNode(Value(*r));
    }
  }
  return FoldTensor(c, *p);
}

// prim(constants...) => constant, evaluated on the device, for small results of
// non-structural primitives.
AnfNode* ConstantFoldPass::FoldTensor(CNode* c, const Primitive& p) {
  // (A small fill folds too: its consumers may then fold; large ones stay fills.)
  if (evaluator_ == nullptr || p.def().structural) return nullptr;
  if (c->num_args() == 0 && p.id() != PrimId::kFill) return nullptr;
  const AbstractTensor* out = passes::KnownTensor(c);
  if (out == nullptr || NumElementsOf(out->shape()) > max_elements_) return nullptr;
  std::vector<Value> inputs;
  for (size_t i = 0; i < c->num_args(); ++i) {
    const Value* v = ConstantOf(In(c, i + 1));
    if (v == nullptr || !(v->is_tensor() || v->is_scalar())) return nullptr;
    inputs.push_back(*v);
  }
  absl::StatusOr<Value> r = evaluator_->Evaluate(p, std::move(inputs));
  if (!r.ok()) return nullptr;  // keep the node: the error will surface at run time
  return c->graph()->NewValueNode(*std::move(r));
}

}  // namespace kgrad
