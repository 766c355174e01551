// Forward mode, derived by transposing the reverse graph.
//
// The vector-Jacobian product h(x, u) = J(x)^T u is linear in u, so reverse mode
// applied to u -> h(x, u) with the cotangent v returns (J^T)^T v = J v. We take
// that route (as MindSpore does) rather than writing a second set of tangent
// rules, because every bprop rule then serves as its own transpose rule, and
// switch, loops, closures and higher order come for free. MindSpore leaves the
// first reverse pass in the result; kgrad evaluates it at u = 0 and optimises:
// every value of that pass folds to zero and is deleted, so a first-order Jvp
// graph keeps only the forward computation and the tangent propagation.
//
//   Jvp(f)(x..., v...) = (f(x...), J v)
//   Linearize(f)(x...) = (f(x...), @tangent)  with @tangent(v...) = J v reusing the
//                         forward values (the primal is not run again)
//   LinearTranspose(l)(ct) = l^T ct for a linear graph l
//   Jacfwd(f)(x) / Jacrev(f)(x): the Jacobian of f w.r.t. input `argnum`, shaped
//                         out.shape + x.shape, column by column (Jvp) or row by
//                         row (Vjp)
//   Hessian(f)(x) = Jacfwd(grad f)(x)   (forward over reverse)
#ifndef KGRAD_AD_JVP_H_
#define KGRAD_AD_JVP_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/module.h"

namespace kgrad {

struct JvpOptions {
  bool optimize = true;  // run the optimiser (without it the reverse pass stays)
  std::vector<AbstractPtr> arg_types;
  // Return @jvp_f(x..., v...) = jvp(@f)(x..., v...), the operator itself, for a
  // graph that others load (ad/expand_differentiation.h expands it).
  bool as_operator = false;
};

absl::StatusOr<FuncGraph*> Jvp(Module& module, FuncGraph* fg, const JvpOptions& options = {});
absl::StatusOr<FuncGraph*> Linearize(Module& module, FuncGraph* fg, const JvpOptions& options = {});
absl::StatusOr<FuncGraph*> LinearTranspose(Module& module, FuncGraph* linear_fg);
absl::StatusOr<FuncGraph*> Jacfwd(Module& module, FuncGraph* fg, int argnum = 0);
absl::StatusOr<FuncGraph*> Jacrev(Module& module, FuncGraph* fg, int argnum = 0);
absl::StatusOr<FuncGraph*> Hessian(Module& module, FuncGraph* fg, int argnum = 0);

}  // namespace kgrad

#endif  // KGRAD_AD_JVP_H_
