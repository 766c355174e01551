#include "ad/prepare.h"

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/builder.h"
#include "core/cloner.h"
#include "core/infer.h"
#include "core/manager.h"
#include "core/module.h"
#include "core/status_macros.h"

namespace kgrad {
namespace {

std::vector<FuncGraph*> ScopeOf(FuncGraph* fg) {
  std::vector<FuncGraph*> out;
  for (FuncGraph* g : fg->module()->manager().Reachable({fg})) {
    if (g != fg && fg->IsSelfOrAncestor(g)) continue;
    out.push_back(g);
  }
  return out;
}

bool ConstantCondition(const AnfNode* n, bool* value) {
  const Value* v = ConstantOf(n);
  if (v != nullptr && v->is_scalar()) {
    *value = v->scalar().AsBool();
    return true;
  }
  const AbstractScalar* s = AsScalar(n->abstract());
  if (s != nullptr && s->value().has_value()) {
    *value = s->value()->AsBool();
    return true;
  }
  return false;
}

bool NeedsLowering(const std::vector<FuncGraph*>& scope, Manager& m) {
  for (FuncGraph* g : scope) {
    for (CNode* c : m.Info(g).order) {
      bool cond;
      if (c->IsPrim(PrimId::kPartial)) return true;
      if (c->IsPrim(PrimId::kSwitch) && ConstantCondition(c->arg(0), &cond)) return true;
      for (size_t i = 1; i < c->size(); ++i) {
        const Value* v = ConstantOf(c->input(i));
        if (v != nullptr && v->is_primitive()) return true;
      }
    }
  }
  return false;
}

// The number of arguments a function-valued node takes, from its constant or
// its inferred abstract.
absl::StatusOr<int> ArityOf(const AnfNode* f) {
  if (FuncGraph* g = GraphOf(f)) return static_cast<int>(g->parameters().size());
  const Value* v = ConstantOf(f);
  if (v != nullptr && v->is_primitive()) {
    const PrimitiveDef& d = v->primitive()->def();
    if (d.min_inputs == d.max_inputs) return d.min_inputs;
  }
  if (const AbstractFunction* fn = AsFunction(f->abstract())) {
    int arity = -1;
    for (const FuncAtom& a : fn->atoms()) {
      int n = -1;
      if (a.kind == FuncAtom::Kind::kGraph) n = static_cast<int>(a.graph->parameters().size());
      if (a.kind == FuncAtom::Kind::kPartial && a.fn->kind == FuncAtom::Kind::kGraph) {
        n = static_cast<int>(a.fn->graph->parameters().size() - a.bound.size());
      }
      if (n < 0 || (arity >= 0 && n != arity)) { arity = -1; break; }
      arity = n;
    }
    if (arity >= 0) return arity;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      f->Location(), ": cannot tell how many arguments this function takes, so its partial "
      "application cannot be differentiated (declare the graph's parameter types)"));
}

// partial(f, a...) -> @p(x...) = f(a..., x...), a closure over f and a.
absl::Status LowerPartial(CNode* c, Transaction* tr) {
  AnfNode* f = c->arg(0);
  KGRAD_ASSIGN_OR_RETURN(int arity, ArityOf(f));
  int bound = static_cast<int>(c->num_args()) - 1;
  if (arity < bound) {
    return absl::InvalidArgumentError(absl::StrCat(c->Location(), ": partial binds ", bound,
                                                   " arguments of a function taking ", arity));
  }
  FuncGraph* g = c->graph();
  GraphBuilder b(g->module(), absl::StrCat(g->name(), "_partial"), g);
  std::vector<AnfNode*> args;
  for (int i = 0; i < bound; ++i) args.push_back(c->arg(1 + i));
  for (int i = bound; i < arity; ++i) args.push_back(b.Param(absl::StrCat("x", i - bound)));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* w, b.Return(b.Call(f, args)));
  tr->Replace(c, g->NewValueNode(Value::Graph(w)));
  return absl::OkStatus();
}

