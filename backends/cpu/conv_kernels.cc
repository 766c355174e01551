// CPU kernels: convolution (NCHW activations, OIHW filters; also the 1-D and
// 3-D forms, NCL and NCDHW, through the same three-axis loops with trivial
// leading axes), f32 and f64. Pooling lives in pool_kernels.cc and is
// registered from here.
//
// Convolution is lowered to GEMM per sample and group (im2col). Output "rows"
// are the (z, i) pairs of output depth and height, r = z*OH + i, each a row of OW:
//   col[((c*KD + a)*KH + p)*KW + q, r*OW + j]
//       = x[c, z*sd - front + a*dd, i*sh - top + p*dh, j*sw - left + q*dw]  (0 outside)
//   conv2d:          Y_g  = W_g * col                 [O/g, OD*OH*OW]
//   backprop_input:  col  = W_g^T * dY_g, then col2im  (scatter-add back into dx)
//   backprop_filter: dW_g += dY_g * col^T, summed over the batch
// conv2d and backprop_input split the batch over threads, or, for few big
// samples, leave it to Eigen's OpenMP-parallel GEMM; backprop_filter splits each
// GEMM into fixed blocks of output channels (see there). f32 convolutions go to
// oneDNN where it takes them (dnnl_conv.h: its direct JIT kernels beat im2col +
// GEMM, and its depthwise kernels the loops of depthwise_conv.h, measured on
// resnet18 and mobilenet_v2); f64, which the gradient checks use, always takes the
// loops here, and depthwise convolutions the direct loops of depthwise_conv.h.
// Every kernel validates its inputs and attributes itself, by the rules of
// ops/conv_window.h.
#include <algorithm>
#include <array>
#include <utility>

#include "absl/status/status.h"
#include "backends/cpu/conv_window.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/depthwise_conv.h"
#include "backends/cpu/dnnl_conv.h"
#include "backends/cpu/eigen.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/parallel.h"
#include "core/status_macros.h"
#include "ops/conv_window.h"

