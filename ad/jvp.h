// Forward mode, derived from the reverse rules by transposition, and
// structural: each primitive's tangent rule is its bprop transposed (derived once
// per signature, ad/tangent_rules.h), and the graph is mapped node for node
// (ad/tangent_functor.h): calls to calls, switch to switch, closures to closures,
// a loop to a loop carrying (value, tangent). Memory is that of the forward pass
// plus the tangents, whatever the trip count; the optimiser then inlines the
// rules. The whole-graph transposition (ad/transposed_jvp.h) stays available
// as a cross-check, and differentiates the one kind of program the structural
// transform leaves to it: one where a graph with a custom bprop reads values of
// enclosing graphs (its bprop gives their sensitivities too).
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

enum class JvpConstruction {
  kStructural,           // per-primitive rules, the program's shape kept
  kTransposedWholeGraph  // reverse of reverse of the whole graph (tests' cross-check)
};

struct JvpOptions {
  bool optimize = true;  // run the optimiser (without it the rules stay calls)
  JvpConstruction construction = JvpConstruction::kStructural;
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
