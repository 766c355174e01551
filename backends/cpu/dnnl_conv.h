// Internal to the conv family's CPU kernels: f32 convolutions through oneDNN
// (Debian's libdnnl 2.6, the library PyTorch and ONNX Runtime's DNNL provider
// build on). oneDNN picks its own blocked layouts and JIT kernels (direct and
// depthwise convolutions for AVX-512, ~1.3-1.5x the rate of im2col + Eigen GEMM
// on resnet18's layers here, reorders included); kgrad's tensors stay NCHW/OIHW and
// are reordered in and out around each call, through scratch from the kernel
// context (so the executor's memory accounting sees it).
//
// Only geometry oneDNN describes exactly is sent (DnnlConvApplies); anything
// else, f64, and builds without oneDNN (KGRAD_NO_DNNL: the TSAN build, where its
// OpenMP runtime is not instrumented) stay on the im2col kernels.
#ifndef KGRAD_BACKENDS_CPU_DNNL_CONV_H_
#define KGRAD_BACKENDS_CPU_DNNL_CONV_H_

#include <cstdint>

#include "absl/status/status.h"
#include "backends/kernel.h"
#include "ops/conv_window.h"

namespace kgrad {
namespace cpu {
namespace conv_internal {

// How many fixed chunks a backward-weights sum is cut into (this file's oneDNN
// path and the im2col kernel's alike): each chunk is summed on one thread and
// the chunks are added in order, so the bits do not depend on the thread count.
inline constexpr int64_t kWeightChunks = 4;

enum class DnnlConvKind {
  kForward,          // y = conv2d(x, w)
  kBackwardData,     // dx = conv2d_backprop_input(dy, w)
  kBackwardWeights,  // dw = conv2d_backprop_filter(x, dy)
};

// Whether oneDNN takes this f32 convolution: a non-empty window whose output dims are oneDNN's formula for the same pads (always true of
// ConvGeom today; checked so that a change there cannot feed oneDNN wrong dims).
bool DnnlConvApplies(const ops::ConvGeom& g, DType dtype);

// Runs one convolution on NCHW x/dx, OIHW w/dw and NCHW y/dy buffers (f32);
// inputs are read, the output written whole. The result does not depend on the
// calling thread's OpenMP thread count (backward weights: fixed batch chunks). An error names the oneDNN call
// that failed; kUnimplemented when oneDNN has no kernel for the window, and for
// the backward weights of fewer than kWeightChunks samples (the caller then
// uses its own kernels). `kept_w`: the weight input (forward, backward data) when
// it is one of the executor's own weights (KernelContext::persistent), whose
// blocked copy the step's cache then keeps across runs; nullptr: reordered per call.
absl::Status DnnlConv(const KernelContext& ctx, const ops::ConvGeom& g, DnnlConvKind kind,
                      float* x, float* w, float* y, const Tensor* kept_w = nullptr);

}  // namespace conv_internal
}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_DNNL_CONV_H_
