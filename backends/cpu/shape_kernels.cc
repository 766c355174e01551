// CPU kernels: shape family. Data movement is one strided copy (CopyPlan: an
// N-d index walk whose rows are memcpy'd when contiguous) shared by transpose,
// broadcast_to, slice, slice_grad, pad, concat, split and gather. Reshape-like
// ops share the input's buffer. Kernels validate inputs and attributes
// themselves: graphs may run without inference.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

// GCC 12 reports false -Wmaybe-uninitialized inside its own AVX-512 intrinsics
// when Eigen's reductions are inlined; the pragma covers those headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "Eigen/Core"
#pragma GCC diagnostic pop
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/view_kernels.h"
#include "core/shape.h"
#include "core/status_macros.h"

namespace kgrad {
namespace cpu {
namespace {

// ----- Errors, inputs and attributes ---------------------------------------------------
absl::StatusOr<const Tensor*> NumericTensorAt(const KernelContext& ctx, size_t i) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.TensorAt(i));
  if (t->dtype() == DType::kBool) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", i, " must be a numeric (not bool) tensor, got ", t->TypeString()));
  }
  return t;
}

absl::StatusOr<const Tensor*> IndexTensorAt(const KernelContext& ctx, size_t i) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.TensorAt(i));
  if (!IsInteger(t->dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", i, " must be an i32 or i64 index tensor, got ", t->TypeString()));
  }
  return t;
}

// A shape attribute with entries >= 0 that makes a valid tensor. (An out
// parameter: GCC 12 warns falsely on moving an InlinedVector into a StatusOr.)
absl::Status ShapeAttr(const KernelContext& ctx, const char* attr, Shape* shape) {
  const std::vector<int64_t>& s = ctx.prim().GetInts(attr);
  absl::StatusOr<int64_t> n = CheckedNumElements(s);
  if (!n.ok()) return AttrError(ctx, attr, n.status().message());
  shape->assign(s.begin(), s.end());
  return absl::OkStatus();
}

int MaxThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// ----- Conversions ---------------------------------------------------------------------
// v as To: float->int truncates toward zero and saturates (NaN gives 0), so that
// no input is undefined behaviour; anything->bool is v != 0; bool->number is 0/1.
template <typename To, typename From>
To Convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    constexpr From lo = static_cast<From>(std::numeric_limits<To>::min());
    constexpr From hi = static_cast<From>(std::numeric_limits<To>::max());
    if (!(v == v)) return To(0);
    if (v <= lo) return std::numeric_limits<To>::min();
    if (v >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

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

// A plan over `dims` reading `src_strides` and writing densely (row-major).
CopyPlan DenseWrite(const Shape& dims, Shape src_strides, int64_t src_offset = 0) {
  CopyPlan p;
  p.dims = dims;
  p.src_strides = std::move(src_strides);
  p.dst_strides = RowMajorStrides(dims);
  p.src_offset = src_offset;
  return p;
}

// A plan over `dims` reading densely and writing `dst_strides`.
CopyPlan DenseRead(const Shape& dims, Shape dst_strides, int64_t dst_offset = 0) {
  CopyPlan p;
  p.dims = dims;
  p.src_strides = RowMajorStrides(dims);
  p.dst_strides = std::move(dst_strides);
  p.dst_offset = dst_offset;
  return p;
}

// reshape, reshape_like, expand_dims and squeeze share the input buffer on every
// device: backends/view_kernels.cc.

// ----- transpose, broadcast_to -------------------------------------------------------------
absl::StatusOr<Value> Transpose(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  std::vector<int64_t> perm = ctx.prim().GetInts("perm");
  int rank = x->rank();
  if (perm.empty()) {
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  std::vector<bool> seen(rank, false);
  bool ok = static_cast<int>(perm.size()) == rank;
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < rank && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  if (!ok) {
    return AttrError(
        ctx, "perm",
        absl::StrCat(Ints(perm), " is not a permutation of [0, ", rank, ") for ", x->TypeString()));
  }
  Shape in_strides = RowMajorStrides(x->shape());
  Shape dims, strides;
  for (int64_t p : perm) {
    dims.push_back(x->dim(p));
    strides.push_back(in_strides[p]);
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x->dtype(), dims));
  StridedCopy(DenseWrite(dims, strides), *x, out);
  return Value(std::move(out));
}

absl::StatusOr<Value> BroadcastToShape(KernelContext& ctx, const Shape& target) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  int lead = static_cast<int>(target.size()) - x->rank();
  bool ok = lead >= 0;
  Shape in_strides = RowMajorStrides(x->shape());
  Shape strides(target.size(), 0);
  for (int i = 0; ok && i < x->rank(); ++i) {
    ok = x->dim(i) == target[lead + i] || x->dim(i) == 1;
    if (x->dim(i) != 1) strides[lead + i] = in_strides[i];
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot broadcast ", x->TypeString(), " to ", ShapeToString(target)));
  }
  if (NumElementsOf(target) == x->NumElements()) return views::ShareAs(ctx, target);
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x->dtype(), target));
  StridedCopy(DenseWrite(target, strides), *x, out);
  return Value(std::move(out));
}

