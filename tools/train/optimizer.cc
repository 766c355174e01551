#include "tools/train/optimizer.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace kgrad {
namespace train {
namespace {

// Graph arithmetic for one update: f64 rank-0 scalars of the step, rounded once
// to each weight dtype that uses them.
class UpdateWriter {
 public:
  UpdateWriter(GraphBuilder& b, AnfNode* steps_done) : b_(b) {
    AnfNode* t = Add(steps_done, b.Const(Value(Tensor::FromScalar<int64_t>(1))));
    t_ = Cast(t, DType::kFloat64);
  }
  AnfNode* t() const { return t_; }
  GraphBuilder* builder() const { return &b_; }
  AnfNode* F64(double v) { return b_.Const(Value(Tensor::FromScalar<double>(v))); }
  // The constant v, or the f64 node s, in dtype d.
  AnfNode* In(DType d, double v) { return b_.Const(Value(*Tensor::Full(d, {}, v))); }
  AnfNode* In(DType d, AnfNode* s) {
    if (d == DType::kFloat64) return s;
    auto [it, fresh] = casts_.try_emplace({s, d}, nullptr);
    if (fresh) it->second = Cast(s, d);
    return it->second;
  }
  AnfNode* Cast(AnfNode* x, DType d) { return b_.Op(PrimId::kCast, {x}, {{"dtype", d}}); }
  AnfNode* Add(AnfNode* a, AnfNode* c) { return b_.Op(PrimId::kAdd, {a, c}); }
  AnfNode* Sub(AnfNode* a, AnfNode* c) { return b_.Op(PrimId::kSub, {a, c}); }
  AnfNode* Mul(AnfNode* a, AnfNode* c) { return b_.Op(PrimId::kMul, {a, c}); }
  AnfNode* Div(AnfNode* a, AnfNode* c) { return b_.Op(PrimId::kDiv, {a, c}); }
  AnfNode* Op(PrimId id, std::vector<AnfNode*> args) { return b_.Op(id, std::move(args)); }

