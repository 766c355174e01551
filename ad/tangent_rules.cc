#include "ad/tangent_rules.h"

#include "absl/strings/str_cat.h"
#include "ad/transposed_jvp.h"
#include "core/passes/optimize.h"
#include "core/status_macros.h"

namespace kgrad {
namespace {

constexpr int64_t kMaxBakedElements = 64;

// A constant input the rule takes as a constant rather than as a parameter.
const Value* Baked(const AnfNode* n) {
  const ValueNode* v = n->AsValue();
  if (v == nullptr) return nullptr;
  const Value& value = v->value();
  if (value.is_graph() || value.is_primitive()) return nullptr;
  if (value.is_tensor() && value.tensor().NumElements() > kMaxBakedElements) return nullptr;
  return &value;
}

// Exact text of a baked constant (tensor elements in full: Value::ToString may
// abbreviate them).
std::string ConstantKey(const Value& v) {
  if (!v.is_tensor()) return v.ToString();
  const Tensor& t = v.tensor();
  std::string out = t.TypeString();
  for (int64_t i = 0; i < t.NumElements(); ++i) absl::StrAppend(&out, i ? "," : "{", t.ElementAsDouble(i));
  return out + "}";
}

std::string SignatureOf(const CNode* c, const std::vector<bool>& active) {
  std::string key = c->primitive()->ToString();
  for (size_t i = 0; i < c->num_args(); ++i) {
    const AnfNode* in = c->arg(i);
    const AbstractPtr& a = in->abstract();
    absl::StrAppend(&key, i ? ", " : "(", a != nullptr ? a->ToString() : "?");
    if (const Value* v = Baked(in)) absl::StrAppend(&key, "=", ConstantKey(*v));
    if (active[i]) key += "'";
  }
  return key + ")";
}

}  // namespace

bool CarriesTangent(const AbstractPtr& a) {
  if (a == nullptr) return true;
  switch (a->kind()) {
    case AbstractKind::kTensor:
      return IsDifferentiable(AsTensor(a)->dtype());
    case AbstractKind::kScalar:
      return IsFloating(AsScalar(a)->dtype());
    case AbstractKind::kEnv:
      return true;
    case AbstractKind::kTuple:
      for (const AbstractPtr& e : AsTuple(a)->elements()) {
        if (CarriesTangent(e)) return true;
      }
      return false;
    case AbstractKind::kList:
      return CarriesTangent(AsList(a)->element());
    default:
      return false;
  }
}

absl::StatusOr<AnfNode*> TangentRules::Apply(GraphBuilder& b, const CNode* c,
                                             const std::vector<bool>& active,
                                             const std::vector<AnfNode*>& xs,
                                             const std::vector<AnfNode*>& ts) {
  auto it = rules_.find(SignatureOf(c, active));
  if (it == rules_.end()) {
    return absl::InternalError(absl::StrCat(c->Location(), ": no tangent rule was derived for ",
                                            c->primitive()->ToString()));
  }
  std::vector<AnfNode*> args;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (Baked(c->arg(i)) == nullptr) args.push_back(xs[i]);
  }
  for (size_t i = 0; i < ts.size(); ++i) {
    if (!active[i]) continue;
    args.push_back(ts[i] != nullptr ? ts[i] : b.Op(PrimId::kZerosLike, {xs[i]}));
  }
  return b.Call(it->second, std::move(args));
}

absl::Status TangentRules::Derive(const CNode* c, const std::vector<bool>& active) {
  std::string key = SignatureOf(c, active);
  if (rules_.contains(key)) return absl::OkStatus();
  const Primitive& prim = *c->primitive();
  // p(x...) = P(x...), constants baked in.
  GraphBuilder pb(module_, absl::StrCat("prim_", prim.name()));
  std::vector<AnfNode*> inputs{c->input(0)};  // the primitive's value node
  for (size_t i = 0; i < c->num_args(); ++i) {
    const Value* v = Baked(c->arg(i));
    inputs.push_back(v != nullptr ? static_cast<AnfNode*>(pb.Const(*v))
                                  : pb.Param(absl::StrCat("x", i), c->arg(i)->abstract()));
  }
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* p, pb.Return(pb.graph()->NewCNode(inputs)));
  // Only the rule is kept: the graphs it is made from are left to the garbage
  // collector.
  OptimizeOptions o;
  absl::StatusOr<FuncGraph*> jvp = TransposedJvp(*module_, p, {}, &o);
  p->set_public(false);
  if (!jvp.ok()) {
    return absl::Status(jvp.status().code(), absl::StrCat(c->Location(), ": no tangent rule for ",
                                                          prim.ToString(), ": ", jvp.status().message()));
  }
  (*jvp)->set_public(false);
  // rule(x..., t_active...) = jvp_p(x..., t or 0)[1].
  GraphBuilder rb(module_, absl::StrCat("tangent_", prim.name()));
  std::vector<AnfNode*> xs, vs;
  for (Parameter* q : p->parameters()) xs.push_back(rb.Param(q->name(), q->declared()));
  size_t k = 0;
  for (size_t i = 0; i < c->num_args(); ++i) {
    if (Baked(c->arg(i)) != nullptr) continue;
    vs.push_back(active[i] ? static_cast<AnfNode*>(rb.Param(absl::StrCat("t", i), c->arg(i)->abstract()))
                           : rb.Op(PrimId::kZerosLike, {xs[k]}));
    ++k;
  }
  std::vector<AnfNode*> args = xs;
  args.insert(args.end(), vs.begin(), vs.end());
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* rule, rb.Return(rb.GetItem(rb.Call(*jvp, args), 1)));
  KGRAD_RETURN_IF_ERROR(Optimize(*module_, rule, o).status());
  rules_[key] = rule;
  return absl::OkStatus();
}

void TangentRules::Release() {
  for (auto& [key, rule] : rules_) rule->set_public(false);
  for (FuncGraph* g : held_) g->set_public(false);
  rules_.clear();  // garbage collection may delete them from here on
  held_.clear();
}

}  // namespace kgrad
