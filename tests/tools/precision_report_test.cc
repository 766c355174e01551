// tools/precision_report.h: the per-application float32-against-float64 report
// on graphs whose float32 behaviour is known: a kink that rounding crosses, an
// amplification without one, whole programs whose kernels round as float32
// should, loops, and the refusals.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "backends/cpu/constant_evaluator.h"
#include "core/builder.h"
#include "core/module.h"
#include "examples/programs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"
#include "tools/precision_report.h"

namespace kgrad {
namespace {

using ::testing::HasSubstr;

Value F32(Shape shape, const std::vector<double>& v) {
  return Value(testing::MakeTensor(DType::kFloat32, std::move(shape), v));
}

// t = (x + 1e4) - 1e4 loses x's low bits in float32 (10000.3 rounds to
// 10000.2998); relu(t - c) with c between the float32 and float64 values of t
// then takes the other side of its kink.
FuncGraph* RoundedRelu(Module& m, double c) {
  GraphBuilder b(&m, "rounded_relu");
  AnfNode* x = b.Param("x", DType::kFloat32, {3});
  AnfNode* big = b.Const(Value(Tensor::Full(DType::kFloat32, {}, 1e4).value()));
  AnfNode* t = b.Op(PrimId::kSub, {b.Op(PrimId::kAdd, {x, big}), big});
  AnfNode* shift = b.Const(Value(Tensor::Full(DType::kFloat32, {}, c).value()));
  AnfNode* y = b.Op(PrimId::kRelu, {b.Op(PrimId::kSub, {t, shift})});
  AnfNode* w = b.Const(F32({3}, {1.5, -2, 0.5}));
  return b.Return(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {y, w})})).value();
}

TEST(PrecisionReportTest, ACrossedKinkIsNamedAsTheCause) {
  Module m(DefaultRegistry());
  FuncGraph* f = RoundedRelu(m, 0.29995);
  absl::StatusOr<PrecisionReport> r = ReportPrecision(m, f, {F32({3}, {0.3, 0.7, 0.9})});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), 2u);
  EXPECT_EQ(r->outputs[0].first, "value");
  EXPECT_EQ(r->outputs[1].first, "x");
  // relu passes 0.2998 - 0.29995 < 0 as 0 in float32, 5e-5 in float64: the value
  // is off by 1.5 * 5e-5 and the gradient of x[0] by all of 1.5 (of 2).
  EXPECT_GT(r->outputs[1].second, 0.5);
  const std::string text = r->ToString();
  EXPECT_THAT(text, HasSubstr("verdict: a kink at step")) << text;
  EXPECT_THAT(text, HasSubstr("not a loss of precision")) << text;
  bool flip = false;
  for (const ApplicationError& a : r->applications) flip |= a.flipped > 0 || a.kink;
  EXPECT_TRUE(flip) << text;
}

