// CPU kernels: shape family. The checks, attribute parses and output shapes are
// ops/shape_checks.h's, shared with inference and the CUDA kernels (graphs may run
// without inference, so every kernel calls them). Reshape-like ops share the
// input's buffer and the data-movement kernels (transpose, broadcast_to, slice,
// slice_grad, pad, concat, split) are written once for every device, both in
// backends/view_kernels.h; here is their copy (CpuMover: an N-d index walk whose
// rows are memcpy'd when contiguous).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "backends/cpu/convert.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/double_sums.h"
#include "backends/cpu/eigen.h"
#include "backends/cpu/parallel.h"
#include "backends/view_kernels.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/shape_checks.h"

namespace kgrad {
namespace cpu {
namespace {

// Fills `t` with `value` converted to its dtype.
void FillValue(const Tensor& t, double value) {
  DispatchDType(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T v = Convert<T>(value);
    T* p = t.mutable_data<T>();
    ParallelFor(t.NumElements(), kParallelGrain,
                [&](int64_t b, int64_t e) { std::fill(p + b, p + e, v); });
  });
}

// ----- Strided copies --------------------------------------------------------------------
// dst[dst_offset + sum_k i_k * dst_strides[k]] = src[src_offset + sum_k i_k * src_strides[k]]
// for every index i of `dims`; strides in elements (0 broadcasts).
struct CopyPlan {
  Shape dims, src_strides, dst_strides;
  int64_t src_offset = 0, dst_offset = 0;
};

// Drops size-1 dims and merges neighbours that are contiguous in both src and
// dst, so that most copies become a few long rows.
void Simplify(CopyPlan* p) {
  Shape d, s, t;
  for (size_t i = 0; i < p->dims.size(); ++i) {
    int64_t n = p->dims[i];
    if (n == 1) continue;
    if (!d.empty() && s.back() == p->src_strides[i] * n && t.back() == p->dst_strides[i] * n) {
      d.back() *= n;
      s.back() = p->src_strides[i];
      t.back() = p->dst_strides[i];
    } else {
      d.push_back(n);
      s.push_back(p->src_strides[i]);
      t.push_back(p->dst_strides[i]);
    }
  }
  p->dims = std::move(d);
  p->src_strides = std::move(s);
  p->dst_strides = std::move(t);
}

template <typename T>
void CopyRow(const T* s, int64_t ss, T* d, int64_t ds, int64_t n) {
  if (ss == 1 && ds == 1) {
    std::memcpy(d, s, n * sizeof(T));
  } else if (ds == 1 && ss == 0) {
    std::fill(d, d + n, *s);
  } else if (ds == 1) {
    for (int64_t i = 0; i < n; ++i) d[i] = s[i * ss];
  } else {
    for (int64_t i = 0; i < n; ++i) d[i * ds] = s[i * ss];
  }
}

// Rows [b, e) of a simplified plan (rank r >= 1): an odometer over the outer
// dims. Rows go in groups of kTileRows; when the rows read with a stride (a
// transpose), the group is copied in column blocks, so that the cache lines a
// block reads serve every row of the group before they are evicted.
template <typename T>
void CopyRows(const CopyPlan& p, const T* src, T* dst, int64_t b, int64_t e) {
  constexpr int kTileRows = 16;
  constexpr int64_t kTileCols = 64;
  int r = static_cast<int>(p.dims.size());
  Shape idx(r - 1, 0);
  int64_t so = 0, dof = 0;
  int64_t rest = b;
  for (int k = r - 2; k >= 0; --k) {
    idx[k] = rest % p.dims[k];
    rest /= p.dims[k];
    so += idx[k] * p.src_strides[k];
    dof += idx[k] * p.dst_strides[k];
  }
  const int64_t n = p.dims[r - 1], ss = p.src_strides[r - 1], ds = p.dst_strides[r - 1];
  const int64_t block = ss > 1 ? kTileCols : n;
  int64_t src_off[kTileRows], dst_off[kTileRows];
  for (int64_t row = b; row < e; row += kTileRows) {
    int m = static_cast<int>(std::min<int64_t>(kTileRows, e - row));
    for (int t = 0; t < m; ++t) {
      src_off[t] = so;
      dst_off[t] = dof;
      for (int k = r - 2; k >= 0; --k) {
        so += p.src_strides[k];
        dof += p.dst_strides[k];
        if (++idx[k] < p.dims[k]) break;
        so -= p.src_strides[k] * p.dims[k];
        dof -= p.dst_strides[k] * p.dims[k];
        idx[k] = 0;
      }
    }
    for (int64_t c = 0; c < n; c += block) {
      int64_t len = std::min(block, n - c);
      for (int t = 0; t < m; ++t) {
        CopyRow(src + src_off[t] + c * ss, ss, dst + dst_off[t] + c * ds, ds, len);
      }
    }
  }
}

template <typename T>
void RunCopy(CopyPlan p, const T* src, T* dst) {
  if (NumElementsOf(p.dims) == 0) return;
  src += p.src_offset;
  dst += p.dst_offset;
  Simplify(&p);
  if (p.dims.empty()) {
    *dst = *src;
    return;
  }
  int r = static_cast<int>(p.dims.size());
  int64_t n = p.dims[r - 1];
  if (r == 1 && p.src_strides[0] == 1 && p.dst_strides[0] == 1) {
    // One contiguous block: split it so that big copies use every thread.
    ParallelFor(n, kParallelGrain,
                [&](int64_t b, int64_t e) { std::memcpy(dst + b, src + b, (e - b) * sizeof(T)); });
    return;
  }
  int64_t rows = NumElementsOf(absl::MakeConstSpan(p.dims).subspan(0, r - 1));
  ParallelFor(rows, std::max<int64_t>(1, kParallelGrain / n),
              [&](int64_t b, int64_t e) { CopyRows(p, src, dst, b, e); });
}

// Runs `plan` from src's buffer into dst's (same dtype).
void StridedCopy(const CopyPlan& plan, const Tensor& src, const Tensor& dst) {
  DispatchDType(src.dtype(), [&](auto zero) {
    using T = decltype(zero);
    RunCopy<T>(plan, src.data<T>(), dst.mutable_data<T>());
  });
}

// A plan reading view `v` of the source and writing the destination densely.
CopyPlan DenseWrite(const StridedView& v) {
  CopyPlan p;
  p.dims = v.dims;
  p.src_strides = v.strides;
  p.dst_strides = RowMajorStrides(v.dims);
  p.src_offset = v.offset;
  return p;
}

// A plan reading the source densely and writing view `v` of the destination.
CopyPlan DenseRead(const StridedView& v) {
  CopyPlan p;
  p.dims = v.dims;
  p.src_strides = RowMajorStrides(v.dims);
  p.dst_strides = v.strides;
  p.dst_offset = v.offset;
  return p;
}

}  // namespace

// ----- CpuMover (cpu_kernels.h): the copies of the moves:: kernels ---------------------
absl::Status CpuMover::ViewToDense(KernelContext&, const StridedView& v, const Tensor& src,
                                   const Tensor& dst) {
  StridedCopy(DenseWrite(v), src, dst);
  return absl::OkStatus();
}
absl::Status CpuMover::DenseToView(KernelContext&, const Tensor& src, const StridedView& v,
                                   const Tensor& dst) {
  StridedCopy(DenseRead(v), src, dst);
  return absl::OkStatus();
}
absl::Status CpuMover::Fill(KernelContext&, const Tensor& t, double value) {
  FillValue(t, value);
  return absl::OkStatus();
}

namespace {

// ----- sum_to -------------------------------------------------------------------------------
// x's dims merged into alternating groups that are kept (out has them) or
// reduced (out has 1); out_strides are 0 on reduced groups.
struct SumPlan {
  Shape dims, x_strides, out_strides;
  std::vector<bool> reduced;
};

SumPlan MakeSumPlan(const Shape& x, const std::vector<bool>& summed) {
  SumPlan p;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == 1) continue;
    bool red = summed[i];
    if (!p.dims.empty() && p.reduced.back() == red) {
      p.dims.back() *= x[i];
    } else {
      p.dims.push_back(x[i]);
      p.reduced.push_back(red);
    }
  }
  p.x_strides = RowMajorStrides(p.dims);
  p.out_strides.assign(p.dims.size(), 0);
  int64_t acc = 1;
  for (int g = static_cast<int>(p.dims.size()) - 1; g >= 0; --g) {
    if (p.reduced[g]) continue;
    p.out_strides[g] = acc;
    acc *= p.dims[g];
  }
  return p;
}

