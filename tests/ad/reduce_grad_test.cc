// Gradient rules of the reduce family (ops/reduce.cc), checked in float64 against
// central finite differences (tools/grad_check.h) to the second order (third for a
// selection), over axes sets that cover all axes ([]), negative axes, non-leading
// axes (which need expand_dims to broadcast back) and keepdims.
//
// reduce_sum and reduce_mean are linear and reduce_max/min piecewise linear: their
// second-order check alone is vacuous. Every reduction is therefore also checked
// through f(x) = P(x)^3, asserting that the derivatives compared at the last order
// are not all zero.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/shape.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/grad_test_util.h"
#include "tests/testing/op_test_util.h"
#include "tools/grad_check.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::Pointwise;

// P(x)^3 checked to `order`, its derivatives at the last order not all zero; x
// declared as `declared` (its own shape when empty).
::testing::AssertionResult CubeGradientOk(PrimId id, const Value& x, const AttrMap& attrs,
                                          int order, uint64_t seed,
                                          std::optional<Shape> declared = std::nullopt) {
  OpGraphOptions cube{/*power=*/3};
  if (declared) cube.declared = {*declared};
  return OpGradientOk(id, {x}, attrs, cube, Order(order, seed), /*nonvacuous=*/true);
}

// dL/dx of L = P(x) (sensitivity ones), as doubles.
std::vector<double> Gradient(PrimId id, const Value& x, const AttrMap& attrs) {
  std::vector<std::vector<double>> g = Gradients(id, {x}, attrs);
  return g.size() == 1 ? g[0] : std::vector<double>{};
}

// ----- Inputs -------------------------------------------------------------------------
// Distinct values spread over [-1, 1] (at least 2/n apart) in random order: no
// ties, and no change of the argmax within the finite-difference step.
Value Distinct(Shape shape, std::mt19937_64& rng) {
  Tensor t = Tensor::Create(DType::kFloat64, shape).value();
  int64_t n = t.NumElements();
  std::vector<double> v(n);
  std::uniform_real_distribution<double> jitter(-0.2, 0.2);
  for (int64_t i = 0; i < n; ++i) v[i] = -1.0 + 2.0 * (i + 0.5 + jitter(rng)) / n;
  std::shuffle(v.begin(), v.end(), rng);
  std::copy(v.begin(), v.end(), t.mutable_data<double>());
  return Value(std::move(t));
}

using MakeX = std::function<Value(Shape, std::mt19937_64&)>;

struct ReduceOp {
  const char* name;
  PrimId id;
  MakeX make;
};

void PrintTo(const ReduceOp& op, std::ostream* os) { *os << op.name; }

std::vector<ReduceOp> ReduceOps() {
  auto uniform = [](Shape s, std::mt19937_64& rng) { return RandomF64(s, rng); };
  return {
      {"reduce_sum", PrimId::kReduceSum, uniform},
      {"reduce_mean", PrimId::kReduceMean, uniform},
      {"reduce_max", PrimId::kReduceMax, Distinct},
      {"reduce_min", PrimId::kReduceMin, Distinct},
      // |x| in [0.6, 1.4]: the product of 24 entries stays within a few orders
      // of magnitude of 1.
      {"reduce_prod", PrimId::kReduceProd,
       [](Shape s, std::mt19937_64& rng) { return RandomF64Away(s, rng, -1.4, 1.4, {0.0}, 0.6); }},
      {"logsumexp", PrimId::kLogsumexp,
       [](Shape s, std::mt19937_64& rng) { return RandomF64(s, rng, -2.0, 2.0); }},
  };
}

// Axes and keepdims on x[2,3,4] (and the small shapes at the end): all axes, a
// middle axis, negative axes, non-leading and leading axes, with and without
// keepdims.
struct AxesCase {
  Shape shape;
  Ints axes;
  bool keepdims;
};
const AxesCase kAxes[] = {
    {{2, 3, 4}, {}, false},    {{2, 3, 4}, {}, true},      {{2, 3, 4}, {1}, false},
    {{2, 3, 4}, {-1}, true},   {{2, 3, 4}, {0, 2}, false}, {{2, 3, 4}, {2, -3}, true},
    {{2, 3, 4}, {-3}, false},  {{2, 3, 4}, {1, 2}, false}, {{5}, {0}, false},
    {{}, {}, false},
};

class ReduceGradTest : public ::testing::TestWithParam<ReduceOp> {};

TEST_P(ReduceGradTest, FirstAndSecondOrder) {
  const ReduceOp& op = GetParam();
  uint64_t seed = 1;
  for (const AxesCase& k : kAxes) {
    SCOPED_TRACE(absl::StrCat(op.name, " x", ShapeToString(k.shape), " axes [",
                              absl::StrJoin(k.axes, ","), "] keepdims ", k.keepdims, " seed ",
                              seed));
    std::mt19937_64 rng(seed);
    Value x = op.make(k.shape, rng);
    AttrMap attrs = Axes(k.axes, k.keepdims);
    EXPECT_TRUE(PrimitiveGradientOk(op.id, {x}, attrs, Order(2, seed)));
    EXPECT_TRUE(CubeGradientOk(op.id, x, attrs, 2, seed));
    ++seed;
  }
}

TEST_P(ReduceGradTest, ThirdOrder) {
  const ReduceOp& op = GetParam();
  for (uint64_t seed : {1, 2, 3}) {
    std::mt19937_64 rng(seed);
    Value x = op.make({2, 3}, rng);
    for (bool keepdims : {false, true}) {
      SCOPED_TRACE(absl::StrCat(op.name, " seed ", seed, " keepdims ", keepdims));
      EXPECT_TRUE(CubeGradientOk(op.id, x, Axes({-1}, keepdims), 3, seed));
    }
  }
}

