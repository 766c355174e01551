// Where one run's host memory peaks and what holds it there: the step during
// which the allocator's high-water mark was reached, and the distinct buffers the
// run's frames held right after that step, each named by the node (or the
// parameter) whose value it is. It answers what a rematerialisation plan cannot
// lower: a peak held by the backward's own gradients and temporaries is not
// lowered by recomputing residuals (`kgrad bench --grad --profile` prints it).
#ifndef KGRAD_BACKENDS_PEAK_TRACE_H_
#define KGRAD_BACKENDS_PEAK_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace kgrad {

struct PeakTrace {
  struct Held {
    std::string what;  // "relu_grad at graph 'g', node 'n'", "parameter 'x' of graph 'g'"
    int64_t bytes = 0;
    bool step_input = false;  // read by the peak step (held by it even if dead after)
  };
  // Bytes above those in use when the run began (its arguments, the weights).
  int64_t peak_bytes = 0;
  // Of those, what the peak step allocated and freed again before returning
  // (its scratch): the high-water mark less the bytes in use right after it.
  int64_t scratch_bytes = 0;
  std::string at;      // the peak step's primitive and node
  int64_t step = -1;   // its index among the run's steps (kernels and fused runs)
  int64_t steps = 0;   // kernels and fused runs in the run
  // The buffers held after the peak step that were not held when the run began,
  // largest first. Values inside closures are not listed (their bytes are part of
  // peak_bytes - scratch_bytes - the sum of these).
  std::vector<Held> held;

  int64_t HeldBytes() const;
  // A readable summary: the peak, the step, then the `rows` largest buffers and
  // the rest summed.
  std::string ToString(int rows = 12) const;
};

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_PEAK_TRACE_H_
