// What a suite run needs from its surroundings: where results go, the PyTorch
// script, the clock, the machine's name, files. Shared by //bench:suite and
// //bench:gpu_suite.
#ifndef KGRAD_BENCH_SUITE_ENV_H_
#define KGRAD_BENCH_SUITE_ENV_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kgrad {
namespace bench {

// `requested` (from --out) made absolute: `bazel run` starts in the runfiles
// tree, so a relative path (and the default, "" -> bench/results) is taken from
// the workspace ($BUILD_WORKSPACE_DIRECTORY) when there is one.
std::string ResultsDir(const std::string& requested);

// bench/torch_side.py from the workspace or the runfiles; "" when not found.
std::string FindTorchScript(const char* argv0);

// Creates the results directory `out` (and its parents), and returns a fresh
// directory under /tmp for the tensors and the PyTorch side's files.
absl::StatusOr<std::string> MakeDirs(const std::string& out);

// How this run was started, for the report: "<bazel_run> -- ARGS..." ("-- ..."
// only when there are arguments).
std::string CommandLine(const std::string& bazel_run, int argc, char** argv);

std::string Now();       // "2026-11-21 09:46:22 UTC"
std::string CpuModel();  // from /proc/cpuinfo

absl::Status WriteText(const std::string& path, const std::string& text);

}  // namespace bench
}  // namespace kgrad

#endif  // KGRAD_BENCH_SUITE_ENV_H_
