// Dead code elimination, after the rewrites: in the graphs a root reaches, the
// nodes no output needs are deleted, and so are the graphs neither the root nor
// a public graph reaches any more (the mark and sweep is Module::CollectGarbage,
// the one owner of nodes).
#ifndef KGRAD_CORE_PASSES_DCE_H_
#define KGRAD_CORE_PASSES_DCE_H_

#include "core/passes/pass.h"

namespace kgrad {

class DcePass : public Pass {
 public:
  std::string name() const override { return "dce"; }
  absl::StatusOr<bool> Run(Module& module, FuncGraph* root) override;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_DCE_H_