// A primitive used as a value -> @prim(x...) = prim(x...).
absl::StatusOr<FuncGraph*> WrapPrimitive(Module* m, const PrimitivePtr& prim, const AnfNode* at) {
  const PrimitiveDef& d = prim->def();
  if (d.min_inputs != d.max_inputs) {
    return absl::InvalidArgumentError(absl::StrCat(
        at->Location(), ": primitive '", prim->name(),
        "' takes a variable number of inputs and cannot be differentiated as a value"));
  }
  GraphBuilder b(m, absl::StrCat("prim_", prim->name()));
  b.graph()->set_public(false);
  std::vector<AnfNode*> xs;
  for (int i = 0; i < d.min_inputs; ++i) xs.push_back(b.Param(absl::StrCat("x", i)));
  return b.Return(b.Op(prim, xs));
}

absl::Status Lower(const std::vector<FuncGraph*>& scope, Module* m) {
  Manager& manager = m->manager();
  std::vector<std::vector<CNode*>> orders;
  for (FuncGraph* g : scope) orders.push_back(manager.Info(g).order);
  Transaction tr(m);
  for (const auto& order : orders) {
    for (CNode* c : order) {
      bool cond;
      if (c->IsPrim(PrimId::kSwitch) && ConstantCondition(c->arg(0), &cond)) {
        tr.Replace(c, cond ? c->arg(1) : c->arg(2));
        continue;
      }
      if (c->IsPrim(PrimId::kPartial)) {
        KGRAD_RETURN_IF_ERROR(LowerPartial(c, &tr));
        continue;
      }
      for (size_t i = 1; i < c->size(); ++i) {
        const Value* v = ConstantOf(c->input(i));
        if (v == nullptr || !v->is_primitive()) continue;
        KGRAD_ASSIGN_OR_RETURN(FuncGraph* w, WrapPrimitive(m, v->primitive(), c));
        tr.SetEdge(c, static_cast<int>(i), c->graph()->NewValueNode(Value::Graph(w)));
      }
    }
  }
  tr.Commit();
  return absl::OkStatus();
}

absl::Status Infer(FuncGraph* fg, const std::vector<AbstractPtr>& arg_types) {
  if (!arg_types.empty()) return InferGraph(fg, arg_types).status();
  for (Parameter* p : fg->parameters()) {
    if (p->declared() == nullptr) return absl::OkStatus();  // nothing to start from
  }
  return EnsureTypes(fg);
}

}  // namespace

absl::StatusOr<FuncGraph*> PrepareForAd(FuncGraph* fg, const std::vector<AbstractPtr>& arg_types) {
  if (!arg_types.empty() && arg_types.size() != fg->parameters().size()) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", fg->name(), "' takes ",
                                                   fg->parameters().size(), " arguments, ",
                                                   arg_types.size(), " types given"));
  }
  Module* m = fg->module();
  KGRAD_RETURN_IF_ERROR(Infer(fg, arg_types));
  std::vector<FuncGraph*> scope = ScopeOf(fg);
  if (!NeedsLowering(scope, m->manager())) return fg;
  // Copy the graphs (roots: those whose enclosing graph is not copied too).
  std::vector<FuncGraph*> roots;
  absl::flat_hash_set<const FuncGraph*> in(scope.begin(), scope.end());
  for (FuncGraph* g : scope) {
    if (g->parent() == nullptr || !in.contains(g->parent())) roots.push_back(g);
  }
  CloneMap map = CloneGraphs(roots, "_ad");
  FuncGraph* copy = map.Graph(fg);
  // Lowering can expose more (a switch folded to a partial); repeat to a fixpoint.
  for (int round = 0; round < 8 && NeedsLowering(ScopeOf(copy), m->manager()); ++round) {
    KGRAD_RETURN_IF_ERROR(Lower(ScopeOf(copy), m));
    KGRAD_RETURN_IF_ERROR(Infer(copy, arg_types));
  }
  return copy;
}

}  // namespace kgrad
