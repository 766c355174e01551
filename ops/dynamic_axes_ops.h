// Run-time axes: dynamic_unsqueeze, dynamic_squeeze and dynamic_reduce_sum
// (ONNX's Unsqueeze, Squeeze and ReduceSum-13 with an axes tensor). Input 1
// (axes) is an i32/i64 tensor of rank 1 computed at run time (CheckShapeOperand,
// ops/shape_checks.h); the formulas take its elements as the run-time shapes'
// formulas do (numbers, or at inference also dim symbols and kUnknownValue). Axes
// are counted from the end when negative; out of range and repeated axes are
// errors, checked for the numbers; an axis that is not a number leaves unknown
// the dims it could move.
#ifndef KGRAD_OPS_DYNAMIC_AXES_OPS_H_
#define KGRAD_OPS_DYNAMIC_AXES_OPS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {

void RegisterDynamicAxesOps(std::vector<PrimitiveDef>* defs);

// dynamic_unsqueeze(x, axes): the output has rank r = rank(x) + len(axes), a 1 at
// each axis (in [-r, r)) and x's dims in order elsewhere.
absl::StatusOr<Shape> DynamicUnsqueezeShape(const Primitive& p, TensorType x,
                                            absl::Span<const int64_t> axes);
// dynamic_squeeze(x, axes): x's dims at the axes (in [-rank, rank), each of size
// 1) dropped.
absl::StatusOr<Shape> DynamicSqueezeShape(const Primitive& p, TensorType x,
                                          absl::Span<const int64_t> axes);
// dynamic_reduce_sum(x, axes){keepdims, noop_with_empty_axes}: the sum of a
// numeric x over the axes; empty axes sum over every dim, or leave x as it is
// with noop_with_empty_axes (`identity`). `axes` is nullopt when inference does
// not know its length (then keepdims must be set: the rank is x's).
struct DynamicReduceSpec {
  bool identity = false;
  std::vector<int64_t> axes;  // the reduced dims, ascending (all for []), when all are numbers
  Shape out;
};
absl::StatusOr<DynamicReduceSpec> DynamicReduceSumSpec(
    const Primitive& p, TensorType x, std::optional<absl::Span<const int64_t>> axes);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_DYNAMIC_AXES_OPS_H_
