#include "core/passes/pass.h"

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace kgrad {

absl::StatusOr<bool> PassLog::Run(Pass& pass, Module& module, FuncGraph* root) {
  auto start = std::chrono::steady_clock::now();
  KGRAD_ASSIGN_OR_RETURN(bool changed, pass.Run(module, root));
  if (check_uses_) {
    absl::Status s = module.CheckUses();
    if (!s.ok()) return absl::InternalError(absl::StrCat("after pass ", pass.name(), ": ", s.message()));
  }
  ms_[pass.name()] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  counts_[pass.name()] += changed ? 1 : 0;
  return changed;
}

std::string PassLog::ToString() const {
  std::vector<std::string> parts;
  for (const auto& [name, total] : ms_) {
    parts.push_back(absl::StrFormat("%s x%d (%.1f ms)", name, counts_.at(name), total));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace kgrad
