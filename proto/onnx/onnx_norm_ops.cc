// ONNX op mappings: the normalisations, in inference and training form, and
// Dropout (the other op whose training form differs).
//
//   BatchNormalization(x, scale, b, mean, var){epsilon, momentum}
//     inference: y = (x - mean) * (scale * rsqrt(var + eps)) + b per channel (dim 1);
//     training (training_mode=1 from opset 14; before, asking for more than one
//     output): y = batch_norm(x, scale, b) with the batch mean m and biased
//     variance v of each channel, and the running statistics as outputs
//       running_mean = mean * momentum + m * (1 - momentum)
//       running_var  = var * momentum + v * (1 - momentum)
//     (ONNX's definition: the biased batch variance), plus m and v as the saved
//     statistics of opsets 7-13.
//   InstanceNormalization(x, scale, b){epsilon}: per (sample, channel) over the
//     spatial dims: y = (x - m) * rsqrt(v + eps) * scale[c] + b[c].
//   LayerNormalization(x, scale[, b]){axis, epsilon} = layer_norm, with the optional
//     Mean and InvStdDev outputs (shaped like x with the normalised dims kept as 1).
//   Dropout(x[, ratio, training_mode]){seed} -> (y, mask): the identity with an
//     all-true mask unless training_mode is true (opset 12+) and ratio > 0; then
//     y = dropout(x){rate, seed} and mask = dropout(ones){rate, seed} != 0, the
//     same counter-based mask (kgrad's dropout is a pure function of seed and
//     position, so a graph without a seed attribute uses seed 0, reproducibly).
//     When training_mode or ratio is computed at run time, the same with
//     dynamic_dropout(x, rate){seed}, rate = training_mode ? ratio : 0: rate 0 is
//     exactly the identity with an all-true mask, so one application covers both
//     modes and the graph needs no switch.
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"

namespace kgrad {
namespace onnx_import {
namespace {

std::vector<int64_t> Range(int64_t begin, int64_t end) {
  std::vector<int64_t> axes;
  for (int64_t i = begin; i < end; ++i) axes.push_back(i);
  return axes;
}

// The dims of a rank-`rank` tensor other than the channel dim 1.
std::vector<int64_t> NonChannelAxes(int rank) {
  std::vector<int64_t> axes = Range(0, rank);
  axes.erase(axes.begin() + 1);
  return axes;
}

// A per-channel [C] vector as [C, 1, ...] for a rank-`rank` x.
absl::StatusOr<ImportedValue> PerChannel(NodeContext& c, const ImportedValue& v, int rank) {
  std::vector<int64_t> shape(rank - 1, 1);
  shape[0] = -1;
  return c.Emit(PrimId::kReshape, {v}, {{"shape", shape}});
}

// The mean and the biased variance of x over `axes`, keeping dims or not.
struct Moments {
  ImportedValue mean, var;
};

absl::StatusOr<Moments> MomentsOf(NodeContext& c, const ImportedValue& x,
                                  const std::vector<int64_t>& axes, bool keepdims) {
  AttrMap keep = {{"axes", axes}, {"keepdims", true}};
  KGRAD_ASSIGN_OR_RETURN(ImportedValue mean, c.Emit(PrimId::kReduceMean, {x}, keep));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue d, c.Emit(PrimId::kSub, {x, mean}));
  KGRAD_ASSIGN_OR_RETURN(d, c.Emit(PrimId::kSquare, {d}));
  AttrMap out = {{"axes", axes}, {"keepdims", keepdims}};
  KGRAD_ASSIGN_OR_RETURN(ImportedValue var, c.Emit(PrimId::kReduceMean, {d}, out));
  if (!keepdims) {
    KGRAD_ASSIGN_OR_RETURN(mean, c.Emit(PrimId::kReduceMean, {x}, out));
  }
  return Moments{mean, var};
}

// rsqrt(var + eps).
absl::StatusOr<ImportedValue> InvStd(NodeContext& c, const ImportedValue& var, double eps) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue k, c.ScalarLike(var, eps));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue v, c.Emit(PrimId::kAdd, {var, k}));
  return c.Emit(PrimId::kRsqrt, {v});
}

// BatchNormalization in inference form.
absl::StatusOr<ImportedValue> BatchNormInference(NodeContext& c, const ImportedValue& x, int rank,
                                                 double eps) {
  std::vector<ImportedValue> p;  // scale, b, mean, var as [C, 1, ...]
  for (int i = 1; i <= 4; ++i) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue v, c.Input(i));
    KGRAD_ASSIGN_OR_RETURN(v, PerChannel(c, v, rank));
    p.push_back(v);
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue rstd, InvStd(c, p[3], eps));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue gain, c.Emit(PrimId::kMul, {p[0], rstd}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue centered, c.Emit(PrimId::kSub, {x, p[2]}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue scaled, c.Emit(PrimId::kMul, {centered, gain}));
  return c.Emit(PrimId::kAdd, {scaled, p[1]});
}

