// Training checkpoints: named weights and optimizer state, the step count and the
// data position, in one protobuf file (checkpoint.proto). Writes go to
// PATH.tmp, are flushed to disk and then renamed over PATH, so a write that is
// interrupted leaves the previous checkpoint whole.
#ifndef KGRAD_TOOLS_TRAIN_CHECKPOINT_H_
#define KGRAD_TOOLS_TRAIN_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace kgrad {
namespace train {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct Checkpoint {
  std::string optimizer;
  int64_t step = 0;
  NamedTensors weights;
  NamedTensors state;
  int64_t epoch = 0;
  int64_t batch = 0;
  uint64_t seed = 0;
  std::vector<std::string> trainable;  // the weights the step updates, in order
};

absl::Status SaveCheckpoint(const Checkpoint& c, const std::string& path);
// Errors name the file: unreadable, not a checkpoint, bad tensors.
absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& path);

// That `got` holds exactly the tensors of `want` (names, dtypes and shapes, in
// order); an error names `file`, what differs and says which model each holds.
absl::Status CheckSameTensors(const NamedTensors& want, const NamedTensors& got,
                              const std::string& what, const std::string& file);

}  // namespace train
}  // namespace kgrad

#endif  // KGRAD_TOOLS_TRAIN_CHECKPOINT_H_
