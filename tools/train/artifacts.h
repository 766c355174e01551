// Training artifacts from a model (ONNX Runtime Training's generate_artifacts):
// one module holding
//
//   train_step(inputs..., target, steps_done, state...)
//       -> (loss, (new trainable weights...), (new state...), steps_done + 1)
//   eval_step(inputs..., target) -> (loss, model output)
//   train_step_unexpanded: train_step with the gradient left as a
//       value_and_grad operator of the training loss, which a data-parallel
//       session (training_session.h) rewrites for its ranks, then expands
//
// where `inputs` are the model's inputs, `target` what the loss compares with
// (absent for LossKind::kNone), steps_done an int64 number, and state the
// optimizer's slots of every trainable weight (OptimizerSlots), weight by
// weight. The module's weights are the model's; frozen ones (matching the
// freeze pattern) get no gradient and no state. Written to a directory as
// training.pb (the module) and checkpoint.ckpt (the initial checkpoint: the
// weights, zero state, step 0).
#ifndef KGRAD_TOOLS_TRAIN_ARTIFACTS_H_
#define KGRAD_TOOLS_TRAIN_ARTIFACTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/module.h"
#include "tools/train/checkpoint.h"
#include "tools/train/loss.h"
#include "tools/train/optimizer.h"

namespace kgrad {
namespace train {

inline constexpr char kTrainStepGraph[] = "train_step";
inline constexpr char kEvalStepGraph[] = "eval_step";
inline constexpr char kTrainStepUnexpandedGraph[] = "train_step_unexpanded";
inline constexpr char kArtifactModelFile[] = "training.pb";
inline constexpr char kInitialCheckpointFile[] = "checkpoint.ckpt";
inline constexpr char kTargetInput[] = "target";
inline constexpr char kStepsInput[] = "steps_done";

struct ArtifactOptions {
  LossKind loss = LossKind::kCrossEntropy;
  CrossEntropyOptions cross_entropy;  // probability targets, label smoothing
  OptimizerOptions optimizer;
  // Weights whose names match this POSIX extended regular expression (searched
  // anywhere in the name; anchor with ^ and $) are frozen. Empty: none.
  std::string freeze;
};

struct TrainingArtifacts {
  std::unique_ptr<Module> module;
  FuncGraph* train_step = nullptr;
  FuncGraph* eval_step = nullptr;
  // Absent when a trainable weight's name holds a comma (value_and_grad's
  // weights attribute is a comma-separated list).
  FuncGraph* train_step_unexpanded = nullptr;
  std::vector<std::string> trainable;  // in the train step's order
  std::vector<std::string> frozen;
  std::vector<std::string> unused;  // not read by the model (e.g. running statistics)
  Checkpoint initial;
};

// Builds the artifacts of `model`'s entry graph (one or more tensor outputs; the
// loss reads the first). `source` names the model in errors.
absl::StatusOr<TrainingArtifacts> MakeTrainingArtifacts(std::unique_ptr<Module> model,
                                                        const ArtifactOptions& options,
                                                        const std::string& source);

// training.pb and checkpoint.ckpt in `dir` (created if missing).
absl::Status WriteTrainingArtifacts(TrainingArtifacts& artifacts, const std::string& dir);

}  // namespace train
}  // namespace kgrad

#endif  // KGRAD_TOOLS_TRAIN_ARTIFACTS_H_