absl::StatusOr<Value> BroadcastTo(KernelContext& ctx) {
  Shape target;
  KGRAD_RETURN_IF_ERROR(ShapeAttr(ctx, "shape", &target));
  return BroadcastToShape(ctx, target);
}

absl::StatusOr<Value> BroadcastToLike(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* ref, ctx.TensorAt(1));
  return BroadcastToShape(ctx, ref->shape());
}

// ----- sum_to -------------------------------------------------------------------------------
// x's dims merged into alternating groups that are kept (out has them) or
// reduced (out has 1); out_strides are 0 on reduced groups.
struct SumPlan {
  Shape dims, x_strides, out_strides;
  std::vector<bool> reduced;
};

SumPlan MakeSumPlan(const Shape& x, const Shape& t) {
  SumPlan p;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == 1) continue;
    bool red = t[i] == 1;
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

// Adds the part of x under group `g` into out; group `split` runs over [lo, hi).
template <typename T>
void SumWalk(const SumPlan& p, size_t g, const T* x, T* out, size_t split, int64_t lo, int64_t hi) {
  int64_t b = g == split ? lo : 0, e = g == split ? hi : p.dims[g];
  if (g + 1 == p.dims.size()) {
    if (p.reduced[g]) {
      *out += Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(x + b, e - b).sum();
    } else {
      for (int64_t i = b; i < e; ++i) out[i] += x[i];
    }
    return;
  }
  for (int64_t i = b; i < e; ++i) {
    SumWalk(p, g + 1, x + i * p.x_strides[g], out + i * p.out_strides[g], split, lo, hi);
  }
}

template <typename T>
void RunSumTo(const SumPlan& p, const T* x, int64_t x_n, T* out, int64_t out_n) {
  std::fill(out, out + out_n, T(0));
  if (x_n == 0) return;
  size_t none = p.dims.size();
  int threads = MaxThreads();
  if (x_n < kParallelGrain || threads == 1) {
    SumWalk(p, 0, x, out, none, 0, 0);
    return;
  }
  // Threads own disjoint outputs when they split a kept group; when none is
  // wide enough, each sums a share of the leading reduced group privately.
  size_t kept = std::find(p.reduced.begin(), p.reduced.end(), false) - p.reduced.begin();
  if (kept < p.dims.size() && (p.dims[kept] >= 2 * threads || !p.reduced[0])) {
    ParallelFor(p.dims[kept], 1, [&](int64_t b, int64_t e) { SumWalk(p, 0, x, out, kept, b, e); });
    return;
  }
  std::mutex mu;
  ParallelFor(p.dims[0], 1, [&](int64_t b, int64_t e) {
    std::vector<T> part(out_n, T(0));
    SumWalk(p, 0, x, part.data(), 0, b, e);
    std::lock_guard<std::mutex> lock(mu);
    for (int64_t i = 0; i < out_n; ++i) out[i] += part[i];
  });
}

