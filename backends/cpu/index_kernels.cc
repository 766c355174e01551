// CPU kernels: element-wise indexing and scans of the shape family
// (gather_elements, scatter_elements, cumsum; ops/index_ops.cc). The checks and
// shapes are ops/index_ops.h's; what is left here is data-dependent: index values
// in range. scatter_elements applies its updates in the indices' row-major order,
// one at a time, so that repeated indices combine in a defined order (the last
// write wins for reduction none).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/index_ops.h"

namespace kgrad {
namespace cpu {
namespace {

int64_t IndexAt(const Tensor& indices, int64_t i) {
  return indices.dtype() == DType::kInt32 ? indices.data<int32_t>()[i] : indices.data<int64_t>()[i];
}

// For each position of `indices` (row-major), the offset in `data` of the
// element it names: its own coordinates with the (normalised) index value in
// place of the one along `axis`. An odometer walks the coordinates; `base` is
// the offset of the current coordinates with the axis coordinate taken as 0.
absl::StatusOr<std::vector<int64_t>> ElementOffsets(const Tensor& indices, ops::TensorType data,
                                                    int axis) {
  const Shape& ishape = indices.shape();
  const int rank = static_cast<int>(ishape.size());
  const Shape strides = RowMajorStrides(data.shape);
  const int64_t dim = data.shape[axis];
  const int64_t n = indices.NumElements();
  std::vector<int64_t> offsets(n);
  Shape coord(rank, 0);
  int64_t base = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = IndexAt(indices, i);
    if (k < -dim || k >= dim) return ops::ElementIndexOutOfRange(k, i, axis, data);
    offsets[i] = base + (k < 0 ? k + dim : k) * strides[axis];
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t step = d == axis ? 0 : strides[d];
      if (++coord[d] < ishape[d]) {
        base += step;
        break;
      }
      base -= (ishape[d] - 1) * step;
      coord[d] = 0;
    }
  }
  return offsets;
}

absl::StatusOr<Value> GatherElements(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(auto in, ctx.TensorsAt<2>());
  const Tensor& data = *in[0];
  KGRAD_ASSIGN_OR_RETURN(ops::AxisShape s, ops::GatherElementsShape(ctx.prim(), data, *in[1]));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, ElementOffsets(*in[1], data, s.axis));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(data.dtype(), s.out));
  DispatchDType(data.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* src = data.data<T>();
    T* dst = out.mutable_data<T>();
    for (size_t i = 0; i < offsets.size(); ++i) dst[i] = src[offsets[i]];
  });
  return Value(std::move(out));
}

// out = combine(out, update) for one reduction; `a != a` is NaN, which wins max
// and min as in the maximum and minimum kernels.
template <typename T>
T Combine(ops::ScatterReduction r, T out, T update) {
  switch (r) {
    case ops::ScatterReduction::kNone:
      return update;
    case ops::ScatterReduction::kAdd:
      return WrapAdd(out, update);
    case ops::ScatterReduction::kMul:
      return WrapMul(out, update);
    case ops::ScatterReduction::kMax:
      return (update > out || update != update) ? update : out;
    case ops::ScatterReduction::kMin:
      return (update < out || update != update) ? update : out;
  }
  return update;
}

absl::StatusOr<Value> ScatterElements(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(auto in, ctx.TensorsAt<3>());
  const Tensor& data = *in[0];
  KGRAD_ASSIGN_OR_RETURN(ops::ScatterElementsSpec s,
                         ops::ParseScatterElements(ctx.prim(), data, *in[1], *in[2]));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, ElementOffsets(*in[1], data, s.axis));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOrReuse({0}, data.dtype(), data.shape()));
  if (out.raw_data() != data.raw_data()) {
    std::memcpy(out.raw_data(), data.raw_data(), data.nbytes());
  }
  const Tensor& updates = *in[2];
  DispatchDType(data.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* u = updates.data<T>();
    T* dst = out.mutable_data<T>();
    if constexpr (!kIsNumericComputeType<T>) {  // reduction none (the parse's check)
      for (size_t i = 0; i < offsets.size(); ++i) dst[offsets[i]] = u[i];
    } else {
      for (size_t i = 0; i < offsets.size(); ++i) {
        dst[offsets[i]] = Combine(s.reduction, dst[offsets[i]], u[i]);
      }
    }
  });
  return Value(std::move(out));
}

// One [len, inner] block of cumsum: each of the inner columns summed along len,
// forwards or backwards, each output before (exclusive) or after adding its own
// element.
template <typename T>
void CumSumBlock(const T* x, T* y, int64_t len, int64_t inner, bool exclusive, bool reverse) {
  std::vector<T> acc(inner, T(0));
  for (int64_t step = 0; step < len; ++step) {
    const int64_t j = reverse ? len - 1 - step : step;
    const T* xr = x + j * inner;
    T* yr = y + j * inner;
    for (int64_t k = 0; k < inner; ++k) {
      const T sum = WrapAdd(acc[k], xr[k]);
      yr[k] = exclusive ? acc[k] : sum;
      acc[k] = sum;
    }
  }
}

absl::StatusOr<Value> CumSum(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(ops::CumSumSpec s, ops::ParseCumSum(ctx.prim(), *x));
  return CumSumOf(ctx, x, s);
}

}  // namespace

absl::StatusOr<Value> CumSumOf(KernelContext& ctx, const Tensor* x, const ops::CumSumSpec& s) {
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.Allocate(x->dtype(), s.out));
  if (y.NumElements() == 0) return Value(std::move(y));
  const ops::AxisSplit v = ops::SplitAtAxis(x->shape(), s.axis);
  DispatchDType(x->dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (kIsNumericComputeType<T>) {  // numeric only (the parse's check)
      const T* px = x->data<T>();
      T* py = y.mutable_data<T>();
      const int64_t block = v.len * v.inner;
      ParallelFor(v.outer, std::max<int64_t>(1, kParallelGrain / block), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          CumSumBlock(px + o * block, py + o * block, v.len, v.inner, s.exclusive, s.reverse);
        }
      });
    }
  });
  return Value(std::move(y));
}

void RegisterIndexKernels(KernelTable* table) {
  table->Set(PrimId::kGatherElements, GatherElements);
  table->Set(PrimId::kScatterElements, ScatterElements);
  table->Set(PrimId::kCumSum, CumSum);
}

}  // namespace cpu
}  // namespace kgrad
