// CPU kernels: max and average pooling (NCHW; NCL and NCDHW through the same
// three-axis loops, trivial leading axes), f32 and f64, over the N*C planes in
// parallel.
//
// Loops run per output row (z, i) of output depth and height. For a kernel
// depth a and row r inside the input and a kernel column q, the output columns
// j in [j0, j1) whose tap j*sw + q - left is a real cell form one strided run,
// so the innermost loops run over j and vectorise. Visiting (a, r, q) in
// increasing order visits the cells of every window in row-major order, which
// is what the first-max tie rule needs. Padding cells are
// never visited: they are -infinity for max and absent (or zero) for mean.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "backends/cpu/conv_window.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "core/status_macros.h"
#include "ops/conv_window.h"

namespace kgrad {
namespace cpu {
namespace conv_internal {
namespace {

using ops::PoolGeom;

int64_t Planes(const PoolGeom& g) { return g.n * g.c; }
// A plane's input cells, and its output rows (z, i) of OW columns each.
int64_t InPlane(const PoolGeom& g) { return g.d * g.h * g.w; }
int64_t OutRows(const PoolGeom& g) { return g.od * g.oh; }

// Input cells [lo, hi) along `axis` of window `i` (never empty: ops/conv_window
// rejects windows that lie entirely in the padding).
std::pair<int64_t, int64_t> Span(const PoolGeom& g, int axis, int64_t i, int64_t len) {
  int64_t start = i * g.win.stride[axis] - g.win.pad_lo[axis];
  return {std::max<int64_t>(start, 0), std::min(start + g.win.kernel[axis], len)};
}

// The input depths and rows of output row r = z*OH + i that lie inside the input.
struct RowWindow {
  int64_t z0, z1, r0, r1;
  int64_t cells() const { return (z1 - z0) * (r1 - r0); }  // per window column
};
RowWindow KernelRows(const PoolGeom& g, int64_t r) {
  auto [z0, z1] = Span(g, ops::kD, r / g.oh, g.d);
  auto [r0, r1] = Span(g, ops::kH, r % g.oh, g.h);
  return {z0, z1, r0, r1};
}

// Real cells in the columns of window column j.
int64_t ColCount(const PoolGeom& g, int64_t j) {
  int64_t start = j * g.win.stride[ops::kW] - g.win.pad_lo[ops::kW];
  return std::min(start + g.win.kernel[ops::kW], g.w) - std::max<int64_t>(start, 0);
}

// fn(base, j0, j1) for each run of output row i: output column j in [j0, j1)
// reads the plane cell base + j*sw, in row-major window order.
template <typename Fn>
void ForEachRun(const PoolGeom& g, int64_t i, Fn&& fn) {
  const RowWindow win = KernelRows(g, i);
  // Only kernel columns that some window places inside the input (a hostile kernel
  // attribute can be far wider than the input).
  const int64_t left = g.win.pad_lo[ops::kW];
  const int64_t q0 = std::max<int64_t>(0, left - (g.ow - 1) * g.win.stride[ops::kW]);
  const int64_t q1 = std::min(g.win.kernel[ops::kW], left + g.w);
  for (int64_t z = win.z0; z < win.z1; ++z) {
    for (int64_t r = win.r0; r < win.r1; ++r) {
      for (int64_t q = q0; q < q1; ++q) {
        int64_t off = q - g.win.pad_lo[ops::kW];
        auto [j0, j1] = ValidRange(off, g.win.stride[ops::kW], g.w, g.ow);
        fn((z * g.h + r) * g.w + off, j0, j1);
      }
    }
  }
}

// Splits the planes into contiguous chunks, one per thread when the work is big
// enough; each chunk owns one row of the scratch buffers.
int64_t PlaneChunks(const PoolGeom& g) {
  int64_t threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  double work = static_cast<double>(Planes(g)) * OutRows(g) * g.ow * g.win.kernel[ops::kD] *
                g.win.kernel[ops::kH] * g.win.kernel[ops::kW];
  if (threads <= 1 || work < kParallelGrain) return 1;
  return std::max<int64_t>(1, std::min(Planes(g), threads));
}

// fn(plane, chunk) over all planes.
template <typename Fn>
void ForEachPlane(const PoolGeom& g, int64_t chunks, Fn&& fn) {
  int64_t planes = Planes(g);
  ParallelFor(chunks, 2, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      for (int64_t pl = planes * c / chunks; pl < planes * (c + 1) / chunks; ++pl) fn(pl, c);
    }
  });
}

// ----- Max ----------------------------------------------------------------------------------
// m[j] = the max of window (i, j) of the plane (NaN wins, so that it propagates
// like in PyTorch). Strict `>` keeps the first of equal values, so m[j] is the
// value at the first argmax.
template <typename T>
void MaxRow(const PoolGeom& g, const T* xp, int64_t i, T* m) {
  const int64_t s = g.win.stride[ops::kW];
  std::fill(m, m + g.ow, -std::numeric_limits<T>::infinity());
  ForEachRun(g, i, [&](int64_t base, int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      T v = xp[base + j * s];
      m[j] = (v > m[j] || v != v) ? v : m[j];
    }
  });
}

// idx[j] = the plane position of the first max of window (i, j); m is scratch.
// Positions P are int32 for f32 planes under 2^31 cells, so that values and
// positions have the same lane width and the select loop vectorises.
template <typename T, typename P>
void ArgmaxRow(const PoolGeom& g, const T* xp, int64_t i, T* m, P* idx) {
  const int64_t s = g.win.stride[ops::kW];
  const RowWindow win = KernelRows(g, i);
  const int64_t first_row = (win.z0 * g.h + win.r0) * g.w;
  std::fill(m, m + g.ow, -std::numeric_limits<T>::infinity());
  // The first real cell: the answer when every cell is -inf.
  for (int64_t j = 0; j < g.ow; ++j) {
    idx[j] = static_cast<P>(first_row + std::max<int64_t>(j * s - g.win.pad_lo[ops::kW], 0));
  }
  // Restrict pointers and positions computed in P's width: with 64-bit positions
  // narrowed per lane and m possibly aliasing x, the loop compiled to half-width
  // lanes and a branch around a masked store (64% of max_pool2d_grad's time).
  T* __restrict mr = m;
  P* __restrict ir = idx;
  ForEachRun(g, i, [&](int64_t base, int64_t j0, int64_t j1) {
    const T* __restrict run = xp + base;
    const P first = static_cast<P>(base), step = static_cast<P>(s);
    for (P j = static_cast<P>(j0); j < static_cast<P>(j1); ++j) {
      const T v = run[j * s], mj = mr[j];
      const bool take = (v > mj) | ((v != v) & (mj == mj));
      mr[j] = take ? v : mj;
      ir[j] = take ? first + j * step : ir[j];
    }
  });
}

template <typename T>
void MaxPool(const PoolGeom& g, const T* x, T* y, int64_t chunks) {
  ForEachPlane(g, chunks, [&](int64_t pl, int64_t) {
    for (int64_t i = 0; i < OutRows(g); ++i) {
      MaxRow(g, x + pl * InPlane(g), i, y + (pl * OutRows(g) + i) * g.ow);
    }
  });
}

// The scratch of the argmax kernels: per chunk, one row of values and one of positions.
struct ArgmaxScratch {
  Tensor values, positions;
};

bool SmallPositions(DType dtype, const PoolGeom& g) {
  return dtype == DType::kFloat32 && InPlane(g) < (int64_t{1} << 31);
}

absl::StatusOr<ArgmaxScratch> MakeArgmaxScratch(const KernelContext& ctx, DType dtype,
                                                const PoolGeom& g, int64_t chunks) {
  ArgmaxScratch s;
  KGRAD_ASSIGN_OR_RETURN(s.values, ctx.Allocate(dtype, {chunks, g.ow}));
  DType positions = SmallPositions(dtype, g) ? DType::kInt32 : DType::kInt64;
  KGRAD_ASSIGN_OR_RETURN(s.positions, ctx.Allocate(positions, {chunks, g.ow}));
  return s;
}

// scatter: dx[argmax] += dy (max_pool2d_grad, dst shaped like x).
// gather:  dst[window] = src[argmax] (max_pool2d_grad_grad, dst shaped like y).
template <typename T, typename P, bool kScatter>
void RouteArgmax(const PoolGeom& g, const T* x, const T* src, T* dst, ArgmaxScratch& s,
                 int64_t chunks) {
  ForEachPlane(g, chunks, [&](int64_t pl, int64_t chunk) {
    const T* xp = x + pl * InPlane(g);
    T* m = s.values.mutable_data<T>() + chunk * g.ow;
    P* idx = s.positions.mutable_data<P>() + chunk * g.ow;
    if (kScatter) std::fill(dst + pl * InPlane(g), dst + (pl + 1) * InPlane(g), T(0));
    for (int64_t i = 0; i < OutRows(g); ++i) {
      ArgmaxRow(g, xp, i, m, idx);
      int64_t row = (pl * OutRows(g) + i) * g.ow;
      if (kScatter) {
        T* dxp = dst + pl * InPlane(g);
        for (int64_t j = 0; j < g.ow; ++j) dxp[idx[j]] += src[row + j];
      } else {
        const T* sp = src + pl * InPlane(g);
        for (int64_t j = 0; j < g.ow; ++j) dst[row + j] = sp[idx[j]];
      }
    }
  });
}

// RouteArgmax with the position type MakeArgmaxScratch chose.
template <typename T, bool kScatter>
void Route(const PoolGeom& g, const T* x, const T* src, T* dst, ArgmaxScratch& s, int64_t chunks) {
  if constexpr (std::is_same_v<T, float>) {
    if (s.positions.dtype() == DType::kInt32) {
      RouteArgmax<T, int32_t, kScatter>(g, x, src, dst, s, chunks);
      return;
    }
  }
  RouteArgmax<T, int64_t, kScatter>(g, x, src, dst, s, chunks);
}

// ----- Max, 2x2 windows at stride 2 ---------------------------------------------------------
// The pooling of most conv nets. Every window's four cells sit at fixed offsets,
// so the loops need no runs or row scratch, and they are written without
// data-dependent branches: the general loops compile to a compare-and-jump per
// cell, which mispredicts about every other cell on real data and made pooling
// cost as much as the convolutions around it. Same results as the general loops:
// the first cell starts the max (what `-inf then take it` gives), a strict `>`
// keeps the first of equal values, and a NaN anywhere makes the result NaN.
// (2-D windows, or 1-D ones of height 1; not 3-D.)
bool IsPlain2x2(const PoolGeom& g) {
  const ops::Axes two{1, 2, 2}, one{1, 1, 1}, zero{0, 0, 0};
  return g.d == 1 && g.win.kernel == two && g.win.stride == two && g.win.dilation == one &&
         g.win.pad_lo == zero && g.win.pad_hi == zero && 2 * g.oh <= g.h && 2 * g.ow <= g.w;
}

// Output columns per block of the 2x2 row loops: a fixed trip count, so that
// each block compiles to straight vector code. Rows of typical conv nets are short
// (7 or 14 outputs at 28x28) and the remainder loop of a variable-length row cost
// as much as its vector part.
constexpr int64_t kBlock2x2 = 8;

// fn(j0, n) over output columns [0, ow) in blocks of kBlock2x2 (n is the
// compile-time block width) and, when ow is not a multiple, one last block that
// ends at ow and overlaps the one before: the 2x2 loops compute each output
// column from its own window and write it whole, so computing a column twice
// writes the same values. Rows shorter than a block run column by column (n = 1).
template <typename Fn>
void ForEachBlock2x2(int64_t ow, Fn&& fn) {
  if (ow < kBlock2x2) {
    for (int64_t j = 0; j < ow; ++j) fn(j, std::integral_constant<int64_t, 1>());
    return;
  }
  int64_t j = 0;
  for (; j + kBlock2x2 <= ow; j += kBlock2x2) fn(j, std::integral_constant<int64_t, kBlock2x2>());
  if (j < ow) fn(ow - kBlock2x2, std::integral_constant<int64_t, kBlock2x2>());
}

// y[j] for output columns [0, n) of one row: rows r0, r1 of the input.
template <typename T, int64_t n>
void MaxBlock2x2(const T* __restrict r0, const T* __restrict r1, T* __restrict y) {
  for (int64_t j = 0; j < n; ++j) {
    const T a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
    T m = a;
    m = b > m ? b : m;
    m = c > m ? c : m;
    m = d > m ? d : m;
    const bool nan = (a != a) | (b != b) | (c != c) | (d != d);
    y[j] = nan ? a + b + c + d : m;  // the sum of a NaN is NaN
  }
}

template <typename T>
void MaxPool2x2(const PoolGeom& g, const T* x, T* y, int64_t chunks) {
  ForEachPlane(g, chunks, [&](int64_t pl, int64_t) {
    const T* xp = x + pl * g.h * g.w;
    for (int64_t i = 0; i < g.oh; ++i) {
      const T* r0 = xp + 2 * i * g.w;
      const T* r1 = r0 + g.w;
      T* yr = y + (pl * g.oh + i) * g.ow;
      ForEachBlock2x2(g.ow, [&](int64_t j, auto n) {
        MaxBlock2x2<T, decltype(n)::value>(r0 + 2 * j, r1 + 2 * j, yr + j);
      });
    }
  });
}

// Which of the four cells (row-major) the general loops route to: the first NaN
// if there is one, else the first max, i.e. the first cell equal to the max.
// As four exclusive masks of plain comparisons, so that the row loops can
// vectorise (an index chain compiles to jumps).
template <typename T>
struct Winner2x2 {
  bool a, b, c, d;