// old * momentum + batch * (1 - momentum).
absl::StatusOr<ImportedValue> Running(NodeContext& c, int input, const ImportedValue& batch,
                                      double momentum) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue old, c.Input(input));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue m, c.ScalarLike(batch, momentum));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue rest, c.ScalarLike(batch, 1 - momentum));
  KGRAD_ASSIGN_OR_RETURN(old, c.Emit(PrimId::kMul, {old, m}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue now, c.Emit(PrimId::kMul, {batch, rest}));
  return c.Emit(PrimId::kAdd, {old, now});
}

// BatchNormalization in training form: y and, when asked for, the statistics.
Outputs BatchNormTraining(NodeContext& c, const ImportedValue& x, int rank, double eps) {
  KGRAD_ASSIGN_OR_RETURN(double momentum, c.Float("momentum", 0.9));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue scale, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue bias, c.Input(2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Emit(PrimId::kBatchNorm, {x, scale, bias},
                                                 {{"epsilon", eps}, {"axis", int64_t{1}}}));
  std::vector<ImportedValue> outs = {y};
  if (c.node().output_size() <= 1) return outs;
  KGRAD_ASSIGN_OR_RETURN(Moments batch, MomentsOf(c, x, NonChannelAxes(rank), false));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue mean, Running(c, 3, batch.mean, momentum));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue var, Running(c, 4, batch.var, momentum));
  outs.insert(outs.end(), {mean, var, batch.mean, batch.var});
  return outs;
}

Outputs BatchNorm(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(5, 5));
  KGRAD_ASSIGN_OR_RETURN(int64_t training, c.Int("training_mode", 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t spatial, c.Int("spatial", 1));
  if (spatial != 1) return c.Error("spatial=0 (per-activation statistics) is not supported");
  if (c.opset() < 14) {
    bool more = false;
    for (int i = 1; i < c.node().output_size(); ++i) more = more || !c.node().output(i).empty();
    training = more ? 1 : 0;
  }
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(training == 0 ? 1 : c.opset() < 14 ? 5 : 3));
  KGRAD_ASSIGN_OR_RETURN(double eps, c.Float("epsilon", 1e-5));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  if (t->rank() < 2) return c.Error(absl::StrCat("needs rank >= 2, got ", t->ToString()));
  if (training != 0) return BatchNormTraining(c, x, t->rank(), eps);
  return OneOutput(BatchNormInference(c, x, t->rank(), eps));
}

// InstanceNormalization(x, scale[C], b[C]){epsilon}.
Outputs InstanceNorm(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(3, 3));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(double eps, c.Float("epsilon", 1e-5));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  if (t->rank() < 3) return c.Error(absl::StrCat("needs [N, C, D1, ...], got ", t->ToString()));
  KGRAD_ASSIGN_OR_RETURN(Moments m, MomentsOf(c, x, Range(2, t->rank()), true));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue rstd, InvStd(c, m.var, eps));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Emit(PrimId::kSub, {x, m.mean}));
  KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kMul, {y, rstd}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue scale, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue bias, c.Input(2));
  KGRAD_ASSIGN_OR_RETURN(scale, PerChannel(c, scale, t->rank()));
  KGRAD_ASSIGN_OR_RETURN(bias, PerChannel(c, bias, t->rank()));
  KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kMul, {y, scale}));
  return OneOutput(c.Emit(PrimId::kAdd, {y, bias}));
}

// LayerNormalization(x, scale[, b]){axis=-1, epsilon=1e-5} -> (y, Mean, InvStdDev);
// a missing bias is zeros.
Outputs LayerNorm(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 3));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(3));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue scale, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", -1));
  KGRAD_ASSIGN_OR_RETURN(double eps, c.Float("epsilon", 1e-5));
  ImportedValue bias;
  if (c.HasInput(2)) {
    KGRAD_ASSIGN_OR_RETURN(bias, c.Input(2));
  } else {
    KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ts, c.TensorType(scale));
    if (!ts->shape_known()) return c.Error("needs the scale's static shape when there is no bias");
    KGRAD_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Zeros(ts->dtype(), ts->shape()));
    bias = c.Const(std::move(zeros));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Emit(PrimId::kLayerNorm, {x, scale, bias},
                                                 {{"begin_norm_axis", axis}, {"epsilon", eps}}));
  std::vector<ImportedValue> outs = {y};
  if (c.node().output_size() <= 1) return outs;
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  absl::StatusOr<int> a = NormalizeAxis(axis, t->rank());
  if (!a.ok()) return c.Error(a.status().message());
  KGRAD_ASSIGN_OR_RETURN(Moments m, MomentsOf(c, x, Range(*a, t->rank()), true));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue rstd, InvStd(c, m.var, eps));
  outs.insert(outs.end(), {m.mean, rstd});
  return outs;
}

