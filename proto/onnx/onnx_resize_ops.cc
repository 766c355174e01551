// ONNX op mappings: Resize (opsets 10, 11, 13, 18, 19) and Upsample (7, 9).
//
// Resizing is separable: along each resized axis, output index o is a fixed
// combination of at most T input indices (T = 1 nearest, 2 linear, 4 cubic), so
//   y = sum_t gather(x, index_t, axis) * weight_t     (weight_t broadcast along axis)
// with index_t and weight_t constant vectors computed here from the static sizes
// and the attributes, following the ONNX spec's formulas (and ONNX Runtime where
// the spec leaves a choice). Gradients come from gather's rule. When a scale,
// size, roi entry or input dim of a resized axis is known only at run time, the
// run-time form (onnx_dynamic_resize_ops.cc) computes the taps with primitives;
// its Original / Nearest / TapsAt mirror the ones here and must agree with them.
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"
#include "proto/onnx/onnx_dynamic_shape_ops.h"
#include "proto/onnx/onnx_resize_ops.h"

namespace kgrad {
namespace onnx_import {
namespace {

// x / scale, exact for integers when the scale is out / in.
double Unscale(const AxisResize& a, double x) {
  return a.rational ? x * static_cast<double>(a.in) / static_cast<double>(a.out) : x / a.scale;
}

// The spec's coordinate_transformation_mode: the input coordinate of output o.
double Original(const ResizeMode& m, const AxisResize& a, int64_t o) {
  const double x = static_cast<double>(o);
  const std::string& t = m.transform;
  if (t == "half_pixel") return Unscale(a, x + 0.5) - 0.5;
  if (t == "pytorch_half_pixel") return a.out > 1 ? Unscale(a, x + 0.5) - 0.5 : 0.0;
  if (t == "align_corners") {
    return a.length == 1 ? 0.0 : x * static_cast<double>(a.in - 1) / (a.length - 1);
  }
  if (t == "asymmetric") return Unscale(a, x);
  if (t == "tf_half_pixel_for_nn") return Unscale(a, x + 0.5);
  if (t == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(a.out) / (a.scale * static_cast<double>(a.in));
    const double center = static_cast<double>(a.in) / 2;
    return center * (1 - adjustment) + Unscale(a, x + 0.5) - 0.5;
  }
  // tf_crop_and_resize
  const double span = static_cast<double>(a.in - 1);
  if (a.out == 1) return 0.5 * (a.roi_start + a.roi_end) * span;
  return a.roi_start * span + x * (a.roi_end - a.roi_start) * span / static_cast<double>(a.out - 1);
}

int64_t Clamp(int64_t i, int64_t in) { return std::min<int64_t>(std::max<int64_t>(i, 0), in - 1); }

// nearest_mode: which input cell x rounds to ("simple": the opset 7-10 rule of
// ONNX Runtime, floor when upsampling and ceil when downsampling).
int64_t Nearest(const ResizeMode& m, const AxisResize& a, double x) {
  const double f = std::floor(x);
  const bool half = x - f == 0.5;
  if (m.nearest == "round_prefer_floor") return static_cast<int64_t>(half ? f : std::round(x));
  if (m.nearest == "round_prefer_ceil") return static_cast<int64_t>(half ? f + 1 : std::round(x));
  if (m.nearest == "ceil") return static_cast<int64_t>(std::ceil(x));
  if (m.nearest == "simple" && a.scale < 1) return static_cast<int64_t>(std::ceil(x));
  return static_cast<int64_t>(f);
}

// Output o's taps: (index, weight) pairs, in-range indices.
void TapsAt(const ResizeMode& m, const AxisResize& a, int64_t o, Taps* taps) {
  double x = Original(m, a, o);
  const bool crop = m.transform == "tf_crop_and_resize";
  const bool inside = !crop || (x >= 0 && x <= static_cast<double>(a.in - 1));
  taps->inside[o] = inside;
  const double keep = inside ? 1.0 : 0.0;  // extrapolated outputs take no input
  if (m.mode == "nearest") {
    taps->index[0][o] = Clamp(Nearest(m, a, x), a.in);
    taps->weight[0][o] = keep;
  } else if (m.mode == "linear") {
    x = std::min(std::max(x, 0.0), static_cast<double>(a.in - 1));
    const int64_t x0 = static_cast<int64_t>(std::floor(x));
    taps->index[0][o] = x0;
    taps->index[1][o] = std::min(x0 + 1, a.in - 1);
    taps->weight[0][o] = keep * (1 - (x - static_cast<double>(x0)));
    taps->weight[1][o] = keep * (x - static_cast<double>(x0));
  } else {
    const double f = std::floor(x);
    std::array<double, 4> w = CubicWeights<double>(m.cubic_a, x - f);
    double sum = 0;
    for (int t = 0; t < 4; ++t) {
      const int64_t i = static_cast<int64_t>(f) - 1 + t;
      if (m.exclude_outside && (i < 0 || i >= a.in)) w[t] = 0;
      sum += w[t];
      taps->index[t][o] = Clamp(i, a.in);
    }
    for (int t = 0; t < 4; ++t) taps->weight[t][o] = keep * (m.exclude_outside ? w[t] / sum : w[t]);
  }
}

// A constant of `dtype` from doubles (cast at import when not f64).
absl::StatusOr<ImportedValue> FloatConst(NodeContext& c, DType dtype, const Shape& shape,
                                         const std::vector<double>& v) {
  ImportedValue k = c.Const(Tensor::FromVector<double>(shape, v));
  if (dtype == DType::kFloat64) return k;
  return c.Emit(PrimId::kCast, {k}, {{"dtype", dtype}});
}

}  // namespace

Taps MakeTaps(const ResizeMode& m, const AxisResize& a) {
  const int n = m.mode == "nearest" ? 1 : m.mode == "linear" ? 2 : 4;
  Taps taps{std::vector<std::vector<int64_t>>(n, std::vector<int64_t>(a.out)),
            std::vector<std::vector<double>>(n, std::vector<double>(a.out)), std::vector<bool>(a.out, true)};
  for (int64_t o = 0; o < a.out; ++o) TapsAt(m, a, o, &taps);
  return taps;
}

// True when the taps copy the input (out == in, o -> o with weight 1).
bool IsIdentity(const AxisResize& a, const Taps& taps) {
  if (a.out != a.in) return false;
  for (int64_t o = 0; o < a.out; ++o) {
    double w_o = 0, rest = 0;
    for (size_t t = 0; t < taps.index.size(); ++t) {
      (taps.index[t][o] == o ? w_o : rest) += std::abs(taps.weight[t][o]);
    }
    if (w_o != 1.0 || rest != 0.0 || !taps.inside[o]) return false;
  }
  return true;
}

// sum_t gather(x, index_t, axis) * weight_t (the product skipped for unit weights,
// taps of zero weight dropped).
absl::StatusOr<ImportedValue> ApplyTaps(NodeContext& c, const ImportedValue& x, int rank, DType dtype,
                                        const AxisResize& a, const Taps& taps) {
  std::optional<ImportedValue> acc;
  Shape wshape(rank - a.axis, 1);
  wshape[0] = a.out;
  for (size_t t = 0; t < taps.index.size(); ++t) {
    const std::vector<double>& w = taps.weight[t];
    const bool zero = std::all_of(w.begin(), w.end(), [](double v) { return v == 0; });
    const bool ones = std::all_of(w.begin(), w.end(), [](double v) { return v == 1; });
    if (zero && (acc.has_value() || t + 1 < taps.index.size())) continue;
    ImportedValue idx = c.Const(Tensor::FromVector<int64_t>({a.out}, taps.index[t]));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue g, c.Emit(PrimId::kGather, {x, idx}, {{"axis", int64_t{a.axis}}}));
    if (!ones) {
      KGRAD_ASSIGN_OR_RETURN(ImportedValue k, FloatConst(c, dtype, wshape, w));
      KGRAD_ASSIGN_OR_RETURN(g, c.Emit(PrimId::kMul, {g, k}));
    }
    if (acc.has_value()) {
      KGRAD_ASSIGN_OR_RETURN(g, c.Emit(PrimId::kAdd, {*acc, g}));
    }
    acc = g;
  }
  return *acc;
}

namespace {

// y + extrapolation * (1 - prod_axes inside_axis): tf_crop_and_resize's value for
// samples outside the input along any axis (the taps gave them 0).
absl::StatusOr<ImportedValue> Extrapolate(NodeContext& c, const ImportedValue& y, int rank, DType dtype,
                                          const std::vector<AxisResize>& axes, const std::vector<Taps>& taps,
                                          double value) {
  Shape shape(rank, 1);
  for (const AxisResize& a : axes) shape[a.axis] = a.out;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n > c.importer().options().max_folded_elements) return c.Error("the extrapolation mask is too large");
  std::vector<double> mask(n);
  bool any = false;
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t rest = flat;
    bool inside = true;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t i = rest % shape[d];
      rest /= shape[d];
      for (size_t k = 0; k < axes.size(); ++k) {
        if (axes[k].axis == d) inside = inside && taps[k].inside[i];
      }
    }
    mask[flat] = inside ? 0.0 : value;
    any = any || !inside;
  }
  if (!any || value == 0) return y;
  KGRAD_ASSIGN_OR_RETURN(ImportedValue k, FloatConst(c, dtype, shape, mask));
  return c.Emit(PrimId::kAdd, {y, k});
}

