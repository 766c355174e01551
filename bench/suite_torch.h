// Running the PyTorch side of the suite: /usr/bin/python3 bench/torch_side.py with
// a spec (shapes, timing budget, the tensors kgrad used), reading its flat JSON
// back. PyTorch is optional: when python3-torch is missing it is installed the way
// bazelw installs packages (apt-get), and if that fails the PyTorch column is
// reported missing -- the suite never fails because of it.
#ifndef KGRAD_BENCH_SUITE_TORCH_H_
#define KGRAD_BENCH_SUITE_TORCH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/suite_json.h"
#include "bench/suite_kgrad.h"

namespace kgrad {
namespace bench {

inline constexpr char kPython[] = "/usr/bin/python3";
// kPython, or $KGRAD_SUITE_PYTHON when set (to try the missing-PyTorch paths).
std::string Python();

// OK when `import torch` works in Python(), after installing python3-torch if
// needed (said on stderr through `progress`); else why not.
absl::Status EnsureTorch(Progress& progress);

// The spec bench/torch_side.py reads. `device` ("cpu", "cuda") is where the MLP
// and the conv net run; `programs` ("mlp", "conv", "chain", "ad_build",
// "sgemm") what is measured, empty for all of them.
std::string TorchSpecJson(const SuiteShapes& s, const TimingBudget& budget, int threads,
                          const std::string& tensor_dir, const TensorManifest& tensors,
                          const std::string& device = "cpu", const std::vector<std::string>& programs = {});

// Runs the script; each "stage NAME" line it prints advances `progress`. Its
// stderr goes to `log_path` (quoted in the error when it fails).
absl::StatusOr<FlatJson> RunTorchSide(const std::string& script, const std::string& spec_path,
                                      const std::string& result_path, const std::string& log_path,
                                      Progress& progress);

// The whole PyTorch side: finds bench/torch_side.py (FindTorchScript), makes
// sure torch imports (EnsureTorch), writes `spec_json` to WORK/spec.json and
// runs the script there. The status says why the PyTorch column is missing.
absl::StatusOr<FlatJson> RunTorchSuite(const char* argv0, const std::string& spec_json, const std::string& work,
                                       Progress& progress);

}  // namespace bench
}  // namespace kgrad

#endif  // KGRAD_BENCH_SUITE_TORCH_H_
