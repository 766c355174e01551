// ConstantEvaluator: computes one primitive application on constant inputs. The
// interface lives in core (the optimiser's constant folding and ONNX import's
// shape chains need it); a backend implements it with its kernels
// (backends/cpu/constant_evaluator.h), since core/ cannot depend on backends/.
//
// It is injected once, into the Module (Module::set_constant_evaluator): ONNX
// import sets the CPU one on the modules it makes, and Optimize, GradOperation
// and Jvp on that module all fold through it.
#ifndef KGRAD_CORE_CONSTANT_EVALUATOR_H_
#define KGRAD_CORE_CONSTANT_EVALUATOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/primitive.h"
#include "core/value.h"

namespace kgrad {

class ConstantEvaluator {
 public:
  virtual ~ConstantEvaluator() = default;
  // Stateless and thread-safe: one evaluator serves every module and thread.
  virtual absl::StatusOr<Value> Evaluate(const Primitive& prim,
                                         std::vector<Value> inputs) const = 0;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_CONSTANT_EVALUATOR_H_
