#include "core/passes/pass.h"

#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace kgrad {

absl::StatusOr<bool> Pipeline::Run(Module& module, FuncGraph* root, int max_rounds) {
  bool any = false;
  std::map<std::string, int> counts;
  std::map<std::string, double> ms;
  for (int round = 0; round < max_rounds; ++round) {
    bool changed = false;
    for (const auto& pass : passes_) {
      auto start = std::chrono::steady_clock::now();
      KGRAD_ASSIGN_OR_RETURN(bool c, pass->Run(module, root));
      if (check_uses_) {
        absl::Status s = module.CheckUses();
        if (!s.ok()) return absl::InternalError(absl::StrCat("after pass ", pass->name(), ": ", s.message()));
      }
      ms[pass->name()] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (c) ++counts[pass->name()];
      changed |= c;
    }
    any |= changed;
    if (!changed) break;
  }
  std::vector<std::string> parts;
  for (const auto& [name, total] : ms) {
    parts.push_back(absl::StrFormat("%s x%d (%.1f ms)", name, counts[name], total));
  }
  log_ = absl::StrJoin(parts, ", ");
  return any;
}

}  // namespace kgrad
