// The gradient checker's second look at a direction whose central difference
// missed (tools/grad_check.h): a kink near the point is stepped over with smaller
// steps, a rule giving a one-sided derivative at a kink passes, a kink at the
// point that the rules match on neither side is counted and, with
// skip_kinks, not compared; a wrong derivative still fails either way.
#include "tools/grad_check.h"

#include <string>
#include <vector>

#include "core/builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

// sum(relu(x)): a kink wherever an element of x is 0.
FuncGraph* ReluSum(Module* m, int64_t n) {
  GraphBuilder b(m, "relu_sum");
  AnfNode* x = b.Param("x", T(DType::kFloat64, {n}));
  return b.Return(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kRelu, {x})})).value();
}

// sum(relu(x) + 2 relu(-x)): slopes 1 right of 0 and -2 left of it, while the
// rules give 0 at 0 (relu'(0) = 0), and the central difference gives -1/2.
FuncGraph* LopsidedKinkSum(Module* m, int64_t n) {
  GraphBuilder b(m, "lopsided_kink_sum");
  AnfNode* x = b.Param("x", T(DType::kFloat64, {n}));
  AnfNode* left = b.Op(PrimId::kRelu, {b.Op(PrimId::kNeg, {x})});
  AnfNode* y = b.Op(PrimId::kAdd, {b.Op(PrimId::kRelu, {x}), b.Op(PrimId::kAdd, {left, left})});
  return b.Return(b.Op(PrimId::kReduceSum, {y})).value();
}

const GradCheckEntry* Find(const GradCheckReport& r, const std::string& input, bool forward) {
  for (const GradCheckEntry& e : r.entries) {
    if (e.input == input && e.forward == forward) return &e;
  }
  return nullptr;
}

TEST(GradCheckTest, AKinkNearThePointIsSteppedOver) {
  Module m(DefaultRegistry());
  FuncGraph* f = ReluSum(&m, 1);
  // 3e-6 from relu's kink: steps of 1e-5 cross it, steps of 1e-7 do not.
  GradCheckOptions o;
  o.seed = 4;
  absl::StatusOr<GradCheckReport> r = CheckGradients(m, f, {F64({1}, {3e-6})}, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed()) << r->ToString();
  for (bool forward : {false, true}) {
    const GradCheckEntry* e = Find(*r, "x", forward);
    ASSERT_NE(e, nullptr);
    // At least the unit coordinate direction crosses the kink at the 1e-5 step
    // (random directions shorter than 0.3 do not).
    EXPECT_GE(e->refined, 1) << r->ToString();
    EXPECT_EQ(e->non_smooth, 0) << r->ToString();
    EXPECT_LT(e->max_rel_error, 1e-6) << r->ToString();
  }
  EXPECT_THAT(r->ToString(), HasSubstr("compared at a smaller step"));
}

TEST(GradCheckTest, ARuleGivingAOneSidedDerivativeAtAKinkPasses) {
  Module m(DefaultRegistry());
  FuncGraph* f = ReluSum(&m, 2);
  // relu'(0) = 0 (PyTorch's and JAX's choice) is relu's slope left of the kink.
  GradCheckOptions o;
  o.seed = 9;
  absl::StatusOr<GradCheckReport> r = CheckGradients(m, f, {F64({2}, {0.0, 0.75})}, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed()) << r->ToString();
  const GradCheckEntry* e = Find(*r, "x", false);
  ASSERT_NE(e, nullptr);
  EXPECT_GT(e->refined, 0) << r->ToString();
  EXPECT_EQ(e->non_smooth, 0) << r->ToString();
}

TEST(GradCheckTest, AKinkAtThePointMatchingNeitherSideFailsUnlessSkipped) {
  Module m(DefaultRegistry());
  FuncGraph* f = LopsidedKinkSum(&m, 2);
  // x[0] sits on the kink; every direction moves it but the coordinate direction
  // of x[1].
  const Value x = F64({2}, {0.0, 0.75});
  GradCheckOptions o;
  o.seed = 9;
  absl::StatusOr<GradCheckReport> strict = CheckGradients(m, f, {x}, o);
  ASSERT_TRUE(strict.ok()) << strict.status();
  EXPECT_FALSE(strict->passed()) << strict->ToString();
  const GradCheckEntry* e = Find(*strict, "x", false);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->non_smooth, e->directions - 1) << strict->ToString();
  EXPECT_THAT(strict->ToString(), HasSubstr("cross a kink at the point  FAILED"));

  o.skip_kinks = true;
  absl::StatusOr<GradCheckReport> lenient = CheckGradients(m, f, {x}, o);
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  EXPECT_TRUE(lenient->passed()) << lenient->ToString();
  e = Find(*lenient, "x", false);
  ASSERT_NE(e, nullptr);
  // Only the coordinate direction of x[1] is smooth, and it was compared.
  EXPECT_EQ(e->non_smooth, e->directions - 1) << lenient->ToString();
  EXPECT_GT(e->max_magnitude, 0) << lenient->ToString();
  EXPECT_LT(e->max_rel_error, 1e-6) << lenient->ToString();
  EXPECT_THAT(lenient->ToString(), HasSubstr("cross a kink at the point: not compared  ok"));
}

TEST(GradCheckTest, SkippingKinksStillCatchesAWrongRule) {
  // d/dx (x*x) claimed to be x: smooth, so no direction is taken for a kink.
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "sq");
  AnfNode* x = b.Param("x", MakeAbstractScalar(DType::kFloat64));
  FuncGraph* f = b.Return(b.Op(PrimId::kScalarMul, {x, x})).value();
  GraphBuilder cb(&m, "sq_bprop");
  AnfNode* cx = cb.Param("x", MakeAbstractScalar(DType::kFloat64));
  cb.Param("out", MakeAbstractScalar(DType::kFloat64));
  AnfNode* dout = cb.Param("dout", MakeAbstractScalar(DType::kFloat64));
  f->set_custom_bprop(cb.Return(cb.Tuple({cb.Op(PrimId::kScalarMul, {cx, dout})})).value());
  GradCheckOptions o;
  o.skip_kinks = true;
  o.check_jvp = false;
  absl::StatusOr<GradCheckReport> r =
      CheckGradients(m, f, {Value(Scalar::FromDouble(DType::kFloat64, 0.9))}, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->passed()) << r->ToString();
  for (const GradCheckEntry& e : r->entries) EXPECT_EQ(e.non_smooth, 0);
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
