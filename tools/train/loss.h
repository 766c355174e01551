// Losses attached to a model's output for training, as torch.nn.functional's
// with the default reduction (the mean over examples):
//
//   cross_entropy    out [N, C] logits, target int64 [N] class indices:
//                    mean_n -log_softmax(out)[n, target[n]]
//   nll              out [N, C] log-probabilities, target int64 [N]:
//                    mean_n -out[n, target[n]]
//   mse              target like out: mean (out - target)^2
//   bce_with_logits  target like out (probabilities): mean of
//                    (1 - y) x + m + log(exp(-m) + exp(-x - m)), m = max(-x, 0)
//                    (torch's stable form; its gradient is sigmoid(x) - y
//                    everywhere, 0 included)
//   none             the model's output is already the loss (a number)
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

absl::StatusOr<LossKind> ParseLossKind(absl::string_view name);
std::string LossKindName(LossKind kind);

// The type the `target` input has for a model output of type `out` (nullptr for
// kNone); an output the loss does not fit is an InvalidArgument error naming the
// loss, `what` (the output, e.g. "output 0 of graph 'main'") and its type.
absl::StatusOr<AbstractPtr> LossTargetType(LossKind kind, const AbstractPtr& out,
                                           const std::string& what);

// The loss of `out` against `target` (unused for kNone), a rank-0 tensor of
// out's dtype; `out_type` as checked by LossTargetType.
AnfNode* BuildLoss(GraphBuilder& b, LossKind kind, AnfNode* out, AnfNode* target,
                   const AbstractTensor& out_type);

}  // namespace train
}  // namespace kgrad

#endif  // KGRAD_TOOLS_TRAIN_LOSS_H_
