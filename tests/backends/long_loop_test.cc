// Long loops at run time. Forward, gradient, Jvp and gradient-of-gradient through
// a 200,000-iteration while loop whose trip count is an input, checked against
// closed forms (tests/stress/long_loop_memory runs the same at 1,000,000 and
// measures memory). Each AD mode leaves a chain of ~200,000 closures behind; Jvp
// crashed from 70,000 iterations and gradient-of-gradient from 100,000 when the
// chain was freed recursively. And loops that wrap their state in one more tuple
// or partial application per iteration, a million times, then drop it.
#include <cmath>

#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/passes/optimize.h"
#include "examples/programs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kIterations = 200'000;
const std::vector<double> kX = {0.5, -0.3, 0.25};

FuncGraph* Optimized(Module& m, absl::StatusOr<FuncGraph*> g) {
  EXPECT_TRUE(g.ok()) << g.status();
  OptimizeOptions o;
  o.evaluator = &CpuConstantEvaluator::Get();
  EXPECT_TRUE(Optimize(m, *g, o).ok());
  return *g;
}

Value RunOnce(FuncGraph* g, std::vector<Value> args) {
  absl::StatusOr<std::unique_ptr<Executor>> e = Executor::Create(g);
  EXPECT_TRUE(e.ok()) << e.status();
  absl::StatusOr<Value> r = (*e)->Run(std::move(args));
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : Value();
}

class LongLoopTest : public ::testing::Test {
 protected:
  Module m_{DefaultRegistry()};
  FuncGraph* f_ = programs::HornerLoop(&m_, 3, DType::kFloat64);
};

TEST_F(LongLoopTest, Forward) {
  Value r = RunOnce(f_, {Vec(kX), I(kIterations)});
  double want = 0;
  for (double x : kX) want += 1 / (1 - x);
  EXPECT_NEAR(r.tensor().ElementAsDouble(0), want, 1e-9);
}

TEST_F(LongLoopTest, Gradient) {
  FuncGraph* g = Optimized(m_, GradOperation()(m_, f_));
  Value r = RunOnce(g, {Vec(kX), I(kIterations)});
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(r.tensor().ElementAsDouble(i), 1 / std::pow(1 - kX[i], 2), 1e-9);
}

TEST_F(LongLoopTest, Jvp) {
  absl::StatusOr<FuncGraph*> j = Jvp(m_, f_);
  ASSERT_TRUE(j.ok()) << j.status();
  std::vector<double> v = {1.0, 2.0, -1.5};
  Value r = RunOnce(*j, {Vec(kX), I(kIterations), Vec(v), I(0)});
  double jv = 0;
  for (int i = 0; i < 3; ++i) jv += v[i] / std::pow(1 - kX[i], 2);
  EXPECT_NEAR(r.tuple()[1].tensor().ElementAsDouble(0), jv, 1e-9);
}

TEST_F(LongLoopTest, GradientOfGradient) {
  FuncGraph* g = Optimized(m_, GradOperation()(m_, f_));
  FuncGraph* gg = Optimized(m_, GradOperation()(m_, g));
  Value r = RunOnce(gg, {Vec(kX), I(kIterations)});
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(r.tensor().ElementAsDouble(i), 2 / std::pow(1 - kX[i], 3), 1e-9);
}

TEST(WrappingLoopTest, AMillionLevelsAreBuiltAndDropped) {
  for (bool partial : {false, true}) {
    Module m(DefaultRegistry());
    FuncGraph* g = programs::WrappingLoop(&m, partial);
    ExecutorOptions o;
    o.check_types = false;  // the state has no fixed type (see the next test)
    auto e = Executor::Create(g, o);
    ASSERT_TRUE(e.ok()) << e.status();
    absl::StatusOr<Value> r = (*e)->Run({I(1'000'000)});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->scalar().AsInt(), 1'000'000) << (partial ? "partials" : "tuples");
  }
}

// With allocation metering on, ops that only move values are not metered: the
// metering walked the whole state at every make_tuple (quadratic in n).
TEST(WrappingLoopTest, MeteringDoesNotWalkTheState) {
  Module m(DefaultRegistry());
  ExecutorOptions o;
  o.check_types = false;
  o.max_run_bytes = 1 << 20;
  auto e = Executor::Create(programs::WrappingLoop(&m, /*partial=*/false), o);
  ASSERT_TRUE(e.ok()) << e.status();
  absl::StatusOr<Value> r = (*e)->Run({I(1'000'000)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->scalar().AsInt(), 1'000'000);
}

TEST(WrappingLoopTest, TypeCheckRefusesAStateWithoutAFixedType) {
  Module m(DefaultRegistry());
  FuncGraph* g = programs::WrappingLoop(&m, /*partial=*/false);
  auto e = Executor::Create(g);
  ASSERT_TRUE(e.ok()) << e.status();
  absl::StatusOr<Value> r = (*e)->Run({I(10)});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("graph 'tuple_chain' does not type-check"));
  EXPECT_THAT(r.status().message(), HasSubstr("cannot join i64 and (i64,)"));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
