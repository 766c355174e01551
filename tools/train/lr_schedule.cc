#include "tools/train/lr_schedule.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace kgrad {
namespace train {
namespace {

AnfNode* F64(GraphBuilder& b, double v) { return b.Const(Value(Tensor::FromScalar<double>(v))); }

// The main schedule at epoch e (f64 rank-0), without warmup.
AnfNode* MainSchedule(GraphBuilder& b, const LrSchedule& s, double lr, AnfNode* e) {
  switch (s.kind) {
    case LrSchedule::Kind::kConstant:
      return F64(b, lr);
    case LrSchedule::Kind::kStep: {
      AnfNode* decays = b.Op(PrimId::kFloor, {b.Op(PrimId::kDiv, {e, F64(b, s.step_size)})});
      return b.Op(PrimId::kMul, {F64(b, lr), b.Op(PrimId::kPow, {F64(b, s.gamma), decays})});
    }
    case LrSchedule::Kind::kCosine: {
      AnfNode* angle = b.Op(PrimId::kMul, {e, F64(b, M_PI / static_cast<double>(s.t_max))});
      AnfNode* half = b.Op(PrimId::kMul, {b.Op(PrimId::kAdd, {F64(b, 1), b.Op(PrimId::kCos, {angle})}),
                                          F64(b, 0.5)});
      return b.Op(PrimId::kAdd, {F64(b, s.eta_min), b.Op(PrimId::kMul, {F64(b, lr - s.eta_min), half})});
    }
  }
  return F64(b, lr);
}

}  // namespace

absl::StatusOr<LrSchedule::Kind> ParseLrScheduleKind(absl::string_view name) {
  if (name == "constant") return LrSchedule::Kind::kConstant;
  if (name == "step") return LrSchedule::Kind::kStep;
  if (name == "cosine") return LrSchedule::Kind::kCosine;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown learning-rate schedule '", name, "' (constant, step or cosine)"));
}

std::string LrScheduleKindName(LrSchedule::Kind kind) {
  switch (kind) {
    case LrSchedule::Kind::kConstant:
      return "constant";
    case LrSchedule::Kind::kStep:
      return "step";
    case LrSchedule::Kind::kCosine:
      return "cosine";
  }
  return "?";
}

absl::Status ValidateLrSchedule(const LrSchedule& s) {
  if (s.kind == LrSchedule::Kind::kStep && s.step_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("the step schedule's step size must be at least 1, got ", s.step_size));
  }
  if (s.kind == LrSchedule::Kind::kStep && !(s.gamma > 0) ) {
    return absl::InvalidArgumentError(absl::StrCat("the step schedule's gamma must be positive, got ", s.gamma));
  }
  if (s.kind == LrSchedule::Kind::kCosine && s.t_max < 1) {
    return absl::InvalidArgumentError(absl::StrCat("the cosine schedule's period (t_max) must be at least 1 step, got ", s.t_max));
  }
  if (s.warmup_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("warmup steps must be 0 or more, got ", s.warmup_steps));
  }
  if (s.warmup_steps > 0 && !(s.warmup_start_factor > 0 && s.warmup_start_factor <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the warmup's start factor must be in (0, 1], got ", s.warmup_start_factor));
  }
  return absl::OkStatus();
}

AnfNode* ScheduledLr(GraphBuilder& b, const LrSchedule& s, double lr, AnfNode* epoch) {
  if (s.warmup_steps == 0) return MainSchedule(b, s, lr, epoch);
  const double w = static_cast<double>(s.warmup_steps);
  AnfNode* ramp = b.Op(PrimId::kMul, {F64(b, (1 - s.warmup_start_factor) / w),
                                      b.Op(PrimId::kMinimum, {epoch, F64(b, w)})});
  AnfNode* warm = b.Op(PrimId::kMul, {F64(b, lr), b.Op(PrimId::kAdd, {F64(b, s.warmup_start_factor), ramp})});
  AnfNode* after = MainSchedule(b, s, lr, b.Op(PrimId::kSub, {epoch, F64(b, w)}));
  AnfNode* warming = b.Op(PrimId::kLess, {epoch, F64(b, w)});
  return b.Op(PrimId::kSelect, {warming, warm, after});
}

}  // namespace train
}  // namespace kgrad
