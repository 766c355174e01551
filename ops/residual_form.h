// What a gradient rule keeps from the forward pass for its backward pass (its
// residuals), after DiffFX's two forms per op and JAX's checkpoint policies.
//
//   save_inputs   the backward reads the op's inputs only, and computes from them
//                 what else it needs (sin: x, and cos x in the backward; tanh: x,
//                 and tanh x again behind a barrier)
//   save_outputs  the backward reads values of the forward pass: the op's output
//                 (tanh: y) or a companion the forward computes for it (sin:
//                 cos x)
//   recompute     the backward recomputes from the saved inputs every forward
//                 value it reads: for the elementwise ops and the softmaxes this is
//                 save_inputs' residual set (the names differ for ops whose rules
//                 keep statistics of their inputs)
//
// A rule lists the forms it has, its default first (BpropContext::Form); a
// policy (ad/residual_policy.h) asks each application for one.
#ifndef KGRAD_OPS_RESIDUAL_FORM_H_
#define KGRAD_OPS_RESIDUAL_FORM_H_

#include <optional>

#include "absl/strings/string_view.h"

namespace kgrad {

enum class ResidualForm {
  kDefault,  // none asked: the rule's own default
  kSaveInputs,
  kSaveOutputs,
  kRecompute,
};

// "save_inputs", "save_outputs", "recompute" ("default" for kDefault).
absl::string_view ResidualFormName(ResidualForm form);
// The form of that name; nullopt for any other text (kDefault has none).
std::optional<ResidualForm> ParseResidualForm(absl::string_view name);

}  // namespace kgrad

#endif  // KGRAD_OPS_RESIDUAL_FORM_H_
