// Comparison of kernel results for the CUDA tests (no CUDA dependency: the
// emulated-kernel test uses it on any machine).
#ifndef KGRAD_TESTS_CUDA_COMPARE_H_
#define KGRAD_TESTS_CUDA_COMPARE_H_

#include "core/value.h"
#include "gtest/gtest.h"

namespace kgrad {
namespace testing {

struct Tolerance {
  double rtol, atol;
};
// Default tolerances: f32 rtol 1e-4 / atol 1e-5, f64 rtol 1e-9 / atol 1e-11.
Tolerance DefaultTolerance(DType dtype);

// Tensors (recursively through tuples) equal in dtype and shape, and values within
// |a - e| <= atol + rtol * |e| (NaN matches NaN, infinities must match exactly;
// integers and bools exactly).
::testing::AssertionResult ValuesClose(const Value& actual, const Value& expected,
                                       Tolerance tol);

}  // namespace testing
}  // namespace kgrad

#endif  // KGRAD_TESTS_CUDA_COMPARE_H_
