#include "ad/tangent_functor.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace kgrad {
namespace {

bool IsFunction(const AbstractPtr& a) { return a != nullptr && a->kind() == AbstractKind::kFunction; }

}  // namespace

TangentFunctor::TangentFunctor(TangentContext* ctx, FuncGraph* primal) : ctx_(ctx), primal_(primal) {
  t_ = ctx->module()->NewGraph(ctx->NameOf(primal),
                               ImageParent<&TangentFunctor::t_graph>(ctx, primal));
}

absl::StatusOr<AnfNode*> TangentFunctor::PrimalOf(AnfNode* node) {
  return ImageOf<&TangentFunctor::t_graph, &TangentFunctor::PrimalOf>(ctx_, primal_, t_, p_, node,
                                                                      "image");
}

absl::StatusOr<AnfNode*> TangentFunctor::TangentOf(AnfNode* node) {
  auto it = d_.find(node);
  if (it != d_.end()) return it->second;
  if (node->is_value() || node->graph() == nullptr) return nullptr;  // constants, weights
  FuncGraph* owner = node->graph();
  if (owner != primal_) {
    if (ctx_->InScope(owner)) return ctx_->FunctorOf(owner)->TangentOf(node);
    return nullptr;
  }
  return absl::InternalError(absl::StrCat(node->Location(), ": used before its tangent exists"));
}

absl::StatusOr<AnfNode*> TangentFunctor::Materialize(AnfNode* node) {
  KGRAD_ASSIGN_OR_RETURN(AnfNode* t, TangentOf(node));
  if (t != nullptr) return t;
  GraphBuilder b(t_);
  if (IsFunction(node->abstract()) || GraphOf(node) != nullptr) return b.Const(Value::EmptyEnv());
  KGRAD_ASSIGN_OR_RETURN(AnfNode* p, PrimalOf(node));
  return b.Op(PrimId::kZerosLike, {p});
}

absl::Status TangentFunctor::MapParameters() {
  std::vector<Parameter*> tangents;
  for (Parameter* p : primal_->parameters()) {
    Parameter* x = t_->AddParameter(p->name(), p->declared());
    x->set_abstract(p->abstract());
    p_[p] = x;
  }
  for (Parameter* p : primal_->parameters()) {
    Parameter* t = t_->AddParameter(p->name() + "_dot", p->declared());
    // An integer input's tangent is taken and ignored.
    d_[p] = CarriesTangent(p->abstract()) ? t : nullptr;
  }
  return absl::OkStatus();
}

absl::Status TangentFunctor::MapPrimitive(CNode* c) {
  std::vector<AnfNode*> inputs{c->input(0)};
  for (size_t i = 0; i < c->num_args(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(AnfNode* x, PrimalOf(c->arg(i)));
    inputs.push_back(x);
  }
  CNode* y = t_->NewCNode(inputs);
  y->set_name(c->name());
  y->set_abstract(c->abstract());
  p_[c] = y;
  inputs.erase(inputs.begin());
  KGRAD_ASSIGN_OR_RETURN(AnfNode* d, PrimitiveTangent(c, inputs));
  if (d != nullptr && d->AsCNode() != nullptr && c->name().size() > 0) {
    d->AsCNode()->set_name(c->name() + "_dot");
  }
  d_[c] = d;
  return absl::OkStatus();
}

absl::StatusOr<AnfNode*> TangentFunctor::PrimitiveTangent(CNode* c, const std::vector<AnfNode*>& xs) {
  const Primitive& prim = *c->primitive();
  const PrimitiveDef& def = prim.def();
  GraphBuilder b(t_);
  std::vector<AnfNode*> ts;
  bool any = false;
  for (size_t i = 0; i < c->num_args(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(AnfNode* t, TangentOf(c->arg(i)));
    ts.push_back(t);
    any |= t != nullptr;
  }
  switch (prim.id()) {
    case PrimId::kMakeTuple: {
      // Forward: y = (x_0, ..., x_n).  Tangent: (t_0, ..., t_n).
      if (!any) return nullptr;
      std::vector<AnfNode*> elems;
      for (size_t i = 0; i < c->num_args(); ++i) {
        KGRAD_ASSIGN_OR_RETURN(AnfNode* t, Materialize(c->arg(i)));
        elems.push_back(t);
      }
      return b.Tuple(std::move(elems));
    }
    case PrimId::kTupleGetItem:
      // Forward: y = x[i].  Tangent: t[i].
      if (ts[0] == nullptr || !CarriesTangent(c->abstract())) return nullptr;
      return b.Op(PrimId::kTupleGetItem, {ts[0], xs[1]});
    case PrimId::kSwitch: {
      // Forward: y = switch(c, a, b).  Tangent: switch(c, t_a, t_b) (none for a
      // function: its tangent is in what the chosen closure captures).
      if ((ts[1] == nullptr && ts[2] == nullptr) || !CarriesTangent(c->abstract())) return nullptr;
      KGRAD_ASSIGN_OR_RETURN(AnfNode* ta, Materialize(c->arg(1)));
      KGRAD_ASSIGN_OR_RETURN(AnfNode* tb, Materialize(c->arg(2)));
      return b.Op(PrimId::kSwitch, {xs[0], ta, tb});
    }
    case PrimId::kDepend:
    case PrimId::kRematBarrier:
      // Forward: y = x_0 (ordered after x_1).  Tangent: t_0.
      return ts[0];
    default:
      break;
  }
  if (def.derived_args != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        c->Location(), ": '", prim.name(), "' is a differentiation operator; expand it first "
        "(kgrad::ExpandDifferentiation in ad/expand_differentiation.h)"));
  }
  if (def.zero_gradient || !any || !CarriesTangent(c->abstract())) return nullptr;
  if (def.bprop == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        c->Location(), ": primitive '", prim.name(), "' has no gradient rule (bprop)"));
  }
  std::vector<bool> active;
  bool needed = ctx_->NeedsRule(c, &active);
  for (size_t i = 0; i < ts.size(); ++i) {
    if (ts[i] != nullptr && !(needed && active[i])) {
      return absl::InternalError(absl::StrCat(c->Location(), ": input ", i,
                                              " has a tangent its type did not predict"));
    }
  }
  return ctx_->rules().Apply(b, c, active, xs, ts);
}

