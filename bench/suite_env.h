// What a suite run needs from its surroundings: where results go, the PyTorch
// script, the clock, the machine's name, files. Shared by //bench:suite and
// //bench:gpu_suite.
#ifndef KGRAD_BENCH_SUITE_ENV_H_
#define KGRAD_BENCH_SUITE_ENV_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kgrad {
namespace bench {

// The command-line flags both suites take.
struct SuiteArgs {
  bool quick = false;    // --quick: fewer repetitions (a smoke run)
  bool torch = true;     // --no-torch: skip the PyTorch side
  bool profile = false;  // --profile: kgrad's time per primitive (stderr)
  std::string out;       // --out DIR: where the results go
};

// A suite's own flags: given a flag SuiteArgs does not know and the argument
// after it (nullptr at the end), how many of the two it took (0: none, the flag
// is unknown), or why the value is wrong.
using SuiteFlagParser = std::function<absl::StatusOr<int>(const std::string& flag, const char* value)>;

// Parses argv[1...] into `a`, SuiteArgs' flags here and the others by `more`.
absl::Status ParseSuiteArgs(int argc, char** argv, SuiteArgs* a, const SuiteFlagParser& more);

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

// Prints "<program>: <message>\n<more>" to stderr and returns `exit_code` (for a
// Main that gives up).
int Fail(absl::string_view program, absl::string_view message, int exit_code, absl::string_view more = "");

// The end of a suite's Main: "<program>: wrote <what>" (or the error writing
// it) on stderr, and the exit status: 0 when the results are written and every
// kgrad measurement succeeded (`kgrad_ok`).
int Finish(absl::string_view program, const absl::Status& written, absl::string_view what, bool kgrad_ok);

}  // namespace bench
}  // namespace kgrad

#endif  // KGRAD_BENCH_SUITE_ENV_H_