// The attributes; "simple" nearest rounding and asymmetric coordinates before
// opset 11 (Resize-10, Upsample), where the other attributes do not exist.
absl::StatusOr<ResizeMode> ReadMode(NodeContext& c, bool legacy) {
  ResizeMode m;
  KGRAD_ASSIGN_OR_RETURN(m.mode, c.String("mode", "nearest"));
  KGRAD_ASSIGN_OR_RETURN(m.policy, c.String("keep_aspect_ratio_policy", "stretch"));
  if (m.policy != "stretch" && m.policy != "not_larger" && m.policy != "not_smaller") {
    return c.Error(
        absl::StrCat("keep_aspect_ratio_policy must be stretch, not_larger or not_smaller, got '", m.policy, "'"));
  }
  if (m.mode != "nearest" && m.mode != "linear" && !(m.mode == "cubic" && !legacy)) {
    return c.Error(absl::StrCat("mode must be nearest, linear", legacy ? "" : " or cubic", ", got '", m.mode, "'"));
  }
  if (legacy) {
    m.transform = "asymmetric";
    m.nearest = "simple";
    return m;
  }
  KGRAD_ASSIGN_OR_RETURN(m.transform, c.String("coordinate_transformation_mode", "half_pixel"));
  KGRAD_ASSIGN_OR_RETURN(m.nearest, c.String("nearest_mode", "round_prefer_floor"));
  KGRAD_ASSIGN_OR_RETURN(m.cubic_a, c.Float("cubic_coeff_a", -0.75));
  KGRAD_ASSIGN_OR_RETURN(int64_t exclude, c.Int("exclude_outside", 0));
  KGRAD_ASSIGN_OR_RETURN(m.extrapolation, c.Float("extrapolation_value", 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t antialias, c.Int("antialias", 0));
  m.exclude_outside = exclude != 0;
  if (antialias != 0) return c.Error("antialias=1 is not supported");
  const std::vector<std::string> transforms = {"half_pixel",        "half_pixel_symmetric", "pytorch_half_pixel",
                                               "align_corners",     "asymmetric",           "tf_half_pixel_for_nn",
                                               "tf_crop_and_resize"};
  if (std::find(transforms.begin(), transforms.end(), m.transform) == transforms.end()) {
    return c.Error(absl::StrCat("coordinate_transformation_mode must be one of ", absl::StrJoin(transforms, ", "),
                                "; got '", m.transform, "'"));
  }
  const std::vector<std::string> nearest = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  if (std::find(nearest.begin(), nearest.end(), m.nearest) == nearest.end()) {
    return c.Error(
        absl::StrCat("nearest_mode must be one of ", absl::StrJoin(nearest, ", "), "; got '", m.nearest, "'"));
  }
  return m;
}

// The floats of input i (empty when the input is omitted or empty); an input
// computed at run time sets *at_run_time and gives as many NaNs as it has entries
// (its length must be static).
absl::StatusOr<std::vector<double>> FloatsOrRunTime(NodeContext& c, int i, bool* at_run_time) {
  std::vector<double> v;
  if (!c.HasInput(i)) return v;
  if (!IsConstantInput(c, i)) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue in, c.Input(i));
    KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(in));
    if (!IsFloating(t->dtype()) || t->rank() != 1 || t->shape()[0] < 0) {
      return c.Error(absl::StrCat("input ", i, " must be a 1-D float tensor of static length, got ", t->ToString()));
    }
    *at_run_time = t->shape()[0] > 0;
    return std::vector<double>(t->shape()[0], std::nan(""));
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor t, c.ConstInput(i));
  if (!IsFloating(t.dtype()))
    return c.Error(absl::StrCat("input ", i, " must be a float tensor, got ", t.TypeString()));
  for (int64_t k = 0; k < t.NumElements(); ++k) v.push_back(t.ElementAsDouble(k));
  return v;
}

