// Dead code elimination: nodes that no output needs and graphs that no public
// graph reaches are deleted (Module::CollectGarbage).
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
