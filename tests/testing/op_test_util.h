// Helpers for op tests: inference of one primitive, one CPU kernel call, random
// tensors, and comparisons against naive references.
#ifndef KGRAD_TESTS_TESTING_OP_TEST_UTIL_H_
#define KGRAD_TESTS_TESTING_OP_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/abstract.h"
#include "core/primitive.h"
#include "core/tensor.h"
#include "core/value.h"

namespace kgrad {
namespace testing {

// Inference of `id` with `attrs` on `args`.
absl::StatusOr<AbstractPtr> InferOp(PrimId id, const std::vector<AbstractPtr>& args,
                                    AttrMap attrs = {});
AbstractPtr T(DType dtype, Shape shape);  // shorthand for MakeAbstractTensor

// Runs the CPU kernel of `id` with `attrs` on `inputs`.
absl::StatusOr<Value> RunCpuKernel(PrimId id, std::vector<Value> inputs, AttrMap attrs = {});

// Random tensors from a seeded generator: uniform in [lo, hi).
Tensor RandomTensor(DType dtype, Shape shape, std::mt19937_64& rng, double lo = -1.0,
                    double hi = 1.0);
// Row-major contents as doubles.
std::vector<double> ToDoubles(const Tensor& t);
// A host tensor of `dtype` with `values` (converted).
Tensor MakeTensor(DType dtype, Shape shape, const std::vector<double>& values);

// Max |a - b| over elements; shapes must match (else +inf).
double MaxAbsDiff(const Tensor& a, const std::vector<double>& expected);

}  // namespace testing
}  // namespace kgrad

#endif  // KGRAD_TESTS_TESTING_OP_TEST_UTIL_H_
