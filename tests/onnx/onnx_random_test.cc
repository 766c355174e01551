// ONNX's random ops through kgrad's seeded draws (onnx_random_ops.cc): the same
// seed gives the same numbers, another seed others; the distributions' ranges
// and means; Bernoulli's certain outcomes exact; errors for non-float outputs.
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_one_node.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

using ::testing::HasSubstr;
using testing::ToDoubles;

std::vector<double> RunNode(const OneNode& n, const std::vector<Value>& args) {
  absl::StatusOr<std::unique_ptr<Module>> m = n.Import();
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return {};
  absl::StatusOr<Value> out = RunGraph((*m)->entry(), args);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? ToDoubles(out->tensor()) : std::vector<double>{};
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e / v.size();
  return s;
}

TEST(OnnxRandom, LikeOpsAreReproduciblePerSeed) {
  Value x(Tensor::Zeros(DType::kFloat64, {40, 50}).value());
  for (const char* op : {"RandomUniformLike", "RandomNormalLike"}) {
    SCOPED_TRACE(op);
    std::vector<double> a = RunNode(OneNode(op, 13).In({40, 50}).Set({{"seed", 3.0}}), {x});
    std::vector<double> b = RunNode(OneNode(op, 13).In({40, 50}).Set({{"seed", 3.0}}), {x});
    std::vector<double> c = RunNode(OneNode(op, 13).In({40, 50}).Set({{"seed", 4.0}}), {x});
    ASSERT_EQ(a.size(), 2000u);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
  }
  std::vector<double> u =
      RunNode(OneNode("RandomUniformLike", 13).In({40, 50}).Set({{"low", -1.0}, {"high", 3.0}, {"seed", 1.0}}), {x});
  for (double v : u) ASSERT_TRUE(v >= -1 && v < 3) << v;
  EXPECT_NEAR(Mean(u), 1.0, 0.15);
  std::vector<double> n =
      RunNode(OneNode("RandomNormalLike", 13).In({40, 50}).Set({{"mean", 2.0}, {"scale", 0.5}, {"seed", 1.0}}), {x});
  EXPECT_NEAR(Mean(n), 2.0, 0.05);
}

TEST(OnnxRandom, OfShapeAndDType) {
  absl::StatusOr<std::unique_ptr<Module>> m =
      OneNode("RandomUniform", 13).Set({{"shape", std::vector<int64_t>{3, 4}}, {"dtype", int64_t{11}}}).Import();
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Value> out = RunGraph((*m)->entry(), {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tensor().TypeString(), "f64[3,4]");
  EXPECT_THAT(ImportError(OneNode("RandomNormal", 13).Set({{"shape", std::vector<int64_t>{2}}, {"dtype", int64_t{6}}})),
              HasSubstr("the output type must be float or double, got i32"));
  EXPECT_THAT(ImportError(OneNode("RandomNormal", 13)), HasSubstr("attribute 'shape' is required"));
}

TEST(OnnxRandom, BernoulliDraws) {
  std::vector<double> p(10000, 0.3);
  p[0] = 0;
  p[1] = 1;
  Value probs(testing::MakeTensor(DType::kFloat64, {10000}, p));
  std::vector<double> y = RunNode(OneNode("Bernoulli", 15).In({10000}).Set({{"seed", 5.0}}), {probs});
  ASSERT_EQ(y.size(), 10000u);
  EXPECT_EQ(y[0], 0);
  EXPECT_EQ(y[1], 1);
  for (double v : y) ASSERT_TRUE(v == 0 || v == 1);
  EXPECT_NEAR(Mean(y), 0.3, 0.03);
  EXPECT_EQ(y, RunNode(OneNode("Bernoulli", 15).In({10000}).Set({{"seed", 5.0}}), {probs}));
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
