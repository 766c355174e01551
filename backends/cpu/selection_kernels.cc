// CPU kernels: selection by value of the shape family (topk, nonzero;
// ops/selection_ops.cc). The checks and shapes are ops/selection_ops.h's; what is
// left here is the data-dependent part: k's value against the axis (TopKShape
// again, with the number), the order of the selected elements and nonzero's count.
// On CUDA both run through the CPU fallback (backends/cuda/README.md).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/selection_ops.h"

namespace kgrad {
namespace cpu {
namespace {

// a > b in NumPy's sort order, where a NaN is larger than every number (and
// NaNs are equal among themselves).
template <typename T>
bool Greater(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a > b;
}

// One line of topk: the positions 0..len-1 of `line` (element j at line[j *
// stride]) ordered best first (largest or smallest), equal values by ascending
// position (a total order, so the first k are unique); the first k written to
// `values` and `indices` at the same stride.
template <typename T>
void TopKLine(const T* line, int64_t len, int64_t stride, int64_t k, bool largest, T* values,
              int64_t* indices, std::vector<int64_t>& order) {
  order.resize(len);
  std::iota(order.begin(), order.end(), int64_t{0});
  auto before = [&](int64_t i, int64_t j) {
    const T a = line[i * stride], b = line[j * stride];
    if (largest ? Greater(a, b) : Greater(b, a)) return true;
    if (largest ? Greater(b, a) : Greater(a, b)) return false;
    return i < j;
  };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
  for (int64_t r = 0; r < k; ++r) {
    values[r * stride] = line[order[r] * stride];
    indices[r * stride] = order[r];
  }
}

absl::StatusOr<Value> TopK(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(int64_t k, ScalarOperand(ctx, 1, "k"));
  KGRAD_ASSIGN_OR_RETURN(ops::TopKSpec s, ops::TopKShape(ctx.prim(), *x, k));
  KGRAD_ASSIGN_OR_RETURN(Tensor values, ctx.Allocate(x->dtype(), s.out));
  KGRAD_ASSIGN_OR_RETURN(Tensor indices, ctx.Allocate(DType::kInt64, s.out));
  const ops::AxisSplit v = ops::SplitAtAxis(x->shape(), s.axis);
  const int64_t lines = v.outer * v.inner;
  if (s.k > 0 && lines > 0) {
    DispatchDType(x->dtype(), [&](auto zero) {
      using T = decltype(zero);
      if constexpr (kIsNumericComputeType<T>) {  // TopKShape allows these only
        const T* px = x->data<T>();
        T* pv = values.mutable_data<T>();
        int64_t* pi = indices.mutable_data<int64_t>();
        const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, v.len));
        ParallelFor(lines, grain, [&](int64_t b, int64_t e) {
          std::vector<int64_t> order;
          for (int64_t l = b; l < e; ++l) {
            const int64_t o = l / v.inner, in = l % v.inner;
            TopKLine(px + o * v.len * v.inner + in, v.len, v.inner, s.k, s.largest,
                     pv + o * s.k * v.inner + in, pi + o * s.k * v.inner + in, order);
          }
        });
      }
    });
  }
  return Value::Tuple({Value(std::move(values)), Value(std::move(indices))});
}

// The coordinates of x's nonzero elements, row-major: one pass to count, one to
// write coordinate d of the j-th hit at out[d, j], an odometer keeping the
// coordinates of element i.
absl::StatusOr<Value> NonZero(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  const int64_t n = x->NumElements();
  std::vector<bool> hit(n);
  int64_t count = 0;
  DispatchDType(x->dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = x->data<T>();
    for (int64_t i = 0; i < n; ++i) count += (hit[i] = px[i] != T(0)) ? 1 : 0;
  });
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(DType::kInt64, ops::NonZeroShape(*x, count)));
  const Shape& shape = x->shape();
  const int rank = static_cast<int>(shape.size());
  int64_t* po = out.mutable_data<int64_t>();
  Shape coord(rank, 0);
  for (int64_t i = 0, j = 0; i < n; ++i) {
    if (hit[i]) {
      for (int d = 0; d < rank; ++d) po[d * count + j] = coord[d];
      ++j;
    }
    for (int d = rank - 1; d >= 0 && ++coord[d] == shape[d]; --d) coord[d] = 0;
  }
  return Value(std::move(out));
}

}  // namespace

void RegisterSelectionKernels(KernelTable* table) {
  table->Set(PrimId::kTopK, TopK);
  table->Set(PrimId::kNonZero, NonZero);
}

}  // namespace cpu
}  // namespace kgrad
