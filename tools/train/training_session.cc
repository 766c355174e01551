#include "tools/train/training_session.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ad/expand_differentiation.h"
#include "backends/communicator.h"
#include "backends/cpu/constant_evaluator.h"
#include "core/passes/optimize.h"
#include "core/status_macros.h"
#include "ops/registry.h"
#include "proto/model_io.h"
#include "tools/train/artifacts.h"

namespace kgrad {
namespace train {
namespace {

// The result of train_step: (loss, new weights, new state, steps).
struct StepResult {
  double loss = 0;
  std::vector<Tensor> weights;
  std::vector<Tensor> state;
  int64_t steps = 0;
};

absl::StatusOr<std::vector<Tensor>> Tensors(const Value& v, size_t n, const char* what) {
  if (!v.is_tuple() || v.tuple().size() != n) {
    return absl::InternalError(absl::StrCat("train_step returned ", v.TypeString(), " for the ", what,
                                            ", want a tuple of ", n, " tensors"));
  }
  std::vector<Tensor> out;
  for (const Value& e : v.tuple()) {
    if (!e.is_tensor()) return absl::InternalError(absl::StrCat("train_step's ", what, " hold ", e.TypeString()));
    out.push_back(e.tensor());
  }
  return out;
}

absl::StatusOr<double> Number(const Value& v, const char* what) {
  if (!v.is_tensor() || v.tensor().NumElements() != 1) {
    return absl::InternalError(absl::StrCat("the ", what, " is ", v.TypeString(), ", not one number"));
  }
  return v.tensor().ElementAsDouble(0);
}

absl::StatusOr<StepResult> ReadStep(const Value& r, size_t weights, size_t state) {
  if (!r.is_tuple() || r.tuple().size() != 4) {
    return absl::InternalError(absl::StrCat("train_step returned ", r.TypeString(),
                                            ", want (loss, weights, state, steps)"));
  }
  StepResult s;
  KGRAD_ASSIGN_OR_RETURN(s.loss, Number(r.tuple()[0], "loss"));
  KGRAD_ASSIGN_OR_RETURN(s.weights, Tensors(r.tuple()[1], weights, "weights"));
  KGRAD_ASSIGN_OR_RETURN(s.state, Tensors(r.tuple()[2], state, "state"));
  KGRAD_ASSIGN_OR_RETURN(double steps, Number(r.tuple()[3], "step count"));
  s.steps = static_cast<int64_t>(steps);
  return s;
}

// Dims of inputs that share a symbol must agree (the batch of x and of target).
absl::Status CheckInput(const std::string& name, const AbstractPtr& want, const Value& got,
                        absl::flat_hash_map<int64_t, std::pair<int64_t, std::string>>* symbols) {
  const AbstractTensor* t = AsTensor(want);
  if (t == nullptr) return absl::OkStatus();  // not a tensor input: the executor checks it
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("input '", name, "': ", why, " (the model wants ",
                                                   want->ToString(), ", got ", got.TypeString(), ")"));
  };
  if (!got.is_tensor()) return refuse("not a tensor");
  const Tensor& x = got.tensor();
  if (x.dtype() != t->dtype()) return refuse("wrong dtype");
  if (x.rank() != static_cast<int>(t->shape().size())) return refuse("wrong rank");
  for (int i = 0; i < x.rank(); ++i) {
    const int64_t d = t->shape()[i];
    if (d >= 0 && d != x.dim(i)) return refuse(absl::StrCat("dim ", i, " is ", x.dim(i), ", not ", d));
    if (d >= 0 || d == kUnknownDim) continue;
    auto [it, fresh] = symbols->try_emplace(d, x.dim(i), name);
    if (!fresh && it->second.first != x.dim(i)) {
      return refuse(absl::StrCat("dim ", i, " is ", x.dim(i), " but the same dim of input '",
                                 it->second.second, "' is ", it->second.first));
    }
  }
  return absl::OkStatus();
}

}  // namespace

TrainingSession::~TrainingSession() = default;

