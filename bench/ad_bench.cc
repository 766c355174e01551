// Time to build and optimise gradient graphs of generated programs of 1k, 10k and
// 100k nodes (a chain of elementwise ops on a small vector, with a side branch
// every few nodes so that sensitivities add up). Target: <= 50 ms at 10k nodes, <= 600 ms
// at 100k (growth <= 12x per decade).
// Run: ./bazelw run //bench:ad_bench
#include <benchmark/benchmark.h>

#include "ad/grad_operation.h"
#include "bench/chain_program.h"
#include "core/passes/optimize.h"
#include "ops/registry.h"

namespace kgrad {
namespace {

using bench::BuildChain;

void BM_GradAndOptimize(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  int64_t nodes_after = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Module m(DefaultRegistry());
    FuncGraph* f = BuildChain(&m, n);
    state.ResumeTiming();
    FuncGraph* g = GradOperation()(m, f).value();
    absl::StatusOr<std::string> log = Optimize(m, g);
    benchmark::DoNotOptimize(log);
    state.PauseTiming();
    nodes_after = 0;
    for (const auto& graph : m.graphs()) nodes_after += static_cast<int64_t>(graph->owned_nodes().size());
    state.ResumeTiming();
  }
  state.counters["nodes_in"] = n;
  state.counters["nodes_after"] = static_cast<double>(nodes_after);
}
BENCHMARK(BM_GradAndOptimize)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_GradOnly(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    Module m(DefaultRegistry());
    FuncGraph* f = BuildChain(&m, n);
    state.ResumeTiming();
    benchmark::DoNotOptimize(GradOperation()(m, f));
  }
}
BENCHMARK(BM_GradOnly)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kgrad

BENCHMARK_MAIN();
