// A pair reduction's inner points combined in registers (tc_interpreter.cc's
// StatementRunner::PointPairs): pooling windows `O(i,j) R=! X(2*i + kh, 2*j + kw)`
// with 1 to 5 points over kh (and 4 over kd, kh of a 3-D window), every
// reducer, and the pair select of max pooling's arg statement with X and Y
// varying by point. f32 from 8 outputs a row goes through the packets (the last
// overlapping), shorter rows, f64 and more than 4 points through the loops.
// Against loops in the same order, bit for bit, NaN and signs of zero included.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "backends/cpu/cpu_device.h"
#include "backends/kernel.h"
#include "core/tensor.h"
#include "core/value.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

struct Red {
  std::string text;
  double identity;
  std::function<double(double, double)> f;
};

class TcPointPairsTest : public ::testing::TestWithParam<DType> {
 protected:
  // Rounded to the dtype, as the kernel's arithmetic.
  double Round(double v) const {
    return GetParam() == kF32 ? static_cast<double>(static_cast<float>(v)) : v;
  }
  std::vector<Red> Reducers() const {
    const double inf = std::numeric_limits<double>::infinity();
    auto pick = [](double a, double v, bool gt) { return (gt ? v > a : v < a) || v != v ? v : a; };
    return {{"max=!", -inf, [=](double a, double v) { return pick(a, v, true); }},
            {"min=!", inf, [=](double a, double v) { return pick(a, v, false); }},
            {"+=!", 0, [this](double a, double v) { return Round(a + v); }},
            {"*=!", 1, [this](double a, double v) { return Round(a * v); }}};
  }
  std::string Def(std::string def) const {
    return GetParam() == kF64 ? absl::StrReplaceAll(def, {{"float", "double"}}) : def;
  }
  static void ExpectSame(const std::vector<double>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t e = 0; e < got.size(); ++e) {
      if (std::isnan(want[e])) {
        EXPECT_TRUE(std::isnan(got[e])) << e;
      } else {
        EXPECT_EQ(got[e], want[e]) << e;
        EXPECT_EQ(std::signbit(got[e]), std::signbit(want[e])) << e;
      }
    }
  }
};

// Window values from a few levels (ties), signed zeros and a NaN.
std::vector<double> WindowValues(int64_t n, std::mt19937_64& rng) {
  std::vector<double> x(n);
  for (double& v : x) {
    const int k = static_cast<int>(rng() % 6);
    v = k == 0 ? -0.0 : k == 1 ? 0.0 : static_cast<double>(k) - 3.5;
  }
  x[n / 3] = std::numeric_limits<double>::quiet_NaN();
  return x;
}

TEST_P(TcPointPairsTest, PoolingWindowsOfAnyPointCount) {
  std::mt19937_64 rng(3);
  for (int P : {1, 2, 3, 4, 5}) {
    for (int J : {5, 8, 14, 17}) {
      const int I2 = 3, H = 2 * I2 + P, W = 2 * J;
      const std::vector<double> x = WindowValues(H * W, rng);
      for (const Red& r : Reducers()) {
        SCOPED_TRACE(::testing::Message() << "P " << P << " J " << J << " " << r.text);
        const std::string def = Def("def f(float(H,W) X) -> (O) {\n  O(i,j) " + r.text +
                                    " X(2*i + kh, 2*j + kw) where i in 0:" + std::to_string(I2) +
                                    ", kh in 0:" + std::to_string(P) + ", kw in 0:2\n}");
        std::vector<double> want;
        for (int i = 0; i < I2; ++i) {
          for (int j = 0; j < J; ++j) {
            double acc = r.identity;
            for (int kh = 0; kh < P; ++kh) {
              for (int kw = 0; kw < 2; ++kw) acc = r.f(acc, x[(2 * i + kh) * W + 2 * j + kw]);
            }
            want.push_back(acc);
          }
        }
        absl::StatusOr<Value> got =
            RunCpuKernel(PrimId::kTc, {Value(MakeTensor(GetParam(), {H, W}, x))}, {{"def", def}});
        ASSERT_TRUE(got.ok()) << got.status();
        ExpectSame(ToDoubles(got->tensor()), want);
      }
    }
  }
}

