#include "tests/backends/cpu/shape_test_util.h"

#include "gtest/gtest.h"

namespace kgrad {
namespace testing {

std::vector<double> MapRef(const Shape& out_shape, const std::vector<double>& src,
                           const std::function<int64_t(const Index&)>& source, double fill) {
  std::vector<double> out(NumElementsOf(out_shape));
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    int64_t j = source(Unravel(out_shape, i));
    out[i] = j < 0 ? fill : src[j];
  }
  return out;
}

Tensor Rand(DType dt, const Shape& s, std::mt19937_64& rng) {
  return IsInteger(dt) ? RandomTensor(dt, s, rng, -10, 10) : RandomTensor(dt, s, rng);
}

void ExpectExact(const Tensor& out, DType dt, const Shape& shape, const std::vector<double>& want) {
  ASSERT_TRUE(out.defined());
  EXPECT_EQ(out.dtype(), dt);
  EXPECT_EQ(out.shape(), shape);
  EXPECT_EQ(MaxAbsDiff(out, want), 0.0) << out.DebugString();
}

}  // namespace testing
}  // namespace kgrad