  Winner2x2(T va, T vb, T vc, T vd) {
    T m = va;
    m = vb > m ? vb : m;
    m = vc > m ? vc : m;
    m = vd > m ? vd : m;
    const bool na = va != va, nb = vb != vb, nc = vc != vc, nd = vd != vd;
    const bool num = !(na | nb | nc | nd);
    a = na | (num & (va == m));
    // Branch-free first-winner selection: bitwise & on bools (no short circuit).
    b = (!a) & (nb | (num & (vb == m)));
    c = (!a) & (!b) & (nc | (num & (vc == m)));
    d = (!a) & (!b) & (!c);
  }
};

// n output columns of the scatter: x rows r0, r1 and their dx rows d0, d1. The
// windows do not overlap, so each window's four cells are written (the routed
// value and three zeros). Restrict pointers: dx never aliases x or dy.
template <typename T, int64_t n>
void ScatterBlock2x2(const T* __restrict r0, const T* __restrict r1, const T* __restrict dy, T* __restrict d0,
                     T* __restrict d1) {
  for (int64_t j = 0; j < n; ++j) {
    const Winner2x2<T> w(r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1]);
    const T v = dy[j];
    d0[2 * j] = w.a ? v : T(0);
    d0[2 * j + 1] = w.b ? v : T(0);
    d1[2 * j] = w.c ? v : T(0);
    d1[2 * j + 1] = w.d ? v : T(0);
  }
}

