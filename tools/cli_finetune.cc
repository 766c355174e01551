#include "tools/cli_finetune.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/status_macros.h"
#include "tools/cli_args.h"
#include "tools/cli_common.h"
#include "tools/cli_data_parallel.h"
#include "tools/train/artifacts.h"
#include "tools/train/dataset.h"
#include "tools/train/training_session.h"

namespace kgrad {
namespace cli {
namespace {

using train::OptimizerOptions;

absl::Status ReadBetas(const ParsedArgs& args, OptimizerOptions* o) {
  if (!args.Has("betas")) return absl::OkStatus();
  std::vector<std::string> parts = absl::StrSplit(args.Get("betas"), ',');
  if (parts.size() != 2 || !absl::SimpleAtod(parts[0], &o->beta1) || !absl::SimpleAtod(parts[1], &o->beta2)) {
    return absl::InvalidArgumentError(absl::StrCat("--betas wants B1,B2, got '", args.Get("betas"), "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<OptimizerOptions> ReadOptimizer(const ParsedArgs& args) {
  KGRAD_ASSIGN_OR_RETURN(OptimizerOptions o, train::DefaultOptimizerOptions(args.Get("optimizer", "adamw")));
  KGRAD_ASSIGN_OR_RETURN(o.lr, NumberOption(args, "lr", o.lr));
  KGRAD_RETURN_IF_ERROR(ReadBetas(args, &o));
  KGRAD_ASSIGN_OR_RETURN(o.eps, NumberOption(args, "eps", o.eps));
  KGRAD_ASSIGN_OR_RETURN(o.weight_decay, NumberOption(args, "weight-decay", o.weight_decay));
  KGRAD_ASSIGN_OR_RETURN(o.momentum, NumberOption(args, "momentum", o.momentum));
  KGRAD_ASSIGN_OR_RETURN(o.dampening, NumberOption(args, "dampening", o.dampening));
  KGRAD_ASSIGN_OR_RETURN(o.max_grad_norm, NumberOption(args, "clip-norm", o.max_grad_norm));
  o.nesterov = args.Has("nesterov");
  o.amsgrad = args.Has("amsgrad");
  o.maximize = args.Has("maximize");
  const bool sgd = o.kind == train::OptimizerKind::kSgd;
  for (const char* name : {"momentum", "dampening", "nesterov"}) {
    if (!sgd && args.Has(name)) return absl::InvalidArgumentError(absl::StrCat("--", name, " is an option of sgd and momentum"));
  }
  for (const char* name : {"betas", "eps", "amsgrad"}) {
    if (sgd && args.Has(name)) return absl::InvalidArgumentError(absl::StrCat("--", name, " is an option of adam and adamw"));
  }
  for (const char* name : {"step-size", "gamma"}) {
    if (args.Has(name) && args.Get("schedule") != "step") {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " is an option of --schedule step"));
    }
  }
  for (const char* name : {"t-max", "eta-min"}) {
    if (args.Has(name) && args.Get("schedule") != "cosine") {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " is an option of --schedule cosine"));
    }
  }
  if (args.Has("warmup-start") && !args.Has("warmup-steps")) {
    return absl::InvalidArgumentError("--warmup-start needs --warmup-steps");
  }
  train::LrSchedule& s = o.schedule;
  KGRAD_ASSIGN_OR_RETURN(s.kind, train::ParseLrScheduleKind(args.Get("schedule", "constant")));
  KGRAD_ASSIGN_OR_RETURN(s.step_size, IntOption(args, "step-size", s.step_size, 1));
  KGRAD_ASSIGN_OR_RETURN(s.gamma, NumberOption(args, "gamma", s.gamma));
  KGRAD_ASSIGN_OR_RETURN(s.t_max, IntOption(args, "t-max", s.t_max, 1));
  KGRAD_ASSIGN_OR_RETURN(s.eta_min, NumberOption(args, "eta-min", s.eta_min));
  KGRAD_ASSIGN_OR_RETURN(s.warmup_steps, IntOption(args, "warmup-steps", s.warmup_steps, 0));
  KGRAD_ASSIGN_OR_RETURN(s.warmup_start_factor, NumberOption(args, "warmup-start", s.warmup_start_factor));
  KGRAD_RETURN_IF_ERROR(train::ValidateOptimizerOptions(o));
  return o;
}

absl::Status TrainArtifacts(const ParsedArgs& args, std::ostream& out) {
  if (args.positional.size() != 1) return absl::InvalidArgumentError("train-artifacts takes one MODEL");
  if (!args.Has("output")) return absl::InvalidArgumentError("train-artifacts needs -o DIR");
  const std::string model = args.positional[0];
  train::ArtifactOptions o;
  KGRAD_ASSIGN_OR_RETURN(o.loss, train::ParseLossKind(args.Get("loss", "cross_entropy")));
  o.cross_entropy.probability_targets = args.Has("probability-targets");
  KGRAD_ASSIGN_OR_RETURN(o.cross_entropy.label_smoothing,
                         NumberOption(args, "label-smoothing", o.cross_entropy.label_smoothing));
  KGRAD_ASSIGN_OR_RETURN(o.optimizer, ReadOptimizer(args));
  o.freeze = args.Get("freeze");
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, LoadModule(model));
  KGRAD_ASSIGN_OR_RETURN(train::TrainingArtifacts a, train::MakeTrainingArtifacts(std::move(m), o, model));
  KGRAD_RETURN_IF_ERROR(train::WriteTrainingArtifacts(a, args.Get("output")));
  out << "wrote " << args.Get("output") << "/" << train::kArtifactModelFile << " and "
      << train::kInitialCheckpointFile << ": loss " << train::LossKindName(o.loss)
      << (o.cross_entropy.probability_targets ? " (probability targets)" : "")
      << (o.cross_entropy.label_smoothing > 0 ? absl::StrCat(" (label smoothing ", o.cross_entropy.label_smoothing, ")")
                                              : "")
      << ", optimizer "
      << train::OptimizerName(o.optimizer) << " (lr " << o.optimizer.lr << ", schedule "
      << train::LrScheduleKindName(o.optimizer.schedule.kind) << "), " << a.trainable.size()
      << " weights trained, " << a.frozen.size() << " frozen, " << a.unused.size()
      << " not read by the model\n";
  out << "inputs: " << absl::StrJoin(a.eval_step->parameters(), ", ", [](std::string* s, const Parameter* p) {
    absl::StrAppend(s, p->name(), " ", p->declared() ? p->declared()->ToString() : "?");
  }) << "\n";
  return absl::OkStatus();
}

// ----- The training loop -----------------------------------------------------------

std::string Clock(double seconds) {
  const int64_t s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  if (s >= 3600) return absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
  return absl::StrFormat("%02d:%02d", s / 60, s % 60);
}

// One line of progress: a bar on a terminal (rewritten in place), else a line.
class Progress {
 public:
  Progress(std::ostream& out, bool terminal, int64_t every) : out_(out), terminal_(terminal), every_(every) {}

