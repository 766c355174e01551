// Common subexpression elimination, within each graph: applications of the same
// callee to the same inputs are one node (every primitive is pure; so are graph
// calls). Equal constants are merged first, so `add(x, 1.0)` written twice with two
// constant nodes is found too.
#ifndef KGRAD_CORE_PASSES_CSE_H_
#define KGRAD_CORE_PASSES_CSE_H_

#include "core/passes/pass.h"

namespace kgrad {

class CsePass : public Pass {
 public:
  std::string name() const override { return "cse"; }
  absl::StatusOr<bool> Run(Module& module, FuncGraph* root) override;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_CSE_H_
