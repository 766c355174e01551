// Learning-rate schedules computed inside a training-step graph from its step
// count, as torch.optim.lr_scheduler's closed forms give them when the scheduler
// is stepped once after every optimizer step: optimizer step t (1-based) uses the
// scheduler's epoch e = t - 1.
//
//   constant  lr(e) = lr
//   step      lr(e) = lr * gamma^floor(e / step_size)               (StepLR)
//   cosine    lr(e) = eta_min + (lr - eta_min) (1 + cos(pi e / t_max)) / 2
//                                                             (CosineAnnealingLR)
// With warmup_steps W > 0 the schedule follows a linear warmup, as
// SequentialLR([LinearLR(start_factor, 1, W), main], milestones=[W]):
//   e < W:   lr(e) = lr * (start_factor + (1 - start_factor) e / W)
//   e >= W:  main(e - W)
#ifndef KGRAD_TOOLS_TRAIN_LR_SCHEDULE_H_
#define KGRAD_TOOLS_TRAIN_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/builder.h"

namespace kgrad {
namespace train {

struct LrSchedule {
  enum class Kind { kConstant, kStep, kCosine };
  Kind kind = Kind::kConstant;
  int64_t step_size = 1;  // step: epochs between decays
  double gamma = 0.1;     // step: the decay factor
  int64_t t_max = 1;      // cosine: half a period, in steps
  double eta_min = 0;     // cosine: the lowest rate
  int64_t warmup_steps = 0;
  double warmup_start_factor = 1.0 / 3;  // LinearLR's default
};

absl::StatusOr<LrSchedule::Kind> ParseLrScheduleKind(absl::string_view name);
std::string LrScheduleKindName(LrSchedule::Kind kind);
// torch's argument checks (step_size >= 1, t_max >= 1, 0 < start_factor <= 1, ...).
absl::Status ValidateLrSchedule(const LrSchedule& s);

// The rate of the step whose scheduler epoch is `epoch` (an f64 rank-0 node) as
// an f64 rank-0 node.
AnfNode* ScheduledLr(GraphBuilder& b, const LrSchedule& s, double lr, AnfNode* epoch);

}  // namespace train
}  // namespace kgrad

#endif  // KGRAD_TOOLS_TRAIN_LR_SCHEDULE_H_
