// CUDA nn kernels against the CPU kernels: softmax / log_softmax (cuDNN) along
// every axis, both cross-entropies (label checks on the device), batch_norm
// (cuDNN), layer_norm, and dropout, whose mask must equal the CPU's exactly.
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

class NnTest : public CudaDTypeTest {
 protected:
  NnTest() : CudaDTypeTest(41, -3, 3) {}
};
INSTANTIATE_TEST_SUITE_P(Dtypes, NnTest, FloatDTypes(), DTypeParamName);

TEST_P(NnTest, SoftmaxAndLogSoftmaxMatchCpu) {
  const std::vector<Shape> shapes = {{5}, {4, 7}, {3, 4, 5}, {2, 1000}, {64, 3, 9}, {0, 4}};
  for (const Shape& s : shapes) {
    Value x = R(s);
    for (int64_t axis = -1; axis < static_cast<int64_t>(s.size()); ++axis) {
      EXPECT_TRUE(MatchesCpu(dev, PrimId::kSoftmax, {x}, {{"axis", axis}})) << ShapeToString(s);
      EXPECT_TRUE(MatchesCpu(dev, PrimId::kLogSoftmax, {x}, {{"axis", axis}}))
          << ShapeToString(s);
    }
  }
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kSoftmax, {R({2, 3})}, {{"axis", int64_t{2}}}));
}

TEST_P(NnTest, CrossEntropiesMatchCpu) {
  const std::vector<Shape> shapes = {{4, 7}, {3, 4, 5}, {2, 1000}, {0, 3}};
  for (const Shape& s : shapes) {
    Value x = R(s), labels = R(s, 0, 1);
    for (int64_t axis = -1; axis < static_cast<int64_t>(s.size()); ++axis) {
      EXPECT_TRUE(MatchesCpu(dev, PrimId::kSoftmaxCrossEntropy, {x, labels}, {{"axis", axis}}))
          << ShapeToString(s);
    }
  }
  for (DType lt : {DType::kInt32, DType::kInt64}) {
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kSparseSoftmaxCrossEntropy,
                           {R({4, 6}), IntTensor(lt, {4}, {0, 5, 3, 3})}));
    std::vector<int64_t> many(300);
    for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>((i * 37) % 500);
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kSparseSoftmaxCrossEntropy,
                           {R({300, 500}), IntTensor(lt, {300}, many)}));
    // A label out of range: the CPU's OutOfRange error, found on the device.
    EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kSparseSoftmaxCrossEntropy,
                             {R({3, 6}), IntTensor(lt, {3}, {0, 6, -1})}));
  }
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kSoftmaxCrossEntropy, {R({2, 3}), R({3, 2})}));
}

TEST_P(NnTest, BatchNormMatchesCpu) {
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{4, 3, 5, 5}, 1}, {{8, 6}, -1}, {{8, 6}, 1}, {{2, 3, 4}, 2}, {{16, 5, 7}, 0}, {{1, 3}, 1}};
  for (const auto& [shape, axis] : cases) {
    const int a = axis < 0 ? static_cast<int>(shape.size()) + static_cast<int>(axis)
                           : static_cast<int>(axis);
    Value x = R(shape, 5, 9);  // a large mean: the statistics must not cancel
    Value scale = R({shape[a]}), bias = R({shape[a]});
    Tolerance tol = DefaultTolerance(GetParam());
    tol.atol = GetParam() == DType::kFloat32 ? 1e-4 : 1e-9;
    for (double eps : {1e-5, 0.1}) {
      EXPECT_TRUE(MatchesCpu(dev, PrimId::kBatchNorm, {x, scale, bias},
                             {{"axis", axis}, {"epsilon", eps}}, &tol))
          << ShapeToString(shape) << " axis " << axis;
    }
  }
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kBatchNorm, {R({4, 3}), R({4}), R({4})}));
}

TEST_P(NnTest, LayerNormMatchesCpu) {
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{4, 7}, -1}, {{3, 4, 5}, 1}, {{2, 2000}, 1}, {{6, 3}, 0}, {{0, 5}, 1}};
  for (const auto& [shape, begin] : cases) {
    const int b = begin < 0 ? static_cast<int>(shape.size()) + static_cast<int>(begin)
                            : static_cast<int>(begin);
    Shape norm(shape.begin() + b, shape.end());
    Value x = R(shape, 100, 101);
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kLayerNorm, {x, R(norm), R(norm)},
                           {{"begin_norm_axis", begin}}))
        << ShapeToString(shape);
  }
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kLayerNorm, {R({2, 3}), R({2}), R({3})}));
}

TEST_P(NnTest, DropoutMaskEqualsTheCpuMaskExactly) {
  Value x = R({1000, 37});
  for (double rate : {0.0, 0.1, 0.5, 0.9}) {
    for (int64_t seed : {int64_t{0}, int64_t{1}, int64_t{-7}, int64_t{123456789}}) {
      const Tolerance exact{0, 0};
      EXPECT_TRUE(MatchesCpu(dev, PrimId::kDropout, {x}, {{"rate", rate}, {"seed", seed}}, &exact))
          << rate << " " << seed;
    }
  }
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kDropout, {x}, {{"rate", 1.0}}));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
