#include "ad/jvp.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ad/ad_context.h"
#include "ad/grad_operation.h"
#include "ad/prepare.h"
#include "ad/tangent_context.h"
#include "ad/transposed_jvp.h"
#include "absl/container/flat_hash_map.h"
#include "core/builder.h"
#include "core/infer.h"
#include "core/manager.h"
#include "core/passes/optimize.h"
#include "core/status_macros.h"

namespace kgrad {
namespace {

std::vector<AnfNode*> CopyParams(GraphBuilder& b, FuncGraph* fg, const std::string& suffix) {
  std::vector<AnfNode*> out;
  for (Parameter* p : fg->parameters()) out.push_back(b.Param(p->name() + suffix, p->declared()));
  return out;
}

}  // namespace

absl::StatusOr<FuncGraph*> Jvp(Module& module, FuncGraph* fg, const JvpOptions& options) {
  if (options.as_operator) {
    std::vector<std::string> tangents;
    for (Parameter* p : fg->parameters()) tangents.push_back(p->name() + "_dot");
    return DifferentiationOperatorGraph(module, fg, module.Prim(PrimId::kJvp), tangents);
  }
  OptimizeOptions defaults;
  if (options.construction == JvpConstruction::kTransposedWholeGraph) {
    return TransposedJvp(module, fg, options.arg_types, options.optimize ? &defaults : nullptr);
  }
  if (fg == nullptr || fg->module() != &module) {
    return absl::InvalidArgumentError("the graph to differentiate must belong to the module");
  }
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* prepared, PrepareForAd(fg, options.arg_types));
  FuncGraph* jvp = nullptr;
  {
    TangentContext ctx(&module, prepared, absl::StrCat("jvp_", fg->name()));
    if (ctx.CustomBpropReadingEnclosingValues() != nullptr) {
      return TransposedJvp(module, fg, options.arg_types, options.optimize ? &defaults : nullptr);
    }
    KGRAD_ASSIGN_OR_RETURN(jvp, ctx.T(prepared));
    // Like a builder's top-level graph, the result belongs to the caller.
    if (jvp->parent() == nullptr) jvp->set_public(true);
  }  // the rules stop being public: inlined, they are collected
  if (options.optimize) KGRAD_RETURN_IF_ERROR(Optimize(module, jvp).status());
  return jvp;
}

namespace {

// Moves the applications of closure `t` that do not depend on its parameters (or
// on anything else computed inside it) into its enclosing graph, so that they run
// once, when the closure is made, not at every call.
absl::Status HoistInvariants(Module& m, FuncGraph* t) {
  FuncGraph* parent = t->parent();
  std::vector<CNode*> order = m.manager().Info(t).order;
  absl::flat_hash_map<const AnfNode*, AnfNode*> moved;
  Transaction tr(&m);
  for (CNode* c : order) {
    std::vector<AnfNode*> inputs;
    bool invariant = true;
    for (AnfNode* in : c->inputs()) {
      auto it = moved.find(in);
      if (it != moved.end()) {
        inputs.push_back(it->second);
        continue;
      }
      FuncGraph* h = GraphOf(in);
      bool local = (!in->is_value() && in->graph() == t) ||
                   (h != nullptr && h->parent() != nullptr && h->IsSelfOrAncestor(t));
      if (local) {
        invariant = false;
        break;
      }
      inputs.push_back(in);
    }
    if (!invariant) continue;
    CNode* copy = parent->NewCNode(std::move(inputs));
    copy->set_abstract(c->abstract());
    moved[c] = copy;
    tr.Replace(c, copy);
  }
  tr.Commit();
  return absl::OkStatus();
}

absl::StatusOr<const AbstractTensor*> StaticTensor(const Parameter* p, const FuncGraph* g) {
  const AbstractTensor* t = AsTensor(p->declared());
  if (t == nullptr || !t->shape_known()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", p->name(), "' of graph '", g->name(),
        "' needs a declared tensor type with known dims"));
  }
  return t;
}

std::vector<int64_t> Dims(const AbstractTensor* t) {
  return std::vector<int64_t>(t->shape().begin(), t->shape().end());
}

}  // namespace

absl::StatusOr<FuncGraph*> Linearize(Module& module, FuncGraph* fg, const JvpOptions& options) {
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* jvp, Jvp(module, fg, options));
  // lin(x...) = (f(x...), @tangent), @tangent(v...) = jvp(x..., v...)[1]; then the
  // tangent's forward part is hoisted into lin, where CSE meets f(x...).
  GraphBuilder b(&module, absl::StrCat("linearize_", fg->name()), fg->parent());
  std::vector<AnfNode*> xs = CopyParams(b, fg, "");
  AnfNode* out = b.Call(fg, xs);
  ValueNode* tangent = b.Closure(absl::StrCat("tangent_", fg->name()), 0, [&](GraphBuilder& t, auto) {
    std::vector<AnfNode*> args = xs;
    for (Parameter* p : fg->parameters()) args.push_back(t.Param(p->name() + "_dot", p->declared()));
    return t.GetItem(t.Call(jvp, args), 1);
  });
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* lin, b.Return(b.Tuple({out, tangent})));
  FuncGraph* t = GraphOf(tangent);
  KGRAD_RETURN_IF_ERROR(Optimize(module, lin).status());
  KGRAD_RETURN_IF_ERROR(HoistInvariants(module, t));
  KGRAD_RETURN_IF_ERROR(Optimize(module, lin).status());
  return lin;
}

