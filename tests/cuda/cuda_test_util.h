// Helpers for CUDA kernel tests: skip without a GPU, run one primitive on the
// CUDA device and on the CPU, and compare.
#ifndef KGRAD_TESTS_CUDA_CUDA_TEST_UTIL_H_
#define KGRAD_TESTS_CUDA_CUDA_TEST_UTIL_H_

#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/device.h"
#include "core/primitive.h"
#include "core/value.h"
#include "gtest/gtest.h"
#include "tests/cuda/compare.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {

// The CUDA device, or nullptr with the reason in `why`.
Device* CudaOrNull(std::string* why);

// In a test body or SetUp: `Device* dev = ...` or skip the test.
#define KGRAD_CUDA_DEVICE_OR_SKIP(dev)                                        \
  std::string dev##_why;                                                      \
  ::kgrad::Device* dev = ::kgrad::testing::CudaOrNull(&dev##_why);            \
  if (dev == nullptr) GTEST_SKIP() << dev##_why

// A fixture for tests on the CUDA device, `dev` in their bodies: they are skipped
// without a GPU (as with KGRAD_CUDA_DEVICE_OR_SKIP).
template <typename Base>
class OnCuda : public Base {
 protected:
  void SetUp() override {
    std::string why;
    dev = CudaOrNull(&why);
    if (dev == nullptr) GTEST_SKIP() << why;
  }
  Device* dev = nullptr;
};

// On the CUDA device, over dtypes (the test parameter). R(shape) draws a random
// tensor of that dtype, uniform in [lo, hi), from a generator seeded with `seed`.
class CudaDTypeTest : public OnCuda<::testing::TestWithParam<DType>> {
 protected:
  explicit CudaDTypeTest(uint64_t seed = 1, double lo = -1, double hi = 1)
      : rng_(seed), lo_(lo), hi_(hi) {}
  Value R(Shape s) { return R(std::move(s), lo_, hi_); }
  Value R(Shape s, double lo, double hi);
  std::mt19937_64 rng_;

 private:
  double lo_, hi_;
};

// The float and the integer dtypes, as test parameters.
inline auto FloatDTypes() { return ::testing::Values(DType::kFloat32, DType::kFloat64); }
inline auto IntDTypes() { return ::testing::Values(DType::kInt32, DType::kInt64); }

// Runs primitive `id` on `device`: tensor inputs are copied to the device, the
// result back to the host.
absl::StatusOr<Value> RunOnDevice(Device* device, PrimId id, std::vector<Value> inputs,
                                  AttrMap attrs = {});

// Runs `id` on the CPU and on CUDA: both must succeed with close results
// (tolerance from the first float tensor's dtype unless given).
::testing::AssertionResult MatchesCpu(Device* cuda, PrimId id, const std::vector<Value>& inputs,
                                      AttrMap attrs = {}, const Tolerance* tol = nullptr);
// Both must fail with the same status (code and message).
::testing::AssertionResult FailsLikeCpu(Device* cuda, PrimId id, const std::vector<Value>& inputs,
                                        AttrMap attrs = {});

// Shorthands.
Value Rand(DType dtype, Shape shape, std::mt19937_64& rng, double lo = -1.0, double hi = 1.0);
Value IntTensor(DType dtype, Shape shape, const std::vector<int64_t>& values);
std::string DTypeParamName(const ::testing::TestParamInfo<DType>& info);

}  // namespace testing
}  // namespace kgrad

#endif  // KGRAD_TESTS_CUDA_CUDA_TEST_UTIL_H_
