// An automatic rematerialisation plan under a memory budget (`--remat auto
// --memory-budget B`): which forward values the training step saves for its
// backward pass and which it recomputes, inside a flat graph (no outlining).
//
// The step is the optimised value-and-gradient, cut as the split cuts it
// (ad/split.h: its residuals are the forward values the backward reads). Saving
// everything has a measured peak P (backends/run_peak.h: the step's memory above
// its inputs and outputs, as `kgrad bench` reports it) with residual bytes R.
// A plan keeps a set S of residuals; the others are recomputed in the backward
// from S, the inputs, weights and constants, each copy entering through
// remat_barrier(leaf, t) on the tangent t of its first backward reader, so that
// it is made where the backward needs it and CSE keeps it apart from the
// forward's. Its peak is estimated as P - R + bytes(S).
//
// Greedy, by bytes freed per recomputed FLOP (a static count: GEMMs and
// convolutions by their depth, other ops by their elements): first recomputing
// through cheap ops only (normalisations, activations, pooling), then through
// contractions too, until the estimate meets the budget; then the step is
// measured, and the target lowered by what the measurement exceeds it by, up to
// four times. Greedy is not optimal (the choice is a knapsack over chains that
// share their leaves): the report gives the plan's measured peak and its added
// FLOPs so that it can be compared with hand-made plans.
#ifndef KGRAD_TOOLS_REMAT_PLAN_H_
#define KGRAD_TOOLS_REMAT_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ad/grad_operation.h"
#include "core/module.h"
#include "core/value.h"

namespace kgrad {

// A budget in bytes, or as a fraction of the save-everything peak.
struct MemoryBudget {
  int64_t bytes = -1;
  double fraction = -1;  // in (0, 1]
};
// "123456" (bytes), "64MiB", "1.5GiB", "512KiB" or "0.5" (a fraction: a number
// in (0, 1] with a point).
absl::StatusOr<MemoryBudget> ParseMemoryBudget(const std::string& text);

struct RematPlanReport {
  int64_t peak_all = 0;       // measured, saving every residual
  int64_t budget = 0;         // bytes
  int64_t peak = 0;           // measured, under the plan
  int64_t residual_bytes_all = 0;
  int64_t residual_bytes = 0;  // kept
  int num_residuals = 0;
  std::vector<std::string> recomputed;  // the residuals recomputed, by name
  double step_flops = 0;       // the save-everything step's static FLOPs
  double added_flops = 0;      // recomputation's
  std::string ToString() const;
};

// The training step of f (value and gradients as `options` asks, the
// sensitivity one) under a plan for `budget`, optimised; `inputs` are f's
// arguments for the measurements. A budget below the smallest peak the plan
// reaches is an error that says that peak.
absl::StatusOr<FuncGraph*> PlanRematStep(Module& module, FuncGraph* f,
                                         const ValueAndGradOptions& options,
                                         const MemoryBudget& budget,
                                         const std::vector<Value>& inputs,
                                         RematPlanReport* report);

}  // namespace kgrad

#endif  // KGRAD_TOOLS_REMAT_PLAN_H_
