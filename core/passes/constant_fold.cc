#include "core/passes/constant_fold.h"

#include <optional>

namespace kgrad {
namespace {

// Two's-complement wrapping, as integer tensors wrap: overflow in a graph's scalar
// arithmetic gives a defined result, never undefined behaviour in C++.
int64_t WrapAdd(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t WrapSub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
int64_t WrapMul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }
// Truncating division (b != 0); INT64_MIN / -1 wraps to INT64_MIN.
int64_t WrapDiv(int64_t a, int64_t b) { return b == -1 ? WrapSub(0, a) : a / b; }

std::optional<Scalar> FoldScalar(PrimId id, const Scalar& a, const Scalar& b) {
  bool f = a.is_float() || b.is_float();
  DType t = f ? (a.dtype() == DType::kFloat64 || b.dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32)
              : (a.dtype() == DType::kInt32 && b.dtype() == DType::kInt32 ? DType::kInt32 : DType::kInt64);
  double x = a.AsDouble(), y = b.AsDouble();
  int64_t i = a.AsInt(), j = b.AsInt();
  switch (id) {
    case PrimId::kScalarAdd: return f ? Scalar::Float(x + y, t) : Scalar::Int(WrapAdd(i, j), t);
    case PrimId::kScalarSub: return f ? Scalar::Float(x - y, t) : Scalar::Int(WrapSub(i, j), t);
    case PrimId::kScalarMul: return f ? Scalar::Float(x * y, t) : Scalar::Int(WrapMul(i, j), t);
    case PrimId::kScalarDiv:
      if (f) return Scalar::Float(x / y, t);
      if (j == 0) return std::nullopt;  // the run-time error is kept
      return Scalar::Int(WrapDiv(i, j), t);
    case PrimId::kScalarLt: return Scalar::Bool(x < y);
    case PrimId::kScalarLe: return Scalar::Bool(x <= y);
    case PrimId::kScalarGt: return Scalar::Bool(x > y);
    case PrimId::kScalarGe: return Scalar::Bool(x >= y);
    case PrimId::kScalarEq: return Scalar::Bool(x == y);
    case PrimId::kScalarNe: return Scalar::Bool(x != y);
    default: return std::nullopt;
  }
}

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
      if (std::optional<Scalar> r = FoldScalar(p->id(), a->scalar(), b->scalar())) {
        return c->graph()->NewValueNode(Value(*r));
      }
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
