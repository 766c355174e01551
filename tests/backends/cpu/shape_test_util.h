// Naive float64 references for the shape family's CPU kernel tests
// (shape_kernels_test.cc, data_movement_kernels_test.cc): plain loops over
// multi-indices, obviously correct, and the dtypes and inputs the tests use.
#ifndef KGRAD_TESTS_BACKENDS_CPU_SHAPE_TEST_UTIL_H_
#define KGRAD_TESTS_BACKENDS_CPU_SHAPE_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {

inline constexpr DType kAll[] = {kF32, kF64, kI32, kI64, kBool};
inline constexpr DType kNumeric[] = {kF32, kF64, kI32, kI64};

// A multi-index, one coordinate per dim (Unravel and Ravel in op_test_util.h
// convert it from and to a row-major position).
using Index = Shape;

// out[i] = src[source(index of i)], or `fill` where source gives -1.
std::vector<double> MapRef(const Shape& out_shape, const std::vector<double>& src,
                           const std::function<int64_t(const Index&)>& source, double fill = 0);

// Random values; integers in [-10, 10) so that sums and casts see signs.
Tensor Rand(DType dt, const Shape& s, std::mt19937_64& rng);

// `out` has dtype `dt`, shape `shape` and exactly the values `want`.
void ExpectExact(const Tensor& out, DType dt, const Shape& shape, const std::vector<double>& want);

}  // namespace testing
}  // namespace kgrad

#endif  // KGRAD_TESTS_BACKENDS_CPU_SHAPE_TEST_UTIL_H_
