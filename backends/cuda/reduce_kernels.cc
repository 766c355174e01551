// CUDA kernels: reduce family (reduce_sum/mean/prod/max/min, logsumexp with axes
// and keepdims; argmax/argmin). Checks and messages follow
// backends/cpu/reduce_kernels.cc; the work is one ReduceGeom launch
// (backends/cuda/kernels/reduce.cu).
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/kernel_util.h"
#include "core/shape.h"
#include "core/status_macros.h"

namespace kgrad {
namespace cuda {
namespace {

absl::StatusOr<const Tensor*> ReduceInput(const KernelContext& ctx, DTypeMask allowed) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  if (!Allows(allowed, x->dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input 0 must be a ", allowed == kFloatTypes ? "f32 or f64" : "f32, f64, i32 or i64",
        " tensor, got ", x->TypeString()));
  }
  return x;
}

absl::Status EmptyAxisError(const KernelContext& ctx, const Tensor& x, int axis) {
  return absl::InvalidArgumentError(absl::StrCat(
      ctx.prim().name(), " over an empty axis: axis ", axis, " of ", x.TypeString(),
      " has size 0, and the ", ctx.prim().name(), " of no elements is undefined"));
}

// Which input dims `axes` reduces (empty: all); error on bad or repeated axes.
absl::StatusOr<std::vector<bool>> ReducedDims(const std::vector<int64_t>& axes, int rank) {
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    KGRAD_ASSIGN_OR_RETURN(int d, NormalizeAxis(a, rank));
    if (reduced[d]) return absl::InvalidArgumentError(absl::StrCat("axis ", a, " is repeated"));
    reduced[d] = true;
  }
  return reduced;
}

Shape OutputShape(const Shape& in, const std::vector<bool>& reduced, bool keepdims) {
  Shape out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!reduced[d]) {
      out.push_back(in[d]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  return out;
}

template <ReduceOp kOp>
absl::StatusOr<Value> ReduceKernel(KernelContext& ctx) {
  constexpr bool kFloatOnly = kOp == ReduceOp::kMean || kOp == ReduceOp::kLogsumexp;
  constexpr bool kNeedsElements = kOp == ReduceOp::kMax || kOp == ReduceOp::kMin;
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x,
                         ReduceInput(ctx, kFloatOnly ? kFloatTypes : kNumericTypes));
  KGRAD_ASSIGN_OR_RETURN(std::vector<bool> reduced,
                         ReducedDims(ctx.prim().GetInts("axes"), x->rank()));
  for (int d = 0; d < x->rank(); ++d) {
    if (kNeedsElements && reduced[d] && x->dim(d) == 0) return EmptyAxisError(ctx, *x, d);
  }
  KGRAD_ASSIGN_OR_RETURN(
      Tensor out,
      ctx.Allocate(x->dtype(), OutputShape(x->shape(), reduced, ctx.prim().GetBool("keepdims"))));
  KGRAD_RETURN_IF_ERROR(RunReduce(ctx, kOp, MakeReduceGeom(x->shape(), reduced), *x, out));
  return Value(std::move(out));
}

template <bool kMax>
absl::StatusOr<Value> ArgReduceKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ReduceInput(ctx, kNumericTypes));
  KGRAD_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.prim().GetInt("axis"), x->rank()));
  if (x->dim(axis) == 0) return EmptyAxisError(ctx, *x, axis);
  std::vector<bool> reduced(x->rank(), false);
  reduced[axis] = true;
  KGRAD_ASSIGN_OR_RETURN(
      Tensor out, ctx.Allocate(DType::kInt64,
                               OutputShape(x->shape(), reduced, ctx.prim().GetBool("keepdims"))));
  const Shape& s = x->shape();
  const int64_t outer = NumElementsOf(absl::MakeConstSpan(s).subspan(0, axis));
  const int64_t inner = NumElementsOf(absl::MakeConstSpan(s).subspan(axis + 1));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_LAUNCH(LaunchArgReduce(kMax, ToDT(x->dtype()), x->raw_data(), out.mutable_data<int64_t>(),
                               outer, s[axis], inner, gpu.stream));
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
