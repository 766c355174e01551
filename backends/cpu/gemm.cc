#include "backends/cpu/gemm.h"

#include <algorithm>
#include <type_traits>

#include "backends/cpu/eigen.h"
#include "backends/cpu/parallel.h"

#ifndef KGRAD_NO_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace kgrad {
namespace cpu {
namespace {

// Below this many multiply-adds a tiled product runs on the calling thread alone.
inline constexpr int64_t kParallelGemmWork = int64_t{1} << 18;

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;

// out (+)= op(ma) * op(mb) on Eigen maps (transposes as views, so no copies).
// Eigen picks its own algorithm by size: packed GEMM, or a coefficient-based
// product for tiny matrices (measured: its choice beats a lazy product forced on
// 8x8x8 and 12x12x12 batches).
template <typename Out, typename A, typename B>
void EigenProduct(Out& out, const A& ma, const B& mb, bool ta, bool tb, bool accumulate) {
  auto assign = [&](const auto& product) {
    if (accumulate) {
      out.noalias() += product;
    } else {
      out.noalias() = product;
    }
  };
  if (!ta && !tb) {
    assign(ma * mb);
  } else if (ta && !tb) {
    assign(ma.transpose() * mb);
  } else if (!ta && tb) {
    assign(ma * mb.transpose());
  } else {
    assign(ma.transpose() * mb.transpose());
  }
}


// Sums over at most this many terms run inside one sgemm call; longer ones are
// sgemm calls over consecutive slices of k, each adding into c. Why: oneDNN's
// AVX-512 kernels sum a skinny product's whole k in one chain per output (4 x
// 4096 x 5: error 1.45e-6 against torch's 9.8e-7 on the same machine, 6.0e-7 on
// AVX2), so the error grew with k; in slices it grows with 256 + k / 256 terms
// on every ISA. The extra passes over the c tile are 1/256 of the product's work.
inline constexpr int64_t kGemmDepthSlice = 256;

// c tile (+)= op(a) * op(b) over depth `depth` with a and b at their first term.
template <typename T>
void GemmSlice(const T* at, const T* bt, T* ct, const GemmShape& s, int64_t rows, int64_t cols,
               int64_t depth, bool accumulate) {
#ifndef KGRAD_NO_DNNL
  if constexpr (std::is_same_v<T, float>) {
    if (dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', rows, cols, depth, 1.0f, at, s.lda, bt,
                   s.ldb, accumulate ? 1.0f : 0.0f, ct, s.ldc) == dnnl_success) {
      return;
    }
  }
#endif
  using ConstMap = Eigen::Map<const RowMatrix<T>, 0, Stride>;
  Eigen::Map<RowMatrix<T>, 0, Stride> out(ct, rows, cols, Stride(s.ldc));
  ConstMap ma(at, s.ta ? depth : rows, s.ta ? rows : depth, Stride(s.lda));
  ConstMap mb(bt, s.tb ? cols : depth, s.tb ? depth : cols, Stride(s.ldb));
  EigenProduct(out, ma, mb, s.ta, s.tb, accumulate);
}

}  // namespace

template <typename T>
void GemmTile(const T* a, const T* b, T* c, const GemmShape& s, int64_t r0, int64_t r1, int64_t c0,
              int64_t c1) {
  const int64_t rows = r1 - r0, cols = c1 - c0;
  if (rows <= 0 || cols <= 0) return;
  const T* at = a + (s.ta ? r0 : r0 * s.lda);
  const T* bt = b + (s.tb ? c0 * s.ldb : c0);
  T* ct = c + r0 * s.ldc + c0;
  if (s.k == 0) {
    if (!s.accumulate) Eigen::Map<RowMatrix<T>, 0, Stride>(ct, rows, cols, Stride(s.ldc)).setZero();
    return;  // a sum of nothing
  }
  // Eigen blocks its depth itself (and doubles need no slicing); floats in slices.
  const int64_t slice = std::is_same_v<T, float> ? kGemmDepthSlice : s.k;
  for (int64_t k0 = 0; k0 < s.k; k0 += slice) {
    GemmSlice(at + (s.ta ? k0 * s.lda : k0), bt + (s.tb ? k0 : k0 * s.ldb), ct, s, rows, cols,
              std::min(slice, s.k - k0), k0 > 0 || s.accumulate);
  }
}

template <typename T>
void SerialGemm(const T* a, const T* b, T* c, const GemmShape& s) {
  const int threads = MaxThreads();
  SetMaxThreads(1);
  GemmTile(a, b, c, s, 0, s.m, 0, s.n);
  SetMaxThreads(threads);
}

template <typename T>
void TiledGemm(const T* a, const T* b, T* c, const GemmShape& s) {
  const int64_t tm = (s.m + kGemmTileRows - 1) / kGemmTileRows;
  const int64_t tn = (s.n + kGemmTileCols - 1) / kGemmTileCols;
  const double work = static_cast<double>(s.m) * s.n * std::max<int64_t>(s.k, 1);
  const int64_t grain = work < kParallelGemmWork ? tm * tn + 1 : 1;
  ParallelForOneThreadEach(tm * tn, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t i = t / tn, j = t % tn;
      GemmTile(a, b, c, s, i * kGemmTileRows, std::min(s.m, (i + 1) * kGemmTileRows),
               j * kGemmTileCols, std::min(s.n, (j + 1) * kGemmTileCols));
    }
  });
}

template void GemmTile<float>(const float*, const float*, float*, const GemmShape&, int64_t,
                              int64_t, int64_t, int64_t);
template void GemmTile<double>(const double*, const double*, double*, const GemmShape&, int64_t,
                               int64_t, int64_t, int64_t);
template void SerialGemm<float>(const float*, const float*, float*, const GemmShape&);
template void SerialGemm<double>(const double*, const double*, double*, const GemmShape&);
template void TiledGemm<float>(const float*, const float*, float*, const GemmShape&);
template void TiledGemm<double>(const double*, const double*, double*, const GemmShape&);

}  // namespace cpu
}  // namespace kgrad
