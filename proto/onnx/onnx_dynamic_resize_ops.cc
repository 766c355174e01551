// The run-time form of ONNX Resize / Upsample (see onnx_resize_ops.h): along
// each run_time axis, the output size, the positions and the taps are computed
// with primitives from the scales, sizes or roi inputs and shape_of(x):
//   out   = floor(in * scale [* crop])  |  sizes[k]  |  floor(common * in + 0.5)
//   o     = cast<f64>(dynamic_range(0, out, valid ? 1 : 0))   (fails when !valid)
//   x_o   = Original(o);  index_t, weight_t = TapsAt(x_o)     (float64 vectors)
//   y     = sum_t gather(y, cast<i64>(index_t), axis) * cast<dtype>(weight_t)
// Original, Nearest and TapsAt are written in the order of their import-time
// twins in onnx_resize_ops.cc and must agree with them entry for entry (float64
// throughout, the same operations in the same order); CubicWeights is shared.
// Every value is an application (RtValue operators), folded at import where its
// inputs are known. Inference leaves the run_time axes' sizes unknown.
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"
#include "proto/onnx/onnx_resize_ops.h"

namespace kgrad {
namespace onnx_import {
namespace {

// ----- Run-time arithmetic -----------------------------------------------------------------
// RtValue operators emit one primitive each, so the formulas below read like the
// import-time ones. The first failure is kept by the Emitter; after it, operators
// emit nothing and return their first operand.
class Emitter;

struct RtValue {
  Emitter* e;
  ImportedValue v;
};

class Emitter {
 public:
  explicit Emitter(NodeContext& c) : c_(c) {}
  NodeContext& c() const { return c_; }
  const absl::Status& status() const { return status_; }

  RtValue Op(PrimId id, const std::vector<RtValue>& args, AttrMap attrs = {}) {
    if (!status_.ok()) return args[0];
    std::vector<ImportedValue> in;
    for (const RtValue& a : args) in.push_back(a.v);
    return Keep(c_.Emit(id, in, std::move(attrs)), args[0]);
  }
  RtValue Value(const ImportedValue& v) { return RtValue{this, v}; }
  RtValue F64(double v) { return Keep(c_.Scalar(DType::kFloat64, v), RtValue{this, ImportedValue{}}); }
  RtValue Cast(const RtValue& a, DType t) { return Op(PrimId::kCast, {a}, {{"dtype", t}}); }
  // Entry k of the 1-D input `i`, as a float64 scalar.
  RtValue Entry(int i, int64_t k) {
    absl::StatusOr<ImportedValue> in = c_.Input(i);
    if (!in.ok()) return Fail(in.status(), RtValue{this, ImportedValue{}});
    RtValue e = Op(PrimId::kSlice, {Value(*in)},
                   {{"begin", std::vector<int64_t>{k}}, {"end", std::vector<int64_t>{k + 1}},
                    {"strides", std::vector<int64_t>{1}}});
    return Cast(Op(PrimId::kReshape, {e}, {{"shape", std::vector<int64_t>{}}}), DType::kFloat64);
  }

 private:
  RtValue Keep(absl::StatusOr<ImportedValue> v, const RtValue& fallback) {
    if (v.ok()) return RtValue{this, *std::move(v)};
    return Fail(v.status(), fallback);
  }
  RtValue Fail(const absl::Status& s, const RtValue& fallback) {
    if (status_.ok()) status_ = s;
    return fallback;
  }

