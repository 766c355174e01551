// The kgrad side of the benchmark suite: builds the programs of SuiteShapes,
// writes the tensors it feeds them (so bench/torch_side.py computes on the same
// numbers), and measures them. Results go into a flat map keyed like the PyTorch
// side's ("mlp.step_ms", "conv.peak_bytes", "ad_build.10000_ms", ...).
#ifndef KGRAD_BENCH_SUITE_KGRAD_H_
#define KGRAD_BENCH_SUITE_KGRAD_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/device.h"
#include "bench/suite_shapes.h"
#include "bench/suite_timing.h"

namespace kgrad {
namespace bench {

using Metrics = std::map<std::string, double>;

// A tensor written for the PyTorch side: raw little-endian f32, row-major.
struct TensorFile {
  std::string name;  // the parameter or weight name in the program
  std::string file;  // relative to the tensor directory
  std::vector<int64_t> shape;
};
// Per program ("mlp", "conv", "chain"): its tensors.
using TensorManifest = std::map<std::string, std::vector<TensorFile>>;

struct KgradRun {
  SuiteShapes shapes;
  TimingBudget budget;
  std::string tensor_dir;  // where the tensors for the PyTorch side go
  Progress* progress = nullptr;
  bool profile = false;  // print each step's time per primitive (stderr)
  // Where the MLP and the conv net run (nullptr: the CPU). Elsewhere (CUDA) each
  // step also runs once on the CPU and "<key>.max_diff_vs_cpu" records how far
  // apart the two are (MaxScaledDiff); peak memory is then not measured (the
  // CPU allocator's statistics do not see device memory).
  Device* device = nullptr;
};

// The largest |a - b| / max|b| over the tensors of `a` and `b` (tuples element by
// element; each tensor scaled by its own largest |b|, 1 when that is 0). An error
// when the structure, dtype or shape differ.
absl::StatusOr<double> MaxScaledDiff(const Value& a, const Value& b);


// 1 and 4: forward, step (loss + weight gradients), Jvp, peak memory of the step.
absl::Status MeasureMlp(const KgradRun& run, Metrics* out, TensorManifest* tensors);
// 2: forward, step, peak memory of the step.
absl::Status MeasureConvNet(const KgradRun& run, Metrics* out, TensorManifest* tensors);
// 3 and 4: forward, forward + gradient, Jvp; executed applications per run.
absl::Status MeasureChain(const KgradRun& run, Metrics* out, TensorManifest* tensors);
// 5: gradient graph build + optimise for each of shapes.build_sizes.
absl::Status MeasureAdBuild(const KgradRun& run, Metrics* out);
// The reference: Eigen sgemm of shapes.sgemm_n^3 on the same threads ("sgemm_gflops").
void MeasureSgemm(const KgradRun& run, Metrics* out);

}  // namespace bench
}  // namespace kgrad

#endif  // KGRAD_BENCH_SUITE_KGRAD_H_
