// Splitting loops over the machine's threads (OpenMP; the build enables it).
#ifndef KGRAD_BACKENDS_CPU_PARALLEL_H_
#define KGRAD_BACKENDS_CPU_PARALLEL_H_

#include <algorithm>
#include <cstdint>

#include "backends/cpu/denormals.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace kgrad {
namespace cpu {

// Below this many elements of elementwise work a loop runs on one thread: waking
// threads costs more than the work.
inline constexpr int64_t kParallelGrain = 1 << 15;

// The threads a parallel region may use (1 without OpenMP).
inline int MaxThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// Sets the calling thread's OpenMP thread count (a per-thread setting).
inline void SetMaxThreads(int n) {
#ifdef _OPENMP
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
#else
  (void)n;
#endif
}

// fn(begin, end) over [0, n) in contiguous chunks, in parallel when n >= grain.
// Every chunk runs with the caller's denormal mode (backends/cpu/denormals.h).
template <typename Fn>
void ParallelFor(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  if (n < grain) {
    fn(int64_t{0}, n);
    return;
  }
  const uint32_t denormal_mode = DenormalMode();
#pragma omp parallel
  {
    ScopedDenormalMode mode(denormal_mode);
    int64_t threads = 1, me = 0;
#ifdef _OPENMP
    threads = omp_get_num_threads();
    me = omp_get_thread_num();
#endif
    int64_t chunk = (n + threads - 1) / threads;
    int64_t b = me * chunk;
    int64_t e = std::min(n, b + chunk);
    if (b < e) fn(b, e);
  }
}

// ParallelFor whose chunks each run with one OpenMP thread, so that the
// libraries they call (Eigen's GEMM, oneDNN) start no threads of their own: a
// chunk's result then depends on its own work only, never on the thread count
// (a caller's share of the cores changes with the runs beside it). The caller's
// setting is restored after each chunk.
template <typename Fn>
void ParallelForOneThreadEach(int64_t n, int64_t grain, Fn&& fn) {
  ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
    const int threads = MaxThreads();
    SetMaxThreads(1);
    fn(begin, end);
    SetMaxThreads(threads);
  });
}

}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_PARALLEL_H_
