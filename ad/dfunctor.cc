#include "ad/dfunctor.h"

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ad/remat.h"
#include "core/cloner.h"
#include "core/infer.h"
#include "core/manager.h"
#include "core/module.h"
#include "core/status_macros.h"
#include "ops/bprop_context.h"
#include "ops/structural.h"

namespace kgrad {
namespace {

bool IsIntegral(const AbstractPtr& a) {
  if (const AbstractTensor* t = AsTensor(a)) return !IsDifferentiable(t->dtype());
  if (const AbstractScalar* s = AsScalar(a)) return !IsFloating(s->dtype());
  return false;
}

// A graph constant whose K-image is a closure (the graph is differentiated here).
FuncGraph* ClosureGraph(const AnfNode* n) { return GraphOf(n); }

}  // namespace

DFunctor::DFunctor(AdContext* ctx, FuncGraph* primal) : ctx_(ctx), primal_(primal) {
  Module* m = ctx->module();
  k_graph_ = m->NewGraph(absl::StrCat("K_", primal->name()),
                         ImageParent<&DFunctor::k_graph>(ctx, primal));
  tape_ = m->NewGraph(absl::StrCat("bprop_", primal->name()), k_graph_);
}

absl::StatusOr<AnfNode*> DFunctor::KOf(AnfNode* node) {
  return ImageOf<&DFunctor::k_graph, &DFunctor::KOf>(ctx_, primal_, k_graph_, k_, node, "K-image");
}

// Step 1. Parameters of K(g) and the dout parameter of bprop.
absl::Status DFunctor::MapObjects() {
  for (Parameter* p : primal_->parameters()) {
    Parameter* kp = k_graph_->AddParameter(p->name(), p->declared());
    kp->set_abstract(p->abstract());
    k_[p] = kp;
  }
  dout_ = tape_->AddParameter("dout");
  // The sensitivity has the output's type (an env for a function): the bprop's
  // nodes can then be typed from their inputs (ad/typing.h).
  if (const AbstractPtr& out = primal_->output()->abstract(); out != nullptr) {
    dout_->set_abstract(ops::SensitivityOf(Broaden(out)));
  }
  return absl::OkStatus();
}

// Step 2. y = P(K(x)...) for primitives; app = K(f)(K(x)...) otherwise.
absl::Status DFunctor::MapMorphism(CNode* c) {
  std::vector<AnfNode*> inputs;
  for (size_t i = 0; i < c->size(); ++i) {
    AnfNode* in = c->input(i);
    if (i == 0 && c->primitive() != nullptr) {
      inputs.push_back(in);  // the primitive itself; its rule runs in step 3
      continue;
    }
    if (FuncGraph* h = ClosureGraph(in); h != nullptr && ctx_->InScope(h)) {
      bool seen = false;
      for (const auto& item : schedule_) seen |= item.first == in;
      if (!seen) schedule_.emplace_back(in, true);
    }
    KGRAD_ASSIGN_OR_RETURN(AnfNode* k, KOf(in));
    inputs.push_back(k);
  }
  CNode* app = k_graph_->NewCNode(std::move(inputs));
  if (c->primitive() != nullptr) {
    app->set_name(c->name());
    app->set_abstract(c->abstract());
    k_[c] = app;
  } else {
    GraphBuilder b(k_graph_);
    CNode* y = b.GetItem(app, 0);
    y->set_name(c->name());
    y->set_abstract(c->abstract());
    k_[c] = y;
    bprop_of_[c] = b.GetItem(app, 1);
  }
  schedule_.emplace_back(c, false);
  return absl::OkStatus();
}

AnfNode* DFunctor::Sum(absl::Span<AnfNode* const> parts, const AbstractPtr& type) {
  if (parts.empty()) return nullptr;
  AnfNode* acc = parts[0];
  PrimId add = AsTensor(type) != nullptr ? PrimId::kAdd : PrimId::kHyperAdd;
  GraphBuilder b(tape_);
  for (size_t i = 1; i < parts.size(); ++i) acc = b.Op(add, {acc, parts[i]});
  return acc;
}

absl::StatusOr<AnfNode*> DFunctor::ZerosOf(AnfNode* primal_node) {
  KGRAD_ASSIGN_OR_RETURN(AnfNode* k, KOf(primal_node));
  GraphBuilder b(tape_);
  return b.Op(PrimId::kZerosLike, {k});
}

absl::StatusOr<AnfNode*> DFunctor::Materialize(AnfNode* primal_node) {
  auto it = adjoints_.find(primal_node);
  if (it == adjoints_.end() || it->second.empty()) return nullptr;
  const Adjoint& adj = it->second;
  const AbstractPtr& type = primal_node->abstract();
  AnfNode* whole = Sum(adj.whole, type);
  if (adj.items.empty()) return whole;
  GraphBuilder b(tape_);
  KGRAD_ASSIGN_OR_RETURN(AnfNode* k, KOf(primal_node));
  AnfNode* tuple = nullptr;
  if (const AbstractTuple* t = AsTuple(type)) {
    // Known arity: (d_0, ..., d_n) with zeros only where nothing flowed.
    std::vector<AnfNode*> elems;
    for (size_t j = 0; j < t->size(); ++j) {
      auto item = adj.items.find(static_cast<int64_t>(j));
      elems.push_back(item != adj.items.end() ? Sum(item->second, t->elements()[j])
                                              : b.Op(PrimId::kZerosLike, {b.GetItem(k, j)}));
    }
    tuple = b.Tuple(std::move(elems));
  } else {
    tuple = b.Op(PrimId::kZerosLike, {k});
    for (const auto& [j, parts] : adj.items) {
      tuple = b.Op(PrimId::kTupleSetItem, {tuple, b.Int(j), Sum(parts, nullptr)});
    }
  }
  return whole == nullptr ? tuple : b.Op(PrimId::kHyperAdd, {whole, tuple});
}

void DFunctor::Accumulate(AnfNode* input, AnfNode* d) {
  if (d == nullptr) return;
  if (input->is_value() && ClosureGraph(input) == nullptr) return;
  if (IsIntegral(input->abstract())) return;
  adjoints_[input].Add(d);
}

// Step 3.
absl::Status DFunctor::BackPropagate() {
  adjoints_.reserve(schedule_.size() + 1);  // about one per scheduled node: no rehashing
  adjoints_[primal_->output()].Add(dout_);
  for (auto it = schedule_.rbegin(); it != schedule_.rend(); ++it) {
    if (it->second) {
      KGRAD_RETURN_IF_ERROR(BackPropClosure(it->first->AsValue()));
    } else {
      KGRAD_RETURN_IF_ERROR(BackPropNode(it->first->AsCNode()));
    }
  }
  return absl::OkStatus();
}

absl::Status DFunctor::BackPropNode(CNode* c) {
  auto it = adjoints_.find(c);
  if (it == adjoints_.end() || it->second.empty()) return absl::OkStatus();  // no work for zeros
  const Primitive* prim = c->primitive();
  GraphBuilder b(tape_);
  if (prim != nullptr && prim->id() == PrimId::kMakeTuple) {
    // Forward: t = (x_0, ..., x_n).  Backward: dx_i = dt[i], taken element-wise so
    // that unread elements get nothing.
    const Adjoint adj = it->second;
    AnfNode* whole = Sum(adj.whole, c->abstract());
    for (size_t i = 0; i < c->num_args(); ++i) {
      std::vector<AnfNode*> parts;
      if (whole != nullptr) parts.push_back(b.GetItem(whole, i));
      auto item = adj.items.find(static_cast<int64_t>(i));
      if (item != adj.items.end()) parts.insert(parts.end(), item->second.begin(), item->second.end());
      const AbstractTuple* t = AsTuple(c->abstract());
      Accumulate(c->arg(i), Sum(parts, t != nullptr ? t->elements()[i] : nullptr));
    }
    return absl::OkStatus();
  }
  KGRAD_ASSIGN_OR_RETURN(AnfNode* dout, Materialize(c));
  if (prim != nullptr && prim->id() == PrimId::kTupleGetItem) {
    const Value* index = ConstantOf(c->arg(1));
    if (index != nullptr && index->is_scalar() && index->scalar().is_int()) {
      // Forward: y = t[i].  Backward: dt[i] += dy (an element contribution).
      int64_t i = index->scalar().AsInt();
      if (const AbstractTuple* t = AsTuple(c->arg(0)->abstract()); t != nullptr && i < 0) {
        i += static_cast<int64_t>(t->size());
      }
      if (i >= 0 && !IsIntegral(c->abstract())) adjoints_[c->arg(0)].AddItem(i, dout);
      return absl::OkStatus();
    }
  }
  if (prim != nullptr) return BackPropPrimitive(c, *prim, dout);
  return BackPropCall(c, dout);
}

absl::Status DFunctor::BackPropPrimitive(CNode* c, const Primitive& prim, AnfNode* dout) {
  const PrimitiveDef& def = prim.def();
  if (def.zero_gradient) return absl::OkStatus();
  if (def.derived_args != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        c->Location(), ": '", prim.name(), "' is a differentiation operator; expand it first "
        "(kgrad::ExpandDifferentiation in ad/expand_differentiation.h)"));
  }
  if (def.bprop == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        c->Location(), ": primitive '", prim.name(), "' has no gradient rule (bprop)"));
  }
  std::vector<AnfNode*> k_inputs;
  std::vector<AbstractPtr> abstracts;
  for (size_t i = 0; i < c->num_args(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(AnfNode* k, KOf(c->arg(i)));
    k_inputs.push_back(k);
    abstracts.push_back(c->arg(i)->abstract());
  }
  BpropContext ctx(tape_, c, prim, std::move(k_inputs), std::move(abstracts), k_.at(c),
                   c->abstract(), dout);
  const ResidualPolicy::Ask ask = ctx_->AskResidualForm(*c, prim);
  ctx.AskForm(ask.form, ask.named);
  ctx.SetForwardGraph(k_graph_);
  KGRAD_RETURN_IF_ERROR(def.bprop(ctx));
  KGRAD_RETURN_IF_ERROR(ctx.status());
  KGRAD_RETURN_IF_ERROR(ctx.CheckAskedForm());
  for (size_t i = 0; i < c->num_args(); ++i) Accumulate(c->arg(i), ctx.grad(static_cast<int>(i)));
  return absl::OkStatus();
}