// x summed to `target`, which must broadcast to x's shape.
absl::StatusOr<Value> SumToShape(KernelContext& ctx, const Shape& target) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, NumericTensorAt(ctx, 0));
  // Target aligned to x's rank: extra leading target dims must be 1.
  int shift = x->rank() - static_cast<int>(target.size());
  Shape t(x->rank(), 1);
  bool ok = true;
  for (int i = 0; i < static_cast<int>(target.size()); ++i) {
    int64_t d = i + shift >= 0 ? x->dim(i + shift) : 1;
    ok = ok && (target[i] == 1 || target[i] == d);
    if (i + shift >= 0) t[i + shift] = target[i];
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot sum ", x->TypeString(), " to ", ShapeToString(target),
                     ": the target must broadcast to the input's shape"));
  }
  SumPlan plan = MakeSumPlan(x->shape(), t);
  if (std::find(plan.reduced.begin(), plan.reduced.end(), true) == plan.reduced.end()) {
    return views::ShareAs(ctx, target);  // nothing to sum: only size-1 dims differ
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x->dtype(), target));
  DispatchDType(x->dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_same_v<T, bool>) {
      RunSumTo<T>(plan, x->data<T>(), x->NumElements(), out.mutable_data<T>(), out.NumElements());
    }
  });
  return Value(std::move(out));
}

absl::StatusOr<Value> SumTo(KernelContext& ctx) {
  Shape target;
  KGRAD_RETURN_IF_ERROR(ShapeAttr(ctx, "shape", &target));
  return SumToShape(ctx, target);
}

absl::StatusOr<Value> SumToLike(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* ref, ctx.TensorAt(1));
  return SumToShape(ctx, ref->shape());
}

// ----- concat, split -------------------------------------------------------------------------
absl::StatusOr<Value> Concat(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* first, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(ctx, "axis", first->rank()));
  Shape dims = first->shape();
  dims[axis] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(i));
    bool ok = x->dtype() == first->dtype() && x->rank() == first->rank();
    for (int d = 0; ok && d < x->rank(); ++d) ok = d == axis || x->dim(d) == dims[d];
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("input ", i, " must match input 0 (", first->TypeString(),
                       ") in dtype and on every dim but ", axis, ", got ", x->TypeString()));
    }
    dims[axis] += x->dim(axis);
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(first->dtype(), dims));
  Shape out_strides = RowMajorStrides(dims);
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i).tensor();
    StridedCopy(DenseRead(x.shape(), out_strides, offset * out_strides[axis]), x, out);
    offset += x.dim(axis);
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> Split(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(ctx, "axis", x->rank()));
  const std::vector<int64_t>& sizes = ctx.prim().GetInts("sizes");
  int64_t total = 0;
  bool ok = !sizes.empty();
  for (int64_t s : sizes) {
    ok = ok && s >= 0 && s <= x->dim(axis);
    total += ok ? s : 0;
  }
  if (!ok || total != x->dim(axis)) {
    return AttrError(
        ctx, "sizes",
        absl::StrCat(Ints(sizes), " must be >= 0 and sum to dim ", axis, " of ", x->TypeString()));
  }
  Shape in_strides = RowMajorStrides(x->shape());
  std::vector<Value> parts;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    Shape dims = x->shape();
    dims[axis] = s;
    KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x->dtype(), dims));
    StridedCopy(DenseWrite(dims, in_strides, offset * in_strides[axis]), *x, out);
    parts.push_back(Value(std::move(out)));
    offset += s;
  }
  return Value::Tuple(std::move(parts));
}

// ----- slice, slice_grad -------------------------------------------------------------------
// Per dim: the first element, the step and the output size of a slice of `in`.
struct SliceSpec {
  Shape out, begin, stride;
};