absl::StatusOr<FuncGraph*> LinearTranspose(Module& module, FuncGraph* l) {
  // l^T(ct) = d/dv <l(v), ct> at v = 0 (any v: l is linear).
  GradOptions o;
  o.argnums.clear();
  for (size_t i = 0; i < l->parameters().size(); ++i) o.argnums.push_back(static_cast<int>(i));
  o.sens_param = true;
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* g, Grad(module, l, o));
  GraphBuilder b(&module, absl::StrCat("transpose_", l->name()), l->parent());
  AnfNode* ct = b.Param("ct");
  std::vector<AnfNode*> args;
  for (Parameter* p : l->parameters()) {
    KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, StaticTensor(p, l));
    args.push_back(b.Op(PrimId::kFill, {}, {{"shape", Dims(t)}, {"value", 0.0}, {"dtype", t->dtype()}}));
  }
  args.push_back(ct);
  AnfNode* grads = b.Call(g, args);
  // Grad returns the gradient itself for one input, a tuple for several.
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* lt, b.Return(grads));
  KGRAD_RETURN_IF_ERROR(Optimize(module, lt).status());
  return lt;
}

namespace {

// jac(x...) [out.shape + x_argnum.shape], built row by row (reverse) or column by
// column (forward) in a loop: acc[k] = flattened (J e_k) or (e_k^T J).
absl::StatusOr<FuncGraph*> Jacobian(Module& module, FuncGraph* fg, int argnum, bool forward) {
  int n_in = static_cast<int>(fg->parameters().size());
  if (argnum < 0) argnum += n_in;
  if (argnum < 0 || argnum >= n_in) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", fg->name(), "' has no input ", argnum));
  }
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* in, StaticTensor(fg->parameters()[argnum], fg));
  KGRAD_ASSIGN_OR_RETURN(AbstractPtr out_abs, InferGraph(fg));
  const AbstractTensor* out = AsTensor(out_abs);
  if (out == nullptr || !out->shape_known()) {
    return absl::InvalidArgumentError(absl::StrCat("the Jacobian of graph '", fg->name(),
                                                   "' needs one tensor output of known shape, it returns ",
                                                   out_abs->ToString()));
  }
  int64_t n = NumElementsOf(in->shape()), m = NumElementsOf(out->shape());
  FuncGraph* step = nullptr;
  if (forward) {
    KGRAD_ASSIGN_OR_RETURN(step, Jvp(module, fg));
  } else {
    KGRAD_ASSIGN_OR_RETURN(step, Vjp(module, fg));
  }
  GraphBuilder b(&module, absl::StrCat(forward ? "jacfwd_" : "jacrev_", fg->name()), fg->parent());
  std::vector<AnfNode*> xs = CopyParams(b, fg, "");
  int64_t rows = forward ? n : m, cols = forward ? m : n;
  AnfNode* acc0 = b.Op(PrimId::kFill, {}, {{"shape", std::vector<int64_t>{rows, cols}}, {"value", 0.0}, {"dtype", out->dtype()}});
  std::vector<AnfNode*> final_state = b.While(
      {b.Int(0), acc0},
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) { return c.Op(PrimId::kScalarLt, {s[0], c.Int(rows)}); },
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) {
        AnfNode* k = c.Op(PrimId::kScalarToTensor, {s[0]}, {{"dtype", DType::kInt64}});
        AnfNode* basis = c.Op(PrimId::kOneHot, {k}, {{"depth", rows}, {"dtype", forward ? in->dtype() : out->dtype()}});
        AnfNode* e = c.Op(PrimId::kReshape, {basis}, {{"shape", forward ? Dims(in) : Dims(out)}});
        std::vector<AnfNode*> args = xs;
        AnfNode* slice;
        if (forward) {
          for (int i = 0; i < n_in; ++i) args.push_back(i == argnum ? e : c.Op(PrimId::kZerosLike, {xs[i]}));
          slice = c.GetItem(c.Call(step, args), 1);
        } else {
          args.push_back(e);
          slice = c.GetItem(c.GetItem(c.Call(step, args), 1), argnum);
        }
        AnfNode* row = c.Op(PrimId::kReshape, {slice}, {{"shape", std::vector<int64_t>{1, cols}}});
        AnfNode* index = c.Op(PrimId::kReshape, {k}, {{"shape", std::vector<int64_t>{1}}});
        AnfNode* acc = c.Op(PrimId::kScatterAdd, {s[1], index, row});
        return std::vector<AnfNode*>{c.Op(PrimId::kScalarAdd, {s[0], c.Int(1)}), acc};
      },
      forward ? "jacfwd_loop" : "jacrev_loop");
  AnfNode* j = final_state[1];
  if (forward) j = b.Op(PrimId::kTranspose, {j}, {{"perm", std::vector<int64_t>{1, 0}}});
  std::vector<int64_t> shape = Dims(out);
  for (int64_t d : in->shape()) shape.push_back(d);
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* jac, b.Return(b.Op(PrimId::kReshape, {j}, {{"shape", shape}})));
  KGRAD_RETURN_IF_ERROR(Optimize(module, jac).status());
  return jac;
}

}  // namespace

absl::StatusOr<FuncGraph*> Jacfwd(Module& module, FuncGraph* fg, int argnum) {
  return Jacobian(module, fg, argnum, /*forward=*/true);
}

absl::StatusOr<FuncGraph*> Jacrev(Module& module, FuncGraph* fg, int argnum) {
  return Jacobian(module, fg, argnum, /*forward=*/false);
}

absl::StatusOr<FuncGraph*> Hessian(Module& module, FuncGraph* fg, int argnum) {
  // Forward over reverse: the Jacobian (by Jvp) of the gradient (by the K-transform).
  GradOptions o;
  o.argnums = {argnum};
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* grad, Grad(module, fg, o));
  return Jacfwd(module, grad, argnum);
}

}  // namespace kgrad
