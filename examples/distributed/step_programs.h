// Training steps for data-parallel jobs (examples/distributed/train.cc, the tests
// in tests/distributed): an MLP and a small CNN written as one graph each
// (value_and_grad{weights="*"} of the loss and an SGD update, as
// examples/train_step.pbtxt), their data, and a loop that trains them.
#ifndef KGRAD_EXAMPLES_DISTRIBUTED_STEP_PROGRAMS_H_
#define KGRAD_EXAMPLES_DISTRIBUTED_STEP_PROGRAMS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/communicator.h"
#include "backends/executor.h"
#include "core/module.h"

namespace kgrad {
namespace examples {

struct StepProgram {
  std::unique_ptr<Module> module;
  FuncGraph* step = nullptr;  // (x, labels) -> (loss, new weights)
};

// loss(x, labels) = mean(softmax_cross_entropy(mlp(x), labels)) with tanh between
// the dense layers of `widths` (x [batch, widths[0]], labels [batch, widths.back()]);
// step = SGD with learning rate `lr`.
StepProgram MlpStep(DType dtype, int64_t batch, std::vector<int64_t> widths = {4, 5, 2},
                    double lr = 0.5);
// conv2d (3 filters 3x3, pad 1) -> relu -> mean over space -> dense -> xent; x
// [batch, 1, 6, 6].
StepProgram CnnStep(DType dtype, int64_t batch, double lr = 0.5);

// Deterministic inputs for `p`'s step: x and one-hot labels with `batch` rows.
std::vector<Value> StepData(const StepProgram& p, int64_t batch, uint64_t seed);
// Rows [begin, end) of every input.
std::vector<Value> RowsOf(const std::vector<Value>& inputs, int64_t begin, int64_t end);

struct Trained {
  std::map<std::string, Tensor> weights;  // by name
  std::vector<double> losses;
  std::vector<double> step_ms;  // wall-clock time of each step
};
// `steps` steps of `p` (differentiation expanded here) on `inputs`, with
// `comm` as the executor's communicator (collectives overlapped unless
// `overlap` is false) on `device` (nullptr: the CPU); per-step profiles into
// `profiles` when given.
absl::StatusOr<Trained> Train(StepProgram& p, const std::vector<Value>& inputs, int steps,
                              Communicator* comm, std::vector<Profile>* profiles = nullptr,
                              bool overlap = true, Device* device = nullptr);

// The largest |a - b| over all weights.
double MaxWeightDiff(const Trained& a, const Trained& b);
// The weights' bytes, in name order (for bit-identity across ranks).
std::string WeightBytes(const Trained& t);

}  // namespace examples
}  // namespace kgrad

#endif  // KGRAD_EXAMPLES_DISTRIBUTED_STEP_PROGRAMS_H_
