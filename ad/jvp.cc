#include "ad/jvp.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ad/ad_context.h"
#include "ad/grad_operation.h"
#include "core/builder.h"
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
  // Step 1. h(x..., u) = (f(x...), J^T u), flattened by the optimiser.
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* h, Vjp(module, fg, options.arg_types));
  if (options.optimize) KGRAD_RETURN_IF_ERROR(Optimize(module, h).status());
  // Step 2. K(h): reverse mode of h, whose bprop maps a cotangent of J^T u to J v.
  AdContext ctx(&module, h);
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* kh, ctx.K(h));
  // Step 3. jvp(x..., v...) with u = 0 (any u gives the same J v; zero lets the
  // optimiser delete the first reverse pass).
  GraphBuilder b(&module, absl::StrCat("jvp_", fg->name()), fg->parent());
  std::vector<AnfNode*> xs = CopyParams(b, fg, "");
  std::vector<AnfNode*> vs = CopyParams(b, fg, "_dot");
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
  if (options.optimize) KGRAD_RETURN_IF_ERROR(Optimize(module, jvp).status());
  return jvp;
}

}  // namespace kgrad
