#include "core/passes/dce.h"

#include "core/passes/rewrite.h"

namespace kgrad {

absl::StatusOr<bool> DcePass::Run(Module& module, FuncGraph* root) {
  // The root lives even when it is not public; graphs the pass may not change
  // (another root's, declared public) keep every node.
  Module::Collected gone = module.CollectGarbage(
      [root](const FuncGraph* g) { return passes::MayModify(g, root); }, {root});
  return gone.graphs + gone.nodes > 0;
}

}  // namespace kgrad
