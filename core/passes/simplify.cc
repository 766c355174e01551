#include "core/passes/simplify.h"

#include "core/passes/algebra.h"
#include "core/passes/env_simplify.h"
#include "core/passes/inline.h"
#include "core/passes/tuple_simplify.h"

namespace kgrad {

SimplifyPass::SimplifyPass(const ConstantEvaluator* evaluator) : RewritePass(/*merge_equal=*/true) {
  rules_.push_back(std::make_unique<PartialEliminatePass>());
  rules_.push_back(std::make_unique<TupleSimplifyPass>());
  rules_.push_back(std::make_unique<EnvSimplifyPass>());
  rules_.push_back(std::make_unique<AlgebraPass>());
  rules_.push_back(std::make_unique<ConstantFoldPass>(evaluator));
}

AnfNode* SimplifyPass::Rewrite(CNode* c) {
  for (const auto& rules : rules_) {
    AnfNode* r = rules->RewriteWithin(c, this);
    if (r != nullptr && r != c) return r;
  }
  return nullptr;
}

}  // namespace kgrad
