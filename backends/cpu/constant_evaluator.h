// Constant folding on the CPU: evaluates a primitive on constant inputs with the
// CPU kernels. Stateless: Get() is the one instance everything shares.
#ifndef KGRAD_BACKENDS_CPU_CONSTANT_EVALUATOR_H_
#define KGRAD_BACKENDS_CPU_CONSTANT_EVALUATOR_H_

#include "core/constant_evaluator.h"

namespace kgrad {

class CpuConstantEvaluator final : public ConstantEvaluator {
 public:
  static const CpuConstantEvaluator& Get();
  absl::StatusOr<Value> Evaluate(const Primitive& prim, std::vector<Value> inputs) const override;
};

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_CONSTANT_EVALUATOR_H_
