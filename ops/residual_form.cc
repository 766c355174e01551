#include "ops/residual_form.h"

namespace kgrad {

absl::string_view ResidualFormName(ResidualForm form) {
  switch (form) {
    case ResidualForm::kSaveInputs: return "save_inputs";
    case ResidualForm::kSaveOutputs: return "save_outputs";
    case ResidualForm::kRecompute: return "recompute";
    case ResidualForm::kDefault: break;
  }
  return "default";
}

std::optional<ResidualForm> ParseResidualForm(absl::string_view name) {
  for (ResidualForm f :
       {ResidualForm::kSaveInputs, ResidualForm::kSaveOutputs, ResidualForm::kRecompute}) {
    if (name == ResidualFormName(f)) return f;
  }
  return std::nullopt;
}

}  // namespace kgrad
