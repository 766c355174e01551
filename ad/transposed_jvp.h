// Forward mode of a whole graph by transposing its reverse graph (the
// construction kgrad's Jvp used before the structural transform of
// ad/tangent_functor.h; kept as that transform's source of per-primitive tangent
// rules and as a cross-check in tests).
//
// The vector-Jacobian product h(x, u) = J(x)^T u is linear in u, so reverse mode
// applied to u -> h(x, u) with the cotangent v returns (J^T)^T v = J v; every
// bprop rule serves as its own transpose rule. MindSpore leaves the first reverse
// pass in the result; here it is evaluated at u = 0 and, with `optimize`, every
// value of that pass folds to zero and is deleted.
//
//   TransposedJvp(f)(x..., v...) = (f(x...), J v)
//
// Lean on straight-line code; through control flow the outer reverse pass stores
// the inner one, so memory grows with a loop's trip count. ad/jvp.h's Jvp uses it
// per primitive, where there is no control flow.
#ifndef KGRAD_AD_TRANSPOSED_JVP_H_
#define KGRAD_AD_TRANSPOSED_JVP_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/module.h"
#include "core/passes/optimize.h"

namespace kgrad {

// `optimize`: the options of the optimiser's runs, or nullptr to leave the
// reverse pass in the result.
absl::StatusOr<FuncGraph*> TransposedJvp(Module& module, FuncGraph* fg,
                                         const std::vector<AbstractPtr>& arg_types,
                                         const OptimizeOptions* optimize);

}  // namespace kgrad

#endif  // KGRAD_AD_TRANSPOSED_JVP_H_
