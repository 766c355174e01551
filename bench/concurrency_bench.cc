// Concurrent callers: T threads each running the optimised MLP training step
// (784-1024-1024-10, batch 128, float32) on one shared Executor, against one
// thread alone. A service embedding kgrad runs many requests at once; the cores
// must stay busy without any caller stalling behind workers that are not running.
// Prints steps per second alone (the best of three rounds) and together, their
// ratio (target >= 0.90), and the median and slowest step time together (target:
// slowest <= 10x the median).
//   ./bazelw run //bench:concurrency_bench -- [--threads T] [--steps S]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "ad/grad_operation.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "core/passes/optimize.h"
#include "examples/programs.h"
#include "ops/registry.h"

namespace kgrad {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Runs `steps` steps on each of `threads` threads at once; returns every step's
// time (ms) and sets the wall time of the whole.
std::vector<double> RunTogether(const Executor& e, const std::vector<Value>& args, int threads,
                                int steps, double* wall_ms) {
  std::vector<std::vector<double>> times(threads);
  std::vector<std::thread> pool;
  auto start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int s = 0; s < steps; ++s) {
        auto a = Clock::now();
        absl::StatusOr<Value> out = e.Run(args);
        if (!out.ok()) {
          std::fprintf(stderr, "step failed: %s\n", out.status().ToString().c_str());
          std::exit(1);
        }
        times[t].push_back(Ms(a, Clock::now()));
      }
    });
  }
  for (std::thread& th : pool) th.join();
  *wall_ms = Ms(start, Clock::now());
  std::vector<double> all;
  for (const auto& v : times) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  return all;
}

int Main(int argc, char** argv) {
  int threads = 16, steps = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::max(1, std::atoi(argv[i + 1]));
  }
  Module m(DefaultRegistry());
  m.set_constant_evaluator(&CpuConstantEvaluator::Get());
  FuncGraph* f = programs::Mlp(&m, 128, {784, 1024, 1024, 10}, DType::kFloat32);
  ValueAndGradOptions vo;
  vo.argnums.clear();
  for (const auto& w : m.weights()) vo.weights.push_back(w.get());
  FuncGraph* step = ValueAndGrad(m, f, vo).value();
  Optimize(m, step).value();
  std::unique_ptr<Executor> e = Executor::Create(step).value();
  std::vector<Value> args = programs::RandomInputs(f, 1);
  double wall = 0;
  RunTogether(*e, args, 1, 3, &wall);  // warm-up
  double alone = 0;
  for (int round = 0; round < 3; ++round) {
    RunTogether(*e, args, 1, steps, &wall);
    alone = std::max(alone, steps / (wall / 1000));
  }
  std::vector<double> t = RunTogether(*e, args, threads, steps, &wall);
  double together = threads * steps / (wall / 1000);
  double median = t[t.size() / 2], slowest = t.back();
  std::printf("threads %d, steps %d each\n", threads, steps);
  std::printf("alone     %.1f steps/s\n", alone);
  std::printf("together  %.1f steps/s  (%.2fx of alone; target >= 0.90)\n", together,
              together / alone);
  std::printf("step time together: median %.1f ms, slowest %.1f ms (%.1fx the median; "
              "target <= 10)\n",
              median, slowest, slowest / median);
  return 0;
}

}  // namespace
}  // namespace kgrad

int main(int argc, char** argv) { return kgrad::Main(argc, argv); }
