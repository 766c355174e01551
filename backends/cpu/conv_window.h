// Internal to the conv family's CPU kernels (conv_kernels.cc, pool_kernels.cc):
// what they share beyond the window rules of ops/conv_window.h, which they use
// for attributes, geometry and input checks.
#ifndef KGRAD_BACKENDS_CPU_CONV_WINDOW_H_
#define KGRAD_BACKENDS_CPU_CONV_WINDOW_H_

#include <algorithm>
#include <cstdint>
#include <utility>

#include "backends/kernel.h"
#include "core/dtype.h"

namespace kgrad {
namespace cpu {
namespace conv_internal {

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

// Runs fn(T{}) with T = float or double after `dtype` (an f32/f64 dtype, checked
// by ops::CheckKernelInputs).
template <typename Fn>
void DispatchFloat(DType dtype, Fn&& fn) {
  if (dtype == DType::kFloat32) {
    fn(float{});
  } else {
    fn(double{});
  }
}

// The pooling kernels (pool_kernels.cc), registered by RegisterConvKernels.
void RegisterPoolKernels(KernelTable* table);

}  // namespace conv_internal
}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_CONV_WINDOW_H_
