#include "tools/cli_demo.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <chrono>
#include <cmath>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/passes/optimize.h"
#include "core/status_macros.h"
#include "examples/programs.h"
#include "ops/registry.h"
#include "tools/cli_args.h"
#include "tools/cli_common.h"

namespace kgrad {
namespace cli {
namespace {

constexpr int64_t kClasses = 3;
constexpr int64_t kPoints = 300;

// Three interleaved spiral arms in the plane (the classic toy problem a linear
// model cannot solve), with a little noise; labels one-hot.
std::pair<Tensor, Tensor> Spirals(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.15f);
  std::vector<float> x(kPoints * 2), y(kPoints * kClasses, 0.0f);
  const int64_t per_class = kPoints / kClasses;
  for (int64_t c = 0; c < kClasses; ++c) {
    for (int64_t i = 0; i < per_class; ++i) {
      int64_t k = c * per_class + i;
      float r = static_cast<float>(i) / per_class;
      float t = 4.0f * c + 4.0f * r + noise(rng);
      x[k * 2] = r * std::sin(t);
      x[k * 2 + 1] = r * std::cos(t);
      y[k * kClasses + c] = 1.0f;
    }
  }
  return {Tensor::FromVector<float>({kPoints, 2}, x), Tensor::FromVector<float>({kPoints, kClasses}, y)};
}

// "[#########-----------]  45/100  loss 0.8123" on one line, redrawn in place.
void ProgressBar(std::ostream& err, int step, int steps, double loss) {
  constexpr int kWidth = 30;
  int filled = steps == 0 ? kWidth : step * kWidth / steps;
  err << "\r[" << std::string(filled, '#') << std::string(kWidth - filled, '-') << "] "
      << absl::StrFormat("%4d/%d  loss %.4f", step, steps, loss) << std::flush;
}

struct DemoOptions {
  int steps = 300;
  double lr = 0.5;
  uint64_t seed = 7;
  int hidden = 32;
};

absl::StatusOr<DemoOptions> ParseDemo(const ParsedArgs& args) {
  DemoOptions o;
  if (args.Has("steps") && (!absl::SimpleAtoi(args.Get("steps"), &o.steps) || o.steps < 1 || o.steps > 1000000)) {
    return absl::InvalidArgumentError(absl::StrCat("--steps wants an integer in [1, 1000000], got '", args.Get("steps"), "'"));
  }
  if (args.Has("lr") && (!absl::SimpleAtod(args.Get("lr"), &o.lr) || !(o.lr > 0) || !std::isfinite(o.lr))) {
    return absl::InvalidArgumentError(absl::StrCat("--lr wants a positive number, got '", args.Get("lr"), "'"));
  }
  if (args.Has("seed") && !absl::SimpleAtoi(args.Get("seed"), &o.seed)) {
    return absl::InvalidArgumentError(absl::StrCat("--seed wants an integer, got '", args.Get("seed"), "'"));
  }
  if (args.Has("hidden") && (!absl::SimpleAtoi(args.Get("hidden"), &o.hidden) || o.hidden < 1 || o.hidden > 4096)) {
    return absl::InvalidArgumentError(absl::StrCat("--hidden wants an integer in [1, 4096], got '", args.Get("hidden"), "'"));
  }
  return o;
}

// The weight gradients in ValueAndGrad's result: (value, weight grads) when it has
// no argnums, else (value, (input grads, weight grads)).
absl::StatusOr<std::vector<Tensor>> WeightGrads(const Value& result, size_t n) {
  if (!result.is_tuple() || result.tuple().size() != 2 || !result.tuple()[1].is_tuple()) {
    return absl::InternalError("demo: value_and_grad did not return (loss, grads)");
  }
  const Value& grads = result.tuple()[1];
  const Value& wg = grads.tuple().size() == 2 && grads.tuple()[1].is_tuple() ? grads.tuple()[1] : grads;
  if (wg.tuple().size() != n) return absl::InternalError("demo: wrong number of weight gradients");
  std::vector<Tensor> out;
  for (const Value& v : wg.tuple()) {
    if (!v.is_tensor()) return absl::InternalError("demo: a weight gradient is not a tensor");
    out.push_back(v.tensor());
  }
  return out;
}

absl::Status Demo(const DemoOptions& o, std::ostream& out, std::ostream& err) {
  // The bar redraws one line in place: only for a person at a terminal.
  const bool bar = &err == &std::cerr && isatty(STDERR_FILENO);
  Module m(DefaultRegistry());
  FuncGraph* loss = programs::Mlp(&m, kPoints, {2, o.hidden, o.hidden, kClasses}, DType::kFloat32, o.seed);
  ValueAndGradOptions vo;
  vo.argnums = {};
  for (const auto& w : m.weights()) vo.weights.push_back(w.get());
  KGRAD_ASSIGN_OR_RETURN(FuncGraph * step, ValueAndGrad(m, loss, vo));
  KGRAD_RETURN_IF_ERROR(Optimize(m, step).status());
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> exec, Executor::Create(step));
  auto [x, labels] = Spirals(o.seed);
  absl::flat_hash_map<std::string, Tensor> weights;
  for (const auto& w : m.weights()) weights[w->name()] = w->default_value()->Clone();
  out << "kgrad demo: an MLP 2-" << o.hidden << "-" << o.hidden << "-3 (tanh) learns " << kPoints
      << " points of three spirals by full-batch gradient descent (lr " << o.lr << ")\n"
      << "step graph: value_and_grad of the loss w.r.t. " << vo.weights.size()
      << " weights, optimised into one kernel schedule\n";
  auto start = std::chrono::steady_clock::now();
  double first = 0, last = 0;
  for (int s = 0; s <= o.steps; ++s) {
    KGRAD_ASSIGN_OR_RETURN(Value r, exec->Run({Value(x), Value(labels)}, weights));
    last = r.tuple()[0].tensor().ElementAsDouble(0);
    if (!std::isfinite(last)) return absl::InternalError(absl::StrCat("demo: the loss diverged at step ", s, " (try a smaller --lr)"));
    if (s == 0) first = last;
    if (s % std::max(1, o.steps / 10) == 0) out << absl::StrFormat("step %5d  loss %.4f\n", s, last);
    if (bar) ProgressBar(err, s, o.steps, last);
    if (s == o.steps) break;
    KGRAD_ASSIGN_OR_RETURN(std::vector<Tensor> grads, WeightGrads(r, m.weights().size()));
    for (size_t i = 0; i < grads.size(); ++i) {
      Tensor& w = weights[m.weights()[i]->name()];
      const float* g = grads[i].data<float>();
      float* p = w.mutable_data<float>();
      for (int64_t k = 0; k < w.NumElements(); ++k) p[k] -= static_cast<float>(o.lr) * g[k];
    }
  }
  if (bar) err << "\n";
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  out << absl::StrFormat("loss %.4f -> %.4f in %d steps (%.2f ms per step)\n", first, last, o.steps, ms / (o.steps + 1));
  return absl::OkStatus();
}

}  // namespace

int DemoCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(argv, {"steps", "lr", "seed", "hidden"}, {});
  if (!args.ok()) return Fail(args.status(), err);
  if (!args->positional.empty()) return Fail(absl::InvalidArgumentError("demo takes no FILE"), err);
  absl::StatusOr<DemoOptions> o = ParseDemo(*args);
  if (!o.ok()) return Fail(o.status(), err);
  absl::Status s = Demo(*o, out, err);
  return s.ok() ? 0 : Fail(s, err);
}

}  // namespace cli
}  // namespace kgrad