// The sizes input as import knows it (NodeContext::KnownInts); a run-time input
// with no shape value has every entry kUnknownValue (its length must be static).
absl::StatusOr<std::vector<int64_t>> KnownSizes(NodeContext& c, int i) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue v, c.Input(i));
  const AbstractTensor* t = AsTensor(v.type);
  if (v.constant.has_value() || t == nullptr || t->value().has_value()) return c.KnownInts(i);
  if (!IsInteger(t->dtype()) || t->rank() != 1 || t->shape()[0] < 0) {
    return c.Error(absl::StrCat("input ", i, " must be a 1-D integer tensor of static length, got ", t->ToString()));
  }
  return std::vector<int64_t>(t->shape()[0], kUnknownValue);
}

// Where the scales, sizes and roi come from, by op and opset. roi is read only
// for tf_crop_and_resize (`crop`), the one mode that uses it.
absl::StatusOr<ResizeInputs> ReadInputs(NodeContext& c, bool crop) {
  ResizeInputs r;
  const bool upsample = c.node().op_type() == "Upsample";
  if (upsample && c.opset() < 9) {
    KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
    const onnx::AttributeProto* a = c.Attr("scales");
    if (a == nullptr) return c.Error("the scales attribute is required");
    for (float f : a->floats()) r.scales.push_back(f);
    return r;
  }
  if (upsample || c.opset() < 11) {
    KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
    r.scales_input = 1;
    KGRAD_ASSIGN_OR_RETURN(r.scales, FloatsOrRunTime(c, 1, &r.scales_at_run_time));
    return r;
  }
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 4));
  if (crop) {
    KGRAD_ASSIGN_OR_RETURN(r.roi, FloatsOrRunTime(c, 1, &r.roi_at_run_time));
  }
  KGRAD_ASSIGN_OR_RETURN(r.scales, FloatsOrRunTime(c, 2, &r.scales_at_run_time));
  if (c.HasInput(3)) {  // may keep dims that are not static: Concat(Shape(x)[:2], [H, W])
    KGRAD_ASSIGN_OR_RETURN(r.sizes, KnownSizes(c, 3));
  }
  if (r.scales.empty() == r.sizes.empty()) return c.Error("exactly one of scales and sizes must be given");
  return r;
}