namespace kgrad {
namespace cpu {
namespace {

using conv_internal::DispatchFloat;
using conv_internal::DnnlConvKind;
using conv_internal::IsDepthwise;
using conv_internal::ValidRange;
using ops::ConvGeom;
using ops::Window;

// Per-sample GEMM work (flops) above which one GEMM is worth all the threads.
constexpr double kGemmParallelFlops = 1 << 24;
// Elements of column scratch per chunk that im2col tiles aim for (16 MB in f32).
constexpr double kColBudget = 1 << 22;

// ----- im2col ------------------------------------------------------------------------
// The column matrix of one sample's group is [cg*KD*KH*KW, OD*OH*OW].
int64_t ColRows(const ConvGeom& g) { return g.cg * g.kd * g.kh * g.kw; }
int64_t ColCols(const ConvGeom& g) { return g.od * g.oh * g.ow; }
// Output rows (z, i) of OW columns each, and an input channel's cells.
int64_t OutRows(const ConvGeom& g) { return g.od * g.oh; }
int64_t InPlane(const ConvGeom& g) { return g.d * g.h * g.w; }

// A 1x1(x1) filter with unit stride and no padding reads x itself as its column
// matrix.
bool IsPointwise(const ConvGeom& g) {
  const ops::Axes zero{0, 0, 0}, one{1, 1, 1};
  return g.kd == 1 && g.kh == 1 && g.kw == 1 && g.win.stride == one && g.win.pad_lo == zero &&
         g.win.pad_hi == zero;
}

// The input row (depth z*sd - front + a*dd, height i*sh - top + p*dh) that output
// row r reads through filter taps (a, p), as an offset into a channel's cells;
// -1 when it lies in the padding.
int64_t InputRow(const ConvGeom& g, int64_t r, int64_t a, int64_t p) {
  const Window& k = g.win;
  const int64_t z = r / g.oh, i = r % g.oh;
  const int64_t iz = z * k.stride[ops::kD] - k.pad_lo[ops::kD] + a * k.dilation[ops::kD];
  const int64_t ih = i * k.stride[ops::kH] - k.pad_lo[ops::kH] + p * k.dilation[ops::kH];
  if (iz < 0 || iz >= g.d || ih < 0 || ih >= g.h) return -1;
  return (iz * g.h + ih) * g.w;
}

// fn(col_row, a, p, q) for every column row of channels [c0, c1): the filter tap
// (a, p, q) of channel c, in the column matrix's row order.
template <typename Fn>
void ForEachTap(const ConvGeom& g, int64_t c0, int64_t c1, Fn&& fn) {
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t a = 0; a < g.kd; ++a) {
      for (int64_t p = 0; p < g.kh; ++p) {
        for (int64_t q = 0; q < g.kw; ++q) fn(((c * g.kd + a) * g.kh + p) * g.kw + q, c, a, p, q);
      }
    }
  }
}

// The column matrix of output rows [i0, i1): col[tap, (r - i0)*OW + j],
// [cg*KD*KH*KW, (i1 - i0)*OW], from one sample's group x [cg, D, H, W].
// Channels [c0, c1) only when given (threads fill disjoint row ranges of col).
template <typename T>
void Im2Col(const ConvGeom& g, const T* x, int64_t i0, int64_t i1, T* col, int64_t c0 = 0,
            int64_t c1 = -1) {
  const Window& k = g.win;
  const int64_t tile = (i1 - i0) * g.ow, sw = k.stride[ops::kW];
  ForEachTap(g, c0, c1 < 0 ? g.cg : c1, [&](int64_t tap, int64_t c, int64_t a, int64_t p, int64_t q) {
    T* row = col + tap * tile;
    const int64_t off_w = q * k.dilation[ops::kW] - k.pad_lo[ops::kW];
    auto [j0, j1] = ValidRange(off_w, sw, g.w, g.ow);
    for (int64_t r = i0; r < i1; ++r) {
      T* out = row + (r - i0) * g.ow;
      const int64_t in = InputRow(g, r, a, p);
      if (in < 0) {
        std::fill(out, out + g.ow, T(0));
        continue;
      }
      const T* src = x + c * InPlane(g) + in;
      std::fill(out, out + j0, T(0));
      for (int64_t j = j0; j < j1; ++j) out[j] = src[j * sw + off_w];
      std::fill(out + j1, out + g.ow, T(0));
    }
  });
}

// The adjoint of Im2Col: adds each column entry into the x cell it was read from.
template <typename T>
void Col2Im(const ConvGeom& g, const T* col, int64_t i0, int64_t i1, T* dx) {
  const Window& k = g.win;
  const int64_t tile = (i1 - i0) * g.ow, sw = k.stride[ops::kW];
  ForEachTap(g, 0, g.cg, [&](int64_t tap, int64_t c, int64_t a, int64_t p, int64_t q) {
    const T* row = col + tap * tile;
    const int64_t off_w = q * k.dilation[ops::kW] - k.pad_lo[ops::kW];
    auto [j0, j1] = ValidRange(off_w, sw, g.w, g.ow);
    for (int64_t r = i0; r < i1; ++r) {
      const int64_t in = InputRow(g, r, a, p);
      if (in < 0) continue;
      const T* src = row + (r - i0) * g.ow;
      T* dst = dx + c * InPlane(g) + in;
      for (int64_t j = j0; j < j1; ++j) dst[j * sw + off_w] += src[j];
    }
  });
}

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
template <typename T>
using MatMap = Eigen::Map<RowMat<T>, 0, Stride>;
template <typename T>
using ConstMatMap = Eigen::Map<const RowMat<T>, 0, Stride>;

// A row-major [rows, cols] view of `p` whose rows are `stride` elements apart.
template <typename T>
MatMap<T> View(T* p, int64_t rows, int64_t cols, int64_t stride) {
  return MatMap<T>(p, rows, cols, Stride(stride));
}
template <typename T>
ConstMatMap<T> View(const T* p, int64_t rows, int64_t cols, int64_t stride) {
  return ConstMatMap<T>(p, rows, cols, Stride(stride));
}

// out = op(a) * op(b) on row-major views, through the GEMM whose bits do not
// depend on the thread count (backends/cpu/gemm.h): in fixed tiles over the
// threads when called outside a parallel region (a serial batch loop), on the
// calling thread inside one (a batch chunk).
template <typename T>
void Product(MatMap<T> out, ConstMatMap<T> a, bool ta, ConstMatMap<T> b, bool tb) {
  GemmShape s;
  s.m = out.rows();
  s.n = out.cols();
  s.k = ta ? a.rows() : a.cols();
  s.ta = ta;
  s.tb = tb;
  s.lda = a.outerStride();
  s.ldb = b.outerStride();
  s.ldc = out.outerStride();
  TiledGemm(a.data(), b.data(), out.data(), s);
}

// Batch chunks to run in parallel. One chunk (a serial batch loop) when the work is
// small, or when a sample's GEMM is big enough to use every thread by itself
// (Product spreads its tiles over the threads outside a parallel region). Work is
// estimated in double: the dims are bounded but their products need not fit int64.
int64_t BatchChunks(const ConvGeom& g) {
  int64_t threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  double per_sample = 2.0 * g.o * ColRows(g) * ColCols(g);
  if (g.n <= 1 || threads <= 1 || g.n * per_sample < kParallelGrain) return 1;
  if (g.n < threads && per_sample >= kGemmParallelFlops) return 1;
  return std::min(g.n, threads);
}

// Output rows per im2col tile, so that a chunk's column scratch stays near
// kColBudget elements (large images would otherwise need gigabytes). Pointwise
// convolutions read x in place and take all rows at once.
int64_t TileRows(const ConvGeom& g) {
  if (IsPointwise(g)) return OutRows(g);
  double per_row = std::max(1.0, static_cast<double>(ColRows(g)) * g.ow);
  return std::clamp<int64_t>(static_cast<int64_t>(kColBudget / per_row), 1,
                             std::max<int64_t>(OutRows(g), 1));
}

// Runs fn(chunk, n) for every sample, the chunks in parallel.
template <typename Fn>
void ForEachSample(int64_t n, int64_t chunks, Fn&& fn) {
  ParallelFor(chunks, 2, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      for (int64_t s = n * c / chunks; s < n * (c + 1) / chunks; ++s) fn(c, s);
    }
  });
}

