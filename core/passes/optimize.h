// The post-AD optimisation pipeline, run to a fixpoint:
//   inline (partial evaluation) -> simplify [partial elimination, tuple, env,
//   algebra (zeros, ones, identities, static forms), constant folding] -> CSE
// and then DCE.
// For a first-order program the result has no closure, partial, env or tuple left:
// a plain graph of kernels, about the size of a hand-written backward pass.
#ifndef KGRAD_CORE_PASSES_OPTIMIZE_H_
#define KGRAD_CORE_PASSES_OPTIMIZE_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/module.h"
#include "core/passes/constant_fold.h"

namespace kgrad {

struct OptimizeOptions {
  // Folds tensor constants; nullptr: the module's (Module::constant_evaluator).
  const ConstantEvaluator* evaluator = nullptr;
  int max_rounds = 512;
  int max_unroll = 20000;                  // nodes copied by loop unrolling
  // Verify use lists after every pass; also on when KGRAD_CHECK_USES is set (read
  // once per Optimize call).
  bool check_uses = false;
};

// Optimises `root` and everything it reaches, in place; unreachable graphs that are
// not public are deleted. Returns a summary of what ran ("inline x3, tuple x2...").
absl::StatusOr<std::string> Optimize(Module& module, FuncGraph* root,
                                     const OptimizeOptions& options = {});

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_OPTIMIZE_H_