bool KnownSize(int64_t s) { return s != kUnknownValue && !IsSymbolDim(s); }

// The axes attribute (opset 18; every axis when empty), each in [0, rank), with
// the entry counts of scales, sizes and roi checked against it.
absl::StatusOr<std::vector<int64_t>> ReadAxes(NodeContext& c, const AbstractTensor* tx, const ResizeInputs& r) {
  const int rank = tx->rank();
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> axes, c.Ints("axes", {}));
  if (axes.empty()) {
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  }
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return c.Error(absl::StrCat("axis ", a, " is out of range for ", tx->ToString()));
    if (a < 0) a += rank;
  }
  const size_t n = axes.size();
  if ((!r.scales.empty() && r.scales.size() != n) || (!r.sizes.empty() && r.sizes.size() != n)) {
    return c.Error(absl::StrCat("scales or sizes must have ", n, " entries (one per axis)"));
  }
  if (!r.roi.empty() && r.roi.size() != 2 * n) return c.Error(absl::StrCat("roi must have ", 2 * n, " entries"));
  return axes;
}

// keep_aspect_ratio_policy's one scale for every axis, the smallest or largest of
// sizes / in; nullopt when a size or an input dim is known only at run time.
absl::StatusOr<std::optional<double>> CommonScale(NodeContext& c, const AbstractTensor* tx, const ResizeInputs& r,
                                                  const ResizeMode& m, const std::vector<int64_t>& axes) {
  double common = 0;
  for (size_t k = 0; k < axes.size() && !r.sizes.empty() && m.policy != "stretch"; ++k) {
    const int64_t in = tx->shape()[axes[k]];
    if (in == 0) return c.Error("cannot resize an empty axis");
    if (in < 0 || !KnownSize(r.sizes[k])) return std::optional<double>();
    const double s = static_cast<double>(r.sizes[k]) / static_cast<double>(in);
    common = k == 0 ? s : m.policy == "not_larger" ? std::min(common, s) : std::max(common, s);
  }
  return std::optional<double>(common);
}

