#include "ad/expand_differentiation.h"

#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ad/ad_context.h"
#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "ad/prepare.h"
#include "core/builder.h"
#include "core/infer.h"
#include "core/manager.h"
#include "core/status_macros.h"
#include "ops/differentiation.h"

namespace kgrad {
namespace {

bool IsDerivedOp(const AnfNode* n) {
  if (!n->is_cnode()) return false;
  const Primitive* p = n->AsCNode()->primitive();
  return p != nullptr && p->def().derived_args != nullptr;
}

absl::Status OpError(const CNode* c, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat(c->Location(), ": ", c->primitive()->name(), ": ", message));
}

std::vector<FuncGraph*> Roots(Module& m, FuncGraph* root) {
  if (root != nullptr) return {root};
  std::vector<FuncGraph*> roots;
  for (const auto& g : m.graphs()) {
    if (g->is_public() || g.get() == m.entry()) roots.push_back(g.get());
  }
  return roots;
}

std::vector<CNode*> Collect(Module& m, const std::vector<FuncGraph*>& roots) {
  std::vector<CNode*> out;
  for (FuncGraph* g : m.manager().Reachable(roots)) {
    for (CNode* c : m.manager().Info(g).order) {
      if (IsDerivedOp(c)) out.push_back(c);
    }
  }
  return out;
}

// The whole pass over one module: the operators still to expand, and the types
// inference found for undeclared parameters.
class Expander {
 public:
  Expander(Module& m, std::vector<FuncGraph*> roots, std::vector<AbstractPtr> root_args)
      : m_(m), roots_(std::move(roots)), root_args_(std::move(root_args)) {}

  absl::StatusOr<int> Run() {
    pending_ = Collect(m_, roots_);
    int expanded = 0;
    while (!pending_.empty()) {
      KGRAD_ASSIGN_OR_RETURN(bool progressed, Step(&expanded));
      if (!progressed) return Cycle();
    }
    return expanded;
  }

 private:
  // Expands (or rewrites the operand of) one operator that is ready.
  absl::StatusOr<bool> Step(int* expanded) {
    for (size_t i = 0; i < pending_.size(); ++i) {
      CNode* c = pending_[i];
      if (c->num_args() != 1) return OpError(c, "takes 1 input, the function to differentiate");
      KGRAD_ASSIGN_OR_RETURN(bool rewritten, Normalize(c));
      if (rewritten) return true;  // `pending_` changed
      FuncGraph* target = GraphOf(c->arg(0));
      if (target == nullptr || !Ready(target)) continue;
      pending_.erase(pending_.begin() + i);
      KGRAD_RETURN_IF_ERROR(Expand(c, target));
      ++*expanded;
      return true;
    }
    return false;
  }

  // No pending operator, `c` included, in the graphs the operand reaches
  // (innermost first; reaching `c` itself is a cycle). The enclosing graphs of a
  // closure are its scope, not its callees: an operator there does not count.
  bool Ready(FuncGraph* target) {
    std::vector<FuncGraph*> reach = m_.manager().Reachable({target});
    absl::flat_hash_set<const FuncGraph*> in_reach(reach.begin(), reach.end());
    for (CNode* other : pending_) {
      FuncGraph* g = other->graph();
      bool enclosing = g != target && target->IsSelfOrAncestor(g);
      if (in_reach.contains(g) && !enclosing) return false;
    }
    return true;
  }

  absl::Status Cycle() {
    CNode* c = pending_.front();
    if (GraphOf(c->arg(0)) == nullptr) {
      return OpError(c, "its operand is another differentiation operator that cannot be expanded");
    }
    return OpError(c, absl::StrCat("the graph it differentiates, '", GraphOf(c->arg(0))->name(),
                                   "', reaches this operator again (a graph that differentiates "
                                   "itself has no finite expansion)"));
  }

  // Rewrites an operand that is not yet a graph constant; true when `pending_`
  // changed (the caller rescans).
  absl::StatusOr<bool> Normalize(CNode* c) {
    AnfNode* o = c->arg(0);
    if (GraphOf(o) != nullptr) return false;
    if (IsDerivedOp(o)) return false;  // expanded first
    const Value* v = ConstantOf(o);
    if (v != nullptr && v->is_primitive()) return WrapPrimitive(c, *v->primitive());
    if (v != nullptr && !v->is_callable()) {
      return OpError(c, absl::StrCat("its operand '", o->DebugName(), "' is a constant ",
                                     v->TypeString(), ", not a function"));
    }
    if (o->is_cnode() && o->AsCNode()->IsPrim(PrimId::kSwitch)) return Distribute(c);
    if (o->is_cnode() && o->AsCNode()->IsPrim(PrimId::kPartial)) return BindPartial(c);
    return OpError(c, absl::StrCat(
                          "cannot tell statically which function '", o->DebugName(),
                          "' is: the operand must be a graph, a closure, a partial application "
                          "of one, or a switch between them, not a value computed at run time"));
  }

