// CPU kernels: reduce family. Input dims are merged into alternating groups of
// kept and reduced dims; three loops then cover every case:
//   * everything reduced: one contiguous run, cut into a fixed number of chunks
//     whose partial results are merged in order (deterministic for any thread count);
//   * innermost group reduced: per output, contiguous runs reduced with Eigen;
//   * innermost group kept: per block of outputs, whole input rows folded into a
//     row of accumulators (vectorised over the kept dim).
// Integer sums and products wrap (two's complement). Empty reductions: see
// ops/reduce.cc (sum 0, prod 1, mean NaN, logsumexp -inf, max/min/arg* errors).
// The checks, axes and output shapes are ops/reduce.h's (ParseReduceAxes).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/double_sums.h"
#include "backends/cpu/eigen.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/simd.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/reduce.h"

namespace kgrad {
namespace cpu {
namespace {

template <typename T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

// Accumulator rows are cut to this many columns: long enough to vectorise,
// short enough to stay in L1 while every reduced row streams past.
constexpr int64_t kRowPiece = 1024;
// A full reduction is cut into at most this many chunks.
constexpr int64_t kMaxChunks = 64;

// ----- Reducers -----------------------------------------------------------------
// Acc, the type partial results are kept in; Identity(); Merge(a, b) of two
// partial results; Run(x, n, o, acc): acc folded with the contiguous run x[0, n)
// of output o; Rows(x, n, o, acc): acc[j] folded with x[j] for the n outputs
// o, o + 1, ...

// Sums of floats are accumulated in double (SumAcc, backends/cpu/double_sums.h).
template <typename T>
struct SumReducer {
  using Acc = SumAcc<T>;
  Acc Identity() const { return Acc(0); }
  Acc Merge(Acc a, Acc b) const { return WrapAdd(a, b); }
  Acc Run(const T* x, int64_t n, int64_t, Acc acc) const {
    if constexpr (std::is_floating_point_v<T>) {
      return acc + SumAsDouble(x, n);
    } else {
      for (int64_t i = 0; i < n; ++i) acc = WrapAdd(acc, x[i]);
      return acc;
    }
  }
  void Rows(const T* x, int64_t n, int64_t, Acc* acc) const {
    for (int64_t j = 0; j < n; ++j) acc[j] = WrapAdd(acc[j], static_cast<Acc>(x[j]));
  }
};

template <typename T>
struct ProdReducer {
  using Acc = T;
  T Identity() const { return T(1); }
  T Merge(T a, T b) const { return WrapMul(a, b); }
  T Run(const T* x, int64_t n, int64_t, T acc) const {
    if constexpr (std::is_floating_point_v<T>) {
      return acc * ConstArrayMap<T>(x, n).prod();
    } else {
      for (int64_t i = 0; i < n; ++i) acc = WrapMul(acc, x[i]);
      return acc;
    }
  }
  void Rows(const T* x, int64_t n, int64_t, T* acc) const {
    for (int64_t j = 0; j < n; ++j) acc[j] = WrapMul(acc[j], x[j]);
  }
};

// Max (kMax) or min; a NaN anywhere makes the result NaN, as in NumPy.
template <typename T, bool kMax>
struct ExtremumReducer {
  using Acc = T;
  T Identity() const {
    if constexpr (std::is_floating_point_v<T>) {
      return kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    } else {
      return kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    }
  }
  // `b != b` is NaN: it replaces the accumulator and then nothing replaces it.
  static T Pick(T a, T b) { return ((kMax ? b > a : b < a) || b != b) ? b : a; }
  T Merge(T a, T b) const { return Pick(a, b); }
  T Run(const T* x, int64_t n, int64_t, T acc) const {
    if constexpr (std::is_floating_point_v<T>) {
      ConstArrayMap<T> v(x, n);
      return Pick(acc, kMax ? v.template maxCoeff<Eigen::PropagateNaN>()
                            : v.template minCoeff<Eigen::PropagateNaN>());
    } else {
      for (int64_t i = 0; i < n; ++i) acc = Pick(acc, x[i]);
      return acc;
    }
  }
  void Rows(const T* x, int64_t n, int64_t, T* acc) const {
    for (int64_t j = 0; j < n; ++j) acc[j] = Pick(acc[j], x[j]);
  }
};

// sum exp(x - shift[o]): the second pass of logsumexp.
// (The exponentials in T, their sum in double, as SumReducer.)
template <typename T>
struct SumExpReducer {
  using Acc = SumAcc<T>;
  const T* shift;
  Acc Identity() const { return Acc(0); }
  Acc Merge(Acc a, Acc b) const { return a + b; }
  Acc Run(const T* x, int64_t n, int64_t o, Acc acc) const {
    return acc + Exp(ConstArrayMap<T>(x, n) - shift[o]).template cast<Acc>().sum();
  }
  void Rows(const T* x, int64_t n, int64_t o, Acc* acc) const {
    ArrayMap<Acc>(acc, n) +=
        Exp(ConstArrayMap<T>(x, n) - ConstArrayMap<T>(shift + o, n)).template cast<Acc>();
  }
};

// ----- Plan ------------------------------------------------------------------------
struct ReducePlan {
  int64_t out_count = 1;  // output elements
  int64_t red_count = 1;  // input elements folded into each output
  // Merged groups (size-1 dims dropped), outermost first, with input strides.
  Shape kept_dims, kept_strides;
  Shape red_dims, red_strides;
  bool inner_kept = false;  // the innermost group is kept (stride 1)
};

ReducePlan MakeReducePlan(const Shape& in, const std::vector<bool>& reduced) {
  const ops::ReduceGroups groups = ops::GroupReduceDims(in, reduced);
  ReducePlan p;
  p.out_count = groups.out_count;
  p.red_count = groups.red_count;
  const Shape strides = RowMajorStrides(groups.sizes);
  for (size_t g = 0; g < groups.sizes.size(); ++g) {
    const bool red = groups.reduced[g];
    (red ? p.red_dims : p.kept_dims).push_back(groups.sizes[g]);
    (red ? p.red_strides : p.kept_strides).push_back(strides[g]);
  }
  p.inner_kept = !groups.reduced.empty() && !groups.reduced.back();
  return p;
}

// Calls fn(offset) for every index of `dims` in row-major order.
template <typename Fn>
void ForEachOffset(absl::Span<const int64_t> dims, absl::Span<const int64_t> strides,
                   Fn&& fn) {
  const int rank = static_cast<int>(dims.size());
  Shape idx(rank, 0);
  int64_t off = 0;
  while (true) {
    fn(off);
    int d = rank - 1;
    for (; d >= 0; --d) {
      off += strides[d];
      if (++idx[d] < dims[d]) break;
      off -= strides[d] * dims[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// Input offset of kept index `k` over the first `n` kept groups.
int64_t KeptOffset(const ReducePlan& p, int64_t k, size_t n) {
  int64_t off = 0;
  for (size_t g = n; g-- > 0;) {
    off += (k % p.kept_dims[g]) * p.kept_strides[g];
    k /= p.kept_dims[g];
  }
  return off;
}

// ----- Loops ------------------------------------------------------------------------
// Folds the contiguous x[0, n) into one value.
template <typename T, typename Op>
typename Op::Acc ReduceContiguous(const T* x, int64_t n, int64_t o, const Op& op) {
  using Acc = typename Op::Acc;
  const int64_t chunks = std::clamp<int64_t>(n / kParallelGrain, 1, kMaxChunks);
  if (chunks == 1) return op.Run(x, n, o, op.Identity());
  const int64_t len = (n + chunks - 1) / chunks;
  std::vector<Acc> partial(chunks, op.Identity());
  ParallelFor(chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t b = c * len, e = std::min(n, b + len);
      if (b < e) partial[c] = op.Run(x + b, e - b, o, op.Identity());
    }
  });
  Acc acc = op.Identity();
  for (Acc v : partial) acc = op.Merge(acc, v);
  return acc;
}

// Innermost group reduced: each output folds runs of the innermost reduced group.
template <typename T, typename Op>
void ReduceRuns(const ReducePlan& p, const T* x, T* out, const Op& op) {
  const int64_t run = p.red_dims.back();
  const absl::Span<const int64_t> outer_dims(p.red_dims.data(), p.red_dims.size() - 1);
  const absl::Span<const int64_t> outer_strides(p.red_strides.data(), p.red_strides.size() - 1);
  if (outer_dims.empty() && run >= 2 * kParallelGrain) {
    // Few long runs: parallelise inside each one instead.
    for (int64_t o = 0; o < p.out_count; ++o) {
      out[o] = static_cast<T>(ReduceContiguous(x + KeptOffset(p, o, p.kept_dims.size()), run, o, op));
    }
    return;
  }
  ParallelFor(p.out_count, std::max<int64_t>(1, kParallelGrain / p.red_count),
              [&](int64_t ob, int64_t oe) {
                for (int64_t o = ob; o < oe; ++o) {
                  const T* base = x + KeptOffset(p, o, p.kept_dims.size());
                  typename Op::Acc acc = op.Identity();
                  ForEachOffset(outer_dims, outer_strides,
                                [&](int64_t off) { acc = op.Run(base + off, run, o, acc); });
                  out[o] = static_cast<T>(acc);
                }
              });
}

// Innermost group kept: each task owns a piece of one row of outputs and folds
// the matching piece of every reduced input row into it.
template <typename T, typename Op>
void ReduceRows(const ReducePlan& p, const T* x, T* out, const Op& op) {
  const int64_t k = p.kept_dims.back();
  const int64_t piece = std::min(k, kRowPiece);
  const int64_t pieces = (k + piece - 1) / piece;
  const int64_t tasks = p.out_count / k * pieces;
  ParallelFor(tasks, std::max<int64_t>(1, kParallelGrain / (p.red_count * piece)),
              [&](int64_t tb, int64_t te) {
                std::vector<typename Op::Acc> acc(piece);
                for (int64_t t = tb; t < te; ++t) {
                  const int64_t block = t / pieces, c0 = (t % pieces) * piece;
                  const int64_t n = std::min(k, c0 + piece) - c0;
                  const int64_t o = block * k + c0;
                  const T* base = x + KeptOffset(p, block, p.kept_dims.size() - 1) + c0;
                  std::fill(acc.begin(), acc.begin() + n, op.Identity());
                  ForEachOffset(p.red_dims, p.red_strides,
                                [&](int64_t off) { op.Rows(base + off, n, o, acc.data()); });
                  for (int64_t j = 0; j < n; ++j) out[o + j] = static_cast<T>(acc[j]);
                }
              });
}

template <typename T, typename Op>
void Reduce(const ReducePlan& p, const T* x, T* out, const Op& op) {
  if (p.out_count == 0) return;
  if (p.red_count == 0) {
    std::fill(out, out + p.out_count, static_cast<T>(op.Identity()));
  } else if (p.kept_dims.empty()) {
    out[0] = static_cast<T>(ReduceContiguous(x, p.red_count, 0, op));
  } else if (p.inner_kept) {
    ReduceRows(p, x, out, op);
  } else {
    ReduceRuns(p, x, out, op);
  }
}

// ----- Kernels ------------------------------------------------------------------------
enum class ReduceKind { kSum, kMean, kProd, kMax, kMin, kLogsumexp };

template <typename T>
void LogSumExp(const ReducePlan& p, const T* x, T* out) {
  Reduce(p, x, out, ExtremumReducer<T, true>{});
  // Shift by the max where it is finite: all -inf gives log(0) = -inf, a +inf
  // gives +inf, a NaN gives NaN, never inf - inf.
  std::vector<T> shift(out, out + p.out_count);
  for (T& s : shift) s = std::isfinite(s) ? s : T(0);
  std::vector<T> sum(p.out_count);
  Reduce(p, x, sum.data(), SumExpReducer<T>{shift.data()});
  for (int64_t o = 0; o < p.out_count; ++o) out[o] = shift[o] + std::log(sum[o]);
}

template <ReduceKind kKind>
absl::StatusOr<Value> ReduceKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const ops::ReduceAxes r, ops::ParseReduceAxes(ctx.prim(), *x));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(r.out_dtype, r.out_shape));
  const ReducePlan plan = MakeReducePlan(x->shape(), r.reduced);
  DispatchDType(x->dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (kIsNumericComputeType<T>) {
      const T* px = x->data<T>();
      T* po = out.mutable_data<T>();
      if constexpr (kKind == ReduceKind::kSum) Reduce(plan, px, po, SumReducer<T>{});
      if constexpr (kKind == ReduceKind::kProd) Reduce(plan, px, po, ProdReducer<T>{});
      if constexpr (kKind == ReduceKind::kMax) Reduce(plan, px, po, ExtremumReducer<T, true>{});
      if constexpr (kKind == ReduceKind::kMin) Reduce(plan, px, po, ExtremumReducer<T, false>{});
      if constexpr (std::is_floating_point_v<T> && kKind == ReduceKind::kMean) {
        // An empty mean is 0 / 0 = NaN.
        Reduce(plan, px, po, SumReducer<T>{});
        const T count = static_cast<T>(plan.red_count);
        for (int64_t o = 0; o < plan.out_count; ++o) po[o] /= count;
      }
      if constexpr (std::is_floating_point_v<T> && kKind == ReduceKind::kLogsumexp) {
        LogSumExp(plan, px, po);
      }
    }
  });
  return Value(std::move(out));
}

// ----- argmax / argmin ----------------------------------------------------------------
// True when x replaces `best`: strictly larger (smaller), or the first NaN.
template <bool kMax, typename T>
bool Beats(T x, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (best != best) return false;
    if (x != x) return true;
  }
  return kMax ? x > best : x < best;
}

