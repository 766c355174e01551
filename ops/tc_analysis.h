// A tc block checked against its inputs' types: the size of every symbol, the
// shape of every tensor, and each statement's domain (its indices, their ranges
// and the guards that cut points out). Inference (with unknown dims) and the
// kernels of every backend (with concrete shapes) call the same Analyze, so a
// block that infers is one the kernels run, and the kernels trust the result.
//
// Ranges follow TC: a `where i in lo:hi` gives one; otherwise an index takes the
// largest range for which every read and condition naming it (with its other
// indices' ranges known) stays in bounds, intersected over them; an index of the
// left side of an output already written takes the output's dim. An output's dim
// is its index's upper bound. Every read must then be in bounds over the whole
// domain (interval arithmetic on its affine index), unless a `where` condition
// on the same expression bounds it: reads out of range are an error, never zeros.
#ifndef KGRAD_OPS_TC_ANALYSIS_H_
#define KGRAD_OPS_TC_ANALYSIS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "ops/op_util.h"
#include "ops/tc_block.h"

namespace kgrad {
namespace tc {

// A point of a statement's domain is kept only where `numerator` is divisible
// by `divisor` and lo <= numerator / divisor < hi.
struct Guard {
  Affine numerator;  // divisor 1
  int64_t divisor = 1;
  int64_t lo = 0, hi = 0;  // kNoBound: that side unbounded
};
inline constexpr int64_t kNoBound = INT64_MIN;

struct Domain {
  // The left side's indices in order, then the reduction indices in the order
  // they first appear in the statement (the order that breaks max/min ties).
  std::vector<int> indices;
  int num_lhs = 0;
  std::vector<int64_t> lo, hi;  // per position; hi kUnknownDim when unknown
  std::vector<Guard> guards;
  // Position of index id in `indices` (-1: the statement does not use it).
  std::vector<int> position;
  // Each range as the block's symbols say it (a size, an integer, a size plus an
  // integer), or kNotSymbolic where it is only known as a number (an inferred
  // range such as N - K + 1): what the adjoint block copies into its `where`s.
  std::vector<Bound> lo_bound, hi_bound;
};
inline constexpr int kNotSymbolic = -2;  // Bound::size of a range with no symbolic form

struct Analysis {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> size;    // per size id; kUnknownDim when unknown
  std::vector<Shape> shapes;    // per tensor
  std::vector<std::vector<Bound>> dim_bounds;  // per tensor and dim, as Domain's
  std::vector<Domain> domains;  // per statement
  bool known() const;           // every size and range known (kernels' case)
};

// `inputs` in signature order: their count, ranks and dtypes must match the
// declarations (float is f32, double f64; one dtype for the block). Errors name
// the block and statement: an index with no range ("index k has no range: add
// `where k in a:b`"), a read out of bounds, an output read before it is
// written, an update of an output never initialised.
absl::StatusOr<Analysis> Analyze(const Block& b, absl::Span<const ops::TensorType> inputs);

}  // namespace tc
}  // namespace kgrad

#endif  // KGRAD_OPS_TC_ANALYSIS_H_