  void Step(int64_t epoch, int64_t epochs, int64_t batch, int64_t batches, double loss, int64_t done,
            int64_t total, double seconds) {
    const double rate = seconds > 0 ? done / seconds : 0;
    const std::string line = absl::StrFormat(
        "epoch %d/%d step %d/%d loss %.6g %.2f steps/s %s left", epoch + 1, epochs, batch + 1, batches, loss,
        rate, Clock(rate > 0 ? (total - done) / rate : 0));
    if (terminal_) {
      const int width = 24;
      const int filled = static_cast<int>(width * static_cast<double>(done) / std::max<int64_t>(total, 1));
      out_ << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << line << "\033[K"
           << std::flush;
    } else if (done % every_ == 0 || batch + 1 == batches) {
      out_ << line << "\n";
    }
  }
  void Line(const std::string& text) {
    if (terminal_) out_ << "\r\033[K";
    out_ << text << "\n" << std::flush;
  }

 private:
  std::ostream& out_;
  bool terminal_;
  int64_t every_;
};

struct LoopOptions {
  int64_t epochs = 1;
  int64_t save_every = 0;
  std::string checkpoint;  // DIR/last.ckpt
  bool writes = true;      // false on ranks other than 0 of a data-parallel job
};

// The mean loss over the eval data (weighted by batch size).
absl::StatusOr<double> Evaluate(const train::TrainingSession& s, const train::Dataset& eval) {
  double sum = 0;
  int64_t n = 0;
  for (int64_t b = 0; b < eval.batches_per_epoch(); ++b) {
    std::vector<Value> batch = eval.Batch(0, b);
    const int64_t rows = batch[0].tensor().dim(0);
    KGRAD_ASSIGN_OR_RETURN(train::EvalResult r, s.EvalStep(batch));
    sum += r.loss * rows;
    n += rows;
  }
  return sum / n;
}

absl::Status Loop(train::TrainingSession& s, const train::Dataset& data, const train::Dataset* eval,
                  const LoopOptions& o, Progress& progress) {
  const int64_t batches = data.batches_per_epoch();
  train::TrainingSession::Position p = s.position();
  const int64_t total = o.epochs * batches;
  const int64_t start = std::min(total, p.epoch * batches + p.batch);
  const auto t0 = std::chrono::steady_clock::now();
  double last = NAN;
  for (int64_t done = start; done < total; ++done) {
    const int64_t epoch = done / batches, b = done % batches;
    KGRAD_ASSIGN_OR_RETURN(last, s.TrainStep(data.Batch(epoch, b)));
    if (!std::isfinite(last)) {
      return absl::InvalidArgumentError(absl::StrCat("step ", s.step(), ": the loss is ", last,
                                                     " (diverged; try a smaller learning rate)"));
    }
    p.epoch = (done + 1) / batches;
    p.batch = (done + 1) % batches;
    s.set_position(p);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress.Step(epoch, o.epochs, b, batches, last, done + 1 - start, total - start, seconds);
    if (o.writes && o.save_every > 0 && s.step() % o.save_every == 0) {
      KGRAD_RETURN_IF_ERROR(s.SaveCheckpoint(o.checkpoint));
    }
    if (b + 1 == batches && eval != nullptr) {
      KGRAD_ASSIGN_OR_RETURN(double e, Evaluate(s, *eval));
      progress.Line(absl::StrFormat("epoch %d/%d eval loss %.6g (%d examples)", epoch + 1, o.epochs, e,
                                    eval->examples()));
    }
  }
  if (start == total) progress.Line(absl::StrCat("nothing to do: the checkpoint is at epoch ", p.epoch, " of ", o.epochs));
  if (o.writes) KGRAD_RETURN_IF_ERROR(s.SaveCheckpoint(o.checkpoint));
  progress.Line(absl::StrFormat("%d steps, last loss %.6g; checkpoint %s", s.step(), last, o.checkpoint));
  return absl::OkStatus();
}

std::vector<std::string> Values(const ParsedArgs& args, const std::string& name) {
  auto it = args.options.find(name);
  return it == args.options.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<train::Dataset> ReadData(const ParsedArgs& args, const std::string& option,
                                        const train::DatasetOptions& o, const train::TrainingSession& s) {
  KGRAD_ASSIGN_OR_RETURN(train::Dataset d, train::Dataset::FromNpyFiles(Values(args, option), o));
  KGRAD_RETURN_IF_ERROR(d.Reorder(s.input_names()));
  absl::Status fits = s.CheckInputs(d.Batch(0, 0));
  if (!fits.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", option, " ", absl::StrJoin(d.files(), ", "), ": ",
                                                   fits.message()));
  }
  // A model with a fixed batch size takes no partial batch: say so before training.
  for (size_t i = 0; i < s.input_types().size(); ++i) {
    const AbstractTensor* t = AsTensor(s.input_types()[i]);
    if (t == nullptr || t->shape().empty() || t->shape()[0] < 0) continue;
    const bool partial = !o.drop_last && d.examples() % o.batch != 0;
    if (t->shape()[0] != o.batch || partial) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", s.input_names()[i], "' has a fixed batch of ", t->shape()[0], "; --", option,
          " would give batches of ", o.batch, partial ? " and a partial last one (--drop-last drops it)" : ""));
    }
  }
  return d;
}