// Input `i` (one element) as a double when import knows it, `dflt` if omitted,
// nullopt when it is computed at run time.
absl::StatusOr<std::optional<double>> KnownScalarInput(NodeContext& c, int i, double dflt) {
  if (!c.HasInput(i)) return std::optional<double>(dflt);
  KGRAD_ASSIGN_OR_RETURN(ImportedValue v, c.Input(i));
  if (!v.constant.has_value()) return std::optional<double>();
  if (v.constant->NumElements() != 1) return c.Error(absl::StrCat("input ", i, " must have one element"));
  return std::optional<double>(v.constant->ElementAsDouble(0));
}

// Dropout whose training_mode or ratio is known only at run time:
// dynamic_dropout(x, rate){seed} and its mask, rate = training_mode ? ratio : 0
// (cast to x's dtype; 0.5 when ratio is omitted). The kernel checks the rate.
Outputs RunTimeDropout(NodeContext& c, const ImportedValue& x, int64_t seed,
                       std::optional<double> training) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, c.TensorType(x));
  ImportedValue rate;
  if (c.HasInput(1)) {
    KGRAD_ASSIGN_OR_RETURN(rate, c.Input(1));
    KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tr, c.TensorType(rate));
    if (!IsFloating(tr->dtype())) {
      return c.Error(absl::StrCat("ratio must be floating point, got ", tr->ToString()));
    }
    if (tr->dtype() != tx->dtype()) {
      KGRAD_ASSIGN_OR_RETURN(rate, c.Emit(PrimId::kCast, {rate}, {{"dtype", tx->dtype()}}));
    }
  } else {
    KGRAD_ASSIGN_OR_RETURN(rate, c.ScalarLike(x, 0.5));
  }
  if (!training.has_value()) {  // else known to be true: the ratio as it is
    KGRAD_ASSIGN_OR_RETURN(ImportedValue t, c.Input(2));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue zero, c.ScalarLike(x, 0));
    KGRAD_ASSIGN_OR_RETURN(rate, c.Emit(PrimId::kSelect, {t, rate, zero}));
  }
  AttrMap attrs = {{"seed", seed}};
  std::vector<ImportedValue> outs(1);
  KGRAD_ASSIGN_OR_RETURN(outs[0], c.Emit(PrimId::kDynamicDropout, {x, rate}, attrs));
  if (c.node().output_size() <= 1) return outs;
  KGRAD_ASSIGN_OR_RETURN(ImportedValue ones, c.Emit(PrimId::kOnesLike, {x}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue kept, c.Emit(PrimId::kDynamicDropout, {ones, rate}, attrs));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue zero, c.ScalarLike(x, 0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue mask, c.Emit(PrimId::kNotEqual, {kept, zero}));
  outs.push_back(mask);
  return outs;
}

Outputs Dropout(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, c.opset() >= 12 ? 3 : 1));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(std::optional<double> known_training, KnownScalarInput(c, 2, 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t seed, c.Int("seed", 0));
  // In inference mode the ratio (perhaps computed at run time) is unused.
  std::optional<double> known_ratio = 0;
  if (c.opset() < 12) {
    KGRAD_ASSIGN_OR_RETURN(known_ratio, c.Float("ratio", 0.5));
  } else if (!known_training.has_value() || *known_training != 0) {
    KGRAD_ASSIGN_OR_RETURN(known_ratio, KnownScalarInput(c, 1, 0.5));
  }
  if (!known_training.has_value() || !known_ratio.has_value()) {
    return RunTimeDropout(c, x, seed, known_training);
  }
  const double training = *known_training, ratio = *known_ratio;
  if (!(ratio >= 0 && ratio < 1)) return c.Error(absl::StrCat("ratio must be in [0, 1), got ", ratio));
  std::vector<ImportedValue> outs = {x};
  if (training == 0 || ratio == 0) {
    if (c.node().output_size() <= 1) return outs;
    KGRAD_ASSIGN_OR_RETURN(ImportedValue ones, c.Emit(PrimId::kOnesLike, {x}));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue mask, c.Emit(PrimId::kCast, {ones}, {{"dtype", DType::kBool}}));
    outs.push_back(mask);
    return outs;
  }
  AttrMap attrs = {{"rate", ratio}, {"seed", seed}};
  KGRAD_ASSIGN_OR_RETURN(outs[0], c.Emit(PrimId::kDropout, {x}, attrs));
  if (c.node().output_size() <= 1) return outs;
  KGRAD_ASSIGN_OR_RETURN(ImportedValue ones, c.Emit(PrimId::kOnesLike, {x}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue kept, c.Emit(PrimId::kDropout, {ones}, attrs));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue zero, c.ScalarLike(x, 0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue mask, c.Emit(PrimId::kNotEqual, {kept, zero}));
  outs.push_back(mask);
  return outs;
}

}  // namespace

void AddNormOps(OpTable* t) {
  AddMappings(t, {{"BatchNormalization", BatchNorm}, {"InstanceNormalization", InstanceNorm},
                  {"LayerNormalization", LayerNorm}, {"Dropout", Dropout}});
}

}  // namespace onnx_import
}  // namespace kgrad
