#include "backends/cuda/kernel_util.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/cuda/cuda_context.h"
#include "core/status_macros.h"

namespace kgrad {
namespace cuda {

std::string MaskNames(DTypeMask mask) {
  std::string out;
  int remaining = __builtin_popcount(mask);
  for (int i = 0; i < kNumDTypes; ++i) {
    if (!Allows(mask, static_cast<DType>(i))) continue;
    --remaining;
    absl::StrAppend(&out, DTypeName(static_cast<DType>(i)),
                    remaining == 0 ? "" : (remaining == 1 ? " or " : ", "));
  }
  return out;
}

absl::StatusOr<const Tensor*> TypedInput(const KernelContext& ctx, int i, DTypeMask allowed) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.TensorAt(i));
  if (!Allows(allowed, t->dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input ", i, " must be a ", MaskNames(allowed), " tensor, got ", t->TypeString()));
  }
  return t;
}

absl::Status SameDTypes(const Tensor& a, int i, const Tensor& b, int j) {
  if (a.dtype() == b.dtype()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("inputs ", i, " and ", j,
                                                 " must have the same dtype, got ",
                                                 a.TypeString(), " and ", b.TypeString()));
}

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
