// Shared settings of the fuzz targets: limits small enough that the fuzzer
// cannot spend its time on huge tensors or long loops, and a way to report a
// broken invariant as a crash (libFuzzer records crashes, not statuses).
#ifndef KGRAD_FUZZ_FUZZ_LIMITS_H_
#define KGRAD_FUZZ_FUZZ_LIMITS_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "backends/executor.h"
#include "core/infer_options.h"
#include "proto/convert.h"

namespace kgrad {
namespace fuzz {

inline LoadLimits Limits() {
  LoadLimits l;
  l.max_file_bytes = 64 << 10;
  l.max_tensor_bytes = 4 << 10;
  l.max_total_tensor_bytes = 32 << 10;
  l.max_nodes = 2000;
  l.max_graphs = 64;
  l.max_nesting_depth = 16;
  l.max_value_depth = 16;
  l.max_message_depth = 64;
  return l;
}

// Executor limits of one run: call depth, tail calls, bytes allocated and seconds.
// The defaults are the pipeline target's first run (a trip count of 3).
inline ExecutorOptions RunLimits(int max_call_depth = 200, int64_t max_tail_calls = 4000,
                                 int64_t max_run_bytes = 16 << 20, double max_run_seconds = 1) {
  ExecutorOptions o;
  o.max_call_depth = max_call_depth;
  o.max_tail_calls = max_tail_calls;
  o.max_run_bytes = max_run_bytes;
  o.max_run_seconds = max_run_seconds;
  return o;
}

// The pipeline target's second run, with a trip count of up to 5,500: long loops
// and the deep values they build, within a deadline (at most four such runs per
// input, well inside libFuzzer's -timeout of fuzz/run.sh).
inline ExecutorOptions LongRunLimits() { return RunLimits(100'000, 100'000, 256 << 20, 0.75); }

inline InferOptions InferLimits() {
  InferOptions o;
  o.max_call_depth = 64;
  o.max_abstract_depth = 64;
  return o;
}

// Largest tensor (elements) any node may have for the pipeline target to run it.
inline constexpr int64_t kMaxElements = 1 << 14;

// The input of LLVMFuzzerTestOneInput.
inline absl::string_view Bytes(const uint8_t* data, size_t size) {
  return absl::string_view(reinterpret_cast<const char*>(data), size);
}

[[noreturn]] inline void Die(const char* what, const absl::Status& s) {
  std::fprintf(stderr, "fuzz invariant broken: %s: %s\n", what, s.ToString().c_str());
  std::abort();
}

}  // namespace fuzz
}  // namespace kgrad

#endif  // KGRAD_FUZZ_FUZZ_LIMITS_H_
