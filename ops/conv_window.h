// The rules of the conv family's sliding windows, written once for inference
// (ops/conv.cc) and for the kernels (backends/cpu, backends/cuda), which re-check
// them because graphs may run without inference.
//
// Windows span 1, 2 or 3 spatial axes (inputs of rank 3, 4 or 5: (N, C, L),
// (N, C, H, W), (N, C, D, H, W)). One description covers all three: the arrays
// below always hold three axes, depth, height and width, and an op over s
// spatial axes uses the last s of them; the others are trivial (length 1,
// kernel 1, stride 1, dilation 1, no padding), so a 2-D window is a 3-D window
// of depth 1 and every kernel loops over three axes.
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
inline constexpr int kMaxSpatial = 3;
// Depth, height, width (see the top of the file).
using Axes = std::array<int64_t, kMaxSpatial>;
inline constexpr int kD = 0, kH = 1, kW = 2;

// The window of one application; `kernel` comes from the attribute for pooling
// and from the filter's shape for convolution. Entries of the unused leading
// axes stay trivial.
struct Window {
  int spatial = 2;  // spatial axes of the op's inputs: 1, 2 or 3
  Axes kernel{1, kUnknownDim, kUnknownDim};
  Axes stride{1, 1, 1};
  Axes dilation{1, 1, 1};
  Axes pad_lo{0, 0, 0};  // front, top, left
  Axes pad_hi{0, 0, 0};  // back, bottom, right
  int64_t groups = 1;

  bool symmetric() const { return pad_lo == pad_hi; }
  // The first axis the op uses (kMaxSpatial - spatial).
  int first() const { return kMaxSpatial - spatial; }
};

// The attributes of a window over `spatial` axes. Lists name the used axes in
// order: stride and dilation `spatial` entries (empty: all 1); padding `spatial`
// entries (symmetric) or 2 * `spatial` as (begin, end) per axis (empty: none);
// a pooling kernel `spatial` entries.
// stride, padding, dilation, groups of conv2d and its backprop ops (kernel unset).
absl::StatusOr<Window> ConvAttrs(const Primitive& p, int spatial);
// kernel, stride (empty: the kernel), padding of the pooling ops.
absl::StatusOr<Window> PoolAttrs(const Primitive& p, int spatial);

// Windows along `axis` (kD, kH, kW) over an input of length `in` (unknown stays
// unknown); error when the padded input is shorter than the dilated kernel.
// Pooling (`pool`) also rejects windows that lie entirely in the padding
// (nothing to take the max or mean of).
absl::StatusOr<int64_t> WindowCount(const Window& w, int axis, int64_t in, bool pool);

// The shape {a, b, the used axes of `s`}: [N, C, spatial...] and the like.
Shape SpatialShape(int64_t a, int64_t b, const Axes& s, int spatial);

// ----- Inputs --------------------------------------------------------------------------
// What each input of the family's op `id` holds, in input order ("(N, C,
// spatial...) input", "(O, C/groups, kernel...) filter", ...; empty for other
// ops). Every one is an f32/f64 tensor of rank 3, 4 or 5 with the dtype and rank
// of input 0.
absl::Span<const char* const> InputNames(PrimId id);

// The rank of input 0 that the rule allows (3 to 5): "a rank-3, 4 or 5".
inline bool WindowRank(int rank) { return rank >= 3 && rank <= 2 + kMaxSpatial; }

// The kernels' form of that rule over their float tensor inputs `in` (input
// order): "input 0 must be a rank-3, 4 or 5 (N, C, spatial...) input tensor, got
// f32[3,5]".
absl::Status CheckKernelInputs(PrimId id, absl::Span<const Tensor* const> in);

// Input `i`, shaped `got`, must be shaped `expected` (`what` says why). Dims
// unknown on one side match; returns the merged shape (the known dim wins).
absl::StatusOr<Shape> MatchShape(int i, const Shape& got, const Shape& expected,
                                 absl::string_view what);

// ----- Convolution ---------------------------------------------------------------------
// x [N,C,D,H,W] * w [O,C/groups,KD,KH,KW] -> y [N,O,OD,OH,OW] (the trivial
// leading axes of 1-D and 2-D windows are 1 here and absent from the shapes).
struct ConvGeom {
  Window win;                  // with kernel = {kd, kh, kw}
  int64_t n, c, d = 1, h, w;   // input
  int64_t o, kd = 1, kh, kw;   // filter
  int64_t od = 1, oh, ow;      // output
  int64_t cg, og;              // channels per group (input, output)

  Shape x_shape() const { return SpatialShape(n, c, {d, h, w}, win.spatial); }
  Shape y_shape() const { return SpatialShape(n, o, {od, oh, ow}, win.spatial); }
  Shape w_shape() const { return SpatialShape(o, cg, {kd, kh, kw}, win.spatial); }
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
// x [N,C,D,H,W] -> y [N,C,OD,OH,OW] (trivial leading axes as in ConvGeom).
struct PoolGeom {
  Window win;
  int64_t n, c, d = 1, h, w, od = 1, oh, ow;
  bool count_include_pad = true;  // avg pooling: padding cells count in the divisor

  Shape x_shape() const { return SpatialShape(n, c, {d, h, w}, win.spatial); }
  Shape y_shape() const { return SpatialShape(n, c, {od, oh, ow}, win.spatial); }
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
