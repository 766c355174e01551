// Losses attached to a model's output for training, as torch.nn.functional's
// with the default reduction (the mean over examples):
//
//   cross_entropy    out [N, C] logits, target int64 [N] class indices:
//                    mean_n -log_softmax(out)[n, target[n]]; out [N, C, d1, ...]
//                    (C known), target [N, d1, ...]: the mean over every
//                    position (n, d1, ...), as torch's K-dimensional case
//   nll              out [N, C, ...] log-probabilities, target int64 [N, ...]:
//                    mean -out[n, target[n, ...], ...]
//   mse              target like out: mean (out - target)^2
//   bce_with_logits  target like out (probabilities): mean of
//                    (1 - y) x + m + log(exp(-m) + exp(-x - m)), m = max(-x, 0)
//                    (torch's stable form; its gradient is sigmoid(x) - y
//                    everywhere, 0 included)
//   none             the model's output is already the loss (a number)
//
// cross_entropy takes torch's two further forms (CrossEntropyOptions):
//   probability_targets  target float like out, class probabilities along axis 1:
//                        mean over positions of -sum_c target_c log_softmax(out)_c
//   label_smoothing e    the target mixed with the uniform distribution:
//                        (1 - e) target + e / C (class indices: (1 - e) times
//                        their loss plus e times the mean of -log_softmax over C)
#ifndef KGRAD_TOOLS_TRAIN_LOSS_H_
#define KGRAD_TOOLS_TRAIN_LOSS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/abstract.h"
#include "core/builder.h"

namespace kgrad {
namespace train {

enum class LossKind { kNone, kCrossEntropy, kNll, kMse, kBceWithLogits };

struct CrossEntropyOptions {
  bool probability_targets = false;
  double label_smoothing = 0;  // in [0, 1]
};

absl::StatusOr<LossKind> ParseLossKind(absl::string_view name);
std::string LossKindName(LossKind kind);

// The type the `target` input has for a model output of type `out` (nullptr for
// kNone); an output the loss does not fit is an InvalidArgument error naming the
// loss, `what` (the output, e.g. "output 0 of graph 'main'") and its type.
// `ce` must be the defaults for other losses (an error says so).
absl::StatusOr<AbstractPtr> LossTargetType(LossKind kind, const AbstractPtr& out,
                                           const std::string& what, const CrossEntropyOptions& ce = {});

// The loss of `out` against `target` (unused for kNone), a rank-0 tensor of
// out's dtype; `out_type` as checked by LossTargetType.
AnfNode* BuildLoss(GraphBuilder& b, LossKind kind, AnfNode* out, AnfNode* target,
                   const AbstractTensor& out_type, const CrossEntropyOptions& ce = {});

}  // namespace train
}  // namespace kgrad

#endif  // KGRAD_TOOLS_TRAIN_LOSS_H_