// Adds the part of x under group `g` into out (sums of floats in double: SumAcc);
// group `split` runs over [lo, hi).
template <typename T>
void SumWalk(const SumPlan& p, size_t g, const T* x, SumAcc<T>* out, size_t split, int64_t lo,
             int64_t hi) {
  int64_t b = g == split ? lo : 0, e = g == split ? hi : p.dims[g];
  if (g + 1 == p.dims.size()) {
    if (!p.reduced[g]) {
      for (int64_t i = b; i < e; ++i) out[i] += x[i];
    } else if constexpr (std::is_floating_point_v<T>) {
      *out += SumAsDouble(x + b, e - b);
    } else {
      *out += Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(x + b, e - b).sum();
    }
    return;
  }
  for (int64_t i = b; i < e; ++i) {
    SumWalk(p, g + 1, x + i * p.x_strides[g], out + i * p.out_strides[g], split, lo, hi);
  }
}

// x summed into acc (zeros on entry). Threads own disjoint outputs when they
// split a kept group; when none is wide enough, each sums a fixed share of the
// leading reduced group into its own row, and the rows are added in order (the
// same result on every run).
template <typename T>
void SumInto(const SumPlan& p, const T* x, int64_t x_n, SumAcc<T>* acc, int64_t out_n) {
  using Acc = SumAcc<T>;
  if (x_n == 0) return;
  const int threads = MaxThreads();
  if (x_n < kParallelGrain || threads == 1) {
    SumWalk(p, 0, x, acc, p.dims.size(), 0, 0);
    return;
  }
  const size_t kept = std::find(p.reduced.begin(), p.reduced.end(), false) - p.reduced.begin();
  if (kept < p.dims.size() && (p.dims[kept] >= 2 * threads || !p.reduced[0])) {
    ParallelFor(p.dims[kept], 1, [&](int64_t b, int64_t e) { SumWalk(p, 0, x, acc, kept, b, e); });
    return;
  }
  const int64_t shares = std::min<int64_t>(threads, p.dims[0]);
  const int64_t len = (p.dims[0] + shares - 1) / shares;
  std::vector<std::vector<Acc>> rows(shares);
  ParallelFor(shares, 1, [&](int64_t sb, int64_t se) {
    for (int64_t s = sb; s < se; ++s) {
      rows[s].assign(out_n, Acc(0));
      SumWalk(p, 0, x, rows[s].data(), 0, s * len, std::min(p.dims[0], (s + 1) * len));
    }
  });
  for (const std::vector<Acc>& row : rows) {
    for (int64_t i = 0; i < out_n; ++i) acc[i] += row[i];
  }
}