// Forward: y = f(x...), b from K(f).  Backward: din = b(dy); df += din[0] (an env),
// dx_i += din[i].
absl::Status DFunctor::BackPropCall(CNode* c, AnfNode* dout) {
  GraphBuilder b(tape_);
  CNode* din = b.Call(bprop_of_.at(c), {dout});
  for (size_t i = 0; i < c->size(); ++i) {
    AnfNode* in = c->input(i);
    if (in->is_value() && ClosureGraph(in) == nullptr) continue;
    Accumulate(in, b.GetItem(din, i));
  }
  return absl::OkStatus();
}

// Every user of the closure constant has been processed: open its env.
// Forward: c = closure of h over v_1..v_k.  Backward: dv_j += env_getitem(dc, key(v_j)).
absl::Status DFunctor::BackPropClosure(ValueNode* vn) {
  KGRAD_ASSIGN_OR_RETURN(AnfNode* env, Materialize(vn));
  if (env == nullptr) return absl::OkStatus();
  FuncGraph* h = vn->value().graph();
  GraphBuilder b(tape_);
  for (AnfNode* fv : ctx_->PrimalInfo(h).fvs) {
    if (IsIntegral(fv->abstract())) continue;
    KGRAD_ASSIGN_OR_RETURN(AnfNode* zeros, ZerosOf(fv));
    AnfNode* key = b.Const(Value::String(AdContext::KeyOf(fv)));
    Accumulate(fv, b.Op(PrimId::kEnvGetItem, {env, key, zeros}));
  }
  return absl::OkStatus();
}

