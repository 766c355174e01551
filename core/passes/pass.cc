#include "core/passes/pass.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace kgrad {

absl::StatusOr<bool> Pipeline::Run(Module& module, FuncGraph* root, int max_rounds) {
  bool any = false;
  std::map<std::string, int> counts;
  for (int round = 0; round < max_rounds; ++round) {
    bool changed = false;
    for (const auto& pass : passes_) {
      KGRAD_ASSIGN_OR_RETURN(bool c, pass->Run(module, root));
      if (c) ++counts[pass->name()];
      changed |= c;
    }
    any |= changed;
    if (!changed) break;
  }
  std::vector<std::string> parts;
  for (const auto& [name, n] : counts) parts.push_back(absl::StrCat(name, " x", n));
  log_ = absl::StrJoin(parts, ", ");
  return any;
}

}  // namespace kgrad