// The shared plan of the three convolution kernels: chunks and their scratch.
struct ConvPlan {
  int64_t chunks, tile_rows;
  Tensor scratch;  // [chunks, col_rows, tile_rows*OW] (empty for pointwise)

  template <typename T>
  T* col(int64_t chunk, const ConvGeom& g) const {
    if (scratch.NumElements() == 0) return nullptr;  // pointwise: no im2col
    return scratch.mutable_data<T>() + chunk * ColRows(g) * tile_rows * g.ow;
  }
};

// `chunks`: how many chunks run at once, each with its own column scratch.
absl::StatusOr<ConvPlan> MakePlan(const KernelContext& ctx, DType dtype, const ConvGeom& g,
                                  int64_t chunks) {
  ConvPlan plan;
  plan.chunks = chunks;
  plan.tile_rows = TileRows(g);
  Shape shape = {0};
  if (!IsPointwise(g)) shape = {plan.chunks, ColRows(g), plan.tile_rows * g.ow};
  KGRAD_ASSIGN_OR_RETURN(plan.scratch, ctx.Allocate(dtype, shape));
  return plan;
}

// Columns of output rows [i0, i1) for one sample's group xg: x itself (row stride
// H*W) for pointwise convolutions, else im2col into `col`. Returns the view.
template <typename T>
ConstMatMap<T> Columns(const ConvGeom& g, const T* xg, int64_t i0, int64_t i1, T* col) {
  int64_t tile = (i1 - i0) * g.ow;
  if (IsPointwise(g)) return View(xg + i0 * g.ow, ColRows(g), tile, ColCols(g));
  Im2Col(g, xg, i0, i1, col);
  return View(static_cast<const T*>(col), ColRows(g), tile, tile);
}

