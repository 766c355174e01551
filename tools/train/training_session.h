// TrainingSession: runs the artifacts of tools/train/artifacts.h from C++ (ONNX
// Runtime Training's TrainingSession): TrainStep updates the weights and the
// optimizer state in place of the session, EvalStep computes the loss and the
// model's output, checkpoints save and restore everything a resumed run needs
// (weights, state, step, and the data position a training loop records).
//
//   auto s = train::TrainingSession::Open("artifacts/");
//   double loss = *(*s)->TrainStep({Value(x), Value(labels)});
//   (*s)->SaveCheckpoint("artifacts/step100.ckpt");
//
// Data-parallel (SessionOptions::data_parallel, with a communicator): every rank
// opens the same artifacts and passes every step the whole batch; the session
// runs train_step_unexpanded rewritten for the communicator's ranks
// (ad/data_parallel.h): each rank computes on its share of the batch's rows and
// the gradients and the loss are averaged across ranks, so the weights stay
// bit-identical on every rank. EvalStep runs the whole batch on every rank.
//
// Not thread-safe: one caller steps a session at a time.
#ifndef KGRAD_TOOLS_TRAIN_TRAINING_SESSION_H_
#define KGRAD_TOOLS_TRAIN_TRAINING_SESSION_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ad/data_parallel.h"
#include "backends/executor.h"
#include "core/module.h"
#include "tools/train/checkpoint.h"

namespace kgrad {
namespace train {

struct SessionOptions {
  std::string checkpoint;       // empty: DIR/checkpoint.ckpt
  ExecutorOptions executor;     // device, fusion, limits, communicator
  // Train on executor.communicator's ranks (see above); gradients all-reduced in
  // buckets of up to bucket_bytes.
  bool data_parallel = false;
  int64_t bucket_bytes = 25 << 20;
};

struct EvalResult {
  double loss = 0;
  Value outputs;  // the model's output (a tuple when it has several)
};

class TrainingSession {
 public:
  static absl::StatusOr<std::unique_ptr<TrainingSession>> Open(const std::string& dir,
                                                               const SessionOptions& options = {});
  ~TrainingSession();

  // The data the steps take, in order: the model's inputs, then "target" (when
  // the loss has one). Each input's declared type is in input_types().
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<AbstractPtr>& input_types() const { return input_types_; }

  // One optimizer step on a batch; returns its loss (before the update). The
  // inputs are checked against the declared types first (errors name the input).
  absl::StatusOr<double> TrainStep(absl::Span<const Value> inputs);
  // The check TrainStep and EvalStep make, alone (a loop checks its data first).
  absl::Status CheckInputs(absl::Span<const Value> inputs) const;
  absl::StatusOr<EvalResult> EvalStep(absl::Span<const Value> inputs) const;

  absl::Status SaveCheckpoint(const std::string& path) const;
  // Replaces weights, state, step and position; a checkpoint of another model
  // (other names, dtypes or shapes) or optimizer is refused, the session unchanged.
  absl::Status LoadCheckpoint(const std::string& path);

  int64_t step() const { return step_; }
  // Every weight by name (trainable and frozen).
  const absl::flat_hash_map<std::string, Tensor>& weights() const { return weights_; }
  const std::vector<std::string>& trainable() const { return trainable_; }
  const NamedTensors& state() const { return state_; }
  const std::string& optimizer() const { return optimizer_; }

  // Where a training loop stands in its data; saved in checkpoints.
  struct Position {
    int64_t epoch = 0;
    int64_t batch = 0;
    uint64_t seed = 0;
  };
  const Position& position() const { return position_; }
  void set_position(const Position& p) { position_ = p; }

  // What a data-parallel session all-reduces per step (zeros otherwise).
  const DataParallelReport& data_parallel_report() const { return data_parallel_; }

  Module& module() { return *module_; }
  FuncGraph* train_graph() const { return train_graph_; }

 private:
  TrainingSession() = default;
  absl::Status Adopt(Checkpoint c, const std::string& file);
  // Replaces the train step by its data-parallel form for the communicator.
  absl::Status UseDataParallelStep(const SessionOptions& options, const std::string& model_file);
  // This rank's rows of each input (data-parallel sessions).
  absl::StatusOr<std::vector<Value>> Shard(absl::Span<const Value> inputs) const;

  std::string dir_;
  std::unique_ptr<Module> module_;
  FuncGraph* train_graph_ = nullptr;
  FuncGraph* eval_graph_ = nullptr;
  std::unique_ptr<Executor> train_;
  std::unique_ptr<Executor> eval_;
  Communicator* communicator_ = nullptr;  // set in data-parallel sessions
  DataParallelReport data_parallel_;
  std::vector<std::string> input_names_;
  std::vector<AbstractPtr> input_types_;
  std::vector<std::string> trainable_;
  std::string optimizer_;
  absl::flat_hash_map<std::string, Tensor> weights_;
  NamedTensors state_;
  int64_t step_ = 0;
  Position position_;
};

}  // namespace train
}  // namespace kgrad

#endif  // KGRAD_TOOLS_TRAIN_TRAINING_SESSION_H_