// Every batch (the last one included) must divide among the ranks.
absl::Status CheckDivides(const train::Dataset& d, const train::DatasetOptions& o, int ranks) {
  const int64_t tail = d.examples() % o.batch;
  const int64_t last = o.drop_last || tail == 0 ? o.batch : tail;
  if (o.batch % ranks == 0 && last % ranks == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--batch ", o.batch, " over ", d.examples(), " examples gives batches of ", o.batch,
      last != o.batch ? absl::StrCat(" and a last one of ", last) : "", " rows, which do not divide among ",
      ranks, " ranks", last % ranks != 0 && o.batch % ranks == 0 ? " (--drop-last drops the last one)" : ""));
}

absl::Status Finetune(const ParsedArgs& args, std::ostream& out) {
  if (args.positional.size() != 1) return absl::InvalidArgumentError("train takes one DIR");
  const std::string dir = args.positional[0];
  train::DatasetOptions dopts;
  KGRAD_ASSIGN_OR_RETURN(dopts.batch, IntOption(args, "batch", dopts.batch, 1));
  int64_t seed = 0;
  KGRAD_ASSIGN_OR_RETURN(seed, IntOption(args, "seed", seed, 0));
  dopts.seed = static_cast<uint64_t>(seed);
  dopts.shuffle = args.Has("shuffle");
  dopts.drop_last = args.Has("drop-last");
  LoopOptions lo;
  KGRAD_ASSIGN_OR_RETURN(lo.epochs, IntOption(args, "epochs", lo.epochs, 1));
  KGRAD_ASSIGN_OR_RETURN(lo.save_every, IntOption(args, "save-every", lo.save_every, 1));
  int64_t every = 10;
  KGRAD_ASSIGN_OR_RETURN(every, IntOption(args, "print-every", every, 1));
  lo.checkpoint = absl::StrCat(dir, "/last.ckpt");
  train::SessionOptions so;
  if (args.Has("resume")) so.checkpoint = lo.checkpoint;
  std::unique_ptr<Communicator> comm;
  if (args.Has("data-parallel")) {
    KGRAD_ASSIGN_OR_RETURN(comm, JoinDataParallel(args, absl::StrCat(dir, "/", train::kArtifactModelFile)));
    KGRAD_ASSIGN_OR_RETURN(so.bucket_bytes, BucketBytes(args));
    so.data_parallel = true;
    so.executor.communicator = comm.get();
    lo.writes = comm->rank() == 0;
  }
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<train::TrainingSession> s, train::TrainingSession::Open(dir, so));
  if (args.Has("resume") && args.Has("seed") && s->position().seed != dopts.seed) {
    return absl::InvalidArgumentError(absl::StrCat(lo.checkpoint, " was trained with --seed ", s->position().seed,
                                                   "; resume with the same seed"));
  }
  if (args.Has("resume")) dopts.seed = s->position().seed;
  train::TrainingSession::Position p = s->position();
  p.seed = dopts.seed;
  s->set_position(p);
  KGRAD_ASSIGN_OR_RETURN(train::Dataset data, ReadData(args, "data", dopts, *s));
  std::optional<train::Dataset> eval;
  if (args.Has("eval")) {
    train::DatasetOptions eopts = dopts;
    eopts.shuffle = false;
    eopts.drop_last = false;
    KGRAD_ASSIGN_OR_RETURN(eval, ReadData(args, "eval", eopts, *s));
  }
  if (comm != nullptr) KGRAD_RETURN_IF_ERROR(CheckDivides(data, dopts, comm->size()));
  // Only rank 0 of a data-parallel job speaks (the others write to no buffer).
  std::ostream silent(nullptr);
  std::ostream& says = lo.writes ? out : silent;
  const bool terminal = lo.writes && &out == &std::cout && ::isatty(STDOUT_FILENO);
  Progress progress(says, terminal, every);
  if (comm != nullptr) progress.Line(DataParallelSummary(s->data_parallel_report(), comm->size()));
  progress.Line(absl::StrFormat("%d examples, batches of %d (%d per epoch, last %s), %d epochs, %s%s", data.examples(),
                                dopts.batch, data.batches_per_epoch(),
                                dopts.drop_last ? "partial one dropped" : "partial one kept", lo.epochs,
                                s->optimizer(), args.Has("resume") ? absl::StrCat(", resumed at step ", s->step()) : ""));
  KGRAD_RETURN_IF_ERROR(Loop(*s, data, eval ? &*eval : nullptr, lo, progress));
  if (comm != nullptr) {
    KGRAD_RETURN_IF_ERROR(CheckSameWeights(s->weights(), *comm));
    progress.Line(absl::StrCat("weights bit-identical on all ", comm->size(), " ranks"));
  }
  if (lo.writes && args.Has("output")) {
    for (const auto& [name, t] : s->weights()) KGRAD_RETURN_IF_ERROR(WriteOutputs(Value(t), args.Get("output"), name));
  }
  return absl::OkStatus();
}

}  // namespace

int TrainArtifactsCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return CommandMain(argv,
                     {"loss", "optimizer", "lr", "betas", "eps", "weight-decay", "momentum", "dampening",
                      "clip-norm", "schedule", "step-size", "gamma", "t-max", "eta-min", "warmup-steps",
                      "warmup-start", "freeze", "output", "label-smoothing"},
                     {"nesterov", "amsgrad", "maximize", "probability-targets"}, TrainArtifacts, out, err);
}

int FinetuneCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return CommandMain(argv,
                     {"data", "eval", "batch", "epochs", "seed", "save-every", "print-every", "output",
                      "collective-timeout", "bucket-mb"},
                     {"shuffle", "drop-last", "resume", "data-parallel"}, Finetune, out, err);
}

}  // namespace cli
}  // namespace kgrad