absl::StatusOr<SliceSpec> MakeSliceSpec(const KernelContext& ctx, const Shape& in) {
  const std::vector<int64_t>& begin = ctx.prim().GetInts("begin");
  const std::vector<int64_t>& end = ctx.prim().GetInts("end");
  std::vector<int64_t> strides = ctx.prim().GetInts("strides");
  if (strides.empty()) strides.assign(in.size(), 1);
  const std::pair<const char*, size_t> lens[] = {
      {"begin", begin.size()}, {"end", end.size()}, {"strides", strides.size()}};
  for (const auto& [name, len] : lens) {
    if (len != in.size()) {
      return AttrError(ctx, name,
                       absl::StrCat("has ", len, " entries, expected the rank ", in.size()));
    }
  }
  SliceSpec s;
  for (size_t i = 0; i < in.size(); ++i) {
    if (strides[i] < 1) {
      return AttrError(ctx, "strides", absl::StrCat("must be >= 1, got ", Ints(strides)));
    }
    int64_t d = in[i];
    int64_t b = std::clamp<int64_t>(begin[i] < 0 ? begin[i] + d : begin[i], 0, d);
    int64_t e = std::clamp<int64_t>(end[i] < 0 ? end[i] + d : end[i], 0, d);
    int64_t n = e > b ? (e - b - 1) / strides[i] + 1 : 0;
    s.out.push_back(n);
    s.begin.push_back(b);
    s.stride.push_back(n > 1 ? strides[i] : 1);  // a single step: keep strides small
  }
  return s;
}

// The strided view of a slice inside a row-major tensor of shape `in`: element
// strides per output dim and the offset of the first element.
std::pair<Shape, int64_t> SliceView(const SliceSpec& s, const Shape& in) {
  Shape strides = RowMajorStrides(in);
  int64_t offset = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    offset += s.begin[i] * strides[i];
    strides[i] *= s.stride[i];
  }
  return {strides, offset};
}

absl::StatusOr<Value> Slice(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(SliceSpec s, MakeSliceSpec(ctx, x->shape()));
  if (s.out == x->shape()) return std::move(ctx.mutable_input(0));  // the whole tensor
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x->dtype(), s.out));
  auto [strides, offset] = SliceView(s, x->shape());
  StridedCopy(DenseWrite(s.out, strides, offset), *x, out);
  return Value(std::move(out));
}

absl::StatusOr<Value> SliceGrad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* dy, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* ref, ctx.TensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(SliceSpec s, MakeSliceSpec(ctx, ref->shape()));
  if (dy->shape() != s.out) {
    return absl::InvalidArgumentError(absl::StrCat("input 0 must have the slice's shape ",
                                                   ShapeToString(s.out), " (a slice of input 1 ",
                                                   ref->TypeString(), "), got ", dy->TypeString()));
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(dy->dtype(), ref->shape()));
  FillValue(out, 0.0);
  auto [strides, offset] = SliceView(s, ref->shape());
  StridedCopy(DenseRead(s.out, strides, offset), *dy, out);
  return Value(std::move(out));
}

// ----- pad -----------------------------------------------------------------------------------
absl::StatusOr<Value> Pad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  const std::vector<int64_t>& pads = ctx.prim().GetInts("pads");
  if (pads.size() != 2 * static_cast<size_t>(x->rank())) {
    return AttrError(
        ctx, "pads",
        absl::StrCat("has ", pads.size(), " entries, expected 2 * rank = ", 2 * x->rank()));
  }
  Shape dims = x->shape();
  for (int i = 0; i < x->rank(); ++i) {
    int64_t b = pads[2 * i], a = pads[2 * i + 1];
    if (b < 0 || a < 0 || b > kMaxElements || a > kMaxElements) {
      return AttrError(ctx, "pads", absl::StrCat("must be >= 0 (and not huge), got ", Ints(pads)));
    }
    dims[i] += b + a;
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x->dtype(), dims));
  FillValue(out, ctx.prim().GetFloat("value"));
  Shape out_strides = RowMajorStrides(dims);
  int64_t offset = 0;
  for (int i = 0; i < x->rank(); ++i) offset += pads[2 * i] * out_strides[i];
  StridedCopy(DenseRead(x->shape(), out_strides, offset), *x, out);
  return Value(std::move(out));
}

