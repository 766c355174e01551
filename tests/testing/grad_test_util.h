// Gradient tests of single primitives: builds f(x...) = prim(x...){attrs} with
// the argument types declared, and runs the float64 finite-difference check
// (tools/grad_check.h) to the requested order.
#ifndef KGRAD_TESTS_TESTING_GRAD_TEST_UTIL_H_
#define KGRAD_TESTS_TESTING_GRAD_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "core/module.h"
#include "gtest/gtest.h"
#include "tools/grad_check.h"

namespace kgrad {
namespace testing {

// f(x_0, ..., x_n) = prim(x_0, ..., x_n){attrs}, parameters declared with the
// types of `args` (scalar constants broadened).
absl::StatusOr<FuncGraph*> BuildPrimitiveGraph(Module& m, PrimId id, const std::vector<Value>& args,
                                               AttrMap attrs = {});

struct PrimGradOptions {
  int order = 1;
  uint64_t seed = 0;
  double rtol = 1e-5;
  double atol = 1e-7;
  double eps = 1e-5;
};

// The gradient check of `id` at `args` (float inputs must be float64). Passes
// when every input's derivative matches central differences; the failure message
// has the whole report (with the seed).
::testing::AssertionResult PrimitiveGradientOk(PrimId id, const std::vector<Value>& args,
                                               AttrMap attrs = {}, PrimGradOptions options = {});

// f(x...) = prim(args...){attrs} checked to order 2 at `args` with the full report:
// integer arguments become constants of f (the checker would try to differentiate
// them as parameters), and the check must not be vacuous: every first-order
// derivative is non-zero somewhere and, with `curved`, some second-order one is.
::testing::AssertionResult NonVacuousGradientsOk(PrimId id, const std::vector<Value>& args,
                                                 const AttrMap& attrs, uint64_t seed, bool curved);

// A float64 tensor with entries uniform in [lo, hi).
Value RandomF64(Shape shape, std::mt19937_64& rng, double lo = -1.0, double hi = 1.0);
// Entries uniform in [lo, hi) but at least `gap` away from each of `avoid` (for
// kinks: relu at 0, abs at 0, max ties...).
Value RandomF64Away(Shape shape, std::mt19937_64& rng, double lo, double hi,
                    std::vector<double> avoid, double gap);

}  // namespace testing
}  // namespace kgrad

#endif  // KGRAD_TESTS_TESTING_GRAD_TEST_UTIL_H_
