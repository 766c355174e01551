#include "backends/run_peak.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "core/status_macros.h"
#include "core/tensor.h"

namespace kgrad {
namespace {

// fn(tensor) for every tensor of `v`, through tuples and lists (a stack, not
// the C++ one: outputs nest as deep as a program makes them).
template <typename Fn>
void ForEachTensor(const Value& v, Fn&& fn) {
  std::vector<const Value*> stack = {&v};
  while (!stack.empty()) {
    const Value* x = stack.back();
    stack.pop_back();
    if (x->is_tensor()) {
      fn(x->tensor());
    } else if (x->is_sequence()) {
      for (const Value& e : x->elements()) stack.push_back(&e);
    }
  }
}

}  // namespace

absl::StatusOr<int64_t> RunPeakBytes(const Executor& e, const std::vector<Value>& args, int runs,
                                     Value* result) {
  int64_t peak = 0;
  for (int i = 0; i < runs; ++i) {
    const AllocatorStats before = CpuAllocatorStats();
    ResetCpuAllocatorPeak();
    {
      KGRAD_ASSIGN_OR_RETURN(Value r, e.Run(args));
      if (result != nullptr && i == runs - 1) *result = std::move(r);
    }
    peak = std::max(peak, CpuAllocatorStats().peak_bytes_in_use - before.bytes_in_use);
  }
  return peak;
}

int64_t NewBufferBytes(const Value& v, absl::Span<const Value> args) {
  absl::flat_hash_set<const Buffer*> held;
  for (const Value& a : args) {
    ForEachTensor(a, [&](const Tensor& t) {
      if (t.defined()) held.insert(t.buffer().get());
    });
  }
  int64_t bytes = 0;
  ForEachTensor(v, [&](const Tensor& t) {
    if (t.defined() && t.buffer() != nullptr && held.insert(t.buffer().get()).second) {
      bytes += static_cast<int64_t>(t.buffer()->bytes());
    }
  });
  return bytes;
}

absl::StatusOr<int64_t> RunPeakAboveOutputs(const Executor& e, const std::vector<Value>& args,
                                            int runs) {
  Value result;
  KGRAD_ASSIGN_OR_RETURN(int64_t high, RunPeakBytes(e, args, runs, &result));
  return std::max<int64_t>(0, high - NewBufferBytes(result, args));
}

}  // namespace kgrad
