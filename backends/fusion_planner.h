// Which applications of a graph the executor runs fused (backends/fused_elementwise.h).
//
// An application is fusable when its primitive has a fused instruction, its
// arity is that instruction's and, where types are known, it computes a
// floating tensor from operands of its own shape. The compile order (the run
// order, backends/run_order.h) is re-sorted so that fusable applications form
// long contiguous runs: Kahn's algorithm that, while a run is open, prefers a
// ready fusable application reading a value of the run, then any ready fusable
// one, and otherwise takes the earliest ready application of the run order (so a graph without fusable runs
// keeps its order exactly); a run ends at the first application that is not
// fusable. A Jvp of an elementwise chain then
// becomes one run (the primal chain and its tangents) instead of two runs with
// every primal value between them.
#ifndef KGRAD_BACKENDS_FUSION_PLANNER_H_
#define KGRAD_BACKENDS_FUSION_PLANNER_H_

#include <array>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "backends/fused_elementwise.h"
#include "core/node.h"

namespace kgrad {

struct FusionPlan {
  std::vector<CNode*> order;                       // the compile order
  std::vector<std::pair<size_t, size_t>> runs;     // [begin, end) in `order`, 2+ applications
};

// `may_reorder` false (a graph that makes closures over its nodes, see
// backends/run_order.h): the order stays, runs are its contiguous fusable stretches.
FusionPlan PlanFusion(const std::vector<CNode*>& order, bool may_reorder = true);

// A run as a program: its external inputs (in first-read order) and the
// applications whose values are read outside the run (graph output, later
// applications, nested graphs), in run order. The program merges each add of two
// products read nowhere else into one kMulAdd; `node_operands` keeps the run's
// applications as they are (value ids: the inputs, then application i as
// num_inputs + i), for running them one by one with their kernels, and
// `node_outputs` the ids of the outputs in that numbering.
struct FusedRunProgram {
  FusedProgram program;
  std::vector<AnfNode*> inputs;
  std::vector<CNode*> outputs;
  std::vector<std::array<int32_t, 2>> node_operands;
  std::vector<int32_t> node_outputs;
};

FusedRunProgram BuildFusedProgram(absl::Span<CNode* const> run);

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_FUSION_PLANNER_H_
