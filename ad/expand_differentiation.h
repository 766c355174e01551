// Expanding differentiation operators (ops/differentiation.h) into graphs: the
// pass that makes `grad(@f)` in a graph file mean what GradOperation means in
// C++ (MindSpore's J expansion).
//
// Each application `op(F)` of J / grad / value_and_grad / jvp / vjp becomes a
// constant naming the graph the C++ API builds for F (K(F), Grad, ValueAndGrad,
// Jvp, Vjp). The operand F may be
//   - a graph constant or a closure (a nested graph using enclosing values),
//   - partial(f, a...): a closure @partial(x...) = f(a..., x...) is made,
//   - switch(c, F1, F2): becomes switch(c, op(F1), op(F2)),
//   - a primitive of fixed arity: a graph @prim(x...) = prim(x...) is made,
//   - another differentiation operator (expanded first).
// Anything computed at run time (a parameter, a call's result) is an error
// naming the node. Operators are expanded innermost first: one whose operand
// reaches another operator waits for it, so `grad(@g)` where @g applies
// `grad(@f)` differentiates the expansion (higher order written in the file);
// a cycle (a graph that differentiates itself) is an error.
//
// Argument types: a graph whose parameters are declared is differentiated for
// those types; otherwise for the types inference finds for its parameters when
// the root is analysed with `root_args` (or its declared types).
#ifndef KGRAD_AD_EXPAND_DIFFERENTIATION_H_
#define KGRAD_AD_EXPAND_DIFFERENTIATION_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/module.h"

namespace kgrad {

// Expands every differentiation operator in the graphs reachable from `root`
// (nullptr: the module's entry and every public graph). Returns the number
// expanded. The graphs are edited in place (each operator is replaced by the
// graph it denotes; nothing else changes).
absl::StatusOr<int> ExpandDifferentiation(Module& module, FuncGraph* root = nullptr,
                                          const std::vector<AbstractPtr>& root_args = {});

// Whether a graph reachable from `root` applies a differentiation operator.
bool HasDifferentiationOperators(Module& module, FuncGraph* root);

}  // namespace kgrad

#endif  // KGRAD_AD_EXPAND_DIFFERENTIATION_H_