// ----- gather, scatter_add -----------------------------------------------------------------
// The indices as int64, each checked against [0, dim).
absl::StatusOr<std::vector<int64_t>> ReadIndices(const Tensor& indices, int64_t dim,
                                                 const Tensor& data, int axis) {
  std::vector<int64_t> out(indices.NumElements());
  for (int64_t i = 0; i < indices.NumElements(); ++i) {
    out[i] =
        indices.dtype() == DType::kInt32 ? indices.data<int32_t>()[i] : indices.data<int64_t>()[i];
    if (out[i] < 0 || out[i] >= dim) {
      return absl::OutOfRangeError(absl::StrCat("index ", out[i], " (at position ", i,
                                                " of the indices) is out of range [0, ", dim,
                                                ") for dim ", axis, " of ", data.TypeString()));
    }
  }
  return out;
}

// A tensor seen as [outer, dim, inner] around `axis`.
struct AxisView {
  int64_t outer, dim, inner;
};
AxisView ViewAround(const Shape& s, int axis) {
  absl::Span<const int64_t> d(s);
  return {NumElementsOf(d.subspan(0, axis)), s[axis], NumElementsOf(d.subspan(axis + 1))};
}

// out[o, j, :] = params[o, idx[j], :], one row copy per (o, j).
template <typename T>
void GatherRows(const T* params, T* out, const std::vector<int64_t>& idx, AxisView v) {
  int64_t n = static_cast<int64_t>(idx.size());
  ParallelFor(v.outer * n, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(v.inner, 1)),
              [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r) {
                  int64_t o = r / n, j = r % n;
                  CopyRow(params + (o * v.dim + idx[j]) * v.inner, 1, out + r * v.inner, 1,
                          v.inner);
                }
              });
}

absl::StatusOr<Value> Gather(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* params, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* indices, IndexTensorAt(ctx, 1));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(ctx, "axis", params->rank()));
  AxisView v = ViewAround(params->shape(), axis);
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(*indices, v.dim, *params, axis));
  Shape dims(params->shape().begin(), params->shape().begin() + axis);
  dims.insert(dims.end(), indices->shape().begin(), indices->shape().end());
  dims.insert(dims.end(), params->shape().begin() + axis + 1, params->shape().end());
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(params->dtype(), dims));
  if (out.NumElements() == 0) return Value(std::move(out));
  DispatchDType(params->dtype(), [&](auto zero) {
    using T = decltype(zero);
    GatherRows<T>(params->data<T>(), out.mutable_data<T>(), idx, v);
  });
  return Value(std::move(out));
}

// out[o, idx[j], k] += upd[o, j, k]. Threads own disjoint (o, k) columns, so
// repeated indices never race.
template <typename T>
void ScatterAddRows(T* out, const T* upd, const std::vector<int64_t>& idx, AxisView v) {
  int64_t n = static_cast<int64_t>(idx.size());
  ParallelFor(v.outer * v.inner, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)),
              [&](int64_t b, int64_t e) {
                for (int64_t pos = b; pos < e;) {
                  int64_t o = pos / v.inner, k0 = pos % v.inner;
                  int64_t k1 = std::min(v.inner, k0 + (e - pos));
                  for (int64_t j = 0; j < n; ++j) {
                    T* d = out + (o * v.dim + idx[j]) * v.inner;
                    const T* s = upd + (o * n + j) * v.inner;
                    for (int64_t k = k0; k < k1; ++k) d[k] += s[k];
                  }
                  pos += k1 - k0;
                }
              });
}

