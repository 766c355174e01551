// CUDA shape kernels against the CPU kernels: views, transposes, broadcasts,
// sum_to, concat/split, slices and their gradient, pad, gather/scatter_add with
// index checks on the device, gather_elements/scatter_elements (every reduction,
// negative and repeated indices), cumsum, one_hot, cast between every dtype pair,
// fill.
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using Ints = std::vector<int64_t>;

class ShapeTest : public CudaDTypeTest {
 protected:
  ShapeTest() : CudaDTypeTest(21, -2, 2) {}
};
INSTANTIATE_TEST_SUITE_P(Dtypes, ShapeTest, FloatDTypes(), DTypeParamName);

TEST_P(ShapeTest, ViewsMatchCpu) {
  Value x = R({2, 3, 4});
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kReshape, {x}, {{"shape", Ints{4, -1}}}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kReshape, {x}, {{"shape", Ints{5, -1}}}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kReshapeLike, {x, R({6, 4})}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kExpandDims, {x}, {{"axis", int64_t{-1}}}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kSqueeze, {R({1, 3, 1})}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kSqueeze, {R({1, 3, 1})}, {{"axes", Ints{1}}}));
}

TEST_P(ShapeTest, TransposesMatchCpu) {
  const std::vector<std::pair<Shape, Ints>> cases = {
      {{3, 4}, {}},           {{3, 4}, {1, 0}},          {{2, 3, 4}, {2, 0, 1}},
      {{2, 3, 4, 5}, {0, 2, 1, 3}}, {{1, 5, 1, 7}, {3, 2, 1, 0}}, {{513, 257}, {1, 0}}};
  for (const auto& [shape, perm] : cases) {
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kTranspose, {R(shape)}, {{"perm", perm}}))
        << ShapeToString(shape);
  }
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kTranspose, {R({2, 3})}, {{"perm", Ints{0, 0}}}));
}

TEST_P(ShapeTest, BroadcastAndSumToMatchCpu) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3}, {2, 3}}, {{2, 1}, {2, 5}}, {{}, {4, 4}}, {{1, 3, 1}, {2, 3, 4}}, {{3}, {3}}};
  for (const auto& [small, big] : cases) {
    Ints target(big.begin(), big.end());
    Ints small_target(small.begin(), small.end());
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kBroadcastTo, {R(small)}, {{"shape", target}}));
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kBroadcastToLike, {R(small), R(big)}));
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kSumTo, {R(big)}, {{"shape", small_target}}));
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kSumToLike, {R(big), R(small)}));
  }
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kBroadcastTo, {R({4})}, {{"shape", Ints{2, 3}}}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kSumTo, {R({2, 3})}, {{"shape", Ints{4}}}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kSumTo, {R({4000, 300})}, {{"shape", Ints{300}}}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kSumTo, {R({300, 4000})}, {{"shape", Ints{300, 1}}}));
}

TEST_P(ShapeTest, ConcatAndSplitMatchCpu) {
  for (int64_t axis : {0, 1, 2, -1}) {
    Shape a = {2, 3, 4}, b = {2, 3, 4};
    const int d = axis < 0 ? 2 : static_cast<int>(axis);
    b[d] = 5;
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kConcat, {R(a), R(b), R(a)}, {{"axis", axis}}));
    Shape whole = {2, 3, 4};
    whole[d] = 9;
    Ints sizes = {4, 0, 5};
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kSplit, {R(whole)}, {{"axis", axis}, {"sizes", sizes}}));
  }
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kConcat, {R({2, 3}), R({3, 3})}, {{"axis", int64_t{1}}}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kSplit, {R({4})}, {{"sizes", Ints{1, 2}}}));
}

