// Internal to the conv family's CPU kernels (conv_kernels.cc, pool_kernels.cc): the
// sliding-window geometry, attribute parsing and input checks that convolution and
// pooling share. The rules match ops/conv.cc; kernels re-check them because graphs
// may run without inference.
#ifndef KGRAD_BACKENDS_CPU_CONV_WINDOW_H_
#define KGRAD_BACKENDS_CPU_CONV_WINDOW_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backends/kernel.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace kgrad {
namespace cpu {
namespace conv_internal {

struct Window {
  std::array<int64_t, 2> kernel{1, 1};
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> dilation{1, 1};
  std::array<int64_t, 2> pad_lo{0, 0};  // top, left
  std::array<int64_t, 2> pad_hi{0, 0};  // bottom, right
  int64_t groups = 1;
};

// stride, padding, dilation, groups of conv2d and its backprop ops (kernel unset).
absl::StatusOr<Window> ConvAttrs(const Primitive& p);
// kernel, stride (empty: the kernel), padding of the pooling ops.
absl::StatusOr<Window> PoolAttrs(const Primitive& p);

// Windows along `axis` (0: height, 1: width) over an input of length `in`:
// (in + lo + hi - eff) / stride + 1 with eff the dilated kernel; error when the
// padded input is shorter than eff. Pooling also rejects windows that lie
// entirely in the padding.
absl::StatusOr<int64_t> WindowCount(const Window& w, int axis, int64_t in, bool pool);

// Input `i`: a rank-4 f32/f64 tensor with the dtype of input 0 (`what` names it).
absl::StatusOr<const Tensor*> Nchw(const KernelContext& ctx, size_t i, const char* what);

// Error unless input `i` is shaped `expected` (`what` says why).
absl::Status ExpectShape(size_t i, const Tensor& t, const Shape& expected, absl::string_view what);

// The output positions [lo, hi) whose tap j*stride + offset lies in [0, len), of
// `count` positions; the others read padding.
inline std::pair<int64_t, int64_t> ValidRange(int64_t offset, int64_t stride, int64_t len,
                                              int64_t count) {
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t hi = len - offset <= 0 ? 0 : (len - offset + stride - 1) / stride;
  lo = std::min(lo, count);
  hi = std::max(lo, std::min(hi, count));
  return {lo, hi};
}

// The pooling kernels (pool_kernels.cc), registered by RegisterConvKernels.
void RegisterPoolKernels(KernelTable* table);

}  // namespace conv_internal
}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_CONV_WINDOW_H_