// Columns, with im2col's channels spread over the threads when `parallel` (a
// copy: no sums whose order could change).
template <typename T>
ConstMatMap<T> ParallelColumns(const ConvGeom& g, const T* xg, int64_t i0, int64_t i1, T* col,
                               bool parallel) {
  if (!parallel || IsPointwise(g)) return Columns(g, xg, i0, i1, col);
  ParallelFor(g.cg, 2, [&](int64_t c0, int64_t c1) { Im2Col(g, xg, i0, i1, col, c0, c1); });
  int64_t tile = (i1 - i0) * g.ow;
  return View(static_cast<const T*>(col), ColRows(g), tile, tile);
}

// Runs the convolution through oneDNN when it takes it: true when it ran, false
// when the loops here must (not applicable, or no oneDNN kernel for the window).
// oneDNN only reads the inputs; its C API takes every buffer as void*.
absl::StatusOr<bool> TryDnnl(const KernelContext& ctx, const ConvGeom& g, DType dtype,
                             DnnlConvKind kind, const Tensor& x, const Tensor& w, const Tensor& y) {
  if (!conv_internal::DnnlConvApplies(g, dtype)) return false;
  // The weight is input 1 of conv2d and conv2d_backprop_input (the output of the
  // filter's backprop).
  const Tensor* kept_w = kind != DnnlConvKind::kBackwardWeights && ctx.persistent(1) ? &w : nullptr;
  absl::Status s = conv_internal::DnnlConv(ctx, g, kind, x.mutable_data<float>(),
                                          w.mutable_data<float>(), y.mutable_data<float>(), kept_w);
  if (absl::IsUnimplemented(s)) return false;
  KGRAD_RETURN_IF_ERROR(s);
  return true;
}

// kgrad's loops of one convolution kind for element type T: `out` from the
// operands `a` and `b` (y from x and w, dx from dy and w, dw from x and dy).
template <typename T>
struct ConvLoops {
  void (*depthwise)(const ConvGeom& g, const T* a, const T* b, T* out);
  void (*gemm)(const ConvGeom& g, const ConvPlan& plan, const T* a, const T* b, T* out);
};

// A convolution that oneDNN did not take: the depthwise loops where they apply,
// else the im2col GEMMs on a plan of `chunks` batch chunks. loops(T{}) gives
// the kind's ConvLoops<T>.
template <typename Loops>
absl::Status RunLoops(const KernelContext& ctx, const ConvGeom& g, int64_t chunks, const Tensor& a,
                      const Tensor& b, const Tensor& out, Loops loops) {
  if (IsDepthwise(g)) {
    DispatchFloat(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      loops(zero).depthwise(g, a.data<T>(), b.data<T>(), out.mutable_data<T>());
    });
    return absl::OkStatus();
  }
  KGRAD_ASSIGN_OR_RETURN(ConvPlan plan, MakePlan(ctx, a.dtype(), g, chunks));
  DispatchFloat(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    loops(zero).gemm(g, plan, a.data<T>(), b.data<T>(), out.mutable_data<T>());
  });
  return absl::OkStatus();
}

// ----- conv2d -------------------------------------------------------------------------
// Y_g[:, tile] = W_g * col(tile) per sample, group and tile of output rows.
template <typename T>
void Conv2dForward(const ConvGeom& g, const ConvPlan& plan, const T* x, const T* w, T* y) {
  const int64_t rows = ColRows(g), cols = ColCols(g);
  ForEachSample(g.n, plan.chunks, [&](int64_t chunk, int64_t n) {
    T* col = plan.col<T>(chunk, g);
    for (int64_t gi = 0; gi < g.win.groups; ++gi) {
      const T* xg = x + (n * g.c + gi * g.cg) * InPlane(g);
      T* yg = y + (n * g.o + gi * g.og) * cols;
      auto wg = View(w + gi * g.og * rows, g.og, rows, rows);
      for (int64_t i0 = 0; i0 < OutRows(g); i0 += plan.tile_rows) {
        int64_t i1 = std::min(OutRows(g), i0 + plan.tile_rows);
        auto out = View(yg + i0 * g.ow, g.og, (i1 - i0) * g.ow, cols);
        if (rows == 0) {
          out.setZero();  // no input channels: an empty sum
        } else {
          Product(out, wg, false, Columns(g, xg, i0, i1, col), false);
        }
      }
    }
  });
}

