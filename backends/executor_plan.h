// The compiled form of one graph for the Executor (backends/executor.h): its
// applications in order as Steps that read and write numbered slots of a frame,
// with the slots each step frees (last use), closures created from captured
// slots, calls marked when in tail position, and runs of elementwise
// applications as one fused step. CompilePlan builds it; the machine
// (backends/executor_machine.h) runs it. Private to the executor target.
#ifndef KGRAD_BACKENDS_EXECUTOR_PLAN_H_
#define KGRAD_BACKENDS_EXECUTOR_PLAN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/device.h"
#include "backends/fused_step.h"
#include "backends/kernel.h"
#include "backends/kernel_cache.h"
#include "core/func_graph.h"
#include "core/manager.h"

namespace kgrad {
namespace executor_internal {

enum class OperandKind : uint8_t { kSlot, kConst, kWeight };

struct Operand {
  OperandKind kind;
  int32_t index;
};

struct Step {
  enum class Kind : uint8_t { kKernel, kCall, kClosure, kFused } kind;
  const CNode* node = nullptr;
  const Primitive* prim = nullptr;  // kKernel
  KernelFn kernel = nullptr;        // kKernel
  FuncGraph* closure_graph = nullptr;  // kClosure
  absl::InlinedVector<Operand, 4> inputs;  // kCall: inputs[0] is the callee
  absl::InlinedVector<bool, 4> move;       // read by moving (last use of the slot)
  absl::InlinedVector<int32_t, 2> release; // slots dead after this step
  int32_t out = -1;
  std::shared_ptr<const FusedGroup> fused;  // kFused
  std::vector<int32_t> outs;                // kFused: one slot per program output
  // kKernel steps that read a weight: their kernel's memo across runs.
  std::shared_ptr<KernelCache> cache;
  bool tail = false;
  bool async = false;  // a collective handed to the CollectiveWorker
  bool waits = false;  // reads a slot an async collective writes
};

// `s` with the node's location (and its primitive's name) in front.
absl::Status AtNode(const absl::Status& s, const CNode* node, const Primitive* prim);

}  // namespace executor_internal

// The plan of one graph; frames of it have num_slots slots: the parameters
// first, then the captured free variables, then one per value computed.
class Plan {
 public:
  FuncGraph* graph = nullptr;
  int num_params = 0;
  int num_slots = 0;
  std::vector<const AnfNode*> fvs;  // captured free variables, closure order
  std::vector<executor_internal::Step> steps;
  std::vector<Value> constants;
  executor_internal::Operand output{executor_internal::OperandKind::kSlot, 0};
  std::vector<int32_t> release_at_entry;
};

namespace executor_internal {

// The plan of graph `g`, reading weights by `weight_index`. `fuse`: runs of
// elementwise applications as one step (where the device can); `overlap`:
// collectives handed to the CollectiveWorker; `weight_caches`: every kernel step
// keeps a KernelCache, for derived weights and compiled plans
// (ExecutorOptions::reuse_weight_layouts).
absl::StatusOr<std::unique_ptr<Plan>> CompilePlan(
    FuncGraph* g, Device* device, Manager& manager,
    const absl::flat_hash_map<const Parameter*, int>& weight_index, bool fuse, bool overlap,
    bool weight_caches);

}  // namespace executor_internal
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_EXECUTOR_PLAN_H_
