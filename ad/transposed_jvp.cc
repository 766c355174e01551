#include "ad/transposed_jvp.h"

#include "absl/strings/str_cat.h"
#include "ad/ad_context.h"
#include "ad/grad_operation.h"
#include "ad/prepare.h"
#include "core/builder.h"
#include "core/status_macros.h"

namespace kgrad {

absl::StatusOr<FuncGraph*> TransposedJvp(Module& module, FuncGraph* fg,
                                         const std::vector<AbstractPtr>& arg_types,
                                         const OptimizeOptions* optimize) {
  // Step 1. h(x..., u) = (f(x...), J^T u), flattened by the optimiser.
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* h, Vjp(module, fg, arg_types));
  if (optimize != nullptr) KGRAD_RETURN_IF_ERROR(Optimize(module, h, *optimize).status());
  // Step 2. K(h): reverse mode of h, whose bprop maps a cotangent of J^T u to J v.
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* prepared, PrepareForAd(h, {}));
  AdContext ctx(&module, prepared);
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* kh, ctx.K(prepared));
  // h is an intermediate: once nothing reaches it, garbage collection takes it.
  h->set_public(false);
  // Step 3. jvp(x..., v...) with u = 0 (any u gives the same J v; zero lets the
  // optimiser delete the first reverse pass).
  GraphBuilder b(&module, absl::StrCat("jvp_", fg->name()), fg->parent());
  std::vector<AnfNode*> xs, vs;
  for (Parameter* p : fg->parameters()) xs.push_back(b.Param(p->name(), p->declared()));
  for (Parameter* p : fg->parameters()) vs.push_back(b.Param(p->name() + "_dot", p->declared()));
  AnfNode* u0 = b.Op(PrimId::kZerosLike, {b.Call(fg, xs)});
  std::vector<AnfNode*> h_args = xs;
  h_args.push_back(u0);
  AnfNode* app = b.Call(kh, h_args);
  AnfNode* hout = b.GetItem(app, 0);
  AnfNode* out = b.GetItem(hout, 0);
  AnfNode* sens = b.Tuple({b.Op(PrimId::kZerosLike, {out}), b.Tuple(vs)});
  AnfNode* din = b.Call(b.GetItem(app, 1), {sens});
  AnfNode* jv = b.GetItem(din, static_cast<int64_t>(xs.size()) + 1);
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* jvp, b.Return(b.Tuple({out, jv})));
  if (optimize != nullptr) KGRAD_RETURN_IF_ERROR(Optimize(module, jvp, *optimize).status());
  return jvp;
}

}  // namespace kgrad
