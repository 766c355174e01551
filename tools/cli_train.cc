#include "tools/cli_train.h"

#include <sys/stat.h>

#include <cmath>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backends/executor.h"
#include "core/status_macros.h"
#include "tools/cli_args.h"
#include "tools/cli_common.h"
#include "tools/cli_data_parallel.h"
#include "tools/cli_finetune.h"
#include "tools/npy.h"

namespace kgrad {
namespace cli {
namespace {

using WeightMap = absl::flat_hash_map<std::string, Tensor>;

// The loss of one step, and the new weights into `weights`; errors name the
// graph and say what a step must return.
absl::StatusOr<double> TakeStep(const Module& m, const FuncGraph* g, const Value& result,
                                WeightMap* weights) {
  const size_t n = m.weights().size();
  auto shape_error = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "graph '", g->name(), "' must return (loss, new_weights) with new_weights a tuple of ", n,
        " tensors (one per weight of the module, in order); ", what));
  };
  if (!result.is_tuple() || result.tuple().size() != 2) {
    return shape_error(absl::StrCat("it returned ", result.TypeString()));
  }
  const Value& loss = result.tuple()[0];
  const Value& update = result.tuple()[1];
  if (!loss.is_tensor() || loss.tensor().NumElements() != 1) {
    return shape_error(absl::StrCat("the loss is ", loss.TypeString(), ", not one number"));
  }
  if (!update.is_tuple() || update.tuple().size() != n) {
    return shape_error(absl::StrCat("the second element is ", update.TypeString()));
  }
  for (size_t i = 0; i < n; ++i) {
    const Parameter* w = m.weights()[i].get();
    const Value& v = update.tuple()[i];
    const Tensor& old = weights->at(w->name());
    if (!v.is_tensor() || v.tensor().dtype() != old.dtype() || v.tensor().shape() != old.shape()) {
      return shape_error(absl::StrCat("new value ", i, " (for weight '", w->name(), "') is ",
                                      v.TypeString(), ", the weight is ", Value(old).TypeString()));
    }
    (*weights)[w->name()] = v.tensor();
  }
  return loss.tensor().ElementAsDouble(0);
}

// The weights' starting values: the file's, or --weight overrides.
absl::StatusOr<WeightMap> StartingWeights(const Module& m, const FuncGraph* g, const ParsedArgs& args) {
  if (m.weights().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the model has no weights to train (graph '",
                                                   g->name(), "')"));
  }
  KGRAD_ASSIGN_OR_RETURN(WeightMap weights, ReadWeightOverrides(args));
  for (const auto& w : m.weights()) {
    if (!weights.contains(w->name()) && w->default_value().has_value()) {
      weights[w->name()] = *w->default_value();
    }
    if (!weights.contains(w->name())) {
      return absl::InvalidArgumentError(absl::StrCat("weight '", w->name(), "' has no value"));
    }
  }
  return weights;
}

// One process's training: the whole batch, or (with `comm`) this rank's share
// of it in a data-parallel job; only rank 0 prints and writes.
absl::Status Train(const ParsedArgs& args, std::ostream& out) {
  if (args.positional.size() != 1) return absl::InvalidArgumentError("train takes one FILE");
  KGRAD_ASSIGN_OR_RETURN(int64_t steps, IntOption(args, "steps", 100, 1));
  KGRAD_ASSIGN_OR_RETURN(int64_t every, IntOption(args, "print-every", 1, 1));
  const bool parallel = args.Has("data-parallel");
  std::unique_ptr<Communicator> comm;
  if (parallel) {
    KGRAD_ASSIGN_OR_RETURN(comm, JoinDataParallel(args, args.positional[0]));
  }
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, LoadModule(args.positional[0], !parallel));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* g, SelectGraph(*m, args));
  KGRAD_ASSIGN_OR_RETURN(WeightMap weights, StartingWeights(*m, g, args));
  KGRAD_ASSIGN_OR_RETURN(std::vector<Value> inputs, ReadInputs(g, args));
  ExecutorOptions options;
  if (parallel) {
    KGRAD_RETURN_IF_ERROR(MakeStepDataParallel(*m, g, *comm, args, out));
    KGRAD_ASSIGN_OR_RETURN(inputs, ShardInputs(g, std::move(inputs), *comm, args));
    options.communicator = comm.get();
  }
  const bool speaks = comm == nullptr || comm->rank() == 0;
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> e, Executor::Create(g, options));
  double first = 0, last = 0;
  for (int64_t step = 1; step <= steps; ++step) {
    KGRAD_ASSIGN_OR_RETURN(Value result, e->Run(inputs, weights));
    KGRAD_ASSIGN_OR_RETURN(last, TakeStep(*m, g, result, &weights));
    if (step == 1) first = last;
    if (!std::isfinite(last)) {
      return absl::InvalidArgumentError(absl::StrCat("step ", step, ": the loss is ", last,
                                                     " (diverged; try a smaller learning rate)"));
    }
    if (speaks && (step % every == 0 || step == 1 || step == steps)) {
      out << "step " << step << " loss " << last << "\n";
    }
  }
  if (parallel) KGRAD_RETURN_IF_ERROR(CheckSameWeights(weights, *comm));
  if (!speaks) return absl::OkStatus();
  out << "loss " << first << " -> " << last << " in " << steps << " steps\n";
  if (parallel) out << "weights bit-identical on all " << comm->size() << " ranks\n";
  if (args.Has("output")) {
    for (const auto& [name, t] : weights) {
      KGRAD_RETURN_IF_ERROR(WriteOutputs(Value(t), args.Get("output"), name));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int TrainCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  // A directory holds training artifacts (kgrad train-artifacts): the data loop.
  struct stat st;
  if (!argv.empty() && ::stat(argv[0].c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return FinetuneCommand(argv, out, err);
  }
  return CommandMain(argv,
                     {"steps", "print-every", "input", "weight", "output", "graph", "collective-timeout",
                      "bucket-mb", "replicated"},
                     {"data-parallel", "gradient-sum"}, Train, out, err);
}

}  // namespace cli
}  // namespace kgrad