template <typename T>
void RunSumTo(const SumPlan& p, const T* x, int64_t x_n, T* out, int64_t out_n) {
  std::vector<SumAcc<T>> acc(out_n, SumAcc<T>(0));
  SumInto(p, x, x_n, acc.data(), out_n);
  for (int64_t i = 0; i < out_n; ++i) out[i] = static_cast<T>(acc[i]);
}

// sum_to and sum_to_like: x summed to the target from `kShapeFn`.
template <auto kShapeFn>
absl::StatusOr<Value> SumTo(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(Shape target, OutputShape(ctx, kShapeFn));
  const Tensor& x = ctx.input(0).tensor();
  SumPlan plan = MakeSumPlan(x.shape(), ops::SummedDims(x.shape(), target));
  if (std::find(plan.reduced.begin(), plan.reduced.end(), true) == plan.reduced.end()) {
    return views::ShareAs(ctx, target);  // nothing to sum: only size-1 dims differ
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x.dtype(), target));
  DispatchDType(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (kIsNumericComputeType<T>) {
      RunSumTo<T>(plan, x.data<T>(), x.NumElements(), out.mutable_data<T>(), out.NumElements());
    }
  });
  return Value(std::move(out));
}

// ----- gather, scatter_add -----------------------------------------------------------------
// The indices as int64, each checked against [0, dim) of `data` at `axis`.
absl::StatusOr<std::vector<int64_t>> ReadIndices(const Tensor& indices, int axis,
                                                 ops::TensorType data) {
  const int64_t dim = data.shape[axis];
  std::vector<int64_t> out(indices.NumElements());
  for (int64_t i = 0; i < indices.NumElements(); ++i) {
    out[i] =
        indices.dtype() == DType::kInt32 ? indices.data<int32_t>()[i] : indices.data<int64_t>()[i];
    if (out[i] < 0 || out[i] >= dim) return ops::IndexOutOfRange(out[i], i, axis, data);
  }
  return out;
}

