// CPU kernels: the run-time counts and axes of the shape family (dynamic_cumsum,
// dynamic_one_hot, dynamic_split, dynamic_tile, dynamic_tile_grad;
// ops/dynamic_index_ops.cc). Each reads its integer operand on the host, passes it
// to the formula inference uses (ops/dynamic_index_ops.h), which validates it, and
// then runs the static op's loop (CumSumOf, OneHotOf, moves::SplitInto) or, for
// tile, a strided view of x (stride 0 across the repeats). On CUDA these kernels
// run through the CPU fallback (backends/cuda/README.md).
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/view_kernels.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/dynamic_index_ops.h"
#include "ops/index_ops.h"
#include "ops/shape_checks.h"

namespace kgrad {
namespace cpu {
namespace {

// The elements of an i32 or i64 tensor (checked by the caller), as int64.
std::vector<int64_t> Ints(const Tensor& t) {
  std::vector<int64_t> out(t.NumElements());
  for (int64_t k = 0; k < t.NumElements(); ++k) {
    out[k] = t.dtype() == DType::kInt32 ? t.data<int32_t>()[k] : t.data<int64_t>()[k];
  }
  return out;
}

// Input i (called `what`) as a rank-1 operand's elements.
absl::StatusOr<std::vector<int64_t>> ReadVector(const KernelContext& ctx, int i, const char* what) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.TensorAt(i));
  KGRAD_RETURN_IF_ERROR(ops::CheckShapeOperand(ctx.prim(), i, what, *t));
  return Ints(*t);
}

absl::StatusOr<Value> DynamicCumSum(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, ScalarOperand(ctx, 1, "axis"));
  KGRAD_ASSIGN_OR_RETURN(ops::CumSumSpec s, ops::DynamicCumSumSpec(ctx.prim(), *x, axis));
  return CumSumOf(ctx, x, s);
}

absl::StatusOr<Value> DynamicOneHot(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* indices, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(int64_t depth, ScalarOperand(ctx, 1, "depth"));
  KGRAD_ASSIGN_OR_RETURN(ops::AxisShape s, ops::DynamicOneHotShape(ctx.prim(), *indices, depth));
  return OneHotOf(ctx, indices, s);
}

absl::StatusOr<Value> DynamicSplit(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ReadVector(ctx, 1, "sizes"));
  KGRAD_ASSIGN_OR_RETURN(ops::SplitShapes s, ops::DynamicSplitShape(ctx.prim(), *x, sizes));
  return moves::SplitInto<CpuMover>(ctx, *x, s);
}

// ----- dynamic_tile, dynamic_tile_grad --------------------------------------------------
// The tile as a view of x: dims [r_0, d_0, r_1, d_1, ...], stride 0 across the
// repeats; read densely it is the output in row-major order.
StridedView TileView(const Shape& x, absl::Span<const int64_t> repeats) {
  const Shape strides = RowMajorStrides(x);
  StridedView v;
  for (size_t i = 0; i < x.size(); ++i) {
    v.dims.insert(v.dims.end(), {repeats[i], x[i]});
    v.strides.insert(v.strides.end(), {0, strides[i]});
  }
  return v;
}

absl::StatusOr<Value> DynamicTile(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ReadVector(ctx, 1, "repeats"));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, ops::DynamicTileShape(ctx.prim(), *x, repeats));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x->dtype(), shape));
  if (out.NumElements() > 0) {
    KGRAD_RETURN_IF_ERROR(CpuMover::ViewToDense(ctx, TileView(x->shape(), repeats), *x, out));
  }
  return Value(std::move(out));
}

// x += each tile of dy: dy walked in row-major order by an odometer that keeps,
// per dim, the coordinate in dy and in the tile (the coordinate mod x's dim),
// and the offset in x of the tile coordinates.
template <typename T>
void SumTiles(const T* dy, const Shape& dy_shape, T* x, const Shape& x_shape) {
  const int rank = static_cast<int>(x_shape.size());
  const Shape strides = RowMajorStrides(x_shape);
  Shape coord(rank, 0), inner(rank, 0);
  int64_t offset = 0;
  const int64_t n = NumElementsOf(dy_shape);
  for (int64_t i = 0; i < n; ++i) {
    x[offset] = WrapAdd(x[offset], dy[i]);
    for (int d = rank - 1; d >= 0; --d) {
      if (++coord[d] < dy_shape[d]) {
        if (++inner[d] == x_shape[d]) {
          offset -= (x_shape[d] - 1) * strides[d];
          inner[d] = 0;
        } else {
          offset += strides[d];
        }
        break;
      }
      offset -= inner[d] * strides[d];
      coord[d] = inner[d] = 0;
    }
  }
}

absl::StatusOr<Value> DynamicTileGrad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(auto io, ctx.TensorsAt<2>());
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ReadVector(ctx, 2, "repeats"));
  KGRAD_ASSIGN_OR_RETURN(Shape shape,
                         ops::DynamicTileGradShape(ctx.prim(), *io[0], *io[1], repeats));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(io[1]->dtype(), shape));
  KGRAD_RETURN_IF_ERROR(CpuMover::Fill(ctx, out, 0.0));
  if (io[0]->NumElements() == 0) return Value(std::move(out));
  DispatchDType(out.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (kIsNumericComputeType<T>) {  // numeric only (the shape function's check)
      SumTiles(io[0]->data<T>(), io[0]->shape(), out.mutable_data<T>(), shape);
    }
  });
  return Value(std::move(out));
}

}  // namespace

absl::StatusOr<int64_t> ScalarOperand(const KernelContext& ctx, int i, const char* what) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.TensorAt(i));
  KGRAD_RETURN_IF_ERROR(ops::CheckScalarOperand(ctx.prim(), i, what, *t));
  return Ints(*t)[0];
}

void RegisterDynamicIndexKernels(KernelTable* table) {
  table->Set(PrimId::kDynamicCumSum, DynamicCumSum);
  table->Set(PrimId::kDynamicOneHot, DynamicOneHot);
  table->Set(PrimId::kDynamicSplit, DynamicSplit);
  table->Set(PrimId::kDynamicTile, DynamicTile);
  table->Set(PrimId::kDynamicTileGrad, DynamicTileGrad);
}

}  // namespace cpu
}  // namespace kgrad
