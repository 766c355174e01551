// The host memory one run of an executor holds at its high point, as the
// benchmarks and `kgrad bench` report it: the allocator's high-water mark
// (core/tensor.h) during the run minus what was in use when it started (the
// inputs, the weights, the executor's caches), so that what else the process
// holds does not count.
#ifndef KGRAD_BACKENDS_RUN_PEAK_H_
#define KGRAD_BACKENDS_RUN_PEAK_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/executor.h"
#include "core/value.h"

namespace kgrad {

// The peak above the bytes in use before it, the largest of `runs` runs of `e`
// on `args` (a first run may allocate what later runs reuse); `result`, when
// not null, gets the last run's result.
absl::StatusOr<int64_t> RunPeakBytes(const Executor& e, const std::vector<Value>& args, int runs,
                                     Value* result = nullptr);

// The bytes of the distinct buffers of `v`'s tensors (through tuples and lists)
// that no tensor of `args` holds: what a run allocated for its outputs, as
// requested (the allocator counts each block rounded up to 64 bytes, 4 KiB from
// 64 KiB: a difference of less than that per output).
int64_t NewBufferBytes(const Value& v, absl::Span<const Value> args);

// The memory a run holds above its inputs and its outputs, as `kgrad bench
// --grad` reports a training step's and memory budgets count it: RunPeakBytes
// less the new buffers of the last run's result (the gradients it returns).
absl::StatusOr<int64_t> RunPeakAboveOutputs(const Executor& e, const std::vector<Value>& args,
                                            int runs);

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_RUN_PEAK_H_