// Index of the first extremum of a contiguous row (n > 0): the extremum by a
// vectorised Eigen reduction, then a scan for its first occurrence, which is
// faster than one branchy pass that tracks the index.
template <bool kMax, typename T>
int64_t ArgExtremum(const T* row, int64_t n) {
  ConstArrayMap<T> v(row, n);
  T m;
  if constexpr (std::is_floating_point_v<T>) {
    m = kMax ? v.template maxCoeff<Eigen::PropagateNaN>()
             : v.template minCoeff<Eigen::PropagateNaN>();
    if (m != m) {
      for (int64_t i = 0; i < n; ++i) {
        if (row[i] != row[i]) return i;
      }
    }
  } else {
    m = kMax ? v.maxCoeff() : v.minCoeff();
  }
  for (int64_t i = 0; i < n; ++i) {
    if (row[i] == m) return i;
  }
  return 0;  // unreachable: m is an element of the row
}

// x viewed as [outer, n, inner]; out[o, j] = index along n of the first extremum.
template <bool kMax, typename T>
void ArgReduce(const T* x, int64_t outer, int64_t n, int64_t inner, int64_t* out) {
  if (inner == 1) {
    ParallelFor(outer, std::max<int64_t>(1, kParallelGrain / n), [&](int64_t ob, int64_t oe) {
      for (int64_t o = ob; o < oe; ++o) out[o] = ArgExtremum<kMax>(x + o * n, n);
    });
    return;
  }
  const int64_t piece = std::min(inner, kRowPiece);
  const int64_t pieces = (inner + piece - 1) / piece;
  ParallelFor(outer * pieces, std::max<int64_t>(1, kParallelGrain / (n * piece)),
              [&](int64_t tb, int64_t te) {
                std::vector<T> best(piece);
                for (int64_t t = tb; t < te; ++t) {
                  const int64_t o = t / pieces, c0 = (t % pieces) * piece;
                  const int64_t m = std::min(inner, c0 + piece) - c0;
                  const T* base = x + o * n * inner + c0;
                  int64_t* idx = out + o * inner + c0;
                  std::copy(base, base + m, best.begin());
                  std::fill(idx, idx + m, 0);
                  for (int64_t i = 1; i < n; ++i) {
                    const T* row = base + i * inner;
                    for (int64_t j = 0; j < m; ++j) {
                      if (Beats<kMax>(row[j], best[j])) {
                        best[j] = row[j];
                        idx[j] = i;
                      }
                    }
                  }
                }
              });
}

