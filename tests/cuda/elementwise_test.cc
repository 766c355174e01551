// CUDA elementwise kernels against the CPU kernels: every unary and binary op,
// select, broadcasting shapes, NaN rules, integer wrap-around and division by
// zero, in f32 and f64 (and the integer and bool dtypes where the op takes them).
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

const Tolerance kExact{0, 0};

struct UnaryCase {
  PrimId id;
  double lo, hi;  // input range
};

const std::vector<UnaryCase>& FloatUnaryOps() {
  static const std::vector<UnaryCase> ops = {
      {PrimId::kNeg, -3, 3},        {PrimId::kAbs, -3, 3},     {PrimId::kSign, -3, 3},
      {PrimId::kSquare, -3, 3},     {PrimId::kExp, -5, 5},     {PrimId::kLog, 0.05, 5},
      {PrimId::kLog1p, -0.9, 5},    {PrimId::kExpm1, -3, 3},   {PrimId::kSin, -6, 6},
      {PrimId::kCos, -6, 6},        {PrimId::kTanh, -4, 4},    {PrimId::kSigmoid, -8, 8},
      {PrimId::kRelu, -3, 3},       {PrimId::kGelu, -4, 4},    {PrimId::kSoftplus, -20, 20},
      {PrimId::kSqrt, 0, 9},        {PrimId::kRsqrt, 0.05, 9}, {PrimId::kReciprocal, 0.1, 3},
      {PrimId::kErf, -3, 3},        {PrimId::kFloor, -3, 3},   {PrimId::kCeil, -3, 3},
      {PrimId::kRound, -3, 3},      {PrimId::kAsin, -0.99, 0.99}, {PrimId::kAcos, -0.99, 0.99},
      {PrimId::kAtan, -5, 5},       {PrimId::kSinh, -5, 5},    {PrimId::kCosh, -5, 5},
      {PrimId::kAsinh, -5, 5},      {PrimId::kAcosh, 1.01, 5}, {PrimId::kAtanh, -0.99, 0.99},
  };
  return ops;
}

const std::vector<Shape>& UnaryShapes() {
  static const std::vector<Shape> shapes = {{}, {0}, {7}, {3, 5, 17}, {1 << 18}};
  return shapes;
}

class FloatElementwiseTest : public CudaDTypeTest {};
INSTANTIATE_TEST_SUITE_P(Dtypes, FloatElementwiseTest, FloatDTypes(), DTypeParamName);

TEST_P(FloatElementwiseTest, UnaryOpsMatchCpu) {
  for (const UnaryCase& c : FloatUnaryOps()) {
    for (const Shape& s : UnaryShapes()) {
      Value x = R(s, c.lo, c.hi);  // the fixture's generator, seeded with 1
      EXPECT_TRUE(MatchesCpu(dev, c.id, {x})) << ShapeToString(s);
      if (c.id == PrimId::kGelu) {
        EXPECT_TRUE(MatchesCpu(dev, c.id, {x}, {{"approximate", true}})) << ShapeToString(s);
      }
    }
  }
}

TEST_P(FloatElementwiseTest, UnaryOpsPassSpecialValues) {
  Value x = Value(MakeTensor(GetParam(), {8}, {kNaN, kInf, -kInf, 0.0, -0.0, 1e-30, -700, 700}));
  for (const UnaryCase& c : FloatUnaryOps()) {
    if (c.id == PrimId::kSign) continue;  // sign(-0) keeps its sign bit: compared by value
    EXPECT_TRUE(MatchesCpu(dev, c.id, {x}));
  }
}

TEST_P(FloatElementwiseTest, RoundHalvesToEvenLikeTheCpu) {
  Value x = Value(MakeTensor(GetParam(), {8}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, -0.0}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kRound, {x}, {}, &kExact));
}

TEST_P(FloatElementwiseTest, ModTakesTheSignOfTheDivisorOrOfFmodsDividend) {
  std::mt19937_64 rng(4);
  Value a = Rand(GetParam(), {3, 1, 5}, rng, -7, 7);
  Value b = Rand(GetParam(), {4, 1}, rng, 0.5, 3);
  Value nb = Rand(GetParam(), {4, 1}, rng, -3, -0.5);
  // Exact multiples (a zero result takes the divisor's sign), NaN and infinities.
  Value specials = Value(MakeTensor(GetParam(), {6}, {6, -6, kNaN, kInf, 1, -0.0}));
  Value divisors = Value(MakeTensor(GetParam(), {6}, {-3, 3, 2, 2, kInf, 5}));
  for (bool fmod : {false, true}) {
    for (const Value& d : {b, nb}) {
      EXPECT_TRUE(MatchesCpu(dev, PrimId::kMod, {a, d}, {{"fmod", fmod}})) << fmod;
    }
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kMod, {specials, divisors}, {{"fmod", fmod}}, &kExact))
        << fmod;
  }
}

