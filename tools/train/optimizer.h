// Optimizers as graphs: the update of one training step written into the step
// graph, with torch.optim's formulas (torch 1.13's single-tensor forms; p a
// weight, g its gradient, t the 1-based step, lr the scheduled rate of step t):
//
// SGD (momentum mu, dampening d, weight decay wd, nesterov):
//   g <- -g if maximize;  g <- g + wd p
//   buf <- g at t = 1, else mu buf + (1 - d) g        (when mu != 0)
//   g <- g + mu buf if nesterov, else buf             (when mu != 0)
//   p <- p - lr g
// Adam (beta1, beta2, eps, wd as L2) and AdamW (wd decoupled):
//   g <- -g if maximize;  Adam: g <- g + wd p;  AdamW: p <- p (1 - lr wd)
//   m <- beta1 m + (1 - beta1) g;   v <- beta2 v + (1 - beta2) g^2
//   vmax <- max(vmax, v) and v <- vmax              (amsgrad)
//   p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// Gradient clipping by global norm (torch.nn.utils.clip_grad_norm_, 2-norm),
// before the update when max_grad_norm > 0:
//   n = sqrt(sum_i |g_i|^2);  g_i <- g_i min(1, max_grad_norm / (n + 1e-6))
// Step-dependent scalars (lr, bias corrections, clip factor) are computed in
// float64 and rounded once to the weight's dtype, as torch's Python floats are.
#ifndef KGRAD_TOOLS_TRAIN_OPTIMIZER_H_
#define KGRAD_TOOLS_TRAIN_OPTIMIZER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/builder.h"
#include "core/dtype.h"
#include "tools/train/lr_schedule.h"

namespace kgrad {
namespace train {

enum class OptimizerKind { kSgd, kAdam, kAdamW };

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kAdamW;
  double lr = 1e-3;
  // SGD.
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
  // Adam and AdamW.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool amsgrad = false;
  // L2 added to the gradient (SGD, Adam) or decoupled (AdamW; torch's default
  // there is 1e-2, which DefaultOptimizerOptions sets).
  double weight_decay = 0;
  bool maximize = false;
  double max_grad_norm = 0;  // > 0: clip the gradients by their global 2-norm
  LrSchedule schedule;
};

// torch's defaults for a kind; "momentum" is SGD with momentum 0.9.
absl::StatusOr<OptimizerOptions> DefaultOptimizerOptions(absl::string_view name);
std::string OptimizerName(const OptimizerOptions& o);
// torch's argument checks (lr >= 0, 0 <= beta < 1, nesterov wants momentum > 0
// and no dampening, ...), each naming the option.
absl::Status ValidateOptimizerOptions(const OptimizerOptions& o);

// The state each weight carries, in order: "momentum_buffer" (SGD with
// momentum), "exp_avg", "exp_avg_sq" and "max_exp_avg_sq" (amsgrad), or none.
// All start as zeros of the weight's shape.
std::vector<std::string> OptimizerSlots(const OptimizerOptions& o);

struct WeightUpdate {
  std::vector<AnfNode*> weights;  // the new value of each weight
  std::vector<AnfNode*> state;    // per weight, its slots in OptimizerSlots' order
};

// Writes step t = steps_done + 1's update into b's graph. `steps_done` is an
// int64 rank-0 node; weights[i], grads[i] and dtypes[i] describe weight i;
// state holds OptimizerSlots(o).size() nodes per weight, weight by weight.
absl::StatusOr<WeightUpdate> BuildOptimizerUpdate(GraphBuilder& b, const OptimizerOptions& o,
                                                  AnfNode* steps_done,
                                                  absl::Span<AnfNode* const> weights,
                                                  absl::Span<AnfNode* const> grads,
                                                  absl::Span<AnfNode* const> state,
                                                  absl::Span<const DType> dtypes);

}  // namespace train
}  // namespace kgrad

#endif  // KGRAD_TOOLS_TRAIN_OPTIMIZER_H_