template <bool kMax>
absl::StatusOr<Value> ArgReduceKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const ops::ReduceAxes r, ops::ParseReduceAxes(ctx.prim(), *x));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(r.out_dtype, r.out_shape));
  const ops::AxisSplit g = ops::SplitAtAxis(x->shape(), r.axes[0]);
  if (g.outer * g.inner == 0) return Value(std::move(out));
  DispatchDType(x->dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (kIsNumericComputeType<T>) {
      ArgReduce<kMax>(x->data<T>(), g.outer, g.len, g.inner, out.mutable_data<int64_t>());
    }
  });
  return Value(std::move(out));
}

}  // namespace

void RegisterReduceKernels(KernelTable* t) {
  t->Set(PrimId::kReduceSum, ReduceKernel<ReduceKind::kSum>);
  t->Set(PrimId::kReduceMean, ReduceKernel<ReduceKind::kMean>);
  t->Set(PrimId::kReduceProd, ReduceKernel<ReduceKind::kProd>);
  t->Set(PrimId::kReduceMax, ReduceKernel<ReduceKind::kMax>);
  t->Set(PrimId::kReduceMin, ReduceKernel<ReduceKind::kMin>);
  t->Set(PrimId::kLogsumexp, ReduceKernel<ReduceKind::kLogsumexp>);
  t->Set(PrimId::kArgmax, ArgReduceKernel<true>);
  t->Set(PrimId::kArgmin, ArgReduceKernel<false>);
}

}  // namespace cpu
}  // namespace kgrad
