// Running the PyTorch side of the suite: /usr/bin/python3 bench/torch_side.py with
// a spec (shapes, timing budget, the tensors kgrad used), reading its flat JSON
// back. PyTorch is optional: when python3-torch is missing it is installed the way
// bazelw installs packages (apt-get), and if that fails the PyTorch column is
// reported missing -- the suite never fails because of it.
#ifndef KGRAD_BENCH_SUITE_TORCH_H_
#define KGRAD_BENCH_SUITE_TORCH_H_

#include <string>

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

// The spec bench/torch_side.py reads.
std::string TorchSpecJson(const SuiteShapes& s, const TimingBudget& budget, int threads,
                          const std::string& tensor_dir, const TensorManifest& tensors);

// Runs the script; each "stage NAME" line it prints advances `progress`. Its
// stderr goes to `log_path` (quoted in the error when it fails).
absl::StatusOr<FlatJson> RunTorchSide(const std::string& script, const std::string& spec_path,
                                      const std::string& result_path, const std::string& log_path,
                                      Progress& progress);

}  // namespace bench
}  // namespace kgrad

#endif  // KGRAD_BENCH_SUITE_TORCH_H_