// n output columns of the gather: y[j] = the ddx cell at window j's argmax.
template <typename T, int64_t n>
void GatherBlock2x2(const T* __restrict r0, const T* __restrict r1, const T* __restrict s0,
                    const T* __restrict s1, T* __restrict y) {
  for (int64_t j = 0; j < n; ++j) {
    const Winner2x2<T> w(r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1]);
    const T a = s0[2 * j], b = s0[2 * j + 1], c = s1[2 * j], d = s1[2 * j + 1];
    y[j] = w.a ? a : (w.b ? b : (w.c ? c : d));
  }
}

// RouteArgmax for 2x2 windows at stride 2. Only cells outside every window (an
// odd last row or column) need clearing before the scatter.
template <typename T, bool kScatter>
void Route2x2(const PoolGeom& g, const T* x, const T* src, T* dst, int64_t chunks) {
  const bool covered = 2 * g.oh == g.h && 2 * g.ow == g.w;
  ForEachPlane(g, chunks, [&](int64_t pl, int64_t) {
    const int64_t plane = pl * g.h * g.w;
    if (kScatter && !covered) std::fill(dst + plane, dst + plane + g.h * g.w, T(0));
    for (int64_t i = 0; i < g.oh; ++i) {
      const int64_t r0 = plane + 2 * i * g.w, r1 = r0 + g.w;
      const int64_t o = (pl * g.oh + i) * g.ow;
      ForEachBlock2x2(g.ow, [&](int64_t j, auto n) {
        constexpr int64_t kN = decltype(n)::value;
        const int64_t c0 = r0 + 2 * j, c1 = r1 + 2 * j;
        if constexpr (kScatter) {
          ScatterBlock2x2<T, kN>(x + c0, x + c1, src + o + j, dst + c0, dst + c1);
        } else {
          GatherBlock2x2<T, kN>(x + c0, x + c1, src + c0, src + c1, dst + o + j);
        }
      });
    }
  });
}

