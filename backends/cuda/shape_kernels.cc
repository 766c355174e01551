// CUDA kernels: shape family. The checks, attribute parses and output shapes are
// ops/shape_checks.h's (ops/index_ops.h's for gather_elements, scatter_elements and
// cumsum), shared with inference and the CPU kernels. Reshape-like ops
// share the input's buffer (no kernel runs) and the data-movement kernels
// (transpose, broadcast_to, slice, slice_grad, pad, concat, split) are written
// once for every device, both in backends/view_kernels.h; here is their copy
// (CudaMover: one strided-copy launch). sum_to is a reduction; gather and
// scatter_add check their indices on the device and read the verdict back before
// touching any data.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/kernel_util.h"
#include "backends/view_kernels.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/index_ops.h"
#include "ops/shape_checks.h"

namespace kgrad {
namespace cuda {
namespace {

// The copies of the moves:: kernels (backends/view_kernels.h), on the thread's
// stream.
struct CudaMover {
  static absl::Status ViewToDense(KernelContext& ctx, const StridedView& v, const Tensor& src,
                                  const Tensor& dst) {
    KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
    return StridedCopy(DenseWrite(v.dims, v.strides, v.offset), src, dst, gpu.stream);
  }
  static absl::Status DenseToView(KernelContext& ctx, const Tensor& src, const StridedView& v,
                                  const Tensor& dst) {
    KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
    return StridedCopy(DenseRead(v.dims, v.strides, v.offset), src, dst, gpu.stream);
  }
  static absl::Status Fill(KernelContext& ctx, const Tensor& t, double value) {
    return FillTensor(ctx, t, value);
  }
};

// ----- sum_to ----------------------------------------------------------------------------------
// sum_to and sum_to_like: x summed to the target from `kShapeFn`.
template <auto kShapeFn>
absl::StatusOr<Value> SumTo(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(Shape target, OutputShape(ctx, kShapeFn));
  const Tensor& x = ctx.input(0).tensor();
  const std::vector<bool> summed = ops::SummedDims(x.shape(), target);
  if (std::find(summed.begin(), summed.end(), true) == summed.end()) {
    return views::ShareAs(ctx, target);  // nothing to sum: only size-1 dims differ
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x.dtype(), target));
  KGRAD_RETURN_IF_ERROR(
      RunReduce(ctx, ReduceOp::kSum, MakeReduceGeom(x.shape(), summed), x, out));
  return Value(std::move(out));
}

// ----- gather, scatter_add, one_hot, cast, fill -----------------------------------------------
// OK when every index is in [0, dim) of `data` at `axis` (gather, scatter_add),
// or with `wrapping` in [-dim, dim) (gather_elements, scatter_elements), checked
// on the device; else the CPU kernels' error for the op.
absl::Status CheckIndices(const KernelContext& ctx, const Gpu& gpu, const Tensor& indices,
                          int axis, ops::TensorType data, bool wrapping = false) {
  if (indices.NumElements() == 0) return absl::OkStatus();
  const int64_t dim = data.shape[axis];
  int64_t value = 0;
  KGRAD_ASSIGN_OR_RETURN(int64_t pos,
                         FirstBadIndex(ctx, gpu, indices, wrapping ? -dim : 0, dim, &value));
  if (pos < 0) return absl::OkStatus();
  return wrapping ? ops::ElementIndexOutOfRange(value, pos, axis, data)
                  : ops::IndexOutOfRange(value, pos, axis, data);
}

// An indexing kernel's operand (input 0) and indices (input 1), the indices
// checked (CheckIndices against the operand's type `data`), and the thread's GPU.
struct Indexed {
  const Tensor* data;
  const Tensor* indices;
  Gpu gpu;
};
absl::StatusOr<Indexed> CheckedIndices(const KernelContext& ctx, int axis, ops::TensorType data,
                                       bool wrapping = false) {
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  Indexed x{&ctx.input(0).tensor(), &ctx.input(1).tensor(), gpu};
  KGRAD_RETURN_IF_ERROR(CheckIndices(ctx, gpu, *x.indices, axis, std::move(data), wrapping));
  return x;
}

// `out` of a scatter starts as a copy of its operand (nothing to copy when it
// reuses the operand's buffer).
absl::Status CopyOperand(const Indexed& x, const Tensor& out) {
  if (out.raw_data() != x.data->raw_data() && x.data->nbytes() > 0) {
    KGRAD_CUDA_CALL(cudaMemcpyAsync(out.raw_data(), x.data->raw_data(), x.data->nbytes(),
                                    cudaMemcpyDeviceToDevice, x.gpu.stream));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> Gather(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<ops::TensorType> in, InputTypes<ops::TensorType>(ctx, 2));
  KGRAD_ASSIGN_OR_RETURN(ops::AxisShape s, ops::GatherShape(ctx.prim(), in[0], in[1]));
  KGRAD_ASSIGN_OR_RETURN(Indexed x, CheckedIndices(ctx, s.axis, in[0]));
  const Tensor& params = *x.data;
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(params.dtype(), s.out));
  const ops::AxisSplit v = ops::SplitAtAxis(params.shape(), s.axis);
  KGRAD_LAUNCH(LaunchGather(static_cast<int>(DTypeSize(params.dtype())), params.raw_data(),
                            ToDT(x.indices->dtype()), x.indices->raw_data(), out.raw_data(),
                            v.outer, v.len, v.inner, x.indices->NumElements(), x.gpu.stream));
  return Value(std::move(out));
}

absl::StatusOr<Value> ScatterAdd(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<ops::TensorType> in, InputTypes<ops::TensorType>(ctx, 3));
  KGRAD_ASSIGN_OR_RETURN(ops::AxisShape s, ops::ScatterAddShape(ctx.prim(), in[0], in[1], in[2]));
  KGRAD_ASSIGN_OR_RETURN(Indexed x, CheckedIndices(ctx, s.axis, in[0]));
  const Tensor& input = *x.data;
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOrReuse({0}, input.dtype(), input.shape()));
  KGRAD_RETURN_IF_ERROR(CopyOperand(x, out));
  const ops::AxisSplit v = ops::SplitAtAxis(input.shape(), s.axis);
  const void* updates = ctx.input(2).tensor().raw_data();
  KGRAD_LAUNCH(LaunchScatterAdd(ToDT(input.dtype()), out.raw_data(), updates,
                                ToDT(x.indices->dtype()), x.indices->raw_data(), v.outer, v.len,
                                v.inner, x.indices->NumElements(), x.gpu.stream));
  return Value(std::move(out));
}

