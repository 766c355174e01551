// Constant folding on the CPU: evaluates a primitive on constant inputs with the
// CPU kernels (the optimiser's ConstantFoldPass takes it; core/ cannot depend on
// backends/ itself).
#ifndef KGRAD_BACKENDS_CPU_CONSTANT_EVALUATOR_H_
#define KGRAD_BACKENDS_CPU_CONSTANT_EVALUATOR_H_

#include "core/passes/constant_fold.h"

namespace kgrad {

class CpuConstantEvaluator final : public ConstantEvaluator {
 public:
  absl::StatusOr<Value> Evaluate(const Primitive& prim, std::vector<Value> inputs) override;
};

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_CONSTANT_EVALUATOR_H_
