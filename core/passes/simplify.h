// Simplify: the local rewrite rule sets (partial elimination, tuples, envs,
// algebra, constant folding) and CSE applied together in one sweep, so that the
// pipeline recomputes its analyses once per round instead of once per rule set,
// and a node is merged with an equal one only once its rewrites are done. Each
// rule set remains a pass of its own (and is tested as one); so does CSE.
#ifndef KGRAD_CORE_PASSES_SIMPLIFY_H_
#define KGRAD_CORE_PASSES_SIMPLIFY_H_

#include <memory>
#include <vector>

#include "core/passes/constant_fold.h"
#include "core/passes/rewrite.h"

namespace kgrad {

class SimplifyPass : public RewritePass {
 public:
  explicit SimplifyPass(const ConstantEvaluator* evaluator = nullptr);
  std::string name() const override { return "simplify"; }

 protected:
  AnfNode* Rewrite(CNode* c) override;

 private:
  std::vector<std::unique_ptr<RewritePass>> rules_;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_SIMPLIFY_H_