// Step 4. bprop = (env of free-variable sensitivities, dx_1, ..., dx_n);
// K(g) = (y, bprop).
absl::Status DFunctor::BuildOutputs() {
  GraphBuilder b(tape_);
  AnfNode* env = b.Const(Value::EmptyEnv());
  for (AnfNode* fv : ctx_->PrimalInfo(primal_).fvs) {
    KGRAD_ASSIGN_OR_RETURN(AnfNode* d, Materialize(fv));
    if (d == nullptr) continue;
    env = b.Op(PrimId::kEnvSetItem, {env, b.Const(Value::String(AdContext::KeyOf(fv))), d});
  }
  std::vector<AnfNode*> outs{env};
  for (Parameter* p : primal_->parameters()) {
    KGRAD_ASSIGN_OR_RETURN(AnfNode* d, Materialize(p));
    if (d == nullptr) {
      KGRAD_ASSIGN_OR_RETURN(d, ZerosOf(p));
    }
    outs.push_back(d);
  }
  tape_->set_output(b.Tuple(std::move(outs)));
  GraphBuilder kb(k_graph_);
  KGRAD_ASSIGN_OR_RETURN(AnfNode* y, KOf(primal_->output()));
  k_graph_->set_output(kb.Tuple({y, kb.GraphRef(tape_)}));
  return kb.status();
}