// The resized axes (those whose size or scale changes something) with their sizes
// and scales, from the inputs, axes (opset 18) and keep_aspect_ratio_policy. An
// axis that needs a value known only at run time (a scale, size, roi entry, its
// input dim, or the policy's common scale) comes back as run_time.
absl::StatusOr<std::vector<AxisResize>> ResizedAxes(NodeContext& c, const AbstractTensor* tx, const ResizeInputs& r,
                                                    const ResizeMode& m) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReadAxes(c, tx, r));
  KGRAD_ASSIGN_OR_RETURN(std::optional<double> common, CommonScale(c, tx, r, m, axes));
  const size_t n = axes.size();
  const bool crop_mode = m.transform == "tf_crop_and_resize";
  std::vector<AxisResize> out;
  for (size_t k = 0; k < n; ++k) {
    AxisResize a{static_cast<int>(axes[k]), tx->shape()[axes[k]], 0, 0, false};
    a.entry = static_cast<int>(k);
    a.run_time = !common.has_value() || (crop_mode && r.roi_at_run_time);
    if (!r.roi.empty() && crop_mode) a.roi_start = r.roi[k], a.roi_end = r.roi[n + k];
    const double crop = crop_mode ? a.roi_end - a.roi_start : 1.0;
    if (r.scales_at_run_time) {
      a.run_time = true;
    } else if (!r.scales.empty()) {
      a.scale = r.scales[k];
      if (!(a.scale > 0)) return c.Error(absl::StrCat("scales must be > 0, got ", a.scale));
      if (a.scale == 1 && crop == 1 && !crop_mode) continue;
    } else if (r.sizes[k] == a.in && a.in < 0 && a.in != kUnknownDim && m.policy == "stretch") {
      continue;  // a dim symbol kept as it is (the batch of a dynamic-batch model)
    } else if (!KnownSize(r.sizes[k])) {
      a.run_time = true;
    } else if (r.sizes[k] <= 0) {
      return c.Error(absl::StrCat("sizes must be > 0, got ", r.sizes[k]));
    }
    if (a.in == 0) return c.Error("cannot resize an empty axis");
    a.run_time = a.run_time || a.in < 0;
    if (a.run_time) {
      out.push_back(a);
      continue;
    }
    double size = static_cast<double>(r.sizes.empty() ? 0 : r.sizes[k]);  // in double: no overflow
    if (!r.scales.empty()) {
      size = std::floor(static_cast<double>(a.in) * a.scale * crop);
    } else if (m.policy == "stretch") {
      a.scale = size / static_cast<double>(a.in);
      a.rational = true;
    } else {
      a.scale = *common;
      size = std::floor(*common * static_cast<double>(a.in) + 0.5);
    }
    if (!(size >= 1 && size <= static_cast<double>(c.importer().options().max_folded_elements))) {
      return c.Error(absl::StrCat("the output size along axis ", a.axis, " would be ", size));
    }
    a.out = static_cast<int64_t>(size);
    a.length = r.scales.empty() ? size : static_cast<double>(a.in) * a.scale;
    out.push_back(a);
  }
  return out;
}

// Resize(X[, roi, scales, sizes]){antialias, axes, coordinate_transformation_mode,
// cubic_coeff_a, exclude_outside, extrapolation_value, keep_aspect_ratio_policy,
// mode, nearest_mode}; Resize-10(X, scales){mode}; Upsample(X, scales){mode}.
Outputs Resize(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  const bool legacy = c.node().op_type() == "Upsample" || c.opset() < 11;
  KGRAD_ASSIGN_OR_RETURN(ResizeMode m, ReadMode(c, legacy));
  KGRAD_ASSIGN_OR_RETURN(ResizeInputs r, ReadInputs(c, m.transform == "tf_crop_and_resize"));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, c.TensorType(x));
  if (!IsFloating(tx->dtype())) return c.Error(absl::StrCat("needs a float input, got ", tx->ToString()));
  KGRAD_ASSIGN_OR_RETURN(std::vector<AxisResize> axes, ResizedAxes(c, tx, r, m));
  if (std::any_of(axes.begin(), axes.end(), [](const AxisResize& a) { return a.run_time; })) {
    return DynamicResize(c, m, r, x, axes);
  }
  std::vector<AxisResize> done;
  std::vector<Taps> done_taps;
  for (const AxisResize& a : axes) {
    Taps taps = MakeTaps(m, a);
    if (IsIdentity(a, taps)) continue;
    KGRAD_ASSIGN_OR_RETURN(x, ApplyTaps(c, x, tx->rank(), tx->dtype(), a, taps));
    done.push_back(a);
    done_taps.push_back(std::move(taps));
  }
  if (m.transform == "tf_crop_and_resize") {
    KGRAD_ASSIGN_OR_RETURN(x, Extrapolate(c, x, tx->rank(), tx->dtype(), done, done_taps, m.extrapolation));
  }
  return std::vector<ImportedValue>{x};
}

}  // namespace

void AddResizeOps(OpTable* t) {
  AddMappings(t, {{"Resize", Resize}, {"Upsample", Resize}});
}

}  // namespace onnx_import
}  // namespace kgrad