// Four points over two indices: a 2x2x2 window of a volume, several planes.
TEST_P(TcPointPairsTest, PointsOverTwoIndices) {
  std::mt19937_64 rng(5);
  const int N = 3, D2 = 2, I2 = 2, J = 9, D = 2 * D2, H = 2 * I2, W = 2 * J;
  const std::vector<double> x = WindowValues(N * D * H * W, rng);
  for (const Red& r : Reducers()) {
    SCOPED_TRACE(r.text);
    const std::string def = Def("def f(float(N,D,H,W) X) -> (O) {\n  O(n,d,i,j) " + r.text +
                                " X(n, 2*d + kd, 2*i + kh, 2*j + kw) where kd in 0:2, kh in 0:2, "
                                "kw in 0:2\n}");
    std::vector<double> want;
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < D2; ++d)
        for (int i = 0; i < I2; ++i)
          for (int j = 0; j < J; ++j) {
            double acc = r.identity;
            for (int kd = 0; kd < 2; ++kd)
              for (int kh = 0; kh < 2; ++kh)
                for (int kw = 0; kw < 2; ++kw)
                  acc = r.f(acc, x[((n * D + 2 * d + kd) * H + 2 * i + kh) * W + 2 * j + kw]);
            want.push_back(acc);
          }
    absl::StatusOr<Value> got = RunCpuKernel(
        PrimId::kTc, {Value(MakeTensor(GetParam(), {N, D, H, W}, x))}, {{"def", def}});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSame(ToDoubles(got->tensor()), want);
  }
}

// The pair select with 1 to 5 points, X and Y both depending on the point.
TEST_P(TcPointPairsTest, PairSelectsWhoseValuesVaryByPoint) {
  std::mt19937_64 rng(11);
  for (int P : {1, 2, 3, 4, 5}) {
    for (int J : {7, 8, 15}) {
      const int I2 = 2, H = 2 * I2 + P, W = 2 * J;
      const std::vector<double> x = WindowValues(H * W, rng);
      std::vector<double> o = WindowValues(I2 * J, rng);
      for (const Red& r : Reducers()) {
        SCOPED_TRACE(::testing::Message() << "P " << P << " J " << J << " " << r.text);
        const std::string def =
            Def("def f(float(H,W) X, float(I2,J) O) -> (R) {\n  R(i,j) " + r.text +
                " X(2*i + kh, 2*j + kw) >= O(i, j) ? kh*2 + kw + 1 : kh - 0.25 where kh in 0:" +
                std::to_string(P) + ", kw in 0:2\n}");
        std::vector<double> want;
        for (int i = 0; i < I2; ++i) {
          for (int j = 0; j < J; ++j) {
            double acc = r.identity;
            for (int kh = 0; kh < P; ++kh) {
              for (int kw = 0; kw < 2; ++kw) {
                const bool t = x[(2 * i + kh) * W + 2 * j + kw] >= o[i * J + j];
                acc = r.f(acc, t ? kh * 2 + kw + 1 : Round(kh - 0.25));
              }
            }
            want.push_back(acc);
          }
        }
        absl::StatusOr<Value> got = RunCpuKernel(
            PrimId::kTc,
            {Value(MakeTensor(GetParam(), {H, W}, x)), Value(MakeTensor(GetParam(), {I2, J}, o))},
            {{"def", def}});
        ASSERT_TRUE(got.ok()) << got.status();
        ExpectSame(ToDoubles(got->tensor()), want);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TcPointPairsTest, ::testing::Values(kF32, kF64),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

}  // namespace
}  // namespace testing
}  // namespace kgrad
