// The kgrad side of bench/finetune_step.sh: for training artifacts (kgrad
// train-artifacts), the median time of
//   - a step of the artifacts (TrainingSession::TrainStep: loss, gradients and
//     the optimizer's update), and
//   - the plain gradient step the update is added to: value_and_grad of the same
//     loss with respect to the same weights, optimised as train-artifacts does,
//     run by the same executor,
// on random data of the given batch (targets in [0, classes) for a class-index
// target), with the bytes the update reads and writes (weights, gradients and
// optimizer state, once each). One JSON line on stdout.
//
//   finetune_step_bench DIR --batch N [--classes C]
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "bench/suite_timing.h"
#include "core/builder.h"
#include "core/passes/optimize.h"
#include "core/status_macros.h"
#include "tools/train/artifacts.h"
#include "tools/train/training_session.h"

namespace kgrad {
namespace {

// Random data of `batch` rows for each input the steps take.
absl::StatusOr<std::vector<Value>> RandomBatch(const train::TrainingSession& s, int64_t batch, int64_t classes) {
  std::mt19937 rng(1);
  std::vector<Value> data;
  for (size_t i = 0; i < s.input_types().size(); ++i) {
    const AbstractTensor* t = AsTensor(s.input_types()[i]);
    if (t == nullptr || t->shape().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", s.input_names()[i], "' is not a batch"));
    }
    Shape shape = t->shape();
    shape[0] = batch;
    for (int64_t d : shape) {
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat("input '", s.input_names()[i], "' has unknown dims"));
    }
    KGRAD_ASSIGN_OR_RETURN(Tensor x, Tensor::Zeros(t->dtype(), shape));
    for (int64_t k = 0; k < x.NumElements(); ++k) {
      if (t->dtype() == DType::kFloat32) {
        x.mutable_data<float>()[k] = std::normal_distribution<float>()(rng);
      } else if (t->dtype() == DType::kFloat64) {
        x.mutable_data<double>()[k] = std::normal_distribution<double>()(rng);
      } else if (t->dtype() == DType::kInt64) {
        x.mutable_data<int64_t>()[k] = static_cast<int64_t>(rng() % classes);
      } else {
        return absl::InvalidArgumentError(absl::StrCat("input '", s.input_names()[i], "': unsupported dtype"));
      }
    }
    data.push_back(Value(std::move(x)));
  }
  return data;
}

// value_and_grad(eval_step's loss) w.r.t. the trainable weights, optimised.
absl::StatusOr<FuncGraph*> PlainGradientStep(train::TrainingSession& s) {
  Module& m = s.module();
  FuncGraph* eval = m.FindGraph(train::kEvalStepGraph);
  GraphBuilder b(&m, "bench_loss");
  std::vector<AnfNode*> in;
  for (size_t i = 0; i < s.input_names().size(); ++i) in.push_back(b.Param(s.input_names()[i], s.input_types()[i]));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* loss, b.Return(b.GetItem(b.Call(eval, in), 0)));
  ValueAndGradOptions v;
  v.argnums = {};
  for (const std::string& name : s.trainable()) {
    for (const auto& w : m.weights()) {
      if (w->name() == name) v.weights.push_back(w.get());
    }
  }
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* step, ValueAndGrad(m, loss, v));
  KGRAD_RETURN_IF_ERROR(Optimize(m, step).status());
  return step;
}

absl::Status Bench(const std::string& dir, int64_t batch, int64_t classes) {
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<train::TrainingSession> s, train::TrainingSession::Open(dir));
  KGRAD_ASSIGN_OR_RETURN(std::vector<Value> data, RandomBatch(*s, batch, classes));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* plain, PlainGradientStep(*s));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> e, Executor::Create(plain));
  KGRAD_RETURN_IF_ERROR(s->TrainStep(data).status());
  KGRAD_RETURN_IF_ERROR(e->Run(data, s->weights()).status());
  int64_t update_bytes = 0;
  for (const std::string& name : s->trainable()) update_bytes += 2 * s->weights().at(name).nbytes();  // w in, w out
  for (const std::string& name : s->trainable()) update_bytes += s->weights().at(name).nbytes();  // gradient in
  for (const auto& [name, t] : s->state()) update_bytes += 2 * t.nbytes();  // state in, state out
  bench::TimingBudget budget;
  budget.budget_s = 3;
  // The artifacts' step updates the session's weights; the plain step reads
  // whatever they are (the same shapes every time).
  const double artifacts = bench::MedianMs([&] { (void)s->TrainStep(data); }, budget);
  const double gradient = bench::MedianMs([&] { (void)e->Run(data, s->weights()); }, budget);
  std::cout << "{\"artifacts_step_ms\": " << artifacts << ", \"grad_step_ms\": " << gradient
            << ", \"update_mb\": " << update_bytes / 1e6 << ", \"optimizer\": \"" << s->optimizer() << "\"}"
            << std::endl;
  return absl::OkStatus();
}

}  // namespace
}  // namespace kgrad

int main(int argc, char** argv) {
  if (argc < 4 || std::string(argv[2]) != "--batch") {
    std::cerr << "usage: finetune_step_bench DIR --batch N [--classes C]\n";
    return 2;
  }
  int64_t batch = 0, classes = 10;
  if (!absl::SimpleAtoi(argv[3], &batch) || batch < 1 ||
      (argc >= 6 && (std::string(argv[4]) != "--classes" || !absl::SimpleAtoi(argv[5], &classes) || classes < 1))) {
    std::cerr << "finetune_step_bench: --batch and --classes want positive whole numbers\n";
    return 2;
  }
  absl::Status st = kgrad::Bench(argv[1], batch, classes);
  if (!st.ok()) {
    std::cerr << "finetune_step_bench: " << st << "\n";
    return 1;
  }
  return 0;
}
