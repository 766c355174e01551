#include "ad/ad_context.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ad/dfunctor.h"
#include "core/status_macros.h"

namespace kgrad {

AdContext::AdContext(Module* module, FuncGraph* root) : FunctorWorklist(module, root) {}

AdContext::~AdContext() = default;

absl::StatusOr<FuncGraph*> AdContext::K(FuncGraph* g) {
  KGRAD_RETURN_IF_ERROR(CheckInScope(g));
  DFunctor* f = FunctorOf(g);
  KGRAD_RETURN_IF_ERROR(RunPending());
  return f->k_graph();
}

std::string AdContext::KeyOf(const AnfNode* fv) {
  if (const Parameter* p = fv->AsParameter(); p != nullptr && p->is_weight()) {
    return absl::StrCat("$", p->name());
  }
  return absl::StrCat(fv->DebugName(), "#", fv->id());
}

ResidualPolicy::Ask AdContext::AskResidualForm(const CNode& app, const Primitive& prim) {
  if (residuals_ == nullptr || residuals_->empty()) return {};
  if (!app.name().empty()) seen_names_.insert(app.name());
  return residuals_->For(app, prim);
}

absl::Status AdContext::CheckResidualNames() const {
  if (residuals_ == nullptr) return absl::OkStatus();
  std::vector<std::string> missing;
  for (const std::string& name : residuals_->NodeNames()) {
    if (!seen_names_.contains(name)) missing.push_back(name);
  }
  if (missing.empty()) return absl::OkStatus();
  std::sort(missing.begin(), missing.end());
  return absl::InvalidArgumentError(absl::StrCat(
      "residual policy '", residuals_->spec(), "' names ", absl::StrJoin(missing, ", "),
      ", but no differentiated application of a primitive has that name"));
}

}  // namespace kgrad