absl::StatusOr<Value> ScatterAdd(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* input, NumericTensorAt(ctx, 0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* indices, IndexTensorAt(ctx, 1));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* updates, ctx.TensorAt(2));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(ctx, "axis", input->rank()));
  Shape want(input->shape().begin(), input->shape().begin() + axis);
  want.insert(want.end(), indices->shape().begin(), indices->shape().end());
  want.insert(want.end(), input->shape().begin() + axis + 1, input->shape().end());
  if (updates->dtype() != input->dtype() || updates->shape() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("input 2 (updates) must be ", DTypeName(input->dtype()), ShapeToString(want),
                     " for input ", input->TypeString(), " and indices ", indices->TypeString(),
                     ", got ", updates->TypeString()));
  }
  AxisView v = ViewAround(input->shape(), axis);
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(*indices, v.dim, *input, axis));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOrReuse({0}, input->dtype(), input->shape()));
  if (out.raw_data() != input->raw_data())
    std::memcpy(out.raw_data(), input->raw_data(), input->nbytes());
  DispatchDType(input->dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_same_v<T, bool>) {
      ScatterAddRows<T>(out.mutable_data<T>(), updates->data<T>(), idx, v);
    }
  });
  return Value(std::move(out));
}

// ----- one_hot, cast, fill ---------------------------------------------------------------
absl::StatusOr<Value> OneHot(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* indices, IndexTensorAt(ctx, 0));
  int64_t depth = ctx.prim().GetInt("depth");
  if (depth < 0) return AttrError(ctx, "depth", absl::StrCat("must be >= 0, got ", depth));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(ctx, "axis", indices->rank() + 1));
  Shape dims = indices->shape();
  dims.insert(dims.begin() + axis, depth);
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(ctx.prim().GetDType("dtype"), dims));
  FillValue(out, ctx.prim().GetFloat("off_value"));
  // out viewed as [outer, depth, inner] around the new axis.
  int64_t inner = NumElementsOf(absl::MakeConstSpan(dims).subspan(axis + 1));
  int64_t n = indices->NumElements();
  DispatchDType(out.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T on = Convert<T>(ctx.prim().GetFloat("on_value"));
    T* p = out.mutable_data<T>();
    ParallelFor(n, kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        int64_t k = indices->dtype() == DType::kInt32 ? indices->data<int32_t>()[i]
                                                      : indices->data<int64_t>()[i];
        if (k < 0 || k >= depth) continue;  // out of range: an all-off row
        p[((i / inner) * depth + k) * inner + i % inner] = on;
      }
    });
  });
  return Value(std::move(out));
}

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
  Shape shape;
  KGRAD_RETURN_IF_ERROR(ShapeAttr(ctx, "shape", &shape));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(ctx.prim().GetDType("dtype"), shape));
  FillValue(out, ctx.prim().GetFloat("value"));
  return Value(std::move(out));
}

}  // namespace

void RegisterShapeKernels(KernelTable* table) {
  table->Set(PrimId::kReshape, views::Reshape);
  table->Set(PrimId::kReshapeLike, views::ReshapeLike);
  table->Set(PrimId::kTranspose, Transpose);
  table->Set(PrimId::kBroadcastTo, BroadcastTo);
  table->Set(PrimId::kBroadcastToLike, BroadcastToLike);
  table->Set(PrimId::kSumTo, SumTo);
  table->Set(PrimId::kSumToLike, SumToLike);
  table->Set(PrimId::kExpandDims, views::ExpandDims);
  table->Set(PrimId::kSqueeze, views::Squeeze);
  table->Set(PrimId::kConcat, Concat);
  table->Set(PrimId::kSplit, Split);
  table->Set(PrimId::kSlice, Slice);
  table->Set(PrimId::kSliceGrad, SliceGrad);
  table->Set(PrimId::kGather, Gather);
  table->Set(PrimId::kScatterAdd, ScatterAdd);
  table->Set(PrimId::kPad, Pad);
  table->Set(PrimId::kOneHot, OneHot);
  table->Set(PrimId::kCast, Cast);
  table->Set(PrimId::kFill, Fill);
}

}  // namespace cpu
}  // namespace kgrad