// ----- Average --------------------------------------------------------------------------------
// The divisor of window (row, j): KD*KH*KW, or its real cells without
// count_include_pad (`rows`: the real depths times rows of its output row).
template <typename T>
T Divisor(const PoolGeom& g, int64_t rows, int64_t j) {
  if (g.count_include_pad) {
    return static_cast<T>(static_cast<double>(g.win.kernel[ops::kD]) * g.win.kernel[ops::kH] *
                          g.win.kernel[ops::kW]);
  }
  return static_cast<T>(rows * ColCount(g, j));
}

template <typename T>
void AvgPool(const PoolGeom& g, const T* x, T* y, int64_t chunks) {
  const int64_t s = g.win.stride[ops::kW];
  ForEachPlane(g, chunks, [&](int64_t pl, int64_t) {
    const T* xp = x + pl * InPlane(g);
    for (int64_t i = 0; i < OutRows(g); ++i) {
      T* yr = y + (pl * OutRows(g) + i) * g.ow;
      std::fill(yr, yr + g.ow, T(0));
      ForEachRun(g, i, [&](int64_t base, int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) yr[j] += xp[base + j * s];
      });
      const int64_t rows = KernelRows(g, i).cells();
      for (int64_t j = 0; j < g.ow; ++j) yr[j] /= Divisor<T>(g, rows, j);
    }
  });
}

