#include "backends/peak_recorder.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/func_graph.h"
#include "core/node.h"
#include "core/value_walk.h"

namespace kgrad {
namespace executor_internal {
namespace {

// The buffers of `v`'s tensors, through tuples and lists.
template <typename Fn>
void ForEachBuffer(const Value& v, Fn&& fn) {
  (void)ForEachLeaf(v, [&](const Value& leaf, absl::Span<const size_t>) {
    if (leaf.is_tensor() && leaf.tensor().defined() && leaf.tensor().buffer() != nullptr) {
      fn(leaf.tensor().buffer().get(), leaf.tensor());
    }
    return absl::OkStatus();
  });
}

std::string StepName(const Step& s) {
  std::string loc = s.node != nullptr ? s.node->Location() : "a step";
  switch (s.kind) {
    case Step::Kind::kKernel:
      return absl::StrCat(s.prim != nullptr ? s.prim->name() : "kernel", " at ", loc);
    case Step::Kind::kFused:
      return absl::StrCat("fused_elementwise at ", loc);
    case Step::Kind::kCall:
      return absl::StrCat("call at ", loc);
    case Step::Kind::kClosure:
      return absl::StrCat("closure at ", loc);
  }
  return loc;
}

}  // namespace

PeakRecorder::PeakRecorder(PeakTrace* trace, absl::Span<const Value> args,
                           absl::Span<const Value> weights)
    : trace_(trace) {
  *trace_ = PeakTrace();
  for (absl::Span<const Value> values : {args, weights}) {
    for (const Value& v : values) ForEachBuffer(v, [&](const Buffer* b, const Tensor&) { before_.insert(b); });
  }
  ResetCpuAllocatorPeak();
  start_bytes_ = CpuAllocatorStats().bytes_in_use;
  high_ = start_bytes_;
}

bool PeakRecorder::AfterStep() {
  ++trace_->steps;
  const int64_t mark = CpuAllocatorStats().peak_bytes_in_use;
  if (mark <= high_) return false;
  high_ = mark;
  return true;
}

void PeakRecorder::Begin(const Step& s) {
  const AllocatorStats now = CpuAllocatorStats();
  trace_->peak_bytes = high_ - start_bytes_;
  trace_->scratch_bytes = std::max<int64_t>(0, high_ - now.bytes_in_use);
  trace_->at = StepName(s);
  trace_->step = trace_->steps - 1;
  trace_->held.clear();
  seen_ = before_;
}

void PeakRecorder::HoldInputs(const Plan& plan, const Step& s, absl::Span<const Value> inputs) {
  const size_t first = s.kind == Step::Kind::kCall ? 1 : 0;
  for (size_t i = 0; i < inputs.size() && first + i < s.inputs.size(); ++i) {
    const Operand& op = s.inputs[first + i];
    std::string what = op.kind == OperandKind::kSlot ? SlotNames(plan)[op.index]
                       : op.kind == OperandKind::kConst ? "a constant"
                                                        : "a weight";
    Hold(inputs[i], what, /*step_input=*/true);
  }
}

void PeakRecorder::HoldFrame(const Plan& plan, absl::Span<const Value> slots) {
  const std::vector<std::string>& names = SlotNames(plan);
  for (size_t i = 0; i < slots.size() && i < names.size(); ++i) Hold(slots[i], names[i], false);
}

void PeakRecorder::End() {
  std::stable_sort(trace_->held.begin(), trace_->held.end(),
                   [](const PeakTrace::Held& a, const PeakTrace::Held& b) { return a.bytes > b.bytes; });
}

void PeakRecorder::Hold(const Value& v, const std::string& what, bool step_input) {
  ForEachBuffer(v, [&](const Buffer* b, const Tensor& t) {
    if (seen_.insert(b).second) {
      trace_->held.push_back({absl::StrCat(t.TypeString(), " ", what), static_cast<int64_t>(b->bytes()), step_input});
    }
  });
}

const std::vector<std::string>& PeakRecorder::SlotNames(const Plan& plan) {
  auto [it, fresh] = names_.try_emplace(&plan);
  std::vector<std::string>& names = it->second;
  if (!fresh) return names;
  names.assign(plan.num_slots, absl::StrCat("a value of graph '", plan.graph->name(), "'"));
  const std::vector<Parameter*>& params = plan.graph->parameters();
  for (int i = 0; i < plan.num_params && i < static_cast<int>(params.size()); ++i) {
    names[i] = absl::StrCat("parameter '", params[i]->DebugName(), "' of graph '",
                            plan.graph->name(), "'");
  }
  for (size_t i = 0; i < plan.fvs.size() && plan.num_params + i < names.size(); ++i) {
    names[plan.num_params + i] = absl::StrCat("free variable '", plan.fvs[i]->DebugName(),
                                              "' of graph '", plan.graph->name(), "'");
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    const std::string name = absl::StrCat(StepName(s), ", step ", i + 1, " of the graph");
    if (s.out >= 0 && s.out < plan.num_slots) names[s.out] = name;
    for (size_t k = 0; k < s.outs.size(); ++k) {
      if (s.outs[k] >= 0 && s.outs[k] < plan.num_slots) {
        names[s.outs[k]] = absl::StrCat(name, " (output ", k, ")");
      }
    }
  }
  // Who holds a value that long: its last reader.
  std::vector<int> last(plan.num_slots, -1);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    for (const Operand& op : plan.steps[i].inputs) {
      if (op.kind == OperandKind::kSlot && op.index >= 0 && op.index < plan.num_slots) {
        last[op.index] = static_cast<int>(i);
      }
    }
  }
  for (int slot = 0; slot < plan.num_slots; ++slot) {
    if (last[slot] < 0) continue;
    const Step& s = plan.steps[last[slot]];
    absl::StrAppend(&names[slot], "; read last by step ", last[slot] + 1,
                    s.prim != nullptr ? absl::StrCat(" (", s.prim->name(), ")") : "");
  }
  return names;
}

}  // namespace executor_internal
}  // namespace kgrad