// out[o, j, :] = params[o, idx[j], :], one row copy per (o, j).
template <typename T>
void GatherRows(const T* params, T* out, const std::vector<int64_t>& idx, ops::AxisSplit v) {
  int64_t n = static_cast<int64_t>(idx.size());
  ParallelFor(v.outer * n, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(v.inner, 1)),
              [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r) {
                  int64_t o = r / n, j = r % n;
                  CopyRow(params + (o * v.len + idx[j]) * v.inner, 1, out + r * v.inner, 1,
                          v.inner);
                }
              });
}

absl::StatusOr<Value> Gather(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<ops::TensorType> in, InputTypes<ops::TensorType>(ctx, 2));
  KGRAD_ASSIGN_OR_RETURN(ops::AxisShape s, ops::GatherShape(ctx.prim(), in[0], in[1]));
  const Tensor& params = ctx.input(0).tensor();
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> idx,
                         ReadIndices(ctx.input(1).tensor(), s.axis, in[0]));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(params.dtype(), s.out));
  if (out.NumElements() == 0) return Value(std::move(out));
  DispatchDType(params.dtype(), [&](auto zero) {
    using T = decltype(zero);
    GatherRows<T>(params.data<T>(), out.mutable_data<T>(), idx,
                  ops::SplitAtAxis(params.shape(), s.axis));
  });
  return Value(std::move(out));
}

// out[o, idx[j], k] += upd[o, j, k]. Threads own disjoint (o, k) columns, so
// repeated indices never race.
template <typename T>
void ScatterAddRows(T* out, const T* upd, const std::vector<int64_t>& idx, ops::AxisSplit v) {
  int64_t n = static_cast<int64_t>(idx.size());
  ParallelFor(v.outer * v.inner, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)),
              [&](int64_t b, int64_t e) {
                for (int64_t pos = b; pos < e;) {
                  int64_t o = pos / v.inner, k0 = pos % v.inner;
                  int64_t k1 = std::min(v.inner, k0 + (e - pos));
                  for (int64_t j = 0; j < n; ++j) {
                    T* d = out + (o * v.len + idx[j]) * v.inner;
                    const T* s = upd + (o * n + j) * v.inner;
                    for (int64_t k = k0; k < k1; ++k) d[k] += s[k];
                  }
                  pos += k1 - k0;
                }
              });
}

absl::StatusOr<Value> ScatterAdd(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<ops::TensorType> in, InputTypes<ops::TensorType>(ctx, 3));
  KGRAD_ASSIGN_OR_RETURN(ops::AxisShape s, ops::ScatterAddShape(ctx.prim(), in[0], in[1], in[2]));
  const Tensor& input = ctx.input(0).tensor();
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> idx,
                         ReadIndices(ctx.input(1).tensor(), s.axis, in[0]));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOrReuse({0}, input.dtype(), input.shape()));
  if (out.raw_data() != input.raw_data())
    std::memcpy(out.raw_data(), input.raw_data(), input.nbytes());
  DispatchDType(input.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (kIsNumericComputeType<T>) {
      ScatterAddRows<T>(out.mutable_data<T>(), ctx.input(2).tensor().data<T>(), idx,
                        ops::SplitAtAxis(input.shape(), s.axis));
    }
  });
  return Value(std::move(out));
}