// dx[cell] += dy[window] / divisor for every real cell of every window; `share`
// (scratch, one row per chunk) holds dy / divisor of the current output row.
template <typename T>
void AvgPoolGrad(const PoolGeom& g, const T* dy, T* dx, T* share, int64_t chunks) {
  const int64_t s = g.win.stride[ops::kW];
  ForEachPlane(g, chunks, [&](int64_t pl, int64_t chunk) {
    T* dxp = dx + pl * InPlane(g);
    T* v = share + chunk * g.ow;
    std::fill(dxp, dxp + InPlane(g), T(0));
    for (int64_t i = 0; i < OutRows(g); ++i) {
      const T* dyr = dy + (pl * OutRows(g) + i) * g.ow;
      const int64_t rows = KernelRows(g, i).cells();
      for (int64_t j = 0; j < g.ow; ++j) v[j] = dyr[j] / Divisor<T>(g, rows, j);
      ForEachRun(g, i, [&](int64_t base, int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) dxp[base + j * s] += v[j];
      });
    }
  });
}

// ----- Kernels ----------------------------------------------------------------------------
// max_pool2d(x) and avg_pool2d(x).
absl::StatusOr<Value> PoolKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(PoolGeom g, ops::PoolKernelGeom(ctx.prim(), {x}));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.Allocate(x->dtype(), g.y_shape()));
  bool max = ctx.prim().id() == PrimId::kMaxPool2d;
  int64_t chunks = PlaneChunks(g);
  DispatchFloat(x->dtype(), [&](auto zero) {
    using T = decltype(zero);
    if (max && IsPlain2x2(g)) {
      MaxPool2x2<T>(g, x->data<T>(), y.mutable_data<T>(), chunks);
    } else if (max) {
      MaxPool<T>(g, x->data<T>(), y.mutable_data<T>(), chunks);
    } else {
      AvgPool<T>(g, x->data<T>(), y.mutable_data<T>(), chunks);
    }
  });
  return Value(std::move(y));
}