namespace {

// "weight 'w'" or "'h' (of graph 'outer')".
std::string FreeVariableName(const AnfNode* fv) {
  if (fv->graph() == nullptr) return absl::StrCat("weight '", fv->DebugName(), "'");
  return absl::StrCat("'", fv->DebugName(), "' (of graph '", fv->graph()->name(), "')");
}

// How many values `custom` returns: the arity of its output tuple, from inference
// with the primal's types (x..., out, dout), or from a make_tuple output.
absl::StatusOr<size_t> ReturnedCount(FuncGraph* custom, FuncGraph* primal) {
  std::vector<AbstractPtr> args;
  for (Parameter* p : primal->parameters()) args.push_back(p->abstract());
  args.push_back(primal->output()->abstract());
  args.push_back(primal->output()->abstract());
  bool known = true;
  for (const AbstractPtr& a : args) known &= a != nullptr;
  if (known) {
    KGRAD_ASSIGN_OR_RETURN(AbstractPtr out, InferGraph(custom, args));
    if (const AbstractTuple* t = AsTuple(out)) return t->size();
  } else if (const CNode* c = custom->output()->AsCNode(); c != nullptr && c->IsPrim(PrimId::kMakeTuple)) {
    return c->num_args();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "custom bprop '", custom->name(), "' of graph '", primal->name(),
      "' must return a tuple of sensitivities"));
}

}  // namespace

