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

}  // namespace

template <typename T>
void GemmTile(const T* a, const T* b, T* c, const GemmShape& s, int64_t r0, int64_t r1, int64_t c0,
              int64_t c1) {
  const int64_t rows = r1 - r0, cols = c1 - c0;
  if (rows <= 0 || cols <= 0) return;
  const T* at = a + (s.ta ? r0 : r0 * s.lda);
  const T* bt = b + (s.tb ? c0 * s.ldb : c0);
  T* ct = c + r0 * s.ldc + c0;
  Eigen::Map<RowMatrix<T>, 0, Stride> out(ct, rows, cols, Stride(s.ldc));
  if (s.k == 0) {
    if (!s.accumulate) out.setZero();  // a sum of nothing
    return;
  }
#ifndef KGRAD_NO_DNNL
  if constexpr (std::is_same_v<T, float>) {
    if (dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', rows, cols, s.k, 1.0f, at, s.lda, bt, s.ldb,
                   s.accumulate ? 1.0f : 0.0f, ct, s.ldc) == dnnl_success) {
      return;
    }
  }
#endif
  using ConstMap = Eigen::Map<const RowMatrix<T>, 0, Stride>;
  ConstMap ma(at, s.ta ? s.k : rows, s.ta ? rows : s.k, Stride(s.lda));
  ConstMap mb(bt, s.tb ? cols : s.k, s.tb ? s.k : cols, Stride(s.ldb));
  EigenProduct(out, ma, mb, s.ta, s.tb, s.accumulate);
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
