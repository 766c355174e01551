// Internal to backends/cuda: launch helpers shared by the host-side kernels.
// (Input checks are the op families', ops/<family>.h, shared with the CPU
// kernels and inference; input accessors are KernelContext's.)
#ifndef KGRAD_BACKENDS_CUDA_KERNEL_UTIL_H_
#define KGRAD_BACKENDS_CUDA_KERNEL_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "backends/cuda/geometry.h"
#include "backends/cuda/kernels/launch.h"
#include "backends/kernel.h"
#include "core/shape.h"

namespace kgrad {
namespace cuda {

// Runs a copy between the buffers of two tensors of the same dtype.
absl::Status StridedCopy(const CopyGeom& g, const Tensor& src, const Tensor& dst,
                         cudaStream_t stream);

// Runs `op` over geometry g from x into out (allocating the scratch it needs).
absl::Status RunReduce(const KernelContext& ctx, ReduceOp op, const ReduceGeom& g, const Tensor& x,
                       const Tensor& out);

// Fills a device tensor with `value` on the thread's stream.
absl::Status FillTensor(const KernelContext& ctx, const Tensor& t, double value);

}  // namespace cuda
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CUDA_KERNEL_UTIL_H_
