#include "core/passes/rewrite.h"

#include "core/infer.h"
#include "core/manager.h"

namespace kgrad {
namespace passes {

CNode* Match(AnfNode* n, PrimId id) {
  CNode* c = n->AsCNode();
  return c != nullptr && c->IsPrim(id) ? c : nullptr;
}

std::optional<int64_t> ConstInt(const AnfNode* n) {
  const Value* v = ConstantOf(n);
  if (v != nullptr && v->is_scalar() && v->scalar().is_int()) return v->scalar().AsInt();
  return std::nullopt;
}

const std::string* ConstString(const AnfNode* n) {
  const Value* v = ConstantOf(n);
  return v != nullptr && v->is_string() ? &v->str() : nullptr;
}

bool IsEmptyEnv(const AnfNode* n) {
  const Value* v = ConstantOf(n);
  return v != nullptr && v->is_env() && v->env().empty();
}

CNode* NewOp(FuncGraph* g, const PrimitivePtr& prim, std::vector<AnfNode*> args) {
  std::vector<AbstractPtr> abstracts;
  bool known = true;
  for (AnfNode* a : args) {
    abstracts.push_back(a->abstract());
    known &= a->abstract() != nullptr;
  }
  args.insert(args.begin(), g->NewValueNode(Value::Prim(prim)));
  CNode* c = g->NewCNode(std::move(args));
  if (known) {
    absl::StatusOr<AbstractPtr> a = InferPrimitiveCall(*prim, abstracts);
    if (a.ok()) c->set_abstract(*a);
  }
  return c;
}

CNode* NewOp(FuncGraph* g, PrimId id, std::vector<AnfNode*> args, AttrMap attrs) {
  return NewOp(g, g->module()->Prim(id, std::move(attrs)), std::move(args));
}

const AbstractTensor* KnownTensor(const AnfNode* n) {
  const AbstractTensor* t = AsTensor(n->abstract());
  return t != nullptr && t->shape_known() ? t : nullptr;
}

bool SameTensorType(const AnfNode* a, const AnfNode* b) {
  const AbstractTensor* x = KnownTensor(a);
  const AbstractTensor* y = KnownTensor(b);
  return x != nullptr && y != nullptr && x->dtype() == y->dtype() && x->shape() == y->shape();
}

std::vector<FuncGraph*> Graphs(Module& m, FuncGraph* root) { return m.manager().Reachable({root}); }

}  // namespace passes
}  // namespace kgrad
