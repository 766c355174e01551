// Executor benchmarks (Google Benchmark):
//   * per-node overhead: a chain of 1,000 tiny elementwise applications (neg on a
//     one-element f32 tensor; the executor reuses the buffer in place), reported
//     as ns per node, with fused elementwise runs off;
//   * an sgemm-heavy MLP forward pass (batch 256, 1024-4096-4096-1024, tanh),
//     reported in GFLOP/s.
// Run: ./bazelw run //bench:executor_bench
#include <benchmark/benchmark.h>

#include "backends/executor.h"
#include "core/builder.h"
#include "ops/registry.h"

namespace kgrad {
namespace {

void BM_PerNodeOverhead(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "chain");
  AnfNode* x = b.Param("x", DType::kFloat32, {1});
  AnfNode* y = x;
  for (int i = 0; i < n; ++i) y = b.Op(PrimId::kNeg, {y});
  FuncGraph* g = b.Return(y).value();
  ExecutorOptions o;
  o.fuse_elementwise = false;  // one kernel per application: the cost measured here
  std::unique_ptr<Executor> e = Executor::Create(g, o).value();
  Tensor input = Tensor::FromVector<float>({1}, {1.0f});
  for (auto _ : state) {
    absl::StatusOr<Value> r = e->Run({Value(input)});
    benchmark::DoNotOptimize(r);
  }
  state.counters["ns_per_node"] = benchmark::Counter(static_cast<double>(n) * state.iterations(),
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_PerNodeOverhead)->Arg(1000)->Unit(benchmark::kMicrosecond);

Tensor Random(Shape shape, uint64_t seed) {
  Tensor t = Tensor::Create(DType::kFloat32, shape).value();
  uint64_t s = seed;
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    t.mutable_data<float>()[i] = (static_cast<float>(s >> 40) / (1 << 24) - 0.5f) * 0.05f;
  }
  return t;
}

void BM_MlpForward(benchmark::State& state) {
  const int64_t batch = 256;
  const std::vector<int64_t> widths = {1024, 4096, 4096, 1024};
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "mlp");
  AnfNode* h = b.Param("x", DType::kFloat32, {batch, widths[0]});
  double flops = 0;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    AnfNode* w = b.Weight("w" + std::to_string(l), Random({widths[l], widths[l + 1]}, l + 1));
    AnfNode* bias = b.Weight("b" + std::to_string(l), Random({widths[l + 1]}, l + 100));
    h = b.Op(PrimId::kAdd, {b.Op(PrimId::kMatMul, {h, w}), bias});
    if (l + 2 < widths.size()) h = b.Op(PrimId::kTanh, {h});
    flops += 2.0 * batch * widths[l] * widths[l + 1];
  }
  FuncGraph* g = b.Return(h).value();
  std::unique_ptr<Executor> e = Executor::Create(g).value();
  Tensor x = Random({batch, widths[0]}, 7);
  for (auto _ : state) {
    absl::StatusOr<Value> r = e->Run({Value(x)});
    benchmark::DoNotOptimize(r);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MlpForward)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace
}  // namespace kgrad

BENCHMARK_MAIN();
