// Gradient tests: graphs of single primitives (f(x...) = prim(x...){attrs}, or a
// power of it) with the argument types declared, the float64 finite-difference
// check (tools/grad_check.h) of such graphs and of any graph to the requested
// order, the gradients themselves, and the error of a graph that cannot be
// differentiated.
#ifndef KGRAD_TESTS_TESTING_GRAD_TEST_UTIL_H_
#define KGRAD_TESTS_TESTING_GRAD_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/module.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tools/grad_check.h"

namespace kgrad {
namespace testing {

// The points (seeds) most gradient tests check at.
inline constexpr uint64_t kSeeds[] = {1, 2, 3};

// The checker's options with `order` and `seed` (the rest default).
GradCheckOptions Order(int order, uint64_t seed = 0);
using PrimGradOptions = GradCheckOptions;

// f(x_0, ..., x_n) = prim(x_0, ..., x_n){attrs}, parameters declared with the
// types of `args` (scalar constants broadened).
absl::StatusOr<FuncGraph*> BuildPrimitiveGraph(Module& m, PrimId id, const std::vector<Value>& args,
                                               AttrMap attrs = {});

// How OpGraph builds f from P.
struct OpGraphOptions {
  int power = 1;                // f = P(x...)^power, elementwise (1, 2 or 3)
  int tuple_size = 0;           // P returns a tuple of this many tensors, each raised to `power`
  std::vector<Shape> declared;  // declared shapes of the first parameters (else their own)
};

// f(x...) = P(x...){attrs}^power. Floating tensor arguments are parameters x<i>
// (i: the argument's position); the others (bool conditions, integer indices) are
// constants: the gradient operation refuses non-floating parameters.
absl::StatusOr<FuncGraph*> OpGraph(Module& m, PrimId id, const std::vector<Value>& args,
                                   const AttrMap& attrs, const OpGraphOptions& o = {});
// The arguments OpGraph makes parameters of.
std::vector<Value> FloatArgs(const std::vector<Value>& args);

// The check of `f` at `args` with `o`: fails when the check errs or does not pass
// (with the report). With `nonvacuous`, the derivatives at the last order
// (o.order) must not all be zero (below 1e-6): those of every input, or only
// those of parameter `input` when given (which must then be in the report).
::testing::AssertionResult GraphGradientOk(Module& m, FuncGraph* f, const std::vector<Value>& args,
                                           const GradCheckOptions& o, bool nonvacuous = false,
                                           const std::string& input = "");
// GraphGradientOk of OpGraph(id, args, attrs, graph) at FloatArgs(args).
::testing::AssertionResult OpGradientOk(PrimId id, const std::vector<Value>& args,
                                        const AttrMap& attrs, const OpGraphOptions& graph,
                                        const GradCheckOptions& o, bool nonvacuous = false,
                                        const std::string& input = "");

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

// P at `args` to the second order with `seed`: P alone (PrimitiveGradientOk when
// every argument is a float tensor, else OpGradientOk with the others constant),
// then P raised as `raised` says, whose second derivatives must not all vanish
// (for every input, or for parameter `input` alone when given).
void ExpectOpGradients(PrimId id, const std::vector<Value>& args, const AttrMap& attrs,
                       uint64_t seed, const OpGraphOptions& raised, const std::string& input = "");

// ExpectOpGradients of `id`{attrs} squared at kSeeds, for an op with run-time
// integer operands: float64 operands of `floats` drawn for each seed, then the
// `ints` (constants of the checked graph). P returns a tuple of `tuple_size`
// tensors when that is not 0. x0's second derivatives must not all vanish.
void ExpectDynamicOpGradients(PrimId id, const std::vector<Shape>& floats, const std::vector<Value>& ints,
                              const AttrMap& attrs = {}, int tuple_size = 0);

// Arguments drawn from a seeded generator (a new point per seed).
using ArgsFn = std::function<std::vector<Value>(std::mt19937_64&)>;
// Float64 operands of `shapes`, uniform in [-1, 1).
ArgsFn Uniform(std::vector<Shape> shapes);
// Uniform(shapes) drawn from a generator seeded with `seed`.
std::vector<Value> RandomOperands(const std::vector<Shape>& shapes, uint64_t seed);

// The check of `id`{attrs} at the points `make` draws for kSeeds, orders 1 and 2
// (PrimitiveGradientOk when every argument is a float tensor); at the first point,
// and at every point with integer arguments (labels, constants of the checked
// graph), also that it is not vacuous (NonVacuousGradientsOk; `curved`: the op is
// not linear, so some second derivative is non-zero).
void ExpectGradientsAtSeeds(PrimId id, const ArgsFn& make, const AttrMap& attrs,
                            bool curved = true);

// The gradients of f = P(args...){attrs} (sensitivity ones) with respect to each
// float argument, as doubles; empty (after a failure) when something fails.
std::vector<std::vector<double>> Gradients(PrimId id, const std::vector<Value>& args,
                                           const AttrMap& attrs = {});

// Differentiating `f` (GradOperation, with `get_all`) fails with InvalidArgument,
// its message containing each of `fragments`.
void ExpectGradError(Module& m, const absl::StatusOr<FuncGraph*>& f,
                     const std::vector<std::string>& fragments, bool get_all = false);

// A float64 tensor with entries uniform in [lo, hi).
Value RandomF64(Shape shape, std::mt19937_64& rng, double lo = -1.0, double hi = 1.0);
// Entries uniform in [lo, hi) but at least `gap` away from each of `avoid` (for
// kinks: relu at 0, abs at 0, max ties...).
Value RandomF64Away(Shape shape, std::mt19937_64& rng, double lo, double hi,
                    std::vector<double> avoid, double gap);

}  // namespace testing
}  // namespace kgrad

#endif  // KGRAD_TESTS_TESTING_GRAD_TEST_UTIL_H_