absl::StatusOr<Value> Conv2d(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* w, ctx.FloatTensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(ConvGeom g, ops::ConvKernelGeom(ctx.prim(), {x, w}));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.Allocate(x->dtype(), g.y_shape()));
  KGRAD_ASSIGN_OR_RETURN(bool ran, TryDnnl(ctx, g, x->dtype(), DnnlConvKind::kForward, *x, *w, y));
  if (!ran) {
    KGRAD_RETURN_IF_ERROR(RunLoops(ctx, g, BatchChunks(g), *x, *w, y, [](auto zero) {
      using T = decltype(zero);
      return ConvLoops<T>{conv_internal::DepthwiseForward<T>, Conv2dForward<T>};
    }));
  }
  return Value(std::move(y));
}

// ----- conv2d_backprop_input ----------------------------------------------------------
// col(tile) = W_g^T * dY_g[:, tile], scattered back by col2im (pointwise: written
// straight into dx).
template <typename T>
void Conv2dBackpropInput(const ConvGeom& g, const ConvPlan& plan, const T* dy, const T* w, T* dx) {
  const int64_t rows = ColRows(g), cols = ColCols(g);
  ForEachSample(g.n, plan.chunks, [&](int64_t chunk, int64_t n) {
    T* col = plan.col<T>(chunk, g);
    for (int64_t gi = 0; gi < g.win.groups; ++gi) {
      T* dxg = dx + (n * g.c + gi * g.cg) * InPlane(g);
      const T* dyg = dy + (n * g.o + gi * g.og) * cols;
      auto wg = View(w + gi * g.og * rows, g.og, rows, rows);
      if (!IsPointwise(g)) std::fill(dxg, dxg + g.cg * InPlane(g), T(0));
      for (int64_t i0 = 0; i0 < OutRows(g); i0 += plan.tile_rows) {
        int64_t i1 = std::min(OutRows(g), i0 + plan.tile_rows);
        int64_t tile = (i1 - i0) * g.ow;
        auto out =
            IsPointwise(g) ? View(dxg + i0 * g.ow, rows, tile, cols) : View(col, rows, tile, tile);
        if (g.og == 0) {
          out.setZero();  // no output channels: nothing flows back
        } else {
          Product(out, wg, true, View(dyg + i0 * g.ow, g.og, tile, cols), false);
        }
        if (!IsPointwise(g)) Col2Im(g, col, i0, i1, dxg);
      }
    }
  });
}

absl::StatusOr<Value> Conv2dBackpropInputKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* dy, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* w, ctx.FloatTensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x_ref, ctx.FloatTensorAt(2));
  KGRAD_ASSIGN_OR_RETURN(ConvGeom g, ops::ConvKernelGeom(ctx.prim(), {dy, w, x_ref}));
  KGRAD_ASSIGN_OR_RETURN(Tensor dx, ctx.Allocate(dy->dtype(), x_ref->shape()));
  KGRAD_ASSIGN_OR_RETURN(bool ran,
                         TryDnnl(ctx, g, dy->dtype(), DnnlConvKind::kBackwardData, dx, *w, *dy));
  if (!ran) {
    KGRAD_RETURN_IF_ERROR(RunLoops(ctx, g, BatchChunks(g), *dy, *w, dx, [](auto zero) {
      using T = decltype(zero);
      return ConvLoops<T>{conv_internal::DepthwiseBackpropInput<T>, Conv2dBackpropInput<T>};
    }));
  }
  return Value(std::move(dx));
}