// In float32 the rules type-check (constants of the input's dtype) and agree with
// float64.
TEST_P(ReduceGradTest, Float32) {
  const ReduceOp& op = GetParam();
  std::mt19937_64 rng(4);
  Value x = op.make({2, 3, 4}, rng);
  AttrMap attrs = Axes({0, 2}, false);
  std::vector<double> g64 = Gradient(op.id, x, attrs);
  Value x32(MakeTensor(DType::kFloat32, x.tensor().shape(), ToDoubles(x.tensor())));
  std::vector<double> g32 = Gradient(op.id, x32, attrs);
  ASSERT_EQ(g32.size(), g64.size());
  ASSERT_FALSE(g64.empty());
  for (size_t i = 0; i < g64.size(); ++i) {
    EXPECT_NEAR(g32[i], g64[i], 1e-5 * (1 + std::abs(g64[i]))) << i;
  }
}

// Declared with unknown dims: the rules need only the rank (reduce_mean divides by
// a counted number of elements when a reduced dim is unknown).
TEST_P(ReduceGradTest, UnknownDims) {
  const ReduceOp& op = GetParam();
  const Shape declared[] = {{kUnknownDim, 3}, {2, kUnknownDim}, {kUnknownDim, kUnknownDim}};
  for (uint64_t seed : {1, 2, 3}) {
    std::mt19937_64 rng(seed);
    Value x = op.make({2, 3}, rng);
    for (const Shape& d : declared) {
      for (const Ints& axes : {Ints{1}, Ints{}, Ints{0}}) {
        SCOPED_TRACE(absl::StrCat(op.name, " declared ", ShapeToString(d), " axes [",
                                  absl::StrJoin(axes, ","), "] seed ", seed));
        EXPECT_TRUE(CubeGradientOk(op.id, x, Axes(axes, false), 2, seed, d));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Reduce, ReduceGradTest, ::testing::ValuesIn(ReduceOps()),
                         [](const ::testing::TestParamInfo<ReduceOp>& info) {
                           return std::string(info.param.name);
                         });

// ----- Values ----------------------------------------------------------------------------
TEST(ReduceGradValuesTest, SumAndMeanBroadcastBack) {
  Value x = F64({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_THAT(Gradient(PrimId::kReduceSum, x, Axes({0}, false)), ElementsAre(1, 1, 1, 1, 1, 1));
  EXPECT_THAT(Gradient(PrimId::kReduceMean, x, Axes({-1}, true)),
              Pointwise(DoubleNear(1e-15), {1 / 3., 1 / 3., 1 / 3., 1 / 3., 1 / 3., 1 / 3.}));
  EXPECT_THAT(Gradient(PrimId::kReduceMean, x, Axes({}, false)),
              Pointwise(DoubleNear(1e-15), {1 / 6., 1 / 6., 1 / 6., 1 / 6., 1 / 6., 1 / 6.}));
}

// Tied extrema share the gradient equally.
TEST(ReduceGradValuesTest, MaxAndMinDivideTiesEqually) {
  Value x = F64({2, 3}, {1, 3, 3, 2, 0, 2});
  EXPECT_THAT(Gradient(PrimId::kReduceMax, x, Axes({1}, false)),
              ElementsAre(0, 0.5, 0.5, 0.5, 0, 0.5));
  Value z = F64({2, 3}, {1, 3, 2, 1, 0, 2});
  EXPECT_THAT(Gradient(PrimId::kReduceMin, z, Axes({0}, true)),
              ElementsAre(0.5, 0, 0.5, 0.5, 1, 0.5));
  Value y = F64({4}, {-1, 5, -1, -1});
  EXPECT_THAT(Gradient(PrimId::kReduceMin, y, Axes({}, false)),
              Pointwise(DoubleNear(1e-15), {1 / 3., 0.0, 1 / 3., 1 / 3.}));
}

// The product of the other elements, also where x has zeros: one zero in a slice
// gets the product of the rest, and every element of a slice with two zeros gets 0.
TEST(ReduceGradValuesTest, ProdWithZeros) {
  Value x = F64({3, 3}, {2, 0, 3, 0, 0, 5, 1, 2, 4});
  EXPECT_THAT(Gradient(PrimId::kReduceProd, x, Axes({1}, false)),
              ElementsAre(0, 6, 0, 0, 0, 0, 8, 4, 2));
}

TEST(ReduceGradValuesTest, LogsumexpGivesSoftmaxWeights) {
  Value x = F64({3}, {0, std::log(2.0), std::log(5.0)});
  EXPECT_THAT(Gradient(PrimId::kLogsumexp, x, Axes({}, false)),
              Pointwise(DoubleNear(1e-15), {1 / 8., 2 / 8., 5 / 8.}));
}

// With exact zeros: one zero per slice is exact to the second order; a slice with
// two zeros is exact to the first (the second is the documented limitation).
TEST(ReduceGradTest, ProdAtZerosMatchesFiniteDifferences) {
  for (uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937_64 rng(seed);
    std::vector<double> v = ToDoubles(RandomF64Away({3, 4}, rng, -1.5, 1.5, {0.0}, 0.3).tensor());
    v[seed % 4] = 0.0;      // row 0: one zero
    v[4 + 1] = 0.0;         // row 1: one zero
    Value one_zero = F64({3, 4}, v);
    PrimGradOptions po = Order(2, seed);
    EXPECT_TRUE(PrimitiveGradientOk(PrimId::kReduceProd, {one_zero}, Axes({-1}, false), po));
    v[8] = v[11] = 0.0;  // row 2: two zeros
    po.order = 1;
    EXPECT_TRUE(PrimitiveGradientOk(PrimId::kReduceProd, {F64({3, 4}, v)}, Axes({1}, true), po));
  }
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
