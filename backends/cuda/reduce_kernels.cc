// CUDA kernels: reduce family (reduce_sum/mean/prod/max/min, logsumexp with axes
// and keepdims; argmax/argmin). Checks, axes and output shapes are
// ops/reduce.h's (ParseReduceAxes, as on the CPU); the work is one ReduceGeom
// launch (backends/cuda/kernels/reduce.cu).
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/kernel_util.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/op_util.h"
#include "ops/reduce.h"

namespace kgrad {
namespace cuda {
namespace {

template <ReduceOp kOp>
absl::StatusOr<Value> ReduceKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const ops::ReduceAxes r, ops::ParseReduceAxes(ctx.prim(), *x));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(r.out_dtype, r.out_shape));
  KGRAD_RETURN_IF_ERROR(RunReduce(ctx, kOp, MakeReduceGeom(x->shape(), r.reduced), *x, out));
  return Value(std::move(out));
}

template <bool kMax>
absl::StatusOr<Value> ArgReduceKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const ops::ReduceAxes r, ops::ParseReduceAxes(ctx.prim(), *x));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(r.out_dtype, r.out_shape));
  const ops::AxisSplit g = ops::SplitAtAxis(x->shape(), r.axes[0]);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_LAUNCH(LaunchArgReduce(kMax, ToDT(x->dtype()), x->raw_data(), out.mutable_data<int64_t>(),
                               g.outer, g.len, g.inner, gpu.stream));
  return Value(std::move(out));
}

}  // namespace

void RegisterReduceKernels(KernelTable* t) {
  t->Set(PrimId::kReduceSum, OnDevice<ReduceKernel<ReduceOp::kSum>>);
  t->Set(PrimId::kReduceMean, OnDevice<ReduceKernel<ReduceOp::kMean>>);
  t->Set(PrimId::kReduceProd, OnDevice<ReduceKernel<ReduceOp::kProd>>);
  t->Set(PrimId::kReduceMax, OnDevice<ReduceKernel<ReduceOp::kMax>>);
  t->Set(PrimId::kReduceMin, OnDevice<ReduceKernel<ReduceOp::kMin>>);
  t->Set(PrimId::kLogsumexp, OnDevice<ReduceKernel<ReduceOp::kLogsumexp>>);
  t->Set(PrimId::kArgmax, OnDevice<ArgReduceKernel<true>>);
  t->Set(PrimId::kArgmin, OnDevice<ArgReduceKernel<false>>);
}

}  // namespace cuda
}  // namespace kgrad