// Forward: y = f(x...).  Image: r = P'(f)(P'(x)..., D(x)...); y = r[0], t_y = r[1].
absl::Status TangentFunctor::MapCall(CNode* c) {
  KGRAD_ASSIGN_OR_RETURN(AnfNode* fn, PrimalOf(c->input(0)));
  std::vector<AnfNode*> args{fn};
  for (size_t i = 0; i < c->num_args(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(AnfNode* x, PrimalOf(c->arg(i)));
    args.push_back(x);
  }
  for (size_t i = 0; i < c->num_args(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(AnfNode* t, Materialize(c->arg(i)));
    args.push_back(t);
  }
  CNode* r = t_->NewCNode(std::move(args));
  GraphBuilder b(t_);
  CNode* y = b.GetItem(r, 0);
  y->set_name(c->name());
  y->set_abstract(c->abstract());
  p_[c] = y;
  d_[c] = CarriesTangent(c->abstract()) ? b.GetItem(r, 1) : nullptr;
  call_result_[c] = r;
  return absl::OkStatus();
}

absl::Status TangentFunctor::BuildOutput() {
  AnfNode* out = primal_->output();
  if (const CNode* c = out->AsCNode(); c != nullptr && call_result_.contains(c)) {
    t_->set_output(call_result_.at(c));  // the tail call stays one
    return absl::OkStatus();
  }
  KGRAD_ASSIGN_OR_RETURN(AnfNode* y, PrimalOf(out));
  KGRAD_ASSIGN_OR_RETURN(AnfNode* t, Materialize(out));
  GraphBuilder b(t_);
  t_->set_output(b.Tuple({y, t}));
  return b.status();
}

// A user-written bprop defines the derivative of its graph; its transpose is the
// graph's tangent rule. The whole-graph transposition sees the graph as a closed
// function: a program where such a graph reads differentiated values of enclosing
// graphs is differentiated as a whole instead (ad/jvp.cc), so this is a check.
absl::Status TangentFunctor::RunCustomBprop() {
  for (AnfNode* fv : ctx_->PrimalInfo(primal_).fvs) {
    if (!ctx_->MayVary(fv)) continue;
    return absl::InternalError(absl::StrCat(
        "graph '", primal_->name(), "' has a custom bprop and reads '", fv->DebugName(),
        "' of graph '", fv->graph()->name(), "': its Jvp needs the whole-graph construction"));
  }
  FuncGraph* jvp = ctx_->CustomJvp(primal_);
  GraphBuilder b(t_);
  std::vector<AnfNode*> args(t_->parameters().begin(), t_->parameters().end());
  t_->set_output(b.Call(jvp, std::move(args)));
  return b.status();
}

absl::Status TangentFunctor::Run() {
  KGRAD_RETURN_IF_ERROR(MapParameters());
  if (primal_->custom_bprop() != nullptr) return RunCustomBprop();
  for (CNode* c : ctx_->PrimalInfo(primal_).order) {
    if (c->primitive() != nullptr) {
      KGRAD_RETURN_IF_ERROR(MapPrimitive(c));
    } else {
      KGRAD_RETURN_IF_ERROR(MapCall(c));
    }
  }
  return BuildOutput();
}

}  // namespace kgrad
