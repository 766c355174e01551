// The optimizer configurations of make_finetune_fixtures.py, as kgrad options.
// Keep the two in step.
#ifndef KGRAD_TESTS_TRAIN_FINETUNE_CONFIG_H_
#define KGRAD_TESTS_TRAIN_FINETUNE_CONFIG_H_

#include <string>
#include <vector>

#include "tools/train/optimizer.h"

namespace kgrad {
namespace train {

inline std::vector<std::string> FinetuneConfigs() { return {"adamw", "nesterov", "adam_clip", "sgd_step"}; }

inline OptimizerOptions FinetuneConfig(const std::string& name) {
  OptimizerOptions o;
  if (name == "adamw") {
    o.kind = OptimizerKind::kAdamW;
    o.lr = 1e-3;
    o.weight_decay = 1e-2;
  } else if (name == "nesterov") {
    o.kind = OptimizerKind::kSgd;
    o.lr = 1e-2;
    o.momentum = 0.9;
    o.nesterov = true;
    o.weight_decay = 1e-4;
  } else if (name == "adam_clip") {
    o.kind = OptimizerKind::kAdam;
    o.lr = 2e-3;
    o.amsgrad = true;
    o.weight_decay = 1e-4;
    o.max_grad_norm = 1.0;
    o.schedule.kind = LrSchedule::Kind::kCosine;
    o.schedule.t_max = 15;
    o.schedule.warmup_steps = 5;
    o.schedule.warmup_start_factor = 0.25;
  } else if (name == "sgd_step") {
    o.kind = OptimizerKind::kSgd;
    o.lr = 5e-2;
    o.momentum = 0.9;
    o.dampening = 0.1;
    o.weight_decay = 1e-4;
    o.schedule.kind = LrSchedule::Kind::kStep;
    o.schedule.step_size = 7;
    o.schedule.gamma = 0.5;
  }
  return o;
}

}  // namespace train
}  // namespace kgrad

#endif  // KGRAD_TESTS_TRAIN_FINETUNE_CONFIG_H_