TEST_P(ShapeTest, SlicesPadsAndTheirGradientsMatchCpu) {
  Value x = R({5, 6, 7});
  const std::vector<std::tuple<Ints, Ints, Ints>> slices = {
      {{0, 0, 0}, {5, 6, 7}, {}},       {{1, 2, 3}, {4, 5, 6}, {}},
      {{-4, 0, 1}, {-1, 6, 7}, {2, 3, 2}}, {{0, 5, 0}, {5, 2, 7}, {}}};
  for (const auto& [begin, end, strides] : slices) {
    AttrMap attrs = {{"begin", begin}, {"end", end}, {"strides", strides}};
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kSlice, {x}, attrs));
    absl::StatusOr<Value> y = RunOnDevice(dev, PrimId::kSlice, {x}, attrs);
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kSliceGrad, {R(y->tensor().shape()), x}, attrs));
  }
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kSlice, {x}, {{"begin", Ints{0, 0}}, {"end", Ints{1, 1}}}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kPad, {x}, {{"pads", Ints{1, 0, 0, 2, 3, 3}}}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kPad, {x}, {{"pads", Ints{0, 1, 2, 0, 0, 0}}, {"value", 2.5}}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kPad, {x}, {{"pads", Ints{-1, 0, 0, 0, 0, 0}}}));
}

TEST_P(ShapeTest, GatherAndScatterAddMatchCpu) {
  for (DType idx_type : {DType::kInt32, DType::kInt64}) {
    Value params = R({6, 4, 6});
    Value idx = IntTensor(idx_type, {2, 3}, {5, 0, 2, 2, 5, 1});
    for (int64_t axis : {0, 2}) {
      EXPECT_TRUE(MatchesCpu(dev, PrimId::kGather, {params, idx}, {{"axis", axis}}));
    }
    Value updates = R({6, 4, 2, 3});
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kScatterAdd, {params, idx, updates}, {{"axis", int64_t{2}}}));
    // Few long columns: many repeated indices (the atomic path).
    Ints many(500);
    for (size_t i = 0; i < many.size(); ++i) many[i] = (i * 7) % 3;
    Value rep = IntTensor(idx_type, {500}, many);
    Tolerance tol = DefaultTolerance(GetParam());
    tol.atol = GetParam() == DType::kFloat32 ? 1e-3 : 1e-10;
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kScatterAdd, {R({3, 4}), rep, R({500, 4})},
                           {{"axis", int64_t{0}}}, &tol));
    // Out-of-range indices: the CPU's OutOfRange error, found on the device.
    Value bad = IntTensor(idx_type, {4}, {0, 6, -1, 2});
    EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kGather, {params, bad}));
    EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kScatterAdd, {params, bad, R({4, 4, 6})}));
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kGather, {params, IntTensor(idx_type, {0}, {})}));
  }
}

TEST_P(ShapeTest, GatherAndScatterElementsMatchCpu) {
  const Tolerance exact{0, 0};
  for (DType idx_type : {DType::kInt32, DType::kInt64}) {
    Value data = R({4, 5, 3});
    // Along each axis, an index tensor smaller than data on the other dims, with
    // negative and repeated values (repeats fold in row-major order).
    for (int64_t axis : {0, 1, 2, -1}) {
      const int64_t a = axis < 0 ? axis + 3 : axis;
      const int64_t dim = a == 0 ? 4 : (a == 1 ? 5 : 3);
      Shape ishape = {3, 4, 2};
      ishape[a] = 6;
      Ints values;
      for (int64_t i = 0; i < NumElementsOf(ishape); ++i) values.push_back((i * 5) % (2 * dim) - dim);
      Value idx = IntTensor(idx_type, ishape, values);
      EXPECT_TRUE(MatchesCpu(dev, PrimId::kGatherElements, {data, idx}, {{"axis", axis}}, &exact))
          << axis;
      Value updates = R(ishape);
      for (const char* r : {"none", "add", "mul", "max", "min"}) {
        EXPECT_TRUE(MatchesCpu(dev, PrimId::kScatterElements, {data, idx, updates},
                               {{"axis", axis}, {"reduction", std::string(r)}}, &exact))
            << axis << " " << r;
      }
    }
    // Out-of-range indices: the CPU's OutOfRange error, found on the device.
    Value bad = IntTensor(idx_type, {1, 2, 1}, {2, -6});
    EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kGatherElements, {data, bad}, {{"axis", int64_t{1}}}));
    EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kScatterElements, {data, bad, R({1, 2, 1})},
                             {{"axis", int64_t{1}}}));
    Value none = IntTensor(idx_type, {0, 5, 3}, {});
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kGatherElements, {data, none}));
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kScatterElements, {data, none, R({0, 5, 3})}));
  }
}

