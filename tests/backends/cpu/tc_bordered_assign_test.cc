// Guarded assignments of tc's interpreter (StatementRunner::AssignItem): rows
// whose guarded lanes are one run are stored whole, the run and the identity
// at its borders in one pass (tc_rows.h's StoreBordered: 16-lane masked loads
// and stores for f32 with AVX-512), as the im2col gathers of a contraction do.
// Shifted windows of every offset in -3..3 along both axes, rows from 5 to 40
// lanes (inside one packet, across packets, ending on a packet's edge), a
// window wholly outside, and a value that varies by row only; against loops,
// bit for bit.
#include <cstdint>
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

class TcBorderedAssignTest : public ::testing::TestWithParam<DType> {
 protected:
  std::string Def(std::string def) const {
    return GetParam() == kF64 ? absl::StrReplaceAll(def, {{"float", "double"}}) : def;
  }
};

std::string Offset(const std::string& index, int d) {
  if (d == 0) return index;
  return index + (d > 0 ? " + " : " - ") + std::to_string(d > 0 ? d : -d);
}

TEST_P(TcBorderedAssignTest, ShiftedWindowsWithZeroBorders) {
  std::mt19937_64 rng(17);
  for (int W : {5, 14, 16, 17, 32, 40}) {
    const int N = 2, H = 6;
    std::vector<double> x(N * H * W);
    for (double& v : x) v = static_cast<double>(rng() % 2000) / 64 - 15;
    for (int dh : {-3, -1, 0, 2}) {
      for (int dw : {-3, -2, -1, 0, 1, 3}) {
        SCOPED_TRACE(::testing::Message() << "W " << W << " dh " << dh << " dw " << dw);
        const std::string h = Offset("h", dh), w = Offset("w", dw);
        const std::string def =
            Def("def f(float(N,H,W) X) -> (O) {\n  O(n,h,w) = X(n, " + h + ", " + w +
                ") where h in 0:H, w in 0:W, " + h + " in 0:H, " + w + " in 0:W\n}");
        std::vector<double> want;
        for (int n = 0; n < N; ++n)
          for (int i = 0; i < H; ++i)
            for (int j = 0; j < W; ++j) {
              const int si = i + dh, sj = j + dw;
              const bool in = si >= 0 && si < H && sj >= 0 && sj < W;
              want.push_back(in ? x[(n * H + si) * W + sj] : 0.0);
            }
        absl::StatusOr<Value> got = RunCpuKernel(
            PrimId::kTc, {Value(MakeTensor(GetParam(), {N, H, W}, x))}, {{"def", def}});
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(ToDoubles(got->tensor()), want);
      }
    }
  }
}

// A shift as wide as the row: every lane guarded out.
TEST_P(TcBorderedAssignTest, AWindowWhollyOutside) {
  const int H = 3, W = 4;
  std::vector<double> x(H * W, 1.5);
  const std::string def = Def(
      "def f(float(H,W) X) -> (O) {\n  O(h,w) = X(h, w + 4) where w in 0:W, w + 4 in 0:W\n}");
  absl::StatusOr<Value> got =
      RunCpuKernel(PrimId::kTc, {Value(MakeTensor(GetParam(), {H, W}, x))}, {{"def", def}});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(ToDoubles(got->tensor()), std::vector<double>(H * W, 0.0));
}

// The value one number per row (a read of no lane index), the lanes guarded.
TEST_P(TcBorderedAssignTest, AValuePerRowInsideItsGuards) {
  const int H = 5, W = 19;
  std::vector<double> x(H * W);
  for (int e = 0; e < H * W; ++e) x[e] = e * 0.25;
  const std::string def = Def(
      "def f(float(H,W) X) -> (O) {\n  O(h,w) = X(h, 0) where w in 0:W, w - 2 in 0:W - 5\n}");
  std::vector<double> want;
  for (int i = 0; i < H; ++i)
    for (int j = 0; j < W; ++j) want.push_back(j >= 2 && j < W - 3 ? x[i * W] : 0.0);
  absl::StatusOr<Value> got =
      RunCpuKernel(PrimId::kTc, {Value(MakeTensor(GetParam(), {H, W}, x))}, {{"def", def}});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(ToDoubles(got->tensor()), want);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TcBorderedAssignTest, ::testing::Values(kF32, kF64),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

}  // namespace
}  // namespace testing
}  // namespace kgrad