  // op(prim) -> op(@prim) with @prim(x...) = prim(x...).
  absl::StatusOr<bool> WrapPrimitive(CNode* c, const Primitive& prim) {
    const PrimitiveDef& d = prim.def();
    if (d.min_inputs != d.max_inputs || d.derived_args != nullptr) {
      return OpError(c, absl::StrCat("cannot differentiate primitive '", prim.name(),
                                     "' used as a value: it takes a variable number of inputs"));
    }
    GraphBuilder b(&m_, prim.name());
    std::vector<AnfNode*> xs;
    for (int i = 0; i < d.min_inputs; ++i) xs.push_back(b.Param(absl::StrCat("x", i)));
    KGRAD_ASSIGN_OR_RETURN(FuncGraph* g, b.Return(b.Op(std::make_shared<const Primitive>(prim), xs)));
    g->set_public(false);
    SetOperand(c, g);
    return true;
  }

  // op(switch(k, f, g)) -> switch(k, op(f), op(g)).
  absl::StatusOr<bool> Distribute(CNode* c) {
    CNode* sw = c->arg(0)->AsCNode();
    FuncGraph* owner = c->graph();
    CNode* a = owner->NewCNode({c->input(0), sw->arg(1)});
    CNode* b = owner->NewCNode({c->input(0), sw->arg(2)});
    CNode* out = owner->NewCNode({sw->input(0), sw->arg(0), a, b});
    Transaction tr(&m_);
    tr.Replace(c, out);
    tr.Commit();
    Forget(c);
    pending_.push_back(a);
    pending_.push_back(b);
    return true;
  }

  // op(partial(f, a...)) -> op(@partial_f), @partial_f(x...) = f(a..., x...),
  // nested in the operator's graph so that it sees a...
  absl::StatusOr<bool> BindPartial(CNode* c) {
    CNode* p = c->arg(0)->AsCNode();
    FuncGraph* f = GraphOf(p->arg(0));
    if (f == nullptr) {
      return OpError(c, "its operand partially applies something that is not a graph constant");
    }
    size_t bound = p->num_args() - 1;
    if (bound > f->parameters().size()) {
      return OpError(c, absl::StrCat("partial application binds ", bound, " arguments of graph '",
                                     f->name(), "', which takes ", f->parameters().size()));
    }
    GraphBuilder outer(c->graph());
    ValueNode* closure =
        outer.Closure(absl::StrCat("partial_", f->name()), 0, [&](GraphBuilder& b, auto) {
          std::vector<AnfNode*> args;
          for (size_t i = 0; i < bound; ++i) args.push_back(p->arg(i + 1));
          for (size_t i = bound; i < f->parameters().size(); ++i) {
            Parameter* q = f->parameters()[i];
            args.push_back(b.Param(q->name(), q->declared()));
          }
          return b.Call(f, args);
        });
    KGRAD_RETURN_IF_ERROR(outer.status());
    Transaction tr(&m_);
    tr.SetEdge(c, 1, closure);
    tr.Commit();
    return true;
  }

  void SetOperand(CNode* c, FuncGraph* g) {
    Transaction tr(&m_);
    tr.SetEdge(c, 1, c->graph()->NewValueNode(Value::Graph(g)));
    tr.Commit();
  }

  void Forget(CNode* c) {
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (pending_[i] == c) {
        pending_.erase(pending_.begin() + i);
        return;
      }
    }
  }

  // Argument types for `g`: none needed when every parameter is declared, else
  // what inference of the roots recorded on its parameters.
  absl::StatusOr<std::vector<AbstractPtr>> ArgTypes(CNode* c, FuncGraph* g) {
    bool declared = true;
    for (Parameter* p : g->parameters()) declared &= p->declared() != nullptr;
    if (declared) return std::vector<AbstractPtr>{};
    KGRAD_RETURN_IF_ERROR(InferRootsOnce());
    std::vector<AbstractPtr> types;
    for (Parameter* p : g->parameters()) {
      AbstractPtr t = p->declared() != nullptr ? p->declared() : p->abstract();
      if (t == nullptr) {
        return OpError(c, absl::StrCat("the type of input '", p->name(), "' of graph '", g->name(),
                                       "' is unknown: declare it, or call the derived function "
                                       "where inference can see its arguments"));
      }
      types.push_back(Broaden(t));
    }
    return types;
  }

