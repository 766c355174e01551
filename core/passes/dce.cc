#include "core/passes/dce.h"

#include "core/passes/rewrite.h"

namespace kgrad {

absl::StatusOr<bool> DcePass::Run(Module& module, FuncGraph* root) {
  // The root is kept even if the caller forgot to make it public.
  bool was_public = root->is_public();
  root->set_public(true);
  size_t graphs = module.graphs().size();
  size_t nodes = 0;
  for (const auto& g : module.graphs()) nodes += g->owned_nodes().size();
  module.CollectGarbage([root](const FuncGraph* g) { return passes::MayModify(g, root); });
  root->set_public(was_public);
  size_t after = 0;
  for (const auto& g : module.graphs()) after += g->owned_nodes().size();
  return graphs != module.graphs().size() || nodes != after;
}

}  // namespace kgrad
