// Fills a PeakTrace (backends/peak_trace.h) during one Run: after every kernel
// and fused step the machine asks whether the allocator's high-water mark rose;
// when it did, it hands over the step's inputs and every frame on its stack, and
// the recorder keeps the buffers they hold, named by the value each slot is.
// Only when a Profile asks for it: the check is one atomic read per step, the
// snapshot a walk over the live frames at each new high.
#ifndef KGRAD_BACKENDS_PEAK_RECORDER_H_
#define KGRAD_BACKENDS_PEAK_RECORDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/types/span.h"
#include "backends/executor_plan.h"
#include "backends/peak_trace.h"
#include "core/tensor.h"
#include "core/value.h"

namespace kgrad {
namespace executor_internal {

class PeakRecorder {
 public:
  // Resets the allocator's peak (the run's mark is its own); what `args` and
  // `weights` hold is in use before the run and not listed.
  PeakRecorder(PeakTrace* trace, absl::Span<const Value> args, absl::Span<const Value> weights);

  // After a kernel or fused step: true when the high-water mark rose during it;
  // then the caller calls Begin, Hold* and End.
  bool AfterStep();
  void Begin(const Step& s);
  // What step `s` of a frame of `plan` read (`inputs` in operand order).
  void HoldInputs(const Plan& plan, const Step& s, absl::Span<const Value> inputs);
  void HoldFrame(const Plan& plan, absl::Span<const Value> slots);
  void End();

 private:
  const std::vector<std::string>& SlotNames(const Plan& plan);
  void Hold(const Value& v, const std::string& what, bool step_input);

  PeakTrace* trace_;
  int64_t start_bytes_ = 0;
  int64_t high_ = 0;  // the allocator's mark at the last new high
  absl::flat_hash_set<const Buffer*> before_;  // held when the run began
  absl::flat_hash_set<const Buffer*> seen_;    // held in the snapshot being taken
  absl::flat_hash_map<const Plan*, std::vector<std::string>> names_;
};

}  // namespace executor_internal
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_PEAK_RECORDER_H_
