// One fused run of the executor's plan (backends/fusion_planner.h): its program,
// and its applications with their kernels for operands the device's evaluator
// does not take.
#ifndef KGRAD_BACKENDS_FUSED_STEP_H_
#define KGRAD_BACKENDS_FUSED_STEP_H_

#include <array>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/device.h"
#include "backends/fusion_planner.h"
#include "core/node.h"
#include "core/value.h"

namespace kgrad {

struct FusedGroup {
  FusedProgram program;
  // The applications as they are: operands and outputs numbered inputs first,
  // then application i as num_inputs + i.
  std::vector<std::array<int32_t, 2>> node_operands;
  std::vector<int32_t> node_outputs;
  std::vector<const CNode*> nodes;
  std::vector<const Primitive*> prims;
  std::vector<KernelFn> kernels;
};

// The group of `run`, compiled for `device` (which has an evaluator); error
// naming the application when the device has no kernel for one.
absl::StatusOr<FusedGroup> MakeFusedGroup(absl::Span<CNode* const> run, FusedRunProgram frp, Device* device);

// The group's output values for its inputs `args`: the device evaluates the
// program when every input is a floating tensor of one dtype and shape on it;
// otherwise each application runs with its own kernel, which also reports what is
// wrong (with the graph and node).
absl::StatusOr<std::vector<Value>> RunFusedGroup(const FusedGroup& g, absl::Span<const Value> args,
                                                 Device* device);

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_FUSED_STEP_H_