absl::StatusOr<std::unique_ptr<TrainingSession>> TrainingSession::Open(const std::string& dir,
                                                                       const SessionOptions& options) {
  std::unique_ptr<TrainingSession> s(new TrainingSession());
  s->dir_ = dir;
  const std::string model_file = absl::StrCat(dir, "/", kArtifactModelFile);
  KGRAD_ASSIGN_OR_RETURN(s->module_, LoadModelFile(model_file, DefaultRegistry()));
  s->module_->set_constant_evaluator(&CpuConstantEvaluator::Get());
  s->train_graph_ = s->module_->FindGraph(kTrainStepGraph);
  s->eval_graph_ = s->module_->FindGraph(kEvalStepGraph);
  if (s->train_graph_ == nullptr || s->eval_graph_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(model_file, ": not training artifacts (no graph '",
                                                   kTrainStepGraph, "' and '", kEvalStepGraph, "')"));
  }
  for (const Parameter* p : s->eval_graph_->parameters()) {
    s->input_names_.push_back(p->name());
    s->input_types_.push_back(p->declared());
  }
  if (options.data_parallel) KGRAD_RETURN_IF_ERROR(s->UseDataParallelStep(options, model_file));
  KGRAD_ASSIGN_OR_RETURN(s->train_, Executor::Create(s->train_graph_, options.executor));
  KGRAD_ASSIGN_OR_RETURN(s->eval_, Executor::Create(s->eval_graph_, options.executor));
  // The initial checkpoint defines what this model's checkpoints hold.
  const std::string initial = absl::StrCat(dir, "/", kInitialCheckpointFile);
  KGRAD_ASSIGN_OR_RETURN(Checkpoint c, train::LoadCheckpoint(initial));
  s->trainable_ = c.trainable;
  s->optimizer_ = c.optimizer;
  KGRAD_RETURN_IF_ERROR(s->Adopt(std::move(c), initial));
  if (!options.checkpoint.empty()) KGRAD_RETURN_IF_ERROR(s->LoadCheckpoint(options.checkpoint));
  return s;
}

absl::Status TrainingSession::UseDataParallelStep(const SessionOptions& options, const std::string& model_file) {
  communicator_ = options.executor.communicator;
  if (communicator_ == nullptr) {
    return absl::InvalidArgumentError("a data-parallel session needs a communicator (SessionOptions::executor)");
  }
  FuncGraph* g = module_->FindGraph(kTrainStepUnexpandedGraph);
  if (g == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_file, ": no graph '", kTrainStepUnexpandedGraph, "' to train data-parallel (artifacts of an older "
        "kgrad, or a trainable weight named with a comma); write them again with kgrad train-artifacts"));
  }
  DataParallelOptions o;
  o.ranks = communicator_->size();
  o.bucket_bytes = options.bucket_bytes;
  // Every input after the data (steps_done and the optimizer state) is the
  // same on every rank.
  const auto& params = g->parameters();
  for (size_t i = input_names_.size(); i < params.size(); ++i) o.replicated.push_back(params[i]->name());
  KGRAD_ASSIGN_OR_RETURN(data_parallel_, MakeDataParallel(*module_, g, o));
  KGRAD_RETURN_IF_ERROR(ExpandDifferentiation(*module_, g).status());
  KGRAD_RETURN_IF_ERROR(Optimize(*module_, g).status());
  train_graph_ = g;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Value>> TrainingSession::Shard(absl::Span<const Value> inputs) const {
  std::vector<Value> mine(inputs.begin(), inputs.end());
  if (communicator_ == nullptr) return mine;
  const int64_t n = communicator_->size(), r = communicator_->rank();
  for (size_t i = 0; i < mine.size(); ++i) {
    if (!mine[i].is_tensor() || mine[i].tensor().rank() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("input '", input_names_[i], "' is ", mine[i].TypeString(),
                                                     ", not a batch to divide among ranks"));
    }
    const Tensor& t = mine[i].tensor();
    if (t.dim(0) % n != 0) {
      return absl::InvalidArgumentError(absl::StrCat("input '", input_names_[i], "': a batch of ", t.dim(0),
                                                     " rows does not divide among ", n, " ranks"));
    }
    const int64_t share = t.dim(0) / n;
    KGRAD_ASSIGN_OR_RETURN(Tensor rows, BatchRows(t, r * share, (r + 1) * share));
    mine[i] = Value(std::move(rows));
  }
  return mine;
}

