// CPU kernels: the run-time axes primitives of the shape family
// (dynamic_unsqueeze, dynamic_squeeze, dynamic_reduce_sum;
// ops/dynamic_axes_ops.cc). Each reads its axes on the host (CheckShapeOperand,
// then the elements as int64) and passes them to the formulas inference uses
// (ops/dynamic_axes_ops.h), which validate them. Unsqueeze and squeeze are views
// of x (its buffer shared, as reshape's); the sum is the device's reduce_sum
// kernel over the parsed axes. On CUDA these kernels run through the CPU fallback
// (backends/cuda/README.md).
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/device.h"
#include "backends/view_kernels.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/dynamic_axes_ops.h"
#include "ops/registry.h"
#include "ops/shape_checks.h"

namespace kgrad {
namespace cpu {
namespace {

// Input 1 (the axes) read on the host.
absl::StatusOr<std::vector<int64_t>> ReadAxes(const KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.TensorAt(1));
  KGRAD_RETURN_IF_ERROR(ops::CheckShapeOperand(ctx.prim(), 1, "axes", *t));
  std::vector<int64_t> out(t->NumElements());
  for (int64_t k = 0; k < t->NumElements(); ++k) {
    out[k] = t->dtype() == DType::kInt32 ? t->data<int32_t>()[k] : t->data<int64_t>()[k];
  }
  return out;
}

absl::StatusOr<Value> DynamicUnsqueeze(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReadAxes(ctx));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, ops::DynamicUnsqueezeShape(ctx.prim(), *x, axes));
  return views::ShareAs(ctx, shape);
}

absl::StatusOr<Value> DynamicSqueeze(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReadAxes(ctx));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, ops::DynamicSqueezeShape(ctx.prim(), *x, axes));
  return views::ShareAs(ctx, shape);
}

// reduce_sum{axes, keepdims} with the axes read here: its kernel on this device.
absl::StatusOr<Value> DynamicReduceSum(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReadAxes(ctx));
  KGRAD_ASSIGN_OR_RETURN(ops::DynamicReduceSpec s,
                         ops::DynamicReduceSumSpec(ctx.prim(), *x, absl::MakeConstSpan(axes)));
  if (s.identity) return std::move(ctx.mutable_input(0));
  KGRAD_ASSIGN_OR_RETURN(
      PrimitivePtr sum,
      DefaultRegistry().Make(PrimId::kReduceSum, {{"axes", std::move(s.axes)},
                                                  {"keepdims", ctx.prim().GetBool("keepdims")}}));
  KernelFn fn = ctx.device()->kernel(PrimId::kReduceSum);
  if (fn == nullptr) return absl::UnimplementedError("no reduce_sum kernel on this device");
  Value in[1] = {ctx.input(0)};
  KernelContext sum_ctx(*sum, absl::MakeSpan(in), ctx.device());
  return fn(sum_ctx);
}

}  // namespace

void RegisterDynamicAxesKernels(KernelTable* table) {
  table->Set(PrimId::kDynamicUnsqueeze, DynamicUnsqueeze);
  table->Set(PrimId::kDynamicSqueeze, DynamicSqueeze);
  table->Set(PrimId::kDynamicReduceSum, DynamicReduceSum);
}

}  // namespace cpu
}  // namespace kgrad
