#include "core/passes/rewrite.h"

#include <optional>

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

bool MayModify(const FuncGraph* g, const FuncGraph* root) {
  // A public graph other than the root belongs to the caller, and so does every
  // graph nested in it; passes read (and inline) them but never change them.
  for (const FuncGraph* p = g; p != nullptr; p = p->parent()) {
    if (p == root) return true;
    if (p->is_public()) return false;
  }
  return true;
}

std::vector<FuncGraph*> Graphs(Module& m, FuncGraph* root) {
  std::vector<FuncGraph*> out;
  for (FuncGraph* g : m.manager().Reachable({root})) {
    if (MayModify(g, root)) out.push_back(g);
  }
  return out;
}

namespace {

// The value every element of a constant (or fill / *_like) node has, if uniform.
std::optional<double> UniformConstant(const AnfNode* n) {
  if (const Value* v = ConstantOf(n)) {
    if (v->is_scalar()) return v->scalar().AsDouble();
    if (v->is_tensor() && v->tensor().device() == DeviceType::kCpu) {
      const Tensor& t = v->tensor();
      if (t.NumElements() == 0 || t.NumElements() > 4096) return std::nullopt;
      double first = t.ElementAsDouble(0);
      for (int64_t i = 1; i < t.NumElements(); ++i) {
        if (t.ElementAsDouble(i) != first) return std::nullopt;
      }
      return first;
    }
    return std::nullopt;
  }
  const CNode* c = n->AsCNode();
  if (c == nullptr) return std::nullopt;
  // zeros_like is a zero of whatever structure (tensor, tuple, env) its input has.
  if (c->IsPrim(PrimId::kZerosLike)) return 0.0;
  bool numeric = AsTensor(c->abstract()) != nullptr || AsScalar(c->abstract()) != nullptr;
  if (c->IsPrim(PrimId::kOnesLike) && numeric) return 1.0;
  if (c->IsPrim(PrimId::kFill)) return c->primitive()->GetFloat("value");
  return std::nullopt;
}

}  // namespace

bool IsZero(const AnfNode* n) {
  std::optional<double> v = UniformConstant(n);
  return v.has_value() && *v == 0.0;
}

bool IsOne(const AnfNode* n) {
  std::optional<double> v = UniformConstant(n);
  return v.has_value() && *v == 1.0;
}

AnfNode* ZerosOf(FuncGraph* g, const AnfNode* like) {
  const AbstractTensor* t = KnownTensor(like);
  if (t == nullptr) return nullptr;
  return NewOp(g, PrimId::kFill, {},
               {{"shape", std::vector<int64_t>(t->shape().begin(), t->shape().end())},
                {"value", 0.0},
                {"dtype", t->dtype()}});
}

}  // namespace passes

AnfNode* RewritePass::Resolve(AnfNode* n) const {
  auto it = replaced_.find(n);
  return it == replaced_.end() ? n : it->second;
}

AnfNode* RewritePass::In(const CNode* c, size_t i) const { return Resolve(c->input(i)); }

absl::StatusOr<bool> RewritePass::Run(Module& module, FuncGraph* root) {
  replaced_.clear();
  Manager& m = module.manager();
  Transaction tr(&module);
  std::vector<FuncGraph*> graphs = passes::Graphs(module, root);
  std::vector<std::vector<CNode*>> orders;
  for (FuncGraph* g : graphs) orders.push_back(m.Info(g).order);
  for (const auto& order : orders) {
    for (CNode* c : order) {
      AnfNode* r = Rewrite(c);
      if (r == nullptr || r == c) continue;
      r = Resolve(r);
      replaced_[c] = r;
      tr.Replace(c, r);
    }
  }
  replaced_.clear();
  return tr.Commit();
}
}  // namespace kgrad