absl::Status TrainingSession::Adopt(Checkpoint c, const std::string& file) {
  NamedTensors want_weights;
  for (const auto& w : module_->weights()) want_weights.emplace_back(w->name(), *w->default_value());
  KGRAD_RETURN_IF_ERROR(CheckSameTensors(want_weights, c.weights, "weight", file));
  NamedTensors want_state;
  const auto& params = train_graph_->parameters();
  const size_t first_state = input_names_.size() + 1;  // after the data and steps_done
  if (params.size() < first_state) return absl::InternalError("train_step takes too few inputs");
  for (size_t i = first_state; i < params.size(); ++i) {
    const AbstractTensor* t = AsTensor(params[i]->declared());
    if (t == nullptr) return absl::InternalError(absl::StrCat("state input '", params[i]->name(), "' is not a tensor"));
    KGRAD_ASSIGN_OR_RETURN(Tensor z, Tensor::Zeros(t->dtype(), t->shape()));
    want_state.emplace_back(params[i]->name(), std::move(z));
  }
  KGRAD_RETURN_IF_ERROR(CheckSameTensors(want_state, c.state, "optimizer state", file));
  if (c.optimizer != optimizer_ || c.trainable != trainable_) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": a checkpoint of optimizer '", c.optimizer, "' over ",
                                                   c.trainable.size(), " weights; these artifacts use '",
                                                   optimizer_, "' over ", trainable_.size()));
  }
  weights_.clear();
  for (auto& [name, t] : c.weights) weights_[name] = std::move(t);
  state_ = std::move(c.state);
  step_ = c.step;
  position_ = {c.epoch, c.batch, c.seed};
  return absl::OkStatus();
}

absl::Status TrainingSession::CheckInputs(absl::Span<const Value> inputs) const {
  if (inputs.size() != input_names_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the steps take ", input_names_.size(), " inputs (",
                                                   absl::StrJoin(input_names_, ", "), "), got ", inputs.size()));
  }
  absl::flat_hash_map<int64_t, std::pair<int64_t, std::string>> symbols;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KGRAD_RETURN_IF_ERROR(CheckInput(input_names_[i], input_types_[i], inputs[i], &symbols));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> TrainingSession::TrainStep(absl::Span<const Value> inputs) {
  KGRAD_RETURN_IF_ERROR(CheckInputs(inputs));
  KGRAD_ASSIGN_OR_RETURN(std::vector<Value> args, Shard(inputs));
  args.push_back(Value(Tensor::FromScalar<int64_t>(step_)));
  for (const auto& [name, t] : state_) args.push_back(Value(t));
  KGRAD_ASSIGN_OR_RETURN(Value r, train_->Run(std::move(args), weights_));
  KGRAD_ASSIGN_OR_RETURN(StepResult s, ReadStep(r, trainable_.size(), state_.size()));
  for (size_t i = 0; i < trainable_.size(); ++i) weights_[trainable_[i]] = std::move(s.weights[i]);
  for (size_t i = 0; i < state_.size(); ++i) state_[i].second = std::move(s.state[i]);
  step_ = s.steps;
  return s.loss;
}

absl::StatusOr<EvalResult> TrainingSession::EvalStep(absl::Span<const Value> inputs) const {
  KGRAD_RETURN_IF_ERROR(CheckInputs(inputs));
  KGRAD_ASSIGN_OR_RETURN(Value r, eval_->Run(std::vector<Value>(inputs.begin(), inputs.end()), weights_));
  if (!r.is_tuple() || r.tuple().size() != 2) {
    return absl::InternalError(absl::StrCat("eval_step returned ", r.TypeString()));
  }
  EvalResult e;
  KGRAD_ASSIGN_OR_RETURN(e.loss, Number(r.tuple()[0], "loss"));
  e.outputs = r.tuple()[1];
  return e;
}

absl::Status TrainingSession::SaveCheckpoint(const std::string& path) const {
  Checkpoint c;
  c.optimizer = optimizer_;
  c.trainable = trainable_;
  c.step = step_;
  c.epoch = position_.epoch;
  c.batch = position_.batch;
  c.seed = position_.seed;
  for (const auto& w : module_->weights()) c.weights.emplace_back(w->name(), weights_.at(w->name()));
  c.state = state_;
  return train::SaveCheckpoint(c, path);
}

absl::Status TrainingSession::LoadCheckpoint(const std::string& path) {
  KGRAD_ASSIGN_OR_RETURN(Checkpoint c, train::LoadCheckpoint(path));
  return Adopt(std::move(c), path);
}

}  // namespace train
}  // namespace kgrad
