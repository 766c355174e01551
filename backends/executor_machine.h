// The machine that runs an Executor's plans (backends/executor_plan.h) for one
// Run: an explicit frame stack, so that recursion never grows the C++ stack
// (tail calls replace the caller's frame), the per-Run limits of
// ExecutorOptions, allocation metering, profiling, and the collectives in
// flight on the CollectiveWorker. Private to the executor target.
#ifndef KGRAD_BACKENDS_EXECUTOR_MACHINE_H_
#define KGRAD_BACKENDS_EXECUTOR_MACHINE_H_

#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "backends/collective_worker.h"
#include "backends/device.h"
#include "backends/executor.h"
#include "backends/executor_plan.h"
#include "backends/slot_pool.h"
#include "core/func_graph.h"

namespace kgrad {
namespace executor_internal {

// Runs `entry` (one of `plans`) on `args`. `weights`: the weights this run reads
// (with Run's replacements); `own_weights`: the executor's own, whose kernel
// caches may be kept. `profile` and `observer` may be null. `run_token` is
// Device::BeginRun's; `worker` is null unless collectives overlap; frames take
// their slots from `slot_pool`.
absl::StatusOr<Value> RunPlans(
    const absl::flat_hash_map<const FuncGraph*, std::unique_ptr<Plan>>& plans, const Plan* entry,
    std::vector<Value> args, std::vector<Value> weights, const std::vector<Value>& own_weights,
    Device* device, const ExecutorOptions& options, Profile* profile, KernelObserver* observer,
    int run_token, CollectiveWorker* worker, SlotPool* slot_pool);

}  // namespace executor_internal
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_EXECUTOR_MACHINE_H_