  NodeContext& c_;
  absl::Status status_;
};

RtValue Bin(PrimId id, const RtValue& a, const RtValue& b) { return a.e->Op(id, {a, b}); }
RtValue Bin(PrimId id, const RtValue& a, double b) { return a.e->Op(id, {a, a.e->F64(b)}); }
RtValue Bin(PrimId id, double a, const RtValue& b) { return b.e->Op(id, {b.e->F64(a), b}); }

#define KGRAD_RT_OPERATOR(OP, ID)                                                               \
  RtValue operator OP(const RtValue& a, const RtValue& b) { return Bin(PrimId::ID, a, b); } \
  RtValue operator OP(const RtValue& a, double b) { return Bin(PrimId::ID, a, b); }         \
  RtValue operator OP(double a, const RtValue& b) { return Bin(PrimId::ID, a, b); }
KGRAD_RT_OPERATOR(+, kAdd)
KGRAD_RT_OPERATOR(-, kSub)
KGRAD_RT_OPERATOR(*, kMul)
KGRAD_RT_OPERATOR(/, kDiv)
KGRAD_RT_OPERATOR(<, kLess)
KGRAD_RT_OPERATOR(<=, kLessEqual)
KGRAD_RT_OPERATOR(>, kGreater)
KGRAD_RT_OPERATOR(>=, kGreaterEqual)
KGRAD_RT_OPERATOR(==, kEqual)
#undef KGRAD_RT_OPERATOR
RtValue operator&&(const RtValue& a, const RtValue& b) { return Bin(PrimId::kLogicalAnd, a, b); }
RtValue operator||(const RtValue& a, const RtValue& b) { return Bin(PrimId::kLogicalOr, a, b); }

RtValue Floor(const RtValue& a) { return a.e->Op(PrimId::kFloor, {a}); }
RtValue Ceil(const RtValue& a) { return a.e->Op(PrimId::kCeil, {a}); }
RtValue Round(const RtValue& a) { return a.e->Op(PrimId::kRound, {a}); }  // ties differ: callers select them
RtValue Min(const RtValue& a, const RtValue& b) { return Bin(PrimId::kMinimum, a, b); }
RtValue Max(const RtValue& a, const RtValue& b) { return Bin(PrimId::kMaximum, a, b); }
RtValue Min(const RtValue& a, double b) { return Bin(PrimId::kMinimum, a, b); }
RtValue Max(const RtValue& a, double b) { return Bin(PrimId::kMaximum, a, b); }
RtValue Select(const RtValue& cond, const RtValue& a, const RtValue& b) { return a.e->Op(PrimId::kSelect, {cond, a, b}); }
RtValue Select(const RtValue& cond, double a, const RtValue& b) { return Select(cond, b.e->F64(a), b); }

// ----- One axis at run time ----------------------------------------------------------------

// AxisResize with run-time values (float64 scalars; valid a bool scalar).
struct RtAxis {
  int axis;
  RtValue in, out, scale;
  bool rational;
  RtValue roi_start, roi_end;
  RtValue valid;   // in >= 1 and 1 <= out <= max_folded_elements (and scale > 0)
  RtValue length;  // length_resized: out, or in * scale when scales are given
};

// Twin of Unscale: x / scale, exact for integers when the scale is out / in.
RtValue Unscale(const RtAxis& a, const RtValue& x) { return a.rational ? x * a.in / a.out : x / a.scale; }

// Twin of Original: the spec's coordinate_transformation_mode at positions x.
RtValue Original(const ResizeMode& m, const RtAxis& a, const RtValue& x) {
  const std::string& t = m.transform;
  if (t == "half_pixel") return Unscale(a, x + 0.5) - 0.5;
  if (t == "pytorch_half_pixel") return Select(a.out > 1, Unscale(a, x + 0.5) - 0.5, x * 0.0);
  if (t == "align_corners") return Select(a.length == 1, 0.0, x * (a.in - 1) / (a.length - 1));
  if (t == "asymmetric") return Unscale(a, x);
  if (t == "tf_half_pixel_for_nn") return Unscale(a, x + 0.5);
  if (t == "half_pixel_symmetric") {
    const RtValue adjustment = a.out / (a.scale * a.in);
    const RtValue center = a.in / 2;
    return center * (1 - adjustment) + Unscale(a, x + 0.5) - 0.5;
  }
  // tf_crop_and_resize
  const RtValue span = a.in - 1;
  return Select(a.out == 1, 0.5 * (a.roi_start + a.roi_end) * span + x * 0.0,
                a.roi_start * span + x * (a.roi_end - a.roi_start) * span / (a.out - 1));
}

RtValue Clamp(const RtValue& i, const RtValue& in) { return Min(Max(i, 0.0), in - 1); }

// Twin of Nearest ("simple": floor when upsampling, ceil when downsampling).
RtValue Nearest(const ResizeMode& m, const RtAxis& a, const RtValue& x) {
  const RtValue f = Floor(x);
  const RtValue half = x - f == 0.5;
  if (m.nearest == "round_prefer_floor") return Select(half, f, Round(x));
  if (m.nearest == "round_prefer_ceil") return Select(half, f + 1, Round(x));
  if (m.nearest == "ceil") return Ceil(x);
  if (m.nearest == "simple") return Select(a.scale < 1, Ceil(x), f);
  return f;
}

// The taps of every output: indices (clamped, float64) and weights (nullopt: 1);
// keep is 1 inside the input and 0 where tf_crop_and_resize extrapolates.
struct RtTaps {
  std::vector<RtValue> index;
  std::vector<std::optional<RtValue>> weight;
  std::optional<RtValue> keep;
};

// Twin of TapsAt, for every position o at once.
RtTaps TapsAt(const ResizeMode& m, const RtAxis& a, const RtValue& o) {
  RtValue x = Original(m, a, o);
  RtTaps taps;
  if (m.transform == "tf_crop_and_resize") {
    taps.keep = o.e->Cast(x >= 0 && x <= a.in - 1, DType::kFloat64);
  }
  auto kept = [&](const RtValue& w) { return taps.keep ? *taps.keep * w : w; };
  if (m.mode == "nearest") {
    taps.index = {Clamp(Nearest(m, a, x), a.in)};
    taps.weight = {taps.keep};
  } else if (m.mode == "linear") {
    x = Min(Max(x, 0.0), a.in - 1);
    const RtValue x0 = Floor(x);
    taps.index = {x0, Min(x0 + 1, a.in - 1)};
    taps.weight = {kept(1 - (x - x0)), kept(x - x0)};
  } else {
    const RtValue f = Floor(x);
    std::array<RtValue, 4> w = CubicWeights<RtValue>(m.cubic_a, x - f);
    std::optional<RtValue> sum;
    for (int t = 0; t < 4; ++t) {
      const RtValue i = f - 1 + t;
      if (m.exclude_outside) w[t] = Select(i < 0 || i >= a.in, 0.0, w[t]);
      sum = sum ? *sum + w[t] : w[t];
      taps.index.push_back(Clamp(i, a.in));
    }
    for (int t = 0; t < 4; ++t) taps.weight.push_back(kept(m.exclude_outside ? w[t] / *sum : w[t]));
  }
  return taps;
}

// v [n] as [n, 1, ..., 1] of rank - axis dims, then `lead` leading 1s.
RtValue AlongAxis(const RtValue& v, int rank, int axis, int lead) {
  RtValue out = v;
  for (int d = axis + 1; d < rank; ++d) out = v.e->Op(PrimId::kExpandDims, {out}, {{"axis", int64_t{-1}}});
  for (int d = 0; d < lead; ++d) out = v.e->Op(PrimId::kExpandDims, {out}, {{"axis", int64_t{0}}});
  return out;
}

// Twin of ApplyTaps: sum_t gather(x, index_t, axis) * weight_t.
RtValue ApplyRtTaps(const RtValue& x, int rank, DType dtype, int axis, const RtTaps& taps) {
  Emitter& e = *x.e;
  std::optional<RtValue> acc;
  for (size_t t = 0; t < taps.index.size(); ++t) {
    RtValue g = e.Op(PrimId::kGather, {x, e.Cast(taps.index[t], DType::kInt64)}, {{"axis", int64_t{axis}}});
    if (taps.weight[t]) g = g * AlongAxis(e.Cast(*taps.weight[t], dtype), rank, axis, 0);
    acc = acc ? *acc + g : g;
  }
  return *acc;
}

// ----- The axes' run-time values -----------------------------------------------------------

// What every axis reads: the node's inputs (constants where import knows them).
struct RtInputs {
  const ResizeMode& m;
  const ResizeInputs& r;
  const AbstractTensor* tx;
  RtValue x;
};

// Input dim `axis` of x (shape_of(x) when not static), float64.
RtValue InputDim(Emitter& e, const RtInputs& in, int axis) {
  const int64_t d = in.tx->shape()[axis];
  if (d >= 0) return e.F64(static_cast<double>(d));
  RtValue shape = e.Op(PrimId::kShapeOf, {in.x});
  RtValue dim = e.Op(PrimId::kSlice, {shape},
                     {{"begin", std::vector<int64_t>{axis}}, {"end", std::vector<int64_t>{axis + 1}},
                      {"strides", std::vector<int64_t>{1}}});
  return e.Cast(e.Op(PrimId::kReshape, {dim}, {{"shape", std::vector<int64_t>{}}}), DType::kFloat64);
}

RtValue Scale(Emitter& e, const RtInputs& in, int k) {
  return in.r.scales_at_run_time ? e.Entry(in.r.scales_input, k) : e.F64(in.r.scales[k]);
}
RtValue Size(Emitter& e, const RtInputs& in, int k) {
  const int64_t s = in.r.sizes[k];
  return s >= 0 ? e.F64(static_cast<double>(s)) : e.Entry(3, k);
}
RtValue Roi(Emitter& e, const RtInputs& in, int k, double dflt) {
  if (in.r.roi_at_run_time) return e.Entry(1, k);
  return e.F64(in.r.roi.empty() ? dflt : in.r.roi[k]);
}

// Twin of CommonScale: the smallest (not_larger) or largest sizes[k] / in_k.
RtValue RtCommonScale(Emitter& e, const RtInputs& in, const std::vector<AxisResize>& axes) {
  std::optional<RtValue> common;
  for (const AxisResize& a : axes) {
    const RtValue s = Size(e, in, a.entry) / InputDim(e, in, a.axis);
    common = !common ? s : in.m.policy == "not_larger" ? Min(*common, s) : Max(*common, s);
  }
  return *common;
}

// Twin of ResizedAxes' sizes and scale of one axis.
RtAxis MakeRtAxis(Emitter& e, const RtInputs& in, const AxisResize& s, size_t n,
                  const std::optional<RtValue>& common) {
  const bool crop_mode = in.m.transform == "tf_crop_and_resize";
  RtAxis a{s.axis, InputDim(e, in, s.axis), RtValue{}, RtValue{}, false, Roi(e, in, s.entry, 0),
           Roi(e, in, static_cast<int>(n) + s.entry, 1), RtValue{}, RtValue{}};
  RtValue scale_ok = a.in >= 1;
  if (!in.r.scales.empty()) {
    a.scale = Scale(e, in, s.entry);
    a.out = Floor(crop_mode ? a.in * a.scale * (a.roi_end - a.roi_start) : a.in * a.scale);
    a.length = a.in * a.scale;
    scale_ok = scale_ok && a.scale > 0;
  } else if (in.m.policy == "stretch") {
    a.out = Size(e, in, s.entry);
    a.scale = a.out / a.in;
    a.rational = true;
  } else {
    a.scale = *common;
    a.out = Floor(*common * a.in + 0.5);
  }
  if (in.r.scales.empty()) a.length = a.out;
  const double max = static_cast<double>(e.c().importer().options().max_folded_elements);
  a.valid = scale_ok && a.out >= 1 && a.out <= max;
  return a;
}

// o = 0, 1, ..., out - 1 as float64; dynamic_range's step is 0 (an error at run
// time) when the axis is not valid.
RtValue Positions(Emitter& e, const RtAxis& a) {
  RtValue limit = e.Cast(Select(a.valid, a.out, e.F64(1)), DType::kInt64);
  RtValue step = e.Cast(a.valid, DType::kInt64);
  RtValue zero = e.Cast(e.F64(0), DType::kInt64);
  return e.Cast(e.Op(PrimId::kDynamicRange, {zero, limit, step}), DType::kFloat64);
}

// y + extrapolation * (1 - prod_axes keep_axis): tf_crop_and_resize's value outside.
RtValue RtExtrapolate(Emitter& e, const RtValue& y, int rank, DType dtype, const std::vector<int>& axes,
                      const std::vector<RtValue>& keeps, double value) {
  if (keeps.empty() || value == 0) return y;
  std::optional<RtValue> inside;
  for (size_t k = 0; k < keeps.size(); ++k) {
    RtValue along = AlongAxis(keeps[k], rank, axes[k], axes[k]);
    inside = inside ? *inside * along : along;
  }
  return y + e.Cast(value * (1 - *inside), dtype);
}

}  // namespace

Outputs DynamicResize(NodeContext& c, const ResizeMode& m, const ResizeInputs& r, const ImportedValue& x,
                      const std::vector<AxisResize>& axes) {
  Emitter e(c);
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, c.TensorType(x));
  const RtInputs in{m, r, tx, e.Value(x)};
  const int rank = tx->rank();
  std::optional<RtValue> common;
  if (!r.sizes.empty() && m.policy != "stretch") common = RtCommonScale(e, in, axes);
  RtValue y = in.x;
  std::vector<int> kept_axes;
  std::vector<RtValue> keeps;
  for (const AxisResize& s : axes) {
    if (!s.run_time) {  // known at import: the constant taps
      Taps taps = MakeTaps(m, s);
      if (IsIdentity(s, taps)) continue;
      KGRAD_RETURN_IF_ERROR(e.status());
      KGRAD_ASSIGN_OR_RETURN(ImportedValue applied, ApplyTaps(c, y.v, rank, tx->dtype(), s, taps));
      y = e.Value(applied);
      if (m.transform == "tf_crop_and_resize") {
        std::vector<double> inside(taps.inside.begin(), taps.inside.end());
        kept_axes.push_back(s.axis);
        keeps.push_back(e.Value(c.Const(Tensor::FromVector<double>({s.out}, inside))));
      }
      continue;
    }
    const RtAxis a = MakeRtAxis(e, in, s, r.scales.empty() ? r.sizes.size() : r.scales.size(), common);
    const RtTaps taps = TapsAt(m, a, Positions(e, a));
    y = ApplyRtTaps(y, rank, tx->dtype(), a.axis, taps);
    if (taps.keep) {
      kept_axes.push_back(a.axis);
      keeps.push_back(*taps.keep);
    }
  }
  if (m.transform == "tf_crop_and_resize") y = RtExtrapolate(e, y, rank, tx->dtype(), kept_axes, keeps, m.extrapolation);
  KGRAD_RETURN_IF_ERROR(e.status());
  return std::vector<ImportedValue>{y.v};
}

}  // namespace onnx_import
}  // namespace kgrad