TEST(PrecisionReportTest, AnAmplificationWithoutAKinkIsOrdinaryRounding) {
  Module m(DefaultRegistry());
  // Every t - c stays positive: no kink, but (x + 1e4) - 1e4 has an error of
  // 2e-4 absolute on values of 0.3, amplified from add's rounding of 6e-8.
  FuncGraph* f = RoundedRelu(m, -1);
  absl::StatusOr<PrecisionReport> r = ReportPrecision(m, f, {F32({3}, {0.3, 0.7, 0.9})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->outputs[0].second, 1e-5);
  const std::string text = r->ToString();
  EXPECT_THAT(text, HasSubstr("verdict: ordinary float32 rounding amplified")) << text;
  EXPECT_THAT(text, HasSubstr("kinks crossed: 0 masks")) << text;
  for (const ApplicationError& a : r->applications) {
    EXPECT_LE(a.local_error, 1e-6) << a.text;  // every kernel rounds once
    EXPECT_LE(a.flipped, 0) << a.text;
  }
  // The growth happens at the subtraction that cancels.
  bool sub_grows = false;
  for (const ApplicationError& a : r->applications) {
    sub_grows |= absl::StrContains(a.text, "= sub(") && a.value_error > 1e-4;
  }
  EXPECT_TRUE(sub_grows) << text;
}

// On whole float32 programs (the MLP, the conv net with batch norm) every
// kernel's own rounding stays near float32's unit: a kernel that loses precision
// would show here first.
TEST(PrecisionReportTest, ProgramsKernelsRoundLikeFloat32) {
  for (int which = 0; which < 2; ++which) {
    Module m(DefaultRegistry());
    m.set_constant_evaluator(&CpuConstantEvaluator::Get());
    FuncGraph* f = which == 0 ? programs::Mlp(&m, 8, {6, 16, 4}, DType::kFloat32)
                              : programs::ConvNet(&m, 4, 8, 3, 4, 3, DType::kFloat32, true);
    absl::StatusOr<PrecisionReport> r = ReportPrecision(m, f, programs::RandomInputs(f, 5));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_GT(r->applications.size(), 20u);
    // The value, then a gradient per float input (x, labels) and per weight.
    EXPECT_EQ(r->outputs.size(), 3 + m.weights().size());
    for (const ApplicationError& a : r->applications) {
      if (a.local_error >= 0) EXPECT_LE(a.local_error, 1e-5) << a.text;
    }
    EXPECT_FALSE(r->trail.empty());
  }
}

// A loop's applications are compared run by run: h = tanh(h * w) n times, n an
// input (the optimiser cannot unroll it).
TEST(PrecisionReportTest, LoopsAreComparedOccurrenceByOccurrence) {
  Module m(DefaultRegistry());
  m.set_constant_evaluator(&CpuConstantEvaluator::Get());
  GraphBuilder b(&m, "loop");
  AnfNode* x = b.Param("x", DType::kFloat32, {3});
  AnfNode* n = b.Param("n", MakeAbstractScalar(DType::kInt64));
  std::vector<AnfNode*> out = b.While(
      {b.Int(0), x},
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) { return c.Op(PrimId::kScalarLt, {s[0], n}); },
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) {
        AnfNode* w = c.Const(F32({3}, {0.9, -1.1, 1.3}));
        return std::vector<AnfNode*>{c.Op(PrimId::kScalarAdd, {s[0], c.Int(1)}),
                                     c.Op(PrimId::kTanh, {c.Op(PrimId::kMul, {s[1], w})})};
      });
  FuncGraph* f = b.Return(b.Op(PrimId::kReduceSum, {out[1]})).value();
  absl::StatusOr<PrecisionReport> r =
      ReportPrecision(m, f, {F32({3}, {0.5, -0.25, 0.75}), Value(Scalar::Int(6))});
  ASSERT_TRUE(r.ok()) << r.status();
  int64_t most = 0;
  for (const ApplicationError& a : r->applications) most = std::max(most, a.occurrence + 1);
  EXPECT_GE(most, 6) << r->ToString();
  EXPECT_LT(r->outputs[1].second, 1e-5) << r->ToString();
}

TEST(PrecisionReportTest, RefusesWhatItCannotCompare) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "ints");
  AnfNode* i = b.Param("i", DType::kInt64, {2});
  FuncGraph* ints = b.Return(b.Op(PrimId::kReduceSum, {i})).value();
  testing::ExpectError(
      ReportPrecision(m, ints, {Value(testing::MakeTensor(DType::kInt64, {2}, {1, 2}))}).status(),
      "has no floating input or weight");
  // A branch on a value that float32 rounds to the other side: the runs diverge.
  GraphBuilder c(&m, "branch");
  AnfNode* x = c.Param("x", DType::kFloat32, {});
  AnfNode* big = c.Const(Value(Tensor::Full(DType::kFloat32, {}, 1e4).value()));
  AnfNode* t = c.Op(PrimId::kSub, {c.Op(PrimId::kAdd, {x, big}), big});
  AnfNode* cond = c.Op(PrimId::kGreater, {t, c.Const(Value(Tensor::Full(DType::kFloat32, {}, 0.29995).value()))});
  AnfNode* out = c.If(
      cond, [&](GraphBuilder& g) { return g.Op(PrimId::kSin, {x}); },
      [&](GraphBuilder& g) { return g.Op(PrimId::kCos, {x}); });
  FuncGraph* branch = c.Return(out).value();
  testing::ExpectError(ReportPrecision(m, branch, {F32({}, {0.3})}).status(),
                       "the float32 and float64 runs took different paths",
                       absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace kgrad