TEST_P(ShapeTest, CumSumMatchesCpuInEveryMode) {
  // The same order of additions as the CPU: equal bit for bit.
  const Tolerance exact{0, 0};
  for (const Shape& shape : {Shape{7}, Shape{3, 9, 4}, Shape{2, 0, 3}, Shape{1000, 3}}) {
    Value x = R(shape);
    for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis) {
      for (bool exclusive : {false, true}) {
        for (bool reverse : {false, true}) {
          EXPECT_TRUE(MatchesCpu(dev, PrimId::kCumSum, {x},
                                 {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}},
                                 &exact))
              << ShapeToString(shape) << " axis " << axis << " " << exclusive << reverse;
        }
      }
    }
  }
}

TEST(ShapeIntTest, IntegerScatterAddAndGatherAreExact) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  std::mt19937_64 rng(22);
  for (DType t : {DType::kInt32, DType::kInt64}) {
    Value params = Rand(t, {4, 3}, rng, -50, 50);
    Value idx = IntTensor(DType::kInt64, {5}, {3, 3, 0, 1, 3});
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kGather, {params, idx}));
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kScatterAdd, {params, idx, Rand(t, {5, 3}, rng, -9, 9)}));
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kTranspose, {params}));
  }
  Value b = Rand(DType::kBool, {3, 4}, rng);
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kGather, {b, IntTensor(DType::kInt32, {2}, {2, 0})}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kTranspose, {b}));
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kConcat, {b, b}));
  // Integer cumsum wraps; bool scatter_elements replaces.
  for (DType t : {DType::kInt32, DType::kInt64}) {
    const int64_t hi = t == DType::kInt32 ? std::numeric_limits<int32_t>::max()
                                          : std::numeric_limits<int64_t>::max();
    Value x = IntTensor(t, {4}, {hi, 1, -3, 5});
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kCumSum, {x}));
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kScatterElements,
                           {x, IntTensor(DType::kInt64, {3}, {1, 1, -1}), IntTensor(t, {3}, {4, 5, 6})},
                           {{"reduction", std::string("mul")}}));
  }
  EXPECT_TRUE(MatchesCpu(dev, PrimId::kScatterElements,
                         {b, IntTensor(DType::kInt32, {1, 4}, {2, 0, 1, 2}), Rand(DType::kBool, {1, 4}, rng)}));
}

TEST(ShapeIntTest, OneHotMatchesCpu) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  Value idx = IntTensor(DType::kInt32, {2, 3}, {0, 4, -1, 2, 5, 1});  // 5 and -1: all-off rows
  for (DType out : {DType::kFloat32, DType::kFloat64, DType::kInt64, DType::kBool}) {
    for (int64_t axis : {-1, 0, 1}) {
      AttrMap attrs = {{"depth", int64_t{5}}, {"axis", axis}, {"dtype", out},
                       {"on_value", 3.0}, {"off_value", -1.0}};
      EXPECT_TRUE(MatchesCpu(dev, PrimId::kOneHot, {idx}, attrs));
    }
  }
}

TEST(ShapeIntTest, CastBetweenEveryDtypePairMatchesCpu) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> values = {0, -0.0, 1.5, -2.7, 1e10, -1e10, 3e9, inf, -inf, nan, 1, 7};
  const DType all[] = {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64,
                       DType::kBool};
  for (DType from : all) {
    Value x = Value(MakeTensor(from, {static_cast<int64_t>(values.size())}, values));
    if (!IsFloating(from)) {
      std::mt19937_64 rng(23);
      x = Rand(from, {12}, rng, -1e6, 1e6);
    }
    for (DType to : all) {
      EXPECT_TRUE(MatchesCpu(dev, PrimId::kCast, {x}, {{"dtype", to}}))
          << DTypeName(from) << " -> " << DTypeName(to);
    }
  }
}

TEST(ShapeIntTest, FillMatchesCpu) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kBool}) {
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kFill, {}, {{"shape", Ints{3, 0}}, {"dtype", t}}));
    EXPECT_TRUE(
        MatchesCpu(dev, PrimId::kFill, {}, {{"shape", Ints{2, 70000}}, {"dtype", t}, {"value", 2.5}}));
  }
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kFill, {}, {{"shape", Ints{-1}}}));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
