// The suite's reference: an Eigen sgemm on the suite's threads.

// GCC 12 reports -W(maybe-)uninitialized inside its own AVX-512 intrinsics
// (_mm512_undefined_ps) when Eigen's GEMM is inlined: a known false positive
// (see backends/cpu/linalg_kernels.cc) that would bury real warnings.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backends/cpu/eigen.h"  // Eigen, as the kernels see it
#include "bench/suite_kgrad.h"

namespace kgrad {
namespace bench {

void MeasureSgemm(const KgradRun& run, Metrics* out) {
  const Eigen::Index n = run.shapes.sgemm_n;
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n), c(n, n);
  double ms = MedianMs([&] { c.noalias() = a * b; }, run.budget, 9);
  (*out)["sgemm_gflops"] = 2.0 * n * n * n / (ms * 1e6);
  (*out)["sgemm_threads"] = Eigen::nbThreads();
  run.progress->Done("Eigen sgemm");
}

}  // namespace bench
}  // namespace kgrad
