// Constant folding: applications whose inputs are all constants become constants.
// Scalar arithmetic and switch on a constant are folded here directly; tensor
// primitives are folded through a ConstantEvaluator (a device's kernels, supplied
// by the caller, since core/ does not depend on backends/), when their result is
// small.
#ifndef KGRAD_CORE_PASSES_CONSTANT_FOLD_H_
#define KGRAD_CORE_PASSES_CONSTANT_FOLD_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/constant_evaluator.h"
#include "core/passes/rewrite.h"

namespace kgrad {

class ConstantFoldPass : public RewritePass {
 public:
  // `evaluator` may be null (then only scalars and switches fold).
  explicit ConstantFoldPass(const ConstantEvaluator* evaluator = nullptr, int64_t max_elements = 1024)
      : evaluator_(evaluator), max_elements_(max_elements) {}
  std::string name() const override { return "constant"; }

 protected:
  AnfNode* Rewrite(CNode* c) override;

 private:
  AnfNode* FoldTensor(CNode* c, const Primitive& p);

  const ConstantEvaluator* evaluator_;
  int64_t max_elements_;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_CONSTANT_FOLD_H_
