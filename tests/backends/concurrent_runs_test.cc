// Many callers running executors at once on the CPU: results are those of a run
// alone, and the CPU device's sharing policy (one OpenMP thread per kernel while
// several runs are in flight, the caller's own count when alone) holds and leaves
// each caller's OpenMP setting as it found it.
#include <omp.h>

#include <cmath>
#include <thread>
#include <vector>

#include "ad/grad_operation.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/cpu/cpu_device.h"
#include "backends/executor.h"
#include "core/passes/optimize.h"
#include "examples/programs.h"
#include "gtest/gtest.h"
#include "ops/registry.h"

namespace kgrad {
namespace testing {
namespace {

// The largest |a - b| / max(1, |b|) over the tensors of two (tuple) values.
double MaxRelDiff(const Value& a, const Value& b) {
  if (a.is_tuple()) {
    double d = 0;
    for (size_t i = 0; i < a.tuple().size(); ++i) d = std::max(d, MaxRelDiff(a.tuple()[i], b.tuple()[i]));
    return d;
  }
  double d = 0;
  for (int64_t i = 0; i < a.tensor().NumElements(); ++i) {
    double x = a.tensor().ElementAsDouble(i), y = b.tensor().ElementAsDouble(i);
    d = std::max(d, std::abs(x - y) / std::max(1.0, std::abs(y)));
  }
  return d;
}

TEST(ConcurrentRunsTest, ManyCallersGetTheResultOfARunAlone) {
  Module m(DefaultRegistry());
  m.set_constant_evaluator(&CpuConstantEvaluator::Get());
  // Big enough that GEMMs and elementwise kernels take their parallel paths.
  FuncGraph* f = programs::Mlp(&m, 64, {256, 512, 10}, DType::kFloat32);
  ValueAndGradOptions vo;
  vo.argnums.clear();
  for (const auto& w : m.weights()) vo.weights.push_back(w.get());
  FuncGraph* step = ValueAndGrad(m, f, vo).value();
  ASSERT_TRUE(Optimize(m, step).ok());
  std::unique_ptr<Executor> e = Executor::Create(step).value();
  std::vector<Value> args = programs::RandomInputs(f, 7);
  absl::StatusOr<Value> alone = e->Run(args);
  ASSERT_TRUE(alone.ok()) << alone.status();

  constexpr int kThreads = 8, kRuns = 4;
  std::vector<double> worst(kThreads, 0.0);
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r) {
        absl::StatusOr<Value> out = e->Run(args);
        if (!out.ok()) {
          ++failures[t];
          continue;
        }
        worst[t] = std::max(worst[t], MaxRelDiff(*out, *alone));
      }
    });
  }
  for (std::thread& c : callers) c.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[t], 0) << "caller " << t;
    // One thread or two sum each dot product in the same order; allow round-off.
    EXPECT_LE(worst[t], 1e-5) << "caller " << t;
  }
}

TEST(ConcurrentRunsTest, KernelsRunOnTheCallerAloneWhileOtherRunsAreInFlight) {
  Device* cpu = CpuDevice();
  omp_set_num_threads(2);
  const int first = cpu->BeginRun();
  EXPECT_EQ(first, 2);
  cpu->BeforeKernel(first);
  EXPECT_EQ(omp_get_max_threads(), 2) << "a run alone keeps the caller's threads";
  const int second = cpu->BeginRun();  // another run starts
  cpu->BeforeKernel(first);
  EXPECT_EQ(omp_get_max_threads(), 1) << "two runs in flight: one thread each";
  cpu->EndRun(second);
  cpu->BeforeKernel(first);
  EXPECT_EQ(omp_get_max_threads(), 2) << "alone again";
  cpu->EndRun(first);
  EXPECT_EQ(omp_get_max_threads(), 2);
}

TEST(ConcurrentRunsTest, EachCallerKeepsItsOwnOpenMpSetting) {
  Module m(DefaultRegistry());
  FuncGraph* f = programs::Mlp(&m, 32, {64, 64, 10}, DType::kFloat32);
  std::unique_ptr<Executor> e = Executor::Create(f).value();
  std::vector<Value> args = programs::RandomInputs(f, 3);
  std::vector<int> after(4, 0);
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      omp_set_num_threads(t + 1);  // a per-thread setting
      for (int r = 0; r < 20; ++r) (void)e->Run(args);
      after[t] = omp_get_max_threads();
    });
  }
  for (std::thread& c : callers) c.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(after[t], t + 1) << "caller " << t;
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
