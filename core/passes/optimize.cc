#include "core/passes/optimize.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/infer.h"
#include "core/passes/algebra.h"
#include "core/passes/cse.h"
#include "core/passes/dce.h"
#include "core/passes/env_simplify.h"
#include "core/passes/inline.h"
#include "core/passes/simplify.h"
#include "core/passes/tuple_simplify.h"
#include "core/status_macros.h"

namespace kgrad {

absl::StatusOr<std::string> Optimize(Module& module, FuncGraph* root, const OptimizeOptions& options) {
  // Types let the algebra pass reason about shapes; a graph without declared
  // inputs is optimised without them.
  bool declared = true;
  for (Parameter* p : root->parameters()) declared &= p->declared() != nullptr;
  if (declared) KGRAD_RETURN_IF_ERROR(InferGraph(root).status());
  const bool check_uses = options.check_uses || std::getenv("KGRAD_CHECK_USES") != nullptr;
  UnrollBudget unroll{options.max_unroll, 0};
  Pipeline pipeline;
  pipeline.Add(std::make_unique<InlinePass>(&unroll))
      .Add(std::make_unique<SimplifyPass>(options.evaluator != nullptr
                                              ? options.evaluator
                                              : module.constant_evaluator()))
      .Add(std::make_unique<CsePass>())
      .CheckUsesAfterEachPass(check_uses);
  KGRAD_RETURN_IF_ERROR(pipeline.Run(module, root, options.max_rounds).status());
  // Dead nodes do not disturb the rewrites (they follow the evaluation order), so
  // they are collected once, at the end.
  KGRAD_ASSIGN_OR_RETURN(bool collected, DcePass().Run(module, root));
  if (check_uses) {
    absl::Status s = module.CheckUses();
    if (!s.ok()) return absl::InternalError(absl::StrCat("after dce: ", s.message()));
  }
  return collected ? pipeline.log() + ", dce" : pipeline.log();
}

}  // namespace kgrad
