// The executor's per-run resource limits (ExecutorOptions): call depth, loop
// iterations and bytes allocated; each gives ResourceExhausted naming the limit
// and its value, and a run that stops early releases everything (ASAN checks).
// And reverse mode through a 100,000-iteration while loop whose trip count is an
// input (so the optimiser cannot unroll it).
#include <cmath>

#include "ad/grad_operation.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/passes/optimize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/graph_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

// loss(x[k], n) = sum(h_n), h_0 = x, h_{t+1} = h_t * a + b: a while loop with n
// iterations, n an input. With a = 1 - 1e-5 the closed form is simple:
// h_n = a^n x + b (1 - a^n) / (1 - a), so dloss/dx = a^n elementwise.
constexpr double kA = 1.0 - 1e-5;
constexpr double kB = 0.001;

FuncGraph* BuildAffineLoop(Module* m, int64_t k) {
  GraphBuilder b(m, "affine_loop");
  AnfNode* x = b.Param("x", DType::kFloat64, {k});
  AnfNode* n = b.Param("n", MakeAbstractScalar(DType::kInt64));
  AnfNode* a = b.Const(Value(Tensor::FromScalar<double>(kA)));
  AnfNode* c = b.Const(Value(Tensor::FromScalar<double>(kB)));
  AnfNode* h = Repeat(b, n, x, [&](GraphBuilder& g, AnfNode*, AnfNode* h) {
    return g.Op(PrimId::kAdd, {g.Op(PrimId::kMul, {h, a}), c});
  });
  return b.Return(b.Op(PrimId::kReduceSum, {h})).value();
}

TEST(ExecutorLimitsTest, CallDepthNamesTheLimit) {
  Module m(DefaultRegistry());
  ExecutorOptions o;
  o.max_call_depth = 50;
  auto e = Executor::Create(BuildFactorial(&m), o);
  ASSERT_TRUE(e.ok()) << e.status();
  absl::StatusOr<Value> r = (*e)->Run({I(20)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->scalar().AsInt(), 2432902008176640000);
  r = (*e)->Run({I(60)});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("ExecutorOptions::max_call_depth"));
  EXPECT_THAT(r.status().message(), HasSubstr("exceeds 50"));
}

TEST(ExecutorLimitsTest, TailCallsAreCountedPerRun) {
  Module m(DefaultRegistry());
  ExecutorOptions o;
  o.max_tail_calls = 100;  // 50 loop iterations: two tail calls each
  auto e = Executor::Create(BuildAffineLoop(&m, 2), o);
  ASSERT_TRUE(e.ok()) << e.status();
  // Each run starts from zero: two runs of 45 iterations both pass.
  for (int run = 0; run < 2; ++run) {
    absl::StatusOr<Value> r = (*e)->Run({Vec({1.0, 2.0}), I(45)});
    ASSERT_TRUE(r.ok()) << r.status();
    double a45 = std::pow(kA, 45);
    double want = a45 * 3.0 + 2 * kB * (1 - a45) / (1 - kA);
    EXPECT_NEAR(r->tensor().ElementAsDouble(0), want, 1e-9);
  }
  absl::StatusOr<Value> r = (*e)->Run({Vec({1.0, 2.0}), I(51)});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("ExecutorOptions::max_tail_calls = 100"));
}

// s(x[k], n) = sum over n iterations of sum(x * 2): x is captured by the loop, so
// x * 2 cannot reuse its buffer and allocates 8k bytes every iteration.
FuncGraph* BuildAllocatingLoop(Module* m, int64_t k) {
  GraphBuilder b(m, "allocating_loop");
  AnfNode* x = b.Param("x", DType::kFloat64, {k});
  AnfNode* n = b.Param("n", MakeAbstractScalar(DType::kInt64));
  AnfNode* two = b.Const(Value(Tensor::FromScalar<double>(2.0)));
  AnfNode* zero = b.Const(Value(Tensor::FromScalar<double>(0.0)));
  AnfNode* sum = Repeat(b, n, zero, [&](GraphBuilder& g, AnfNode*, AnfNode* s) {
    return g.Op(PrimId::kAdd, {s, g.Op(PrimId::kReduceSum, {g.Op(PrimId::kMul, {x, two})})});
  });
  return b.Return(sum).value();
}

TEST(ExecutorLimitsTest, BytesAllocatedPerRun) {
  Module m(DefaultRegistry());
  ExecutorOptions o;
  o.max_run_bytes = 200'000;  // 8,000 bytes (and a few scalars) per iteration
  auto e = Executor::Create(BuildAllocatingLoop(&m, 1000), o);
  ASSERT_TRUE(e.ok()) << e.status();
  std::vector<double> x(1000, 0.5);
  absl::StatusOr<Value> r = (*e)->Run({Vec(x), I(20)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->tensor().ElementAsDouble(0), 20 * 1000.0);
  r = (*e)->Run({Vec(x), I(30)});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("ExecutorOptions::max_run_bytes = 200000"));
  // The limit is per run: a short run after the failed one still passes.
  r = (*e)->Run({Vec(x), I(20)});
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST(ExecutorLimitsTest, Defaults) {
  ExecutorOptions o;
  EXPECT_EQ(o.max_run_bytes, INT64_MAX);
  // A loop without end stops within about a minute, not after 58 hours (2^40).
  EXPECT_EQ(o.max_tail_calls, 100'000'000);
  EXPECT_EQ(o.max_run_seconds, 0);  // no deadline unless asked for
  EXPECT_EQ(o.max_call_depth, 4'000'000);  // any AD mode through a 1,000,000-iteration loop
  EXPECT_TRUE(o.check_types);
}

// Reverse mode through 100,000 iterations: the forward loop records a chain of
// 100,000 backward closures, which the backward pass then walks. Memory is linear
// in n (tests/stress/long_loop_memory: ~0.67 KB per iteration, peak RSS 74 MB at
// n = 100,000 and 276 MB at 400,000), and neither running nor freeing the chain
// may recurse on the C++ stack.
TEST(ExecutorLimitsTest, ReverseModeThroughHundredThousandIterationLoop) {
  Module m(DefaultRegistry());
  FuncGraph* f = BuildAffineLoop(&m, 3);
  absl::StatusOr<FuncGraph*> g = GradOperation()(m, f);
  ASSERT_TRUE(g.ok()) << g.status();
  OptimizeOptions oo;
  oo.evaluator = &CpuConstantEvaluator::Get();
  ASSERT_TRUE(Optimize(m, *g, oo).ok());
  auto e = Executor::Create(*g);  // the default limits suffice (~2 calls nest per iteration)
  ASSERT_TRUE(e.ok()) << e.status();
  for (int64_t n : {int64_t{7}, int64_t{100'000}}) {
    absl::StatusOr<Value> r = (*e)->Run({Vec({0.5, -1.0, 2.0}), I(n)});
    ASSERT_TRUE(r.ok()) << r.status();
    double want = std::pow(kA, static_cast<double>(n));
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(r->tensor().ElementAsDouble(i), want, 1e-9) << "n=" << n;
  }
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
