// Forward, optimised gradient and optimised Jvp of three programs (an MLP with
// softmax cross-entropy, a conv network, a tanh RNN as a while loop): node counts,
// CPU times, and the ratios grad/fwd and jvp/fwd (targets: <= 3.0 and <= 2.0), plus
// whether the optimised gradient graph is free of closures, partials, envs and
// tuples (tools/graph_counts.h). Prints a Markdown table.
// Run: ./bazelw run //bench:ratio_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "core/manager.h"
#include "core/passes/optimize.h"
#include "core/status_macros.h"
#include "examples/programs.h"
#include "ops/registry.h"
#include "tools/graph_counts.h"

namespace kgrad {
namespace {

double MedianMs(const std::function<void()>& fn, int reps) {
  fn();  // warm up
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Row {
  std::string name;
  int fwd_nodes, grad_nodes, jvp_nodes, plumbing;
  double fwd_ms, grad_ms, jvp_ms;
};

absl::StatusOr<Row> Measure(const std::string& name, const std::function<FuncGraph*(Module*)>& build, int reps) {
  Module m(DefaultRegistry());
  FuncGraph* f = build(&m);
  std::vector<Value> args = programs::RandomInputs(f, 5);
  std::vector<Parameter*> weights;
  for (const auto& w : m.weights()) weights.push_back(w.get());
  m.set_constant_evaluator(&CpuConstantEvaluator::Get());  // Optimize and Jvp fold with it
  GradOptions go;
  go.argnums.clear();
  go.weights = weights;
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* grad, Grad(m, f, go));
  KGRAD_RETURN_IF_ERROR(Optimize(m, grad).status());
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* jvp, Jvp(m, f));
  std::vector<Value> jargs = args;
  for (const Value& a : args) jargs.push_back(a);  // tangents: any values of the right types
  KGRAD_ASSIGN_OR_RETURN(auto ef, Executor::Create(f));
  KGRAD_ASSIGN_OR_RETURN(auto eg, Executor::Create(grad));
  KGRAD_ASSIGN_OR_RETURN(auto ej, Executor::Create(jvp));
  Row r;
  r.name = name;
  r.fwd_nodes = CountApplications(f);
  r.grad_nodes = CountApplications(grad);
  r.jvp_nodes = CountApplications(jvp);
  r.plumbing = CountPlumbing(grad);
  r.fwd_ms = MedianMs([&] { (void)ef->Run(args); }, reps);
  r.grad_ms = MedianMs([&] { (void)eg->Run(args); }, reps);
  r.jvp_ms = MedianMs([&] { (void)ej->Run(jargs); }, reps);
  return r;
}

int Main() {
  std::vector<std::pair<std::string, std::function<FuncGraph*(Module*)>>> cases = {
      {"MLP 784-1024-1024-10, batch 128",
       [](Module* m) { return programs::Mlp(m, 128, {784, 1024, 1024, 10}, DType::kFloat32); }},
      {"conv net 28x28 (32, 64), batch 64",
       [](Module* m) { return programs::ConvNet(m, 64, 28, 32, 64, 10, DType::kFloat32); }},
      {"tanh RNN, 32 steps, batch 32, 256 hidden",
       [](Module* m) { return programs::TanhRnn(m, 32, 32, 128, 256, DType::kFloat32); }},
  };
  std::printf("| program | nodes fwd / grad / jvp | plumbing left in grad | fwd ms | grad ms | jvp ms | grad/fwd | jvp/fwd |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const auto& [name, build] : cases) {
    absl::StatusOr<Row> r = Measure(name, build, 7);
    if (!r.ok()) {
      std::printf("| %s | error: %s |\n", name.c_str(), std::string(r.status().message()).c_str());
      continue;
    }
    std::printf("| %s | %d / %d / %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r->name.c_str(), r->fwd_nodes,
                r->grad_nodes, r->jvp_nodes, r->plumbing, r->fwd_ms, r->grad_ms, r->jvp_ms, r->grad_ms / r->fwd_ms,
                r->jvp_ms / r->fwd_ms);
  }
  return 0;
}

}  // namespace
}  // namespace kgrad

int main() { return kgrad::Main(); }
