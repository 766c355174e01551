// Preparing a program for the K-transform:
//   1. switch with a constant condition is replaced by the chosen branch (the
//      other branch is dead; it is neither differentiated nor type-checked);
//   2. partial(f, a...) becomes a closure graph  @p(x...) = f(a..., x...);
//   3. a primitive used as a value (not called directly) becomes a graph
//      @prim(x...) = prim(x...);
//   4. types are inferred, so that gradient rules know dtypes and shapes.
// Steps 1-3 work on a copy of the graphs involved when they change anything: the
// caller's graphs are never modified.
#ifndef KGRAD_AD_PREPARE_H_
#define KGRAD_AD_PREPARE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/func_graph.h"

namespace kgrad {

// `arg_types`: the abstracts of fg's arguments, or empty to use the declared
// parameter types (inference is skipped when neither is available).
absl::StatusOr<FuncGraph*> PrepareForAd(FuncGraph* fg, const std::vector<AbstractPtr>& arg_types);

}  // namespace kgrad

#endif  // KGRAD_AD_PREPARE_H_