 private:
  GraphBuilder& b_;
  AnfNode* t_ = nullptr;
  std::map<std::pair<AnfNode*, DType>, AnfNode*> casts_;
};

// g_i min(1, max_norm / (|g| + 1e-6)), |g| the global 2-norm summed in f64.
std::vector<AnfNode*> ClipByGlobalNorm(UpdateWriter& w, double max_norm,
                                       absl::Span<AnfNode* const> grads,
                                       absl::Span<const DType> dtypes) {
  AnfNode* total = w.F64(0);
  for (size_t i = 0; i < grads.size(); ++i) {
    AnfNode* sq = w.Op(PrimId::kReduceSum, {w.Op(PrimId::kSquare, {grads[i]})});
    total = w.Add(total, dtypes[i] == DType::kFloat64 ? sq : w.Cast(sq, DType::kFloat64));
  }
  AnfNode* norm = w.Op(PrimId::kSqrt, {total});
  AnfNode* coef = w.Op(PrimId::kMinimum,
                       {w.F64(1), w.Div(w.F64(max_norm), w.Add(norm, w.F64(1e-6)))});
  std::vector<AnfNode*> clipped;
  for (size_t i = 0; i < grads.size(); ++i) clipped.push_back(w.Mul(grads[i], w.In(dtypes[i], coef)));
  return clipped;
}

// The step's scalars every weight shares.
struct StepScalars {
  AnfNode* lr = nullptr;           // f64
  AnfNode* first = nullptr;        // bool: t == 1 (SGD's buffer starts as g)
  AnfNode* step_size = nullptr;    // f64: lr / (1 - beta1^t)
  AnfNode* bc2_sqrt = nullptr;     // f64: sqrt(1 - beta2^t)
  AnfNode* decay = nullptr;        // f64: 1 - lr wd (AdamW)
};

StepScalars MakeStepScalars(UpdateWriter& w, const OptimizerOptions& o) {
  StepScalars s;
  s.lr = ScheduledLr(*w.builder(), o.schedule, o.lr, w.Sub(w.t(), w.F64(1)));
  if (o.kind == OptimizerKind::kSgd) {
    s.first = w.Op(PrimId::kEqual, {w.t(), w.F64(1)});
    return s;
  }
  AnfNode* bc1 = w.Sub(w.F64(1), w.Op(PrimId::kPow, {w.F64(o.beta1), w.t()}));
  AnfNode* bc2 = w.Sub(w.F64(1), w.Op(PrimId::kPow, {w.F64(o.beta2), w.t()}));
  s.step_size = w.Div(s.lr, bc1);
  s.bc2_sqrt = w.Op(PrimId::kSqrt, {bc2});
  if (o.kind == OptimizerKind::kAdamW) s.decay = w.Sub(w.F64(1), w.Mul(s.lr, w.F64(o.weight_decay)));
  return s;
}

// One weight's SGD step; state: {buf} when momentum != 0.
AnfNode* SgdStep(UpdateWriter& w, const OptimizerOptions& o, const StepScalars& s, DType d,
                 AnfNode* p, AnfNode* g, absl::Span<AnfNode* const> state,
                 std::vector<AnfNode*>* new_state) {
  if (o.weight_decay != 0) g = w.Add(g, w.Mul(p, w.In(d, o.weight_decay)));
  if (o.momentum != 0) {
    // buf * 0 + g * 1 at t = 1 is g exactly (buf starts as zeros).
    AnfNode* keep = w.Op(PrimId::kSelect, {s.first, w.F64(0), w.F64(o.momentum)});
    AnfNode* take = w.Op(PrimId::kSelect, {s.first, w.F64(1), w.F64(1 - o.dampening)});
    AnfNode* buf = w.Add(w.Mul(state[0], w.In(d, keep)), w.Mul(g, w.In(d, take)));
    new_state->push_back(buf);
    g = o.nesterov ? w.Add(g, w.Mul(buf, w.In(d, o.momentum))) : buf;
  }
  return w.Sub(p, w.Mul(g, w.In(d, s.lr)));
}

// One weight's Adam/AdamW step; state: {m, v} or {m, v, vmax}.
AnfNode* AdamStep(UpdateWriter& w, const OptimizerOptions& o, const StepScalars& s, DType d,
                  AnfNode* p, AnfNode* g, absl::Span<AnfNode* const> state,
                  std::vector<AnfNode*>* new_state) {
  if (o.kind == OptimizerKind::kAdamW) {
    p = w.Mul(p, w.In(d, s.decay));
  } else if (o.weight_decay != 0) {
    g = w.Add(g, w.Mul(p, w.In(d, o.weight_decay)));
  }
  AnfNode* m = w.Add(w.Mul(state[0], w.In(d, o.beta1)), w.Mul(g, w.In(d, 1 - o.beta1)));
  AnfNode* v = w.Add(w.Mul(state[1], w.In(d, o.beta2)),
                     w.Mul(w.Op(PrimId::kSquare, {g}), w.In(d, 1 - o.beta2)));
  new_state->push_back(m);
  new_state->push_back(v);
  if (o.amsgrad) {
    v = w.Op(PrimId::kMaximum, {state[2], v});
    new_state->push_back(v);
  }
  AnfNode* denom = w.Add(w.Div(w.Op(PrimId::kSqrt, {v}), w.In(d, s.bc2_sqrt)), w.In(d, o.eps));
  return w.Sub(p, w.Mul(w.Div(m, denom), w.In(d, s.step_size)));
}

absl::Status CheckRange(const std::string& name, double v, double lo, double hi, bool hi_open) {
  if (v >= lo && (hi_open ? v < hi : v <= hi)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("invalid ", name, " ", v, ": it must be in [", lo,
                                                 ", ", hi, hi_open ? ")" : "]"));
}

}  // namespace

absl::StatusOr<OptimizerOptions> DefaultOptimizerOptions(absl::string_view name) {
  OptimizerOptions o;
  if (name == "sgd") {
    o.kind = OptimizerKind::kSgd;
    o.lr = 1e-2;
  } else if (name == "momentum") {
    o.kind = OptimizerKind::kSgd;
    o.lr = 1e-2;
    o.momentum = 0.9;
  } else if (name == "adam") {
    o.kind = OptimizerKind::kAdam;
  } else if (name == "adamw") {
    o.kind = OptimizerKind::kAdamW;
    o.weight_decay = 1e-2;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown optimizer '", name, "' (sgd, momentum, adam or adamw)"));
  }
  return o;
}

std::string OptimizerName(const OptimizerOptions& o) {
  switch (o.kind) {
    case OptimizerKind::kSgd:
      return o.momentum != 0 ? "momentum" : "sgd";
    case OptimizerKind::kAdam:
      return "adam";
    case OptimizerKind::kAdamW:
      return "adamw";
  }
  return "?";
}

absl::Status ValidateOptimizerOptions(const OptimizerOptions& o) {
  constexpr double kInf = 1e308;
  KGRAD_RETURN_IF_ERROR(CheckRange("learning rate", o.lr, 0, kInf, false));
  KGRAD_RETURN_IF_ERROR(CheckRange("weight_decay", o.weight_decay, 0, kInf, false));
  KGRAD_RETURN_IF_ERROR(CheckRange("max_grad_norm", o.max_grad_norm, 0, kInf, false));
  if (o.kind == OptimizerKind::kSgd) {
    KGRAD_RETURN_IF_ERROR(CheckRange("momentum", o.momentum, 0, kInf, false));
    KGRAD_RETURN_IF_ERROR(CheckRange("dampening", o.dampening, 0, 1, false));
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
      return absl::InvalidArgumentError("nesterov momentum requires a momentum and zero dampening");
    }
  } else {
    KGRAD_RETURN_IF_ERROR(CheckRange("beta1", o.beta1, 0, 1, true));
    KGRAD_RETURN_IF_ERROR(CheckRange("beta2", o.beta2, 0, 1, true));
    KGRAD_RETURN_IF_ERROR(CheckRange("eps", o.eps, 0, kInf, false));
  }
  return ValidateLrSchedule(o.schedule);
}

