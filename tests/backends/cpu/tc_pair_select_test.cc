// The pair select of tc's interpreter (backends/cpu/tc_program.h's
// TcPairSelect): a reduction whose root is `cmp(A, B) ? X : Y` with A read in
// pairs of a 2-wide window and B one value per output, as max pooling's arg
// statement, run with A and B in place (f32 packets from 8 outputs a row, the
// last overlapping). Against loops, bit for bit, for every comparison, the
// operands either way round, every reducer, B per output or one value, and
// rows of lengths around the packet's, NaN included; and the gather that
// follows it in max pooling's adjoint, whose kw items are selected and stored
// interleaved in one pass.
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

struct Cmp {
  std::string text;
  std::function<bool(double, double)> f;
};

struct Red {
  std::string text;
  double identity;
  std::function<double(double, double)> f;
};

class TcPairSelectTest : public ::testing::TestWithParam<DType> {};

TEST_P(TcPairSelectTest, MatchesLoops) {
  const DType dtype = GetParam();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // Rounded to the dtype, as the kernel's arithmetic.
  auto round = [&](double v) { return dtype == kF32 ? static_cast<double>(static_cast<float>(v)) : v; };
  const std::vector<Cmp> cmps = {{"==", [](double p, double q) { return p == q; }},
                                 {"!=", [](double p, double q) { return p != q; }},
                                 {"<", [](double p, double q) { return p < q; }},
                                 {"<=", [](double p, double q) { return p <= q; }},
                                 {">", [](double p, double q) { return p > q; }},
                                 {">=", [](double p, double q) { return p >= q; }}};
  auto pick = [](double a, double v, bool gt) { return (gt ? v > a : v < a) || v != v ? v : a; };
  const std::vector<Red> reds = {
      {"min=!", inf, [&](double a, double v) { return pick(a, v, false); }},
      {"max=!", -inf, [&](double a, double v) { return pick(a, v, true); }},
      {"+=!", 0, [&](double a, double v) { return round(a + v); }},
      {"*=!", 1, [&](double a, double v) { return round(a * v); }}};
  std::mt19937_64 rng(20261203);
  for (int J : {3, 8, 9, 14, 16, 21}) {
    const int I2 = 3, H = 2 * I2, W = 2 * J;
    // Values from a few levels, so that comparisons tie often; some NaN.
    std::vector<double> x(H * W), o(I2 * J);
    for (double& v : x) v = static_cast<double>(rng() % 4) - 1;
    for (double& v : o) v = static_cast<double>(rng() % 4) - 1;
    x[5] = nan;
    o[4] = nan;
    for (const Cmp& c : cmps) {
      for (const Red& r : reds) {
        for (int form = 0; form < 3; ++form) {  // A op B(i,j); B(i,j) op A; A op Y()
          SCOPED_TRACE(::testing::Message() << "J " << J << " " << c.text << " " << r.text
                                            << " form " << form);
          const std::string a = "X(2*i + kh, 2*j + kw)";
          const std::string b = form == 2 ? "Y(0)" : "O(i, j)";
          const std::string cond = form == 1 ? b + " " + c.text + " " + a : a + " " + c.text + " " + b;
          std::string def = "def f(float(H,W) X, float(I2,J) O, float(K) Y) -> (R) {\n  R(i,j) " +
                            r.text + " " + cond +
                            " ? kh*2 + kw + 1 : 0.5 where kh in 0:2, kw in 0:2\n}";
          if (dtype == kF64) def = absl::StrReplaceAll(def, {{"float", "double"}});
          const double y0 = 0;
          std::vector<double> want;
          for (int i = 0; i < I2; ++i) {
            for (int j = 0; j < J; ++j) {
              double acc = r.identity;
              for (int kh = 0; kh < 2; ++kh) {
                for (int kw = 0; kw < 2; ++kw) {
                  const double av = x[(2 * i + kh) * W + 2 * j + kw];
                  const double bv = form == 2 ? y0 : o[i * J + j];
                  const bool t = form == 1 ? c.f(bv, av) : c.f(av, bv);
                  acc = r.f(acc, t ? kh * 2 + kw + 1 : 0.5);
                }
              }
              want.push_back(acc);
            }
          }
          absl::StatusOr<Value> got = RunCpuKernel(
              PrimId::kTc,
              {Value(MakeTensor(dtype, {H, W}, x)), Value(MakeTensor(dtype, {I2, J}, o)),
               Value(MakeTensor(dtype, {1}, {y0}))},
              {{"def", def}});
          ASSERT_TRUE(got.ok()) << got.status();
          const std::vector<double> v = ToDoubles(got->tensor());
          ASSERT_EQ(v.size(), want.size());
          for (size_t e = 0; e < v.size(); ++e) {
            if (std::isnan(want[e])) {
              EXPECT_TRUE(std::isnan(v[e])) << e;
            } else {
              EXPECT_EQ(v[e], want[e]) << e;
            }
          }
        }
      }
    }
  }
}

