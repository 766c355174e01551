#include "core/passes/optimize.h"

#include "core/infer.h"
#include "core/passes/algebra.h"
#include "core/passes/cse.h"
#include "core/passes/dce.h"
#include "core/passes/env_simplify.h"
#include "core/passes/inline.h"
#include "core/passes/tuple_simplify.h"
#include "core/status_macros.h"

namespace kgrad {

absl::StatusOr<std::string> Optimize(Module& module, FuncGraph* root, const OptimizeOptions& options) {
  // Types let the algebra pass reason about shapes; a graph without declared
  // inputs is optimised without them.
  bool declared = true;
  for (Parameter* p : root->parameters()) declared &= p->declared() != nullptr;
  if (declared) KGRAD_RETURN_IF_ERROR(InferGraph(root).status());
  Pipeline pipeline;
  pipeline.Add(std::make_unique<InlinePass>(options.max_unroll))
      .Add(std::make_unique<PartialEliminatePass>())
      .Add(std::make_unique<TupleSimplifyPass>())
      .Add(std::make_unique<EnvSimplifyPass>())
      .Add(std::make_unique<AlgebraPass>())
      .Add(std::make_unique<ConstantFoldPass>(options.evaluator))
      .Add(std::make_unique<CsePass>())
      .Add(std::make_unique<DcePass>());
  KGRAD_RETURN_IF_ERROR(pipeline.Run(module, root, options.max_rounds).status());
  return pipeline.log();
}

}  // namespace kgrad
