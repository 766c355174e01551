// Subnormal floats: ExecutorOptions::flush_denormals computes them as zero on the
// calling thread and on every thread of a parallel kernel, for one Run only; off,
// a run keeps IEEE gradual underflow (or whatever mode its caller set).
#include <omp.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "backends/cpu/denormals.h"
#include "backends/cpu/parallel.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "gtest/gtest.h"
#include "ops/registry.h"

namespace kgrad {
namespace testing {
namespace {

// Elements the parallel kernels split over threads (several grains).
constexpr int64_t kN = 4 * cpu::kParallelGrain;

// x * x * 2 over kN floats: two elementwise steps, fused or not.
FuncGraph* SquareTwice(Module* m) {
  GraphBuilder b(m, "square_twice");
  AnfNode* x = b.Param("x", DType::kFloat32, {kN});
  AnfNode* two = b.Const(Value(Tensor::FromScalar<float>(2.0f)));
  return b.Return(b.Op(PrimId::kMul, {b.Op(PrimId::kMul, {x, x}), two})).value();
}

// Even elements 1e-20 (their square, 1e-40, is subnormal), odd ones 1.5.
Value Input() {
  std::vector<float> v(kN);
  for (int64_t i = 0; i < kN; ++i) v[i] = i % 2 == 0 ? 1e-20f : 1.5f;
  return Value(Tensor::FromVector<float>({kN}, v));
}

// Runs SquareTwice and checks every element: subnormal or zero by `flushed`.
void ExpectResults(const ExecutorOptions& options, bool flushed) {
  Module m(DefaultRegistry());
  absl::StatusOr<std::unique_ptr<Executor>> e = Executor::Create(SquareTwice(&m), options);
  ASSERT_TRUE(e.ok()) << e.status();
  absl::StatusOr<Value> r = (*e)->Run({Input()});
  ASSERT_TRUE(r.ok()) << r.status();
  const float* y = r->tensor().data<float>();
  // What IEEE arithmetic gives, computed and checked by the compiler: at run time
  // this thread may be flushing (OffARunKeepsTheCallersOwnMode), and there an
  // unoptimised build computes 0 and reads a subnormal as 0.
  constexpr float tiny = 2.0f * (1e-20f * 1e-20f);
  static_assert(tiny > 0.0f && tiny < std::numeric_limits<float>::min(), "subnormal");
  int64_t wrong = 0;
  for (int64_t i = 0; i < kN; ++i) {
    float want = i % 2 == 0 ? (flushed ? 0.0f : tiny) : 4.5f;
    if (y[i] != want) ++wrong;
  }
  EXPECT_EQ(wrong, 0) << "y[0] = " << y[0] << ", y[1] = " << y[1];
}

class DenormalsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::kCanFlushDenormals) GTEST_SKIP() << "this build cannot flush subnormals";
    omp_set_num_threads(2);  // parallel regions with a worker beside the caller
    ASSERT_EQ(cpu::DenormalMode(), 0u);
  }
};

TEST_F(DenormalsTest, ParallelForCarriesTheCallersModeIntoEveryChunk) {
  std::mutex mu;
  std::vector<uint32_t> modes;
  auto record = [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    modes.push_back(cpu::DenormalMode());
  };
  {
    cpu::ScopedDenormalMode flush(cpu::kFlushBits);
    EXPECT_EQ(cpu::DenormalMode(), cpu::kFlushBits);
    cpu::ParallelFor(kN, cpu::kParallelGrain, record);
  }
  EXPECT_EQ(cpu::DenormalMode(), 0u);  // the scope put the caller's mode back
  ASSERT_EQ(modes.size(), 2u);
  for (uint32_t mode : modes) EXPECT_EQ(mode, cpu::kFlushBits);
  // The workers, too, are back in the mode they had.
  modes.clear();
  cpu::ParallelFor(kN, cpu::kParallelGrain, record);
  ASSERT_EQ(modes.size(), 2u);
  for (uint32_t mode : modes) EXPECT_EQ(mode, 0u);
}

TEST_F(DenormalsTest, ScopesNestAndRestoreTheOuterMode) {
  cpu::ScopedDenormalMode outer(cpu::kFlushBits);
  {
    cpu::ScopedDenormalMode inner(0);
    EXPECT_EQ(cpu::DenormalMode(), 0u);
  }
  EXPECT_EQ(cpu::DenormalMode(), cpu::kFlushBits);
}

TEST_F(DenormalsTest, RunsKeepGradualUnderflowByDefault) {
  ExecutorOptions o;
  ExpectResults(o, /*flushed=*/false);
  o.fuse_elementwise = false;
  ExpectResults(o, /*flushed=*/false);
}

TEST_F(DenormalsTest, FlushDenormalsZeroesThemInFusedAndSingleKernels) {
  ExecutorOptions o;
  o.flush_denormals = true;
  ExpectResults(o, /*flushed=*/true);
  EXPECT_EQ(cpu::DenormalMode(), 0u);  // the caller's thread is as it was
  o.fuse_elementwise = false;
  ExpectResults(o, /*flushed=*/true);
  EXPECT_EQ(cpu::DenormalMode(), 0u);
}

TEST_F(DenormalsTest, SubnormalInputsReadAsZeroWhenFlushing) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "plus_one_scaled");
  AnfNode* x = b.Param("x", DType::kFloat32, {2});
  AnfNode* big = b.Const(Value(Tensor::FromScalar<float>(1e30f)));
  FuncGraph* g = b.Return(b.Op(PrimId::kMul, {x, big})).value();
  ExecutorOptions o;
  o.flush_denormals = true;
  std::unique_ptr<Executor> e = Executor::Create(g, o).value();
  // 1e-39 is subnormal: read as 0 (DAZ), not scaled to 1e-9.
  absl::StatusOr<Value> r = e->Run({Value(Tensor::FromVector<float>({2}, {1e-39f, 1e-30f}))});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tensor().data<float>()[0], 0.0f);
  EXPECT_NEAR(r->tensor().data<float>()[1], 1.0f, 1e-6f);
}

TEST_F(DenormalsTest, OffARunKeepsTheCallersOwnMode) {
  cpu::ScopedDenormalMode flush(cpu::kFlushBits);
  ExpectResults(ExecutorOptions{}, /*flushed=*/true);
  EXPECT_EQ(cpu::DenormalMode(), cpu::kFlushBits);
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
