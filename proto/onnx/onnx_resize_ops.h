// ONNX Resize / Upsample: what the import-time form (onnx_resize_ops.cc) and the
// run-time form (onnx_dynamic_resize_ops.cc) share.
//
// Along each resized axis, output o reads at most T input cells (T = 1 nearest,
// 2 linear, 4 cubic): y = sum_t gather(x, index_t, axis) * weight_t. The
// import-time form computes index_t and weight_t as constants from static sizes
// and scales (Taps); the run-time form computes them with primitives when a
// scale, size, roi entry or input dim is known only at run time. Both follow the
// same formulas: the cubic kernel is written once here (CubicWeights); the
// coordinate transforms and rounding rules are written twice, Original / Nearest
// / TapsAt in each file, side by side in the same order, and must agree
// (onnx_window_test.cc compares the two forms mode by mode).
#ifndef KGRAD_PROTO_ONNX_ONNX_RESIZE_OPS_H_
#define KGRAD_PROTO_ONNX_ONNX_RESIZE_OPS_H_

#include <array>
#include <string>
#include <vector>

#include "proto/onnx/onnx_context.h"

namespace kgrad {
namespace onnx_import {

// The attributes that shape the taps.
struct ResizeMode {
  std::string mode = "nearest";                // nearest | linear | cubic
  std::string transform = "half_pixel";        // coordinate_transformation_mode
  std::string nearest = "round_prefer_floor";  // nearest_mode; "simple" before opset 11
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
  std::string policy = "stretch";  // keep_aspect_ratio_policy
};

// The scales, sizes and roi as import knows them. An input computed at run time
// has its entries marked unknown: scales and roi by the flags (their values then
// meaningless), sizes entry by entry (kUnknownValue or a dim symbol, as
// NodeContext::KnownInts reads them).
struct ResizeInputs {
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  bool scales_at_run_time = false, roi_at_run_time = false;
  int scales_input = 2;  // 1 for Upsample-9 and Resize-10
};

// One resized axis: its sizes, its scale (out / in, or the given scale), and the
// crop region of tf_crop_and_resize. `entry` is its position in scales / sizes
// (roi: entry and n + entry). A `run_time` axis has only axis and entry set: its
// sizes, scale or crop are computed by the run-time form.
//
// `length` is the spec's length_resized, which align_corners divides by: the
// output size when sizes are given, but in * scale, not floored, when scales are
// (ONNX's reference implementation, interpolate_1d_with_x, confirmed as intended
// in onnx/onnx#2462). ONNX Runtime and PyTorch take the output size in both
// cases; the two differ only when in * scale is not an integer.
struct AxisResize {
  int axis;
  int64_t in, out;
  double scale;
  bool rational;  // scale is exactly out / in: divide by it as in / out
  double roi_start = 0, roi_end = 1;
  int entry = 0;
  bool run_time = false;
  double length = 0;
};

// taps[t][o]: the input index and weight of tap t for output o; inside[o] is
// false where tf_crop_and_resize samples outside the input (extrapolated).
struct Taps {
  std::vector<std::vector<int64_t>> index;
  std::vector<std::vector<double>> weight;
  std::vector<bool> inside;
};

// The cubic convolution weights of cells floor(x) - 1 ... floor(x) + 2 at
// fraction t (Keys, coefficient a); T is double at import and a run-time value
// in onnx_dynamic_resize_ops.cc.
template <typename T>
std::array<T, 4> CubicWeights(double a, T t) {
  auto outer = [a](T s) { return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a; };
  auto inner = [a](T s) { return ((a + 2) * s - (a + 3)) * s * s + 1; };
  return {outer(1 + t), inner(t), inner(1 - t), outer(2 - t)};
}

// The import-time taps of a static axis, whether they copy the input, and
// sum_t gather(x, index_t, axis) * weight_t.
Taps MakeTaps(const ResizeMode& m, const AxisResize& a);
bool IsIdentity(const AxisResize& a, const Taps& taps);
absl::StatusOr<ImportedValue> ApplyTaps(NodeContext& c, const ImportedValue& x, int rank, DType dtype,
                                        const AxisResize& a, const Taps& taps);

// The run-time form: x resized along `axes` (static ones by their constant taps,
// run_time ones by taps computed at run time from the node's inputs and
// shape_of(x)). A scale, size or input dim that leaves an axis empty, or an
// output size above max_folded_elements, fails at run time (dynamic_range with
// a zero step).
Outputs DynamicResize(NodeContext& c, const ResizeMode& m, const ResizeInputs& r, const ImportedValue& x,
                      const std::vector<AxisResize>& axes);

}  // namespace onnx_import
}  // namespace kgrad

#endif  // KGRAD_PROTO_ONNX_ONNX_RESIZE_OPS_H_