  absl::Status InferRootsOnce() {
    if (inferred_) return absl::OkStatus();
    inferred_ = true;
    for (FuncGraph* r : roots_) {
      if (r->parent() != nullptr) continue;
      absl::StatusOr<AbstractPtr> out =
          root_args_.empty() || r != roots_.front() ? InferGraph(r) : InferGraph(r, root_args_);
      if (!out.ok() && roots_.size() == 1) return out.status();
    }
    return absl::OkStatus();
  }

  absl::Status Expand(CNode* c, FuncGraph* target) {
    KGRAD_ASSIGN_OR_RETURN(std::vector<AbstractPtr> types, ArgTypes(c, target));
    absl::StatusOr<FuncGraph*> g = Derive(c, target, types);
    if (!g.ok()) return OpError(c, g.status().message());
    (*g)->set_public(false);
    Transaction tr(&m_);
    tr.Replace(c, c->graph()->NewValueNode(Value::Graph(*g)));
    tr.Commit();
    return absl::OkStatus();
  }

  // The graph the C++ API builds for the operator.
  absl::StatusOr<FuncGraph*> Derive(CNode* c, FuncGraph* f, const std::vector<AbstractPtr>& types) {
    const Primitive& op = *c->primitive();
    switch (op.id()) {
      case PrimId::kJ: {
        KGRAD_ASSIGN_OR_RETURN(FuncGraph* prepared, PrepareForAd(f, types));
        AdContext ctx(&m_, prepared);
        return ctx.K(prepared);
      }
      case PrimId::kGrad:
      case PrimId::kValueAndGrad:
        return DeriveGrad(op, f, types);
      case PrimId::kJvp: {
        JvpOptions o;
        o.arg_types = types;
        return Jvp(m_, f, o);
      }
      case PrimId::kVjp:
        return Vjp(m_, f, types);
      default:
        return absl::InternalError("not a differentiation operator");
    }
  }

  absl::StatusOr<FuncGraph*> DeriveGrad(const Primitive& op, FuncGraph* f,
                                        const std::vector<AbstractPtr>& types) {
    KGRAD_ASSIGN_OR_RETURN(std::vector<Parameter*> weights, ops::DifferentiatedWeights(op, m_));
    KGRAD_ASSIGN_OR_RETURN(std::vector<int> wrt,
                           ops::DifferentiatedInputs(op, static_cast<int>(f->parameters().size())));
    if (op.id() == PrimId::kGrad) {
      GradOptions o;
      o.argnums = wrt;
      o.weights = weights;
      o.sens_param = op.GetBool("sens");
      o.has_aux = op.GetBool("has_aux");
      o.arg_types = types;
      o.residuals = op.GetString("residuals");
      return Grad(m_, f, o);
    }
    ValueAndGradOptions o;
    o.argnums = wrt;
    o.weights = weights;
    o.has_aux = op.GetBool("has_aux");
    o.arg_types = types;
    o.residuals = op.GetString("residuals");
    return ValueAndGrad(m_, f, o);
  }

  Module& m_;
  std::vector<FuncGraph*> roots_;
  std::vector<AbstractPtr> root_args_;
  std::vector<CNode*> pending_;
  bool inferred_ = false;
};

}  // namespace

namespace {

// A differentiation operator passed as a value (partial(grad, @f), a switch
// between operators) has no expansion: it must be applied to its function.
absl::Status CheckNotPassedAsValues(Module& m, const std::vector<FuncGraph*>& roots) {
  for (FuncGraph* g : m.manager().Reachable(roots)) {
    for (CNode* c : m.manager().Info(g).order) {
      for (size_t i = 1; i < c->size(); ++i) {
        const Value* v = ConstantOf(c->input(i));
        if (v == nullptr || !v->is_primitive() || v->primitive()->def().derived_args == nullptr) continue;
        return absl::InvalidArgumentError(absl::StrCat(
            c->Location(), ": the differentiation operator '", v->primitive()->name(),
            "' is passed as a value (input ", i, "); apply it to a function instead: ",
            v->primitive()->name(), "(@f)"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> ExpandDifferentiation(Module& module, FuncGraph* root,
                                          const std::vector<AbstractPtr>& root_args) {
  std::vector<FuncGraph*> roots = Roots(module, root);
  KGRAD_RETURN_IF_ERROR(CheckNotPassedAsValues(module, roots));
  if (Collect(module, roots).empty()) return 0;
  Expander e(module, std::move(roots), root_args);
  return e.Run();
}

bool HasDifferentiationOperators(Module& module, FuncGraph* root) {
  return !Collect(module, Roots(module, root)).empty();
}

}  // namespace kgrad