// The adjoint's gather of 2x2 windows after the lattice substitution: the kw
// items of a chunk computed and stored interleaved in one pass
// (StatementRunner::SelectPairs) for any comparison, with the chosen value a
// read or one number, the comparison either way round; rows of 6 (scalar), 9
// and 16 outputs (packets, the last overlapping). Against loops, bit for bit.
TEST_P(TcPairSelectTest, InterleavedSelectsOfAGather) {
  const DType dtype = GetParam();
  std::mt19937_64 rng(7);
  for (int J : {6, 9, 16}) {
    const int N = 2, I2 = 3, H = 2 * I2, W = 2 * J;
    std::vector<double> arg(N * I2 * J), g(N * I2 * J);
    for (double& v : arg) v = static_cast<double>(rng() % 5);
    for (double& v : g) v = static_cast<double>(rng() % 1000) / 64 - 7;
    g[3] = -0.0;
    for (const Cmp& c : std::vector<Cmp>{{"==", [](double p, double q) { return p == q; }},
                                        {"<", [](double p, double q) { return p < q; }},
                                        {">=", [](double p, double q) { return p >= q; }}}) {
      for (int form = 0; form < 3; ++form) {  // kh*2+kw op A ? G; A op kh*2+kw ? G; ... ? 2.5
        SCOPED_TRACE(::testing::Message() << "J " << J << " " << c.text << " form " << form);
        const std::string at = "(n,(h - kh)/2,(w - kw)/2)";
        const std::string k = "kh*2 + kw", a = "A" + at;
        const std::string cond = form == 1 ? a + " " + c.text + " " + k : k + " " + c.text + " " + a;
        const std::string x = form == 2 ? "2.5" : "G" + at;
        std::string def = "def g(float(N,I2,J) A, float(N,I2,J) G) -> (Ix) {\n  Ix(n,h,w) +=! " +
                          cond + " ? " + x + " : 0 where h in 0:" + std::to_string(H) +
                          ", w in 0:" + std::to_string(W) +
                          ", kh in 0:2, kw in 0:2, (h - kh)/2 in 0:I2, (w - kw)/2 in 0:J\n}";
        if (dtype == kF64) def = absl::StrReplaceAll(def, {{"float", "double"}});
        std::vector<double> want;
        for (int n = 0; n < N; ++n)
          for (int h = 0; h < H; ++h)
            for (int w = 0; w < W; ++w) {
              const int e = (n * I2 + h / 2) * J + w / 2;
              const double kv = (h % 2) * 2 + w % 2;
              const bool t = form == 1 ? c.f(arg[e], kv) : c.f(kv, arg[e]);
              want.push_back(0.0 + (t ? (form == 2 ? 2.5 : g[e]) : 0.0));
            }
        absl::StatusOr<Value> got = RunCpuKernel(
            PrimId::kTc,
            {Value(MakeTensor(dtype, {N, I2, J}, arg)), Value(MakeTensor(dtype, {N, I2, J}, g))},
            {{"def", def}});
        ASSERT_TRUE(got.ok()) << got.status();
        const std::vector<double> v = ToDoubles(got->tensor());
        ASSERT_EQ(v.size(), want.size());
        for (size_t e = 0; e < v.size(); ++e) {
          EXPECT_EQ(v[e], want[e]) << e;
          EXPECT_EQ(std::signbit(v[e]), std::signbit(want[e])) << e;  // 0 + -0 is +0
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TcPairSelectTest, ::testing::Values(kF32, kF64),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

}  // namespace
}  // namespace testing
}  // namespace kgrad