// max_pool2d_grad(x, dy) (kScatter) and max_pool2d_grad_grad(x, ddx): the 2x2
// loops where they apply, else the general ones with a row of argmax scratch per
// chunk.
template <bool kScatter>
absl::StatusOr<Value> RouteKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* src, ctx.FloatTensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(PoolGeom g, ops::PoolKernelGeom(ctx.prim(), {x, src}));
  KGRAD_ASSIGN_OR_RETURN(Tensor out,
                         ctx.Allocate(x->dtype(), ops::OutputShape(ctx.prim().id(), g)));
  const int64_t chunks = PlaneChunks(g);
  const bool plain = IsPlain2x2(g);
  ArgmaxScratch s;  // the general loops' rows (the 2x2 loops need none)
  if (!plain) {
    KGRAD_ASSIGN_OR_RETURN(s, MakeArgmaxScratch(ctx, x->dtype(), g, chunks));
  }
  DispatchFloat(x->dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* xs = x->data<T>();
    if (plain) {
      Route2x2<T, kScatter>(g, xs, src->data<T>(), out.mutable_data<T>(), chunks);
    } else {
      Route<T, kScatter>(g, xs, src->data<T>(), out.mutable_data<T>(), s, chunks);
    }
  });
  return Value(std::move(out));
}

// avg_pool2d_grad(dy, x_ref) -> dx shaped like x_ref.
absl::StatusOr<Value> AvgPoolGradKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* dy, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x_ref, ctx.FloatTensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(PoolGeom g, ops::PoolKernelGeom(ctx.prim(), {dy, x_ref}));
  KGRAD_ASSIGN_OR_RETURN(Tensor dx, ctx.Allocate(dy->dtype(), x_ref->shape()));
  int64_t chunks = PlaneChunks(g);
  KGRAD_ASSIGN_OR_RETURN(Tensor share, ctx.Allocate(dy->dtype(), {chunks, g.ow}));
  DispatchFloat(dy->dtype(), [&](auto zero) {
    using T = decltype(zero);
    AvgPoolGrad<T>(g, dy->data<T>(), dx.mutable_data<T>(), share.mutable_data<T>(), chunks);
  });
  return Value(std::move(dx));
}

}  // namespace

void RegisterPoolKernels(KernelTable* table) {
  table->Set(PrimId::kMaxPool2d, PoolKernel);
  table->Set(PrimId::kMaxPool2dGrad, RouteKernel</*kScatter=*/true>);
  table->Set(PrimId::kMaxPool2dGradGrad, RouteKernel</*kScatter=*/false>);
  table->Set(PrimId::kAvgPool2d, PoolKernel);
  table->Set(PrimId::kAvgPool2dGrad, AvgPoolGradKernel);
}

}  // namespace conv_internal
}  // namespace cpu
}  // namespace kgrad