// A user-written bprop (MindSpore's Cell.bprop), which may also give the
// sensitivities of the weights and free variables the graph reads:
//   K(g)(x...) = (out, bprop),  out = g(x...),  r = custom(x..., out, dout),
//   bprop(dout) = (env{fv_j: r[n + j]}, r[0], ..., r[n - 1])
// with fv_1..fv_k the graph's floating free variables in creation order. A custom
// bprop that returns only the n input sensitivities of a graph that reads such a
// variable is refused here: its gradient would otherwise be silently zero.
absl::Status DFunctor::RunCustomBprop() {
  FuncGraph* custom = primal_->custom_bprop();
  std::vector<AnfNode*> fvs;
  for (AnfNode* fv : ctx_->PrimalInfo(primal_).fvs) {
    const AbstractPtr& a = fv->abstract();
    bool data = AsTensor(a) != nullptr || AsScalar(a) != nullptr || AsTuple(a) != nullptr;
    if (data && !IsIntegral(a)) fvs.push_back(fv);
  }
  const size_t n = primal_->parameters().size();
  KGRAD_ASSIGN_OR_RETURN(size_t returned, ReturnedCount(custom, primal_));
  if (returned != n + fvs.size()) {
    std::vector<std::string> names;
    for (const AnfNode* fv : fvs) names.push_back(FreeVariableName(fv));
    std::string fv_part = fvs.empty() ? "" : absl::StrCat(
        ", then one for each value it reads from outside, in this order: ", absl::StrJoin(names, ", "));
    return absl::InvalidArgumentError(absl::StrCat(
        "custom bprop '", custom->name(), "' of graph '", primal_->name(), "' returns ", returned,
        " values; it must return ", n + fvs.size(), ": one sensitivity per input (", n, ")", fv_part));
  }
  GraphBuilder kb(k_graph_);
  std::vector<AnfNode*> xs(k_graph_->parameters().begin(), k_graph_->parameters().end());
  KGRAD_ASSIGN_OR_RETURN(AnfNode* out, CallInKScope(kb, primal_, xs));
  GraphBuilder b(tape_);
  std::vector<AnfNode*> args = xs;
  args.push_back(out);
  args.push_back(dout_);
  KGRAD_ASSIGN_OR_RETURN(AnfNode* grads, CallInKScope(b, custom, args));
  AnfNode* env = b.Const(Value::EmptyEnv());
  for (size_t j = 0; j < fvs.size(); ++j) {
    env = b.Op(PrimId::kEnvSetItem, {env, b.Const(Value::String(AdContext::KeyOf(fvs[j]))),
                                     b.GetItem(grads, n + j)});
  }
  std::vector<AnfNode*> outs{env};
  for (size_t i = 0; i < n; ++i) outs.push_back(b.GetItem(grads, i));
  tape_->set_output(b.Tuple(std::move(outs)));
  k_graph_->set_output(kb.Tuple({out, kb.GraphRef(tape_)}));
  return kb.status();
}

// g and its custom bprop are lexically inside the primal program; K(g) is inside
// the K-images. When g reads values of enclosing graphs, a lifted copy is called
// instead, with the K-images of those values as extra arguments.
absl::StatusOr<AnfNode*> DFunctor::CallInKScope(GraphBuilder& b, FuncGraph* g,
                                                std::vector<AnfNode*> args) {
  bool captures = false;
  for (AnfNode* fv : ctx_->PrimalInfo(g).fvs) captures |= fv->graph() != nullptr;
  if (!captures) return b.Call(g, args);
  LiftedGraph lifted = LiftFreeVariables(g, "_lifted");
  for (AnfNode* fv : lifted.free_variables) {
    KGRAD_ASSIGN_OR_RETURN(AnfNode* k, KOf(fv));
    args.push_back(k);
  }
  return b.Call(lifted.graph, args);
}

absl::Status DFunctor::Run() {
  KGRAD_RETURN_IF_ERROR(MapObjects());
  if (primal_->custom_bprop() != nullptr) return RunCustomBprop();
  for (CNode* c : ctx_->PrimalInfo(primal_).order) {
    KGRAD_RETURN_IF_ERROR(MapMorphism(c));
  }
  if (FuncGraph* h = ClosureGraph(primal_->output()); h != nullptr && ctx_->InScope(h)) {
    schedule_.emplace_back(primal_->output(), true);
  }
  KGRAD_RETURN_IF_ERROR(BackPropagate());
  KGRAD_RETURN_IF_ERROR(BuildOutputs());
  // Step 5. The policy decides which residuals the bprop recomputes.
  return Rematerialize(primal_, k_graph_, tape_, dout_);
}

}  // namespace kgrad