// ----- gather_elements, scatter_elements, cumsum ---------------------------------------------
static_assert(static_cast<int>(ScatterOp::kMin) == static_cast<int>(ops::ScatterReduction::kMin) &&
                  static_cast<int>(ScatterOp::kAdd) == static_cast<int>(ops::ScatterReduction::kAdd),
              "ScatterOp is numbered like ops::ScatterReduction");

absl::StatusOr<Value> GatherElements(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<ops::TensorType> in, InputTypes<ops::TensorType>(ctx, 2));
  KGRAD_ASSIGN_OR_RETURN(ops::AxisShape s, ops::GatherElementsShape(ctx.prim(), in[0], in[1]));
  KGRAD_ASSIGN_OR_RETURN(Indexed x, CheckedIndices(ctx, s.axis, in[0], /*wrapping=*/true));
  const Tensor& data = *x.data;
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(data.dtype(), s.out));
  KGRAD_LAUNCH(LaunchGatherElements(static_cast<int>(DTypeSize(data.dtype())), data.raw_data(),
                                    ToDT(x.indices->dtype()), x.indices->raw_data(),
                                    out.raw_data(),
                                    MakeElementsGeom(x.indices->shape(), data.shape(), s.axis),
                                    x.gpu.stream));
  return Value(std::move(out));
}

absl::StatusOr<Value> ScatterElements(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<ops::TensorType> in, InputTypes<ops::TensorType>(ctx, 3));
  KGRAD_ASSIGN_OR_RETURN(ops::ScatterElementsSpec s,
                         ops::ParseScatterElements(ctx.prim(), in[0], in[1], in[2]));
  KGRAD_ASSIGN_OR_RETURN(Indexed x, CheckedIndices(ctx, s.axis, in[0], /*wrapping=*/true));
  const Tensor& data = *x.data;
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOrReuse({0}, data.dtype(), data.shape()));
  KGRAD_RETURN_IF_ERROR(CopyOperand(x, out));
  KGRAD_LAUNCH(LaunchScatterElements(ToDT(data.dtype()), static_cast<ScatterOp>(s.reduction),
                                     out.raw_data(), ctx.input(2).tensor().raw_data(),
                                     ToDT(x.indices->dtype()), x.indices->raw_data(),
                                     MakeElementsGeom(x.indices->shape(), data.shape(), s.axis),
                                     x.gpu.stream));
  return Value(std::move(out));
}