TEST_P(FloatElementwiseTest, BinaryOpsBroadcastLikeTheCpu) {
  std::mt19937_64 rng(2);
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 4}, {3, 4}},       {{3, 1, 5}, {4, 1}},         {{}, {2, 3}},
      {{2, 3}, {3}},          {{0, 3}, {1, 3}},            {{2, 1, 4, 1}, {1, 3, 1, 5}},
      {{1 << 17}, {1 << 17}}, {{64, 1, 33}, {64, 20, 33}}, {{5, 1}, {}}};
  const PrimId ops[] = {PrimId::kAdd,      PrimId::kSub,          PrimId::kMul,
                        PrimId::kDiv,      PrimId::kMaximum,      PrimId::kMinimum,
                        PrimId::kEqual,    PrimId::kNotEqual,     PrimId::kLess,
                        PrimId::kLessEqual, PrimId::kGreater,     PrimId::kGreaterEqual,
                        PrimId::kTanhGrad, PrimId::kSigmoidGrad, PrimId::kSinGrad,
                        PrimId::kCosGrad, PrimId::kReluGrad};
  for (const auto& [sa, sb] : shapes) {
    Value a = Rand(GetParam(), sa, rng, -2, 2);
    Value b = Rand(GetParam(), sb, rng, 0.5, 2);
    for (PrimId id : ops) {
      EXPECT_TRUE(MatchesCpu(dev, id, {a, b})) << ShapeToString(sa) << " " << ShapeToString(sb);
      EXPECT_TRUE(MatchesCpu(dev, id, {b, a})) << ShapeToString(sb) << " " << ShapeToString(sa);
    }
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kPow, {b, a}));
  }
}

TEST_P(FloatElementwiseTest, MaximumAndMinimumLetNanWin) {
  Value a = Value(MakeTensor(GetParam(), {4}, {kNaN, 1, kNaN, -1}));
  Value b = Value(MakeTensor(GetParam(), {4}, {1, kNaN, kNaN, 2}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kMaximum, {a, b}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kMinimum, {a, b}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kEqual, {a, b}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kNotEqual, {a, b}));
}

TEST_P(FloatElementwiseTest, SelectBroadcastsThreeOperands) {
  std::mt19937_64 rng(3);
  Value c = Rand(DType::kBool, {4, 1, 6}, rng);
  Value a = Rand(GetParam(), {5, 1}, rng);
  Value b = Rand(GetParam(), {4, 5, 6}, rng);
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kSelect, {c, a, b}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kSelect, {Rand(DType::kBool, {}, rng), a, b}));
}

class IntElementwiseTest : public CudaDTypeTest {};
INSTANTIATE_TEST_SUITE_P(Dtypes, IntElementwiseTest, IntDTypes(), DTypeParamName);

TEST_P(IntElementwiseTest, ArithmeticWrapsLikeTheCpu) {
  const bool i32 = GetParam() == DType::kInt32;
  const int64_t lo = i32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
  const int64_t hi = i32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
  Value a = IntTensor(GetParam(), {6}, {lo, hi, -7, 7, 0, hi});
  Value b = IntTensor(GetParam(), {6}, {-1, 2, 2, -3, 5, hi});
  for (PrimId id : {PrimId::kAdd, PrimId::kSub, PrimId::kMul, PrimId::kDiv, PrimId::kMaximum,
                    PrimId::kMinimum, PrimId::kLess, PrimId::kEqual, PrimId::kGreaterEqual}) {
    EXPECT_TRUE(MatchesCpu(dev, id, {a, b}));
  }
  for (PrimId id : {PrimId::kNeg, PrimId::kAbs, PrimId::kSign, PrimId::kSquare}) {
    EXPECT_TRUE(MatchesCpu(dev, id, {a}));
  }
}

TEST_P(IntElementwiseTest, ModOfEverySignCombinationAndMinByMinusOne) {
  const bool i32 = GetParam() == DType::kInt32;
  const int64_t lo = i32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
  Value a = IntTensor(GetParam(), {7}, {7, -7, 7, -7, lo, 6, 0});
  Value b = IntTensor(GetParam(), {7}, {3, 3, -3, -3, -1, -3, 5});
  for (bool fmod : {false, true}) {
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kMod, {a, b}, {{"fmod", fmod}})) << fmod;
  }
}

TEST_P(IntElementwiseTest, DivisionByZeroIsAnErrorLikeOnTheCpu) {
  Value a = IntTensor(GetParam(), {3}, {1, 2, 3});
  Value b = IntTensor(GetParam(), {3}, {1, 0, 3});
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kDiv, {a, b}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kMod, {a, b}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kMod, {a, b}, {{"fmod", true}}));
}

TEST_P(IntElementwiseTest, FloatOnlyOpsRejectIntegersLikeTheCpu) {
  Value a = IntTensor(GetParam(), {2}, {1, 2});
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kExp, {a}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kRelu, {a}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kPow, {a, a}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kAdd, {a, F64({2}, {1, 2})}));  // mixed dtypes
}

TEST(BoolElementwiseTest, LogicalOpsMatchCpu) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  std::mt19937_64 rng(4);
  Value a = Rand(DType::kBool, {3, 7}, rng);
  Value b = Rand(DType::kBool, {7}, rng);
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kLogicalNot, {a}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kLogicalAnd, {a, b}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kLogicalOr, {a, b}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kEqual, {a, b}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kAdd, {a, b}));
}

TEST(ElementwiseErrorsTest, BadShapesFailLikeTheCpu) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  std::mt19937_64 rng(5);
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kAdd,
                           {Rand(DType::kFloat32, {3}, rng), Rand(DType::kFloat32, {4}, rng)}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kSelect,
                         {Rand(DType::kFloat32, {3}, rng), Rand(DType::kFloat32, {3}, rng),
                          Rand(DType::kFloat32, {3}, rng)}));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
