// The executor's peak trace (backends/peak_trace.h): the step during which a
// run's host memory peaks and the buffers held there, named by their nodes.
#include "backends/peak_trace.h"

#include <string>

#include "backends/executor.h"
#include "core/builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kN = 256;
constexpr int64_t kBytes = kN * kN * 4;  // one f32[256,256]

// a = x x, b = a a, c = a b, d = c + 1 (kept apart from the matmuls), result
// sum(d): while c is computed a, b and c are alive (3 buffers, 768 KiB), which is
// the most the run ever holds: afterwards b and a are dead.
FuncGraph* BuildChain(Module* m) {
  GraphBuilder b(m, "chain");
  AnfNode* x = b.Param("x", DType::kFloat32, {kN, kN});
  CNode* a = b.Op(PrimId::kMatMul, {x, x});
  a->set_name("a");
  CNode* bb = b.Op(PrimId::kMatMul, {a, a});
  bb->set_name("b");
  CNode* c = b.Op(PrimId::kMatMul, {a, bb});
  c->set_name("c");
  return b.Return(b.Op(PrimId::kReduceSum, {c})).value();
}

Tensor Filled(float v) {
  Tensor t = Tensor::Zeros(DType::kFloat32, {kN, kN}).value();
  for (int64_t i = 0; i < kN * kN; ++i) t.mutable_data<float>()[i] = v;
  return t;
}

TEST(PeakTraceTest, NamesTheStepAndTheBuffersHeldAtThePeak) {
  Module m(DefaultRegistry());
  auto e = Executor::Create(BuildChain(&m));
  ASSERT_TRUE(e.ok()) << e.status();
  PeakTrace trace;
  Profile profile;
  profile.peak = &trace;
  absl::StatusOr<Value> r = (*e)->Run({Value(Filled(0.01f))}, {}, &profile);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(trace.at, HasSubstr("matmul at graph 'chain', node 'c'"));
  EXPECT_EQ(trace.steps, 4);
  EXPECT_EQ(trace.step, 2);
  ASSERT_EQ(trace.held.size(), 3u) << trace.ToString();
  // The input x was held before the run and is not listed.
  int a = 0, b = 0, c = 0;
  for (const PeakTrace::Held& h : trace.held) {
    EXPECT_EQ(h.bytes, kBytes) << h.what;
    a += h.what.find("node 'a'") != std::string::npos && h.step_input;
    b += h.what.find("node 'b'") != std::string::npos && h.step_input;
    c += h.what.find("node 'c'") != std::string::npos && !h.step_input;
  }
  EXPECT_EQ(a + b + c, 3) << trace.ToString();
  EXPECT_EQ(trace.HeldBytes(), 3 * kBytes);
  // The allocator rounds blocks up and the matmul may use scratch: the peak is at
  // least what is held, and what is held plus the scratch is within rounding of it.
  EXPECT_GE(trace.peak_bytes, 3 * kBytes);
  EXPECT_LE(trace.peak_bytes - trace.scratch_bytes - trace.HeldBytes(), 3 * 4096);
  const std::string text = trace.ToString();
  EXPECT_THAT(text, HasSubstr("during step 3 of 4: matmul at graph 'chain', node 'c'"));
  EXPECT_THAT(text, HasSubstr("(read by the step)"));
}

TEST(PeakTraceTest, EachRunIsTracedOnItsOwnAndUntracedRunsAreUnchanged) {
  Module m(DefaultRegistry());
  auto e = Executor::Create(BuildChain(&m));
  ASSERT_TRUE(e.ok()) << e.status();
  absl::StatusOr<Value> plain = (*e)->Run({Value(Filled(0.01f))});
  ASSERT_TRUE(plain.ok()) << plain.status();
  PeakTrace trace;
  Profile profile;
  profile.peak = &trace;
  for (int run = 0; run < 2; ++run) {
    absl::StatusOr<Value> r = (*e)->Run({Value(Filled(0.01f))}, {}, &profile);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->tensor().ElementAsDouble(0), plain->tensor().ElementAsDouble(0));
    // A second run starts a new trace (not one added to the first).
    EXPECT_EQ(trace.steps, 4);
    EXPECT_EQ(trace.held.size(), 3u);
  }
}

TEST(PeakTraceTest, AnEmptyTraceSaysSo) {
  PeakTrace trace;
  EXPECT_THAT(trace.ToString(), HasSubstr("no allocation above the run's inputs"));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
