#include "backends/cuda/kernel_util.h"

#include "absl/status/status.h"
#include "backends/cuda/cuda_context.h"
#include "core/status_macros.h"

namespace kgrad {
namespace cuda {

absl::Status StridedCopy(const CopyGeom& g, const Tensor& src, const Tensor& dst,
                         cudaStream_t stream) {
  const int elem = static_cast<int>(DTypeSize(src.dtype()));
  KGRAD_LAUNCH(LaunchStridedCopy(elem, src.raw_data(), dst.raw_data(), g, stream));
  return absl::OkStatus();
}

absl::Status RunReduce(const KernelContext& ctx, ReduceOp op, const ReduceGeom& g, const Tensor& x,
                       const Tensor& out) {
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  const DT dt = ToDT(x.dtype());
  const size_t bytes = ReduceScratchBytes(op, dt, g, gpu.sms);
  Tensor scratch;
  if (bytes > 0) {
    KGRAD_ASSIGN_OR_RETURN(scratch, Scratch(ctx, bytes));
  }
  KGRAD_LAUNCH(LaunchReduce(op, dt, x.raw_data(), out.raw_data(), g,
                            bytes > 0 ? scratch.raw_data() : nullptr, gpu.sms, gpu.stream));
  return absl::OkStatus();
}

absl::Status FillTensor(const KernelContext& ctx, const Tensor& t, double value) {
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_LAUNCH(LaunchFill(ToDT(t.dtype()), t.raw_data(), t.NumElements(), value, gpu.stream));
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace kgrad
