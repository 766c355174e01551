// CUDA reductions against the CPU kernels: every op over many axes sets (all,
// inner, outer, middle, several), keepdims, shapes that take each launch shape
// (a thread per output, a block per output, split reductions), integers, NaN,
// infinities and empty reductions; argmax/argmin with ties and NaN.
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

const PrimId kFloatOps[] = {PrimId::kReduceSum, PrimId::kReduceMean, PrimId::kReduceProd,
                            PrimId::kReduceMax, PrimId::kReduceMin,  PrimId::kLogsumexp};

struct AxesCase {
  Shape shape;
  std::vector<int64_t> axes;
};

const std::vector<AxesCase>& Cases() {
  static const std::vector<AxesCase> cases = {
      {{2, 3, 4}, {}},        {{2, 3, 4}, {0}},       {{2, 3, 4}, {1}},
      {{2, 3, 4}, {2}},       {{2, 3, 4}, {0, 2}},    {{2, 3, 4}, {-1, -2}},
      {{}, {}},               {{5}, {0}},             {{1, 7, 1}, {1}},
      {{4, 100000}, {1}},     {{100000, 4}, {0}},     {{1000003}, {}},
      {{300, 300}, {0}},      {{300, 300}, {1}},      {{64, 33, 17}, {0, 2}},
      {{20000, 40}, {1}},     {{8, 5000, 3}, {1}},    {{3, 2, 2, 2, 5}, {1, 3}},
      {{5000, 2048}, {0}},  // a bias gradient: columns split among threads
  };
  return cases;
}

class FloatReduceTest : public CudaDTypeTest {
 protected:
  FloatReduceTest() : CudaDTypeTest(11) {}
};
INSTANTIATE_TEST_SUITE_P(Dtypes, FloatReduceTest, FloatDTypes(), DTypeParamName);

TEST_P(FloatReduceTest, EveryOpOverEveryAxesSetMatchesCpu) {
  for (const AxesCase& c : Cases()) {
    // Values near 1 keep long products finite.
    Value x = R(c.shape, 0.999, 1.001);
    Value y = R(c.shape, -3, 3);
    for (PrimId id : kFloatOps) {
      for (bool keep : {false, true}) {
        AttrMap attrs = {{"axes", c.axes}, {"keepdims", keep}};
        // Long f32 folds (a million-element product) accumulate rounding in a
        // different order than the CPU's: a looser relative bound, and an
        // absolute floor for sums that cancel to near zero.
        Tolerance tol = DefaultTolerance(GetParam());
        tol.atol *= 100;
        if (GetParam() == DType::kFloat32) tol.rtol = 1e-3;
        EXPECT_TRUE(MatchesCpu(dev, id, {id == PrimId::kReduceProd ? x : y}, attrs, &tol))
            << ShapeToString(c.shape) << " axes " << c.axes.size() << " keepdims " << keep;
      }
    }
  }
}

TEST_P(FloatReduceTest, NanAndInfinitiesFollowTheCpuRules) {
  Value x = Value(
      MakeTensor(GetParam(), {4, 3}, {1, kNaN, 2, -kInf, -kInf, -kInf, kInf, 1, 2, 3, -1, kInf}));
  for (PrimId id : kFloatOps) {
    for (std::vector<int64_t> axes : {std::vector<int64_t>{0}, std::vector<int64_t>{1}}) {
      EXPECT_TRUE(MatchesCpu(dev, id, {x}, {{"axes", axes}}));
    }
  }
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kArgmax, {x}, {{"axis", int64_t{1}}}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kArgmin, {x}, {{"axis", int64_t{0}}}));
}

TEST_P(FloatReduceTest, EmptyReductionsGiveIdentitiesOrErrors) {
  std::mt19937_64 rng(12);
  Value x = Rand(GetParam(), {0, 3}, rng);
  for (PrimId id : kFloatOps) {
    const bool needs_elements = id == PrimId::kReduceMax || id == PrimId::kReduceMin;
    const AttrMap axis0 = {{"axes", std::vector<int64_t>{0}}};
    EXPECT_TRUE(needs_elements ? FailsLikeCpu(dev, id, {x}, axis0) : MatchesCpu(dev, id, {x}, axis0));
    EXPECT_TRUE(MatchesCpu(dev, id, {x}, {{"axes", std::vector<int64_t>{1}}}));
  }
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kArgmax, {x}, {{"axis", int64_t{0}}}));
}

TEST_P(FloatReduceTest, ArgmaxAndArgminPickTheFirstExtremum) {
  std::mt19937_64 rng(13);
  const std::vector<Shape> shapes = {{7}, {5, 9}, {3, 1000}, {4, 300, 5}, {2, 70000}};
  for (const Shape& s : shapes) {
    // Few distinct values: many ties.
    Value x = Value(RandomTensor(GetParam(), s, rng, -3, 3));
    Tensor t = x.tensor();
    for (int64_t i = 0; i < t.NumElements(); ++i) {
      double v = std::floor(t.ElementAsDouble(i));
      if (GetParam() == DType::kFloat32) {
        t.mutable_data<float>()[i] = static_cast<float>(v);
      } else {
        t.mutable_data<double>()[i] = v;
      }
    }
    for (int64_t axis = 0; axis < static_cast<int64_t>(s.size()); ++axis) {
      for (bool keep : {false, true}) {
        AttrMap attrs = {{"axis", axis}, {"keepdims", keep}};
        EXPECT_TRUE(MatchesCpu(dev, PrimId::kArgmax, {x}, attrs)) << ShapeToString(s);
        EXPECT_TRUE(MatchesCpu(dev, PrimId::kArgmin, {x}, attrs)) << ShapeToString(s);
      }
    }
  }
}

class IntReduceTest : public CudaDTypeTest {};
INSTANTIATE_TEST_SUITE_P(Dtypes, IntReduceTest, IntDTypes(), DTypeParamName);

TEST_P(IntReduceTest, IntegerReductionsAreExact) {
  std::mt19937_64 rng(14);
  for (const AxesCase& c : Cases()) {
    Value x = Rand(GetParam(), c.shape, rng, -100, 100);
    for (PrimId id : {PrimId::kReduceSum, PrimId::kReduceProd, PrimId::kReduceMax,
                      PrimId::kReduceMin}) {
      EXPECT_TRUE(MatchesCpu(dev, id, {x}, {{"axes", c.axes}})) << ShapeToString(c.shape);
    }
    for (PrimId id : {PrimId::kReduceMean, PrimId::kLogsumexp}) {
      EXPECT_TRUE(FailsLikeCpu(dev, id, {x}, {{"axes", c.axes}})) << "float only";
    }
  }
  Value x = Rand(GetParam(), {6, 40}, rng, -9, 9);
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kArgmax, {x}, {{"axis", int64_t{1}}}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kArgmin, {x}, {{"axis", int64_t{0}}}));
}

TEST(ReduceErrorsTest, BadAxesFailLikeTheCpu) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  std::mt19937_64 rng(15);
  Value x = Rand(DType::kFloat32, {2, 3}, rng);
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kReduceSum, {x}, {{"axes", std::vector<int64_t>{2}}}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kReduceSum, {x}, {{"axes", std::vector<int64_t>{0, -2}}}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kArgmax, {x}, {{"axis", int64_t{5}}}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kReduceSum, {Rand(DType::kBool, {2}, rng)}));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