// ----- one_hot, cast, fill ---------------------------------------------------------------
absl::StatusOr<Value> OneHot(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* indices, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(ops::AxisShape s, ops::OneHotShape(ctx.prim(), *indices));
  return OneHotOf(ctx, indices, s);
}

}  // namespace

absl::StatusOr<Value> OneHotOf(KernelContext& ctx, const Tensor* indices, const ops::AxisShape& s) {
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(ctx.prim().GetDType("dtype"), s.out));
  FillValue(out, ctx.prim().GetFloat("off_value"));
  const ops::AxisSplit v = ops::SplitAtAxis(s.out, s.axis);  // the new axis in the middle
  const int64_t n = indices->NumElements();
  DispatchDType(out.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T on = Convert<T>(ctx.prim().GetFloat("on_value"));
    T* p = out.mutable_data<T>();
    ParallelFor(n, kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        int64_t k = indices->dtype() == DType::kInt32 ? indices->data<int32_t>()[i]
                                                      : indices->data<int64_t>()[i];
        if (k < 0 || k >= v.len) continue;  // out of range: an all-off row
        p[((i / v.inner) * v.len + k) * v.inner + i % v.inner] = on;
      }
    });
  });
  return Value(std::move(out));
}

namespace {

template <typename To, typename From>
void CastLoop(const From* s, To* d, int64_t n) {
  ParallelFor(n, kParallelGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) d[i] = Convert<To>(s[i]);
  });
}

absl::StatusOr<Value> Cast(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  DType to = ctx.prim().GetDType("dtype");
  if (to == x->dtype()) return std::move(ctx.mutable_input(0));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(to, x->shape()));
  DispatchDType(x->dtype(), [&](auto from_zero) {
    using From = decltype(from_zero);
    DispatchDType(to, [&](auto to_zero) {
      using To = decltype(to_zero);
      CastLoop<To, From>(x->data<From>(), out.mutable_data<To>(), x->NumElements());
    });
  });
  return Value(std::move(out));
}

absl::StatusOr<Value> Fill(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(Shape shape, ops::ShapeAttr(ctx.prim(), "shape"));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(ctx.prim().GetDType("dtype"), shape));
  FillValue(out, ctx.prim().GetFloat("value"));
  return Value(std::move(out));
}

}  // namespace

void RegisterShapeKernels(KernelTable* table) {
  table->Set(PrimId::kReshape, views::View<ops::ReshapeShape>);
  table->Set(PrimId::kReshapeLike, views::View<ops::ReshapeLikeShape>);
  table->Set(PrimId::kTranspose, moves::Transpose<CpuMover, ops::TransposePerm>);
  table->Set(PrimId::kBroadcastTo, moves::BroadcastTo<CpuMover, ops::BroadcastToShape>);
  table->Set(PrimId::kBroadcastToLike, moves::BroadcastTo<CpuMover, ops::BroadcastToLikeShape>);
  table->Set(PrimId::kSumTo, SumTo<ops::SumToShape>);
  table->Set(PrimId::kSumToLike, SumTo<ops::SumToLikeShape>);
  table->Set(PrimId::kExpandDims, views::View<ops::ExpandDimsShape>);
  table->Set(PrimId::kSqueeze, views::View<ops::SqueezeShape>);
  table->Set(PrimId::kConcat, moves::Concat<CpuMover, ops::TensorType, ops::ConcatShape>);
  table->Set(PrimId::kSplit, moves::Split<CpuMover, ops::SplitShape>);
  table->Set(PrimId::kSlice, moves::Slice<CpuMover, ops::ParseSlice>);
  table->Set(PrimId::kSliceGrad, moves::SliceGrad<CpuMover, ops::ParseSliceGrad>);
  table->Set(PrimId::kGather, Gather);
  table->Set(PrimId::kScatterAdd, ScatterAdd);
  table->Set(PrimId::kPad, moves::Pad<CpuMover, ops::ParsePad>);
  table->Set(PrimId::kOneHot, OneHot);
  table->Set(PrimId::kCast, Cast);
  table->Set(PrimId::kFill, Fill);
}

}  // namespace cpu
}  // namespace kgrad