// ----- conv2d_backprop_filter ---------------------------------------------------------
// dW_g += dY_g[:, tile] * col(tile)^T over samples and tiles of output rows. The
// sums must not depend on the thread count (a caller's share of the cores
// varies with the runs beside it, and results must not): each GEMM is cut into
// FilterBlocks fixed blocks of output channels, each block's product on one
// thread (Eigen's GEMM blocks its sums differently on more threads), so every
// dW entry is summed in the same order whatever the threads. (The f32 kernels
// with two samples or more go to oneDNN, in fixed batch chunks: dnnl_conv.cc.)
int64_t FilterBlocks(const ConvGeom& g) {
  const double work = 2.0 * g.o * ColRows(g) * ColCols(g) * g.n;
  if (work < kParallelGrain) return 1;
  return std::clamp<int64_t>(g.og, 1, conv_internal::kWeightChunks);
}

template <typename T>
void Conv2dBackpropFilter(const ConvGeom& g, const ConvPlan& plan, const T* x, const T* dy, T* dw) {
  const int64_t rows = ColRows(g), cols = ColCols(g);
  const int64_t blocks = FilterBlocks(g);
  std::fill(dw, dw + g.o * rows, T(0));
  T* col = plan.col<T>(0, g);
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t gi = 0; gi < g.win.groups; ++gi) {
      const T* xg = x + (n * g.c + gi * g.cg) * InPlane(g);
      const T* dyg = dy + (n * g.o + gi * g.og) * cols;
      auto dwg = View(dw + gi * g.og * rows, g.og, rows, rows);
      for (int64_t i0 = 0; i0 < OutRows(g); i0 += plan.tile_rows) {
        int64_t i1 = std::min(OutRows(g), i0 + plan.tile_rows);
        int64_t tile = (i1 - i0) * g.ow;
        auto columns = ParallelColumns(g, xg, i0, i1, col, blocks > 1);
        auto dyv = View(dyg + i0 * g.ow, g.og, tile, cols);
        ParallelForOneThreadEach(blocks, 2, [&](int64_t b, int64_t e) {
          for (int64_t blk = b; blk < e; ++blk) {
            const int64_t o0 = g.og * blk / blocks, o1 = g.og * (blk + 1) / blocks;
            dwg.middleRows(o0, o1 - o0).noalias() +=
                dyv.middleRows(o0, o1 - o0) * columns.transpose();
          }
        });
      }
    }
  }
}

absl::StatusOr<Value> Conv2dBackpropFilterKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* dy, ctx.FloatTensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* w_ref, ctx.FloatTensorAt(2));
  KGRAD_ASSIGN_OR_RETURN(ConvGeom g, ops::ConvKernelGeom(ctx.prim(), {x, dy, w_ref}));
  KGRAD_ASSIGN_OR_RETURN(Tensor dw, ctx.Allocate(x->dtype(), g.w_shape()));
  KGRAD_ASSIGN_OR_RETURN(bool ran,
                         TryDnnl(ctx, g, x->dtype(), DnnlConvKind::kBackwardWeights, *x, dw, *dy));
  if (!ran) {
    KGRAD_RETURN_IF_ERROR(RunLoops(ctx, g, 1, *x, *dy, dw, [](auto zero) {
      using T = decltype(zero);
      return ConvLoops<T>{conv_internal::DepthwiseBackpropFilter<T>, Conv2dBackpropFilter<T>};
    }));
  }
  return Value(std::move(dw));
}

}  // namespace

void RegisterConvKernels(KernelTable* table) {
  table->Set(PrimId::kConv2d, Conv2d);
  table->Set(PrimId::kConv2dBackpropInput, Conv2dBackpropInputKernel);
  table->Set(PrimId::kConv2dBackpropFilter, Conv2dBackpropFilterKernel);
  conv_internal::RegisterPoolKernels(table);
}

}  // namespace cpu
}  // namespace kgrad
