// Float GEMMs on strided row-major operands whose bits do not depend on the thread
// count. A caller's share of the cores changes with the runs beside it, and a
// result must not change with it (tests/stress/concurrency_test checks whole
// programs bit for bit). Eigen's and oneDNN's threaded GEMMs block and split
// their sums by the number of threads (measured: oneDNN's sgemm gives other bits
// on 1, 2, 3, 5 and 8 threads for 128x784x1024 and every k-heavy shape tried;
// Eigen's picks another depth blocking once it has more than one thread). So a
// product is cut into output tiles of a size fixed by the shapes, each computed
// on one thread: f32 by oneDNN's sgemm (~1.1-1.7x Eigen's rate on the MLP's and
// the transformer's shapes), f64 and builds without oneDNN by Eigen. The matmul
// and convolution kernels share it.
#ifndef KGRAD_BACKENDS_CPU_GEMM_H_
#define KGRAD_BACKENDS_CPU_GEMM_H_

#include <cstdint>

namespace kgrad {
namespace cpu {

// c[m, n] = op(a) * op(b), or c += op(a) * op(b) with `accumulate`; a is stored
// [m, k] ([k, m] when ta), b [k, n] ([n, k] when tb), every operand row-major
// with the given row strides (ld*: elements from one row to the next).
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false;

  // A dense product: every operand's rows contiguous.
  static GemmShape Dense(int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
    return {m, n, k, ta, tb, ta ? m : k, tb ? k : n, n, false};
  }
};

// The fixed output tiles of the threaded product below.
inline constexpr int64_t kGemmTileRows = 128, kGemmTileCols = 512;

// The tile c[r0:r1, c0:c1] of the product, on the calling thread with the
// threads it is allowed (callers allow one: ParallelForOneThreadEach).
template <typename T>
void GemmTile(const T* a, const T* b, T* c, const GemmShape& s, int64_t r0, int64_t r1, int64_t c0,
              int64_t c1);

// The whole product, on one thread, as one call (a shape's bits are those of
// its own blocking, which depends on the shape only).
template <typename T>
void SerialGemm(const T* a, const T* b, T* c, const GemmShape& s);

// The whole product in fixed tiles of kGemmTileRows x kGemmTileCols, spread over
// the threads (on the calling thread alone inside a parallel region). The same
// bits whatever the threads.
template <typename T>
void TiledGemm(const T* a, const T* b, T* c, const GemmShape& s);

extern template void GemmTile<float>(const float*, const float*, float*, const GemmShape&, int64_t,
                                     int64_t, int64_t, int64_t);
extern template void GemmTile<double>(const double*, const double*, double*, const GemmShape&,
                                      int64_t, int64_t, int64_t, int64_t);
extern template void SerialGemm<float>(const float*, const float*, float*, const GemmShape&);
extern template void SerialGemm<double>(const double*, const double*, double*, const GemmShape&);
extern template void TiledGemm<float>(const float*, const float*, float*, const GemmShape&);
extern template void TiledGemm<double>(const double*, const double*, double*, const GemmShape&);

}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_GEMM_H_
