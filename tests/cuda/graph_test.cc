// Whole programs on the CUDA executor against the CPU executor: the forward
// graph, the raw and the optimised gradient graphs (kgrad::GradOperation /
// kgrad::Grad, inputs and weights) and the Jvp graph of an MLP, a conv net with
// batch_norm, and a tanh RNN written as a while loop; plus concurrent runs from
// several threads (one stream each) and weight overrides.
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "core/passes/optimize.h"
#include "examples/programs.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/cuda/cuda_test_util.h"

namespace kgrad {
namespace testing {
namespace {

struct Program {
  std::string name;
  std::function<FuncGraph*(Module*, DType)> build;
};

std::vector<Program> Programs() {
  return {
      {"mlp", [](Module* m, DType t) { return programs::Mlp(m, 8, {12, 16, 5}, t); }},
      {"convnet",
       [](Module* m, DType t) { return programs::ConvNet(m, 2, 8, 3, 4, 3, t, /*batch_norm=*/true); }},
      {"rnn", [](Module* m, DType t) { return programs::TanhRnn(m, 4, 3, 5, 6, t); }},
  };
}

Tolerance GraphTolerance(DType t) {
  // Whole programs chain many kernels; f32 differences compound.
  return t == DType::kFloat32 ? Tolerance{2e-3, 2e-4} : Tolerance{1e-8, 1e-10};
}

// Runs `g` on the CPU and on `cuda` with the same arguments and compares.
::testing::AssertionResult SameOnCudaAndCpu(Device* cuda, FuncGraph* g,
                                            const std::vector<Value>& args, Tolerance tol) {
  absl::StatusOr<std::unique_ptr<Executor>> cpu = Executor::Create(g);
  if (!cpu.ok()) return ::testing::AssertionFailure() << "CPU compile: " << cpu.status();
  ExecutorOptions options;
  options.device = cuda;
  absl::StatusOr<std::unique_ptr<Executor>> gpu = Executor::Create(g, options);
  if (!gpu.ok()) return ::testing::AssertionFailure() << "CUDA compile: " << gpu.status();
  absl::StatusOr<Value> want = (*cpu)->Run(args);
  if (!want.ok()) return ::testing::AssertionFailure() << "CPU run: " << want.status();
  absl::StatusOr<Value> got = (*gpu)->Run(args);
  if (!got.ok()) return ::testing::AssertionFailure() << "CUDA run: " << got.status();
  return ValuesClose(*got, *want, tol);
}

// The gradient of `f` with respect to its first input and every weight of `m`.
absl::StatusOr<FuncGraph*> GradOfInputAndWeights(Module& m, FuncGraph* f) {
  GradOptions go;
  go.argnums = {0};
  for (const auto& p : m.weights()) go.weights.push_back(p.get());
  return Grad(m, f, go);
}

// Each program (Programs()) in each float dtype: f_ in m_, built unless skipped.
class GraphTest : public OnCuda<::testing::TestWithParam<std::tuple<int, DType>>> {
 protected:
  void SetUp() override {
    OnCuda::SetUp();
    if (IsSkipped()) return;
    dtype_ = std::get<1>(GetParam());
    f_ = Programs()[std::get<0>(GetParam())].build(&m_, dtype_);
  }
  // `g` gives the same on CUDA as on the CPU at `args`.
  ::testing::AssertionResult SameAsCpu(FuncGraph* g, const std::vector<Value>& args) {
    return SameOnCudaAndCpu(dev, g, args, GraphTolerance(dtype_));
  }
  DType dtype_ = DType::kFloat32;
  Module m_{DefaultRegistry()};
  FuncGraph* f_ = nullptr;
};

TEST_P(GraphTest, ForwardMatchesCpu) { EXPECT_TRUE(SameAsCpu(f_, programs::RandomInputs(f_, 5))); }

TEST_P(GraphTest, RawGradientGraphMatchesCpu) {
  // (input grads, weight grads), straight from the K-transform: closures,
  // tuples and envs run on the executor with the tensors on the GPU.
  absl::StatusOr<FuncGraph*> g = GradOperation(/*get_all=*/true, /*get_by_list=*/true)(m_, f_);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(SameAsCpu(*g, programs::RandomInputs(f_, 6)));
}

TEST_P(GraphTest, OptimisedGradientGraphMatchesCpu) {
  absl::StatusOr<FuncGraph*> g = GradOfInputAndWeights(m_, f_);
  ASSERT_TRUE(g.ok()) << g.status();
  OptimizeOptions oo;
  oo.evaluator = &CpuConstantEvaluator::Get();
  ASSERT_TRUE(Optimize(m_, *g, oo).ok());
  EXPECT_TRUE(SameAsCpu(*g, programs::RandomInputs(f_, 7)));
}

TEST_P(GraphTest, JvpGraphMatchesCpu) {
  absl::StatusOr<FuncGraph*> jvp = Jvp(m_, f_);
  ASSERT_TRUE(jvp.ok()) << jvp.status();
  std::vector<Value> args = programs::RandomInputs(f_, 8);
  for (const Value& v : programs::RandomInputs(f_, 9)) args.push_back(v);  // tangents
  EXPECT_TRUE(SameAsCpu(*jvp, args));
}

std::string GraphParamName(const ::testing::TestParamInfo<std::tuple<int, DType>>& info) {
  return Programs()[std::get<0>(info.param)].name + "_" + DTypeName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Programs, GraphTest,
                         ::testing::Combine(::testing::Values(0, 1, 2), FloatDTypes()),
                         GraphParamName);

TEST(GraphThreadsTest, ConcurrentRunsOnSeveralThreadsMatchCpu) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  Module m(DefaultRegistry());
  FuncGraph* f = programs::ConvNet(&m, 4, 8, 3, 4, 3, DType::kFloat32, /*batch_norm=*/true);
  absl::StatusOr<FuncGraph*> g = GradOfInputAndWeights(m, f);
  ASSERT_TRUE(g.ok()) << g.status();
  ExecutorOptions options;
  options.device = dev;
  absl::StatusOr<std::unique_ptr<Executor>> gpu = Executor::Create(*g, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  constexpr int kThreads = 4, kRuns = 5;
  std::vector<std::vector<Value>> args(kThreads);
  std::vector<Value> want(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    args[t] = programs::RandomInputs(f, 100 + t);
    absl::StatusOr<Value> w = RunGraph(*g, args[t]);
    ASSERT_TRUE(w.ok()) << w.status();
    want[t] = *w;
  }
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r) {
        absl::StatusOr<Value> got = (*gpu)->Run(args[t]);
        if (!got.ok()) {
          failures[t] = got.status().ToString();
          return;
        }
        ::testing::AssertionResult ok = ValuesClose(*got, want[t], GraphTolerance(DType::kFloat32));
        if (!ok) {
          failures[t] = ok.message();
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

TEST(GraphWeightsTest, WeightOverridesAreCopiedToTheDevice) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  Module m(DefaultRegistry());
  FuncGraph* f = programs::Mlp(&m, 4, {6, 5, 3}, DType::kFloat64);
  std::vector<Value> args = programs::RandomInputs(f, 3);
  absl::flat_hash_map<std::string, Tensor> weights;
  std::mt19937_64 rng(4);
  const Parameter* w0 = m.weights().front().get();
  weights[w0->name()] = Rand(DType::kFloat64, w0->default_value()->shape(), rng).tensor();
  auto cpu = Executor::Create(f);
  ExecutorOptions options;
  options.device = dev;
  auto gpu = Executor::Create(f, options);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  absl::StatusOr<Value> want = (*cpu)->Run(args, weights);
  absl::StatusOr<Value> got = (*gpu)->Run(args, weights);
  ASSERT_TRUE(want.ok() && got.ok()) << want.status() << " " << got.status();
  EXPECT_TRUE(ValuesClose(*got, *want, GraphTolerance(DType::kFloat64)));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