absl::StatusOr<Value> CumSum(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(ops::CumSumSpec s, ops::ParseCumSum(ctx.prim(), *x));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.Allocate(x->dtype(), s.out));
  const ops::AxisSplit v = ops::SplitAtAxis(x->shape(), s.axis);
  KGRAD_LAUNCH(LaunchCumSum(ToDT(x->dtype()), x->raw_data(), y.raw_data(), v.outer, v.len,
                            v.inner, s.exclusive, s.reverse, gpu.stream));
  return Value(std::move(y));
}

absl::StatusOr<Value> OneHot(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* indices, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(ops::AxisShape s, ops::OneHotShape(ctx.prim(), *indices));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(ctx.prim().GetDType("dtype"), s.out));
  const ops::AxisSplit v = ops::SplitAtAxis(s.out, s.axis);  // the new axis in the middle
  KGRAD_LAUNCH(LaunchOneHot(ToDT(out.dtype()), ToDT(indices->dtype()), indices->raw_data(),
                            out.raw_data(), v.outer, v.len, v.inner,
                            ctx.prim().GetFloat("on_value"), ctx.prim().GetFloat("off_value"),
                            gpu.stream));
  return Value(std::move(out));
}

absl::StatusOr<Value> Cast(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  const DType to = ctx.prim().GetDType("dtype");
  if (to == x->dtype()) return std::move(ctx.mutable_input(0));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(to, x->shape()));
  KGRAD_LAUNCH(LaunchCast(ToDT(x->dtype()), ToDT(to), x->raw_data(), out.raw_data(),
                          x->NumElements(), gpu.stream));
  return Value(std::move(out));
}

absl::StatusOr<Value> Fill(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(Shape shape, ops::ShapeAttr(ctx.prim(), "shape"));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(ctx.prim().GetDType("dtype"), shape));
  KGRAD_RETURN_IF_ERROR(FillTensor(ctx, out, ctx.prim().GetFloat("value")));
  return Value(std::move(out));
}

}  // namespace

void RegisterShapeKernels(KernelTable* t) {
  t->Set(PrimId::kReshape, OnDevice<views::View<ops::ReshapeShape>>);
  t->Set(PrimId::kReshapeLike, OnDevice<views::View<ops::ReshapeLikeShape>>);
  t->Set(PrimId::kTranspose, OnDevice<moves::Transpose<CudaMover, ops::TransposePerm>>);
  t->Set(PrimId::kBroadcastTo, OnDevice<moves::BroadcastTo<CudaMover, ops::BroadcastToShape>>);
  t->Set(PrimId::kBroadcastToLike,
         OnDevice<moves::BroadcastTo<CudaMover, ops::BroadcastToLikeShape>>);
  t->Set(PrimId::kSumTo, OnDevice<SumTo<ops::SumToShape>>);
  t->Set(PrimId::kSumToLike, OnDevice<SumTo<ops::SumToLikeShape>>);
  t->Set(PrimId::kExpandDims, OnDevice<views::View<ops::ExpandDimsShape>>);
  t->Set(PrimId::kSqueeze, OnDevice<views::View<ops::SqueezeShape>>);
  t->Set(PrimId::kConcat, OnDevice<moves::Concat<CudaMover, ops::TensorType, ops::ConcatShape>>);
  t->Set(PrimId::kSplit, OnDevice<moves::Split<CudaMover, ops::SplitShape>>);
  t->Set(PrimId::kSlice, OnDevice<moves::Slice<CudaMover, ops::ParseSlice>>);
  t->Set(PrimId::kSliceGrad, OnDevice<moves::SliceGrad<CudaMover, ops::ParseSliceGrad>>);
  t->Set(PrimId::kGather, OnDevice<Gather>);
  t->Set(PrimId::kScatterAdd, OnDevice<ScatterAdd>);
  t->Set(PrimId::kPad, OnDevice<moves::Pad<CudaMover, ops::ParsePad>>);
  t->Set(PrimId::kOneHot, OnDevice<OneHot>);
  t->Set(PrimId::kGatherElements, OnDevice<GatherElements>);
  t->Set(PrimId::kScatterElements, OnDevice<ScatterElements>);
  t->Set(PrimId::kCumSum, OnDevice<CumSum>);
  t->Set(PrimId::kCast, OnDevice<Cast>);
  t->Set(PrimId::kFill, OnDevice<Fill>);
}

}  // namespace cuda
}  // namespace kgrad
