// CPU kernels: selection by value of the shape family (topk, nonzero;
// ops/selection_ops.cc). The checks and shapes are ops/selection_ops.h's; what is
// left here is the data-dependent part: k's value against the axis (TopKShape
// again, with the number), the order of the selected elements and nonzero's count.
// On CUDA both run through the CPU fallback (backends/cuda/README.md).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

// ----- unique --------------------------------------------------------------------------------
// Three-way order of a and b: NumPy's sort order (NaN last), NaNs equal.
template <typename T>
int Compare(T a, T b) {
  if (Greater(a, b)) return 1;
  if (Greater(b, a)) return -1;
  return 0;
}

// x as [outer, len, inner]: item j is the slice x[:, j, :], compared
// lexicographically in row-major order.
template <typename T>
struct Items {
  const T* x;
  int64_t outer, len, inner;
  int Compare(int64_t a, int64_t b) const {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int c = cpu::Compare(x[(o * len + a) * inner + i], x[(o * len + b) * inner + i]);
        if (c != 0) return c;
      }
    }
    return 0;
  }
};

// The groups of equal items: `first` the first occurrence of each group, in the
// output's order (ascending when sorted, else by first occurrence); `group[j]`
// the output position of item j.
template <typename T>
void GroupItems(const Items<T>& items, bool sorted, std::vector<int64_t>* first, std::vector<int64_t>* group) {
  std::vector<int64_t> order(items.len);
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return items.Compare(a, b) < 0; });
  group->assign(items.len, 0);
  std::vector<int64_t> sorted_first;  // per group in sorted order: its first (smallest) item
  for (size_t r = 0; r < order.size(); ++r) {
    if (r == 0 || items.Compare(order[r - 1], order[r]) != 0) sorted_first.push_back(order[r]);
    (*group)[order[r]] = static_cast<int64_t>(sorted_first.size()) - 1;
  }
  std::vector<int64_t> rank(sorted_first.size());  // output position of each sorted group
  std::iota(rank.begin(), rank.end(), int64_t{0});
  if (!sorted) {
    std::vector<int64_t> by_first(sorted_first.size());
    std::iota(by_first.begin(), by_first.end(), int64_t{0});
    std::sort(by_first.begin(), by_first.end(),
              [&](int64_t a, int64_t b) { return sorted_first[a] < sorted_first[b]; });
    for (size_t k = 0; k < by_first.size(); ++k) rank[by_first[k]] = static_cast<int64_t>(k);
  }
  first->assign(sorted_first.size(), 0);
  for (size_t g = 0; g < sorted_first.size(); ++g) (*first)[rank[g]] = sorted_first[g];
  for (int64_t& g : *group) g = rank[g];
}

// The groups of x's items, compared as one of three key types that hold every
// value of its dtype exactly and in order (floats as double, u64 as uint64, the
// other integers and bool as int64): three instantiations of the sorts rather
// than one per dtype (the kernel's compile time, sanitizer builds included).
template <typename K>
void GroupAs(const Tensor& x, const ops::UniqueSpec& s, bool sorted, std::vector<int64_t>* first,
             std::vector<int64_t>* group) {
  std::vector<K> keys(x.NumElements());
  DispatchDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_arithmetic_v<T>) {
      const T* v = x.data<T>();
      for (size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<K>(v[i]);
    }
  });
  GroupItems(Items<K>{keys.data(), s.outer, s.len, s.inner}, sorted, first, group);
}

// unique(x){axis, sorted} -> (y, indices, inverse, counts).
absl::StatusOr<Value> Unique(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(ops::UniqueSpec s, ops::UniqueShape(ctx.prim(), *x, 0));
  std::vector<int64_t> first, group;
  const bool sorted = ctx.prim().GetBool("sorted");
  switch (x->dtype()) {
    case DType::kFloat32:
    case DType::kFloat64:
      GroupAs<double>(*x, s, sorted, &first, &group);
      break;
    case DType::kUInt64:
      GroupAs<uint64_t>(*x, s, sorted, &first, &group);
      break;
    case DType::kFloat16:
    case DType::kBFloat16:
      return absl::InvalidArgumentError(absl::StrCat("unique: ", x->TypeString(), " is not supported"));
    default:
      GroupAs<int64_t>(*x, s, sorted, &first, &group);
  }
  const int64_t count = static_cast<int64_t>(first.size());
  KGRAD_ASSIGN_OR_RETURN(s, ops::UniqueShape(ctx.prim(), *x, count));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.Allocate(x->dtype(), s.y));
  KGRAD_ASSIGN_OR_RETURN(Tensor indices, ctx.Allocate(DType::kInt64, {count}));
  KGRAD_ASSIGN_OR_RETURN(Tensor inverse, ctx.Allocate(DType::kInt64, {s.len}));
  KGRAD_ASSIGN_OR_RETURN(Tensor counts, ctx.Allocate(DType::kInt64, {count}));
  const int64_t bytes = DTypeSize(x->dtype()) * s.inner;
  const char* src = static_cast<const char*>(x->raw_data());
  char* dst = static_cast<char*>(y.raw_data());
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t k = 0; k < count; ++k) {
      std::memcpy(dst + (o * count + k) * bytes, src + (o * s.len + first[k]) * bytes, bytes);
    }
  }
  std::copy(first.begin(), first.end(), indices.mutable_data<int64_t>());
  std::copy(group.begin(), group.end(), inverse.mutable_data<int64_t>());
  int64_t* c = counts.mutable_data<int64_t>();
  std::fill(c, c + count, int64_t{0});
  for (int64_t g : group) ++c[g];
  return Value::Tuple({Value(std::move(y)), Value(std::move(indices)), Value(std::move(inverse)),
                       Value(std::move(counts))});
}

}  // namespace

void RegisterSelectionKernels(KernelTable* table) {
  table->Set(PrimId::kUnique, Unique);
  table->Set(PrimId::kTopK, TopK);
  table->Set(PrimId::kNonZero, NonZero);
}

}  // namespace cpu
}  // namespace kgrad
