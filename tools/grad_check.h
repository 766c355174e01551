// Gradient checking in float64 (in tools/: it runs graphs, and ad/ never depends
// on backends/): analytic derivatives from the transform against
// central finite differences, at random points and directions (seeded; the seed is
// in the report).
//
// Order 1: with a random cotangent u, L(x) = <u, f(x)>; for every floating input
// and weight, and random directions v (plus every coordinate for small inputs),
// <dL/dx, v> (reverse mode) must match (L(x + e v) - L(x - e v)) / 2e. This is
// the identity <J v, u> == <v, J^T u>.
// With check_jvp, forward mode (Jvp, derived by transposition) is checked the same
// way at order 1.
// Order k > 1: the same check on L_{k-1}(x) = sum_i <dL_{k-2}/dx_i, w_i> with
// random w, i.e. the gradient of a gradient, built by differentiating the
// gradient graph again.
#ifndef KGRAD_TOOLS_GRAD_CHECK_H_
#define KGRAD_TOOLS_GRAD_CHECK_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/module.h"

namespace kgrad {

struct GradCheckOptions {
  uint64_t seed = 0;
  int order = 1;            // checks orders 1..order
  int directions = 3;       // random directions per input
  int max_coordinates = 16; // every coordinate of inputs at most this large
  double eps = 1e-5;
  double rtol = 1e-5;
  double atol = 1e-7;
  bool check_weights = true;
  // Also check forward mode at order 1: Jvp(L)(x, v) must give the same directional
  // derivative (inputs only; the Jvp takes tangents for inputs, not weights).
  bool check_jvp = true;
  // A direction whose central difference misses is looked at again with steps
  // 10x to 10^4x smaller (a kink within the step, such as a relu near 0, mixes
  // two slopes into it): it passes if the central or a one-sided difference at
  // one of those steps matches (a one-sided one where the kinks lie on the other
  // side). If none does and the one-sided differences differ by a gap that does
  // not shrink with the step, the function has a kink at the point along that
  // direction (relu at exactly 0, a max over tied values: common in networks
  // after a relu) and no derivative to compare; such directions are counted
  // (GradCheckEntry::non_smooth) and, with skip_kinks, not compared. Without it
  // they fail, as any other mismatch.
  bool skip_kinks = false;
  // The residual policy of every gradient taken (ad/residual_policy.h); empty:
  // each rule's default.
  std::string residuals;
};

struct GradCheckEntry {
  int order = 1;
  bool forward = false;  // a Jvp entry (else reverse mode)
  std::string input;  // parameter or weight name
  double max_abs_error = 0;
  double max_rel_error = 0;
  double max_magnitude = 0;  // largest |derivative| seen
  // Directions along which the finite difference (the function near the input)
  // or the derivative kgrad computed was NaN; such an entry fails.
  int64_t directions = 0;
  int64_t nan_numeric = 0;
  int64_t nan_derivative = 0;
  // Directions that matched only at a smaller step, and directions along which
  // the function has a kink at the point (GradCheckOptions::skip_kinks).
  int64_t refined = 0;
  int64_t non_smooth = 0;
  bool passed = true;
};

struct GradCheckReport {
  uint64_t seed = 0;
  std::vector<GradCheckEntry> entries;
  bool passed() const;
  std::string ToString() const;
};

// `args` are float64 (tensors or scalars) for floating inputs; integer/bool
// inputs are passed through and not checked. Floating weights must be float64.
absl::StatusOr<GradCheckReport> CheckGradients(Module& module, FuncGraph* fg,
                                               const std::vector<Value>& args,
                                               const GradCheckOptions& options = {});

// A graph x... -> sum over the float leaves of g(x...) (through tuples and
// lists) of <leaf, w> with w uniform in [-1, 1) from `rng`, of the leaf's
// dtype; `sample_out` is one output of g, for the structure. With
// `float64_only`, a leaf that is not float64 is an error (gradient checks run in
// float64).
absl::StatusOr<FuncGraph*> ScalarProjection(Module& m, FuncGraph* g, const Value& sample_out,
                                            std::mt19937_64& rng, const std::string& name,
                                            bool float64_only = true);

// Random float64 arguments for fg's declared parameter types (uniform in
// [-1, 1); integers in [0, 3)); with `declared_floats`, floating ones in their
// declared dtype (float32 draws are the float64 ones rounded). Parameters marked
// in `given` get no draw (an empty Value), so they need no declared shape.
absl::StatusOr<std::vector<Value>> RandomArguments(FuncGraph* fg, uint64_t seed,
                                                   bool declared_floats = false,
                                                   const std::vector<bool>& given = {});

}  // namespace kgrad

#endif  // KGRAD_TOOLS_GRAD_CHECK_H_
