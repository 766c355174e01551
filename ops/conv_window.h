// The rules of the conv family's sliding windows, written once for inference
// (ops/conv.cc) and for the kernels (backends/cpu, backends/cuda), which re-check
// them because graphs may run without inference.
//
// Along one axis of length `in`, with padding `lo`/`hi`, stride `s`, window `k`
// and dilation `d`, the window spans eff = d*(k-1)+1 cells and there are
//   out = (in + lo + hi - eff) / s + 1        (floor)
// windows; window i starts at i*s - lo. A padded input shorter than eff is an
// error (no zero-sized outputs from windows that do not fit).
//
// Shapes may hold kUnknownDim (inference): a check runs only where its dims are
// known, and unknown stays unknown. Kernels pass concrete shapes.
#ifndef KGRAD_OPS_CONV_WINDOW_H_
#define KGRAD_OPS_CONV_WINDOW_H_

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace kgrad {
namespace ops {

// ----- Attributes ------------------------------------------------------------------
// The window of one application; `kernel` comes from the attribute for pooling
// and from the filter's shape for convolution.
struct Window {
  std::array<int64_t, 2> kernel{kUnknownDim, kUnknownDim};
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> dilation{1, 1};
  std::array<int64_t, 2> pad_lo{0, 0};  // top, left
  std::array<int64_t, 2> pad_hi{0, 0};  // bottom, right
  int64_t groups = 1;

  bool symmetric() const { return pad_lo == pad_hi; }
};

// stride, padding, dilation, groups of conv2d and its backprop ops (kernel unset).
absl::StatusOr<Window> ConvAttrs(const Primitive& p);
// kernel, stride (empty: the kernel), padding of the pooling ops.
absl::StatusOr<Window> PoolAttrs(const Primitive& p);

// Windows along `axis` (0: height, 1: width) over an input of length `in`
// (unknown stays unknown); error when the padded input is shorter than the
// dilated kernel. Pooling (`pool`) also rejects windows that lie entirely in the
// padding (nothing to take the max or mean of).
absl::StatusOr<int64_t> WindowCount(const Window& w, int axis, int64_t in, bool pool);

// ----- Inputs --------------------------------------------------------------------------
// What each input of the family's op `id` holds, in input order ("NCHW input",
// "OIHW filter", ...; empty for other ops). Every one is a rank-4 f32/f64 tensor
// with the dtype of input 0.
absl::Span<const char* const> InputNames(PrimId id);

// The kernels' form of that rule over their float tensor inputs `in` (input
// order): "input 0 must be a rank-4 NCHW input tensor, got f32[3,5,5]".
absl::Status CheckKernelInputs(PrimId id, absl::Span<const Tensor* const> in);

// Input `i`, shaped `got`, must be shaped `expected` (`what` says why). Dims
// unknown on one side match; returns the merged shape (the known dim wins).
absl::StatusOr<Shape> MatchShape(int i, const Shape& got, const Shape& expected,
                                 absl::string_view what);

// ----- Convolution ---------------------------------------------------------------------
// x [N,C,H,W] * w [O,C/groups,KH,KW] -> y [N,O,OH,OW].
struct ConvGeom {
  Window win;          // with kernel = {kh, kw}
  int64_t n, c, h, w;  // input
  int64_t o, kh, kw;   // filter
  int64_t oh, ow;      // output
  int64_t cg, og;      // channels per group (input, output)

  Shape x_shape() const { return {n, c, h, w}; }
  Shape y_shape() const { return {n, o, oh, ow}; }
  Shape w_shape() const { return {o, cg, kh, kw}; }
};

// Checks x (input xi) against the filter w (input wi): channels and output
// channels divisible by groups, w's C/groups input channels, a kernel >= 1x1, and
// the window counts. cg is known from x or else from w.
absl::StatusOr<ConvGeom> MakeConvGeom(const Window& win, const Shape& x, int xi, const Shape& w,
                                      int wi);

// The geometry of conv2d(x, w), conv2d_backprop_input(dy, w, x_ref) or
// conv2d_backprop_filter(x, dy, w_ref) from its attributes and input shapes
// (input order); the backprops' dy must be shaped like the conv2d output (and
// gives the batch where x leaves it unknown).
absl::StatusOr<ConvGeom> ConvOpGeom(const Primitive& p, absl::Span<const Shape* const> in);
// The same for a kernel, after CheckKernelInputs.
absl::StatusOr<ConvGeom> ConvKernelGeom(const Primitive& p, absl::Span<const Tensor* const> in);
// The output shape of conv op `id`: y (conv2d), x (conv2d_backprop_input) or w
// (conv2d_backprop_filter).
Shape OutputShape(PrimId id, const ConvGeom& g);

// ----- Pooling --------------------------------------------------------------------------
// x [N,C,H,W] -> y [N,C,OH,OW].
struct PoolGeom {
  Window win;
  int64_t n, c, h, w, oh, ow;
  bool count_include_pad = true;  // avg pooling: padding cells count in the divisor

  Shape x_shape() const { return {n, c, h, w}; }
  Shape y_shape() const { return {n, c, oh, ow}; }
};

// The geometry of a pooling op from its attributes and input shapes (input
// order): max_pool2d(x) and avg_pool2d(x); max_pool2d_grad(x, dy) and
// avg_pool2d_grad(dy, x_ref), dy shaped like the pooled x; max_pool2d_grad_grad(x,
// ddx), ddx shaped like x. Where x leaves them unknown, the batch and channels
// come from dy, and every dim from ddx.
absl::StatusOr<PoolGeom> PoolOpGeom(const Primitive& p, absl::Span<const Shape* const> in);
// The same for a kernel, after CheckKernelInputs.
absl::StatusOr<PoolGeom> PoolKernelGeom(const Primitive& p, absl::Span<const Tensor* const> in);
// The output shape of pooling op `id`: x for max_pool2d_grad and avg_pool2d_grad,
// else y.
Shape OutputShape(PrimId id, const PoolGeom& g);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_CONV_WINDOW_H_