std::vector<std::string> OptimizerSlots(const OptimizerOptions& o) {
  if (o.kind == OptimizerKind::kSgd) {
    if (o.momentum == 0) return {};
    return {"momentum_buffer"};
  }
  if (o.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

absl::StatusOr<WeightUpdate> BuildOptimizerUpdate(GraphBuilder& b, const OptimizerOptions& o,
                                                  AnfNode* steps_done,
                                                  absl::Span<AnfNode* const> weights,
                                                  absl::Span<AnfNode* const> grads,
                                                  absl::Span<AnfNode* const> state,
                                                  absl::Span<const DType> dtypes) {
  KGRAD_RETURN_IF_ERROR(ValidateOptimizerOptions(o));
  const size_t slots = OptimizerSlots(o).size();
  if (grads.size() != weights.size() || dtypes.size() != weights.size() ||
      state.size() != slots * weights.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer update: ", weights.size(), " weights, ", grads.size(), " gradients, ",
        dtypes.size(), " dtypes and ", state.size(), " state tensors (want ", slots, " per weight)"));
  }
  for (DType d : dtypes) {
    if (d != DType::kFloat32 && d != DType::kFloat64) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer update: weights must be float32 or float64, got ", DTypeName(d)));
    }
  }
  UpdateWriter w(b, steps_done);
  std::vector<AnfNode*> g(grads.begin(), grads.end());
  if (o.max_grad_norm > 0) g = ClipByGlobalNorm(w, o.max_grad_norm, g, dtypes);
  const StepScalars s = MakeStepScalars(w, o);
  WeightUpdate out;
  for (size_t i = 0; i < weights.size(); ++i) {
    AnfNode* gi = o.maximize ? w.Op(PrimId::kNeg, {g[i]}) : g[i];
    absl::Span<AnfNode* const> st = state.subspan(i * slots, slots);
    out.weights.push_back(o.kind == OptimizerKind::kSgd
                              ? SgdStep(w, o, s, dtypes[i], weights[i], gi, st, &out.state)
                              : AdamStep(w, o, s, dtypes[i], weights[i], gi, st, &out.state));
  }
  KGRAD_RETURN_IF_ERROR(b.status());
  return out;
}

}  // namespace train
}  // namespace kgrad
