// Internal to backends/cuda: input checks (with the CPU kernels' messages) and
// launch helpers shared by the host-side kernels.
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
#include "backends/view_kernels.h"  // AttrError, Ints
#include "core/shape.h"

namespace kgrad {
namespace cuda {

// ----- Dtype sets -------------------------------------------------------------------------
using DTypeMask = uint32_t;
constexpr DTypeMask Bit(DType t) { return DTypeMask{1} << static_cast<int>(t); }
constexpr DTypeMask kFloatTypes = Bit(DType::kFloat32) | Bit(DType::kFloat64);
constexpr DTypeMask kNumericTypes = kFloatTypes | Bit(DType::kInt32) | Bit(DType::kInt64);
constexpr DTypeMask kBoolType = Bit(DType::kBool);
constexpr DTypeMask kAllTypes = kNumericTypes | kBoolType;
constexpr bool Allows(DTypeMask mask, DType t) { return (mask & Bit(t)) != 0; }

// "f32, f64, i32 or i64".
std::string MaskNames(DTypeMask mask);

// Input `i` as a tensor with a dtype in `allowed` ("input 0 must be a f32 or f64
// tensor, got i32[3]").
absl::StatusOr<const Tensor*> TypedInput(const KernelContext& ctx, int i, DTypeMask allowed);
absl::Status SameDTypes(const Tensor& a, int i, const Tensor& b, int j);

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
