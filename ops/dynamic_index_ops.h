// Run-time counts and axes: dynamic_cumsum, dynamic_one_hot, dynamic_split and
// dynamic_tile(_grad) (ONNX's CumSum, OneHot, Split and Tile with the axis,
// depth, split sizes or repeats computed at run time). As for the run-time
// shapes (ops/dynamic_shape_ops.h), the formulas take the operand's elements:
// numbers from the kernels; numbers, dim symbols or kUnknownValue at inference.
// The one-element operands are checked by CheckScalarOperand (ops/shape_checks.h).
#ifndef KGRAD_OPS_DYNAMIC_INDEX_OPS_H_
#define KGRAD_OPS_DYNAMIC_INDEX_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "ops/index_ops.h"
#include "ops/op_util.h"
#include "ops/shape_checks.h"

namespace kgrad {
namespace ops {

void RegisterDynamicIndexOps(std::vector<PrimitiveDef>* defs);

// dynamic_cumsum(x, axis){exclusive, reverse}: cumsum's spec with the axis an
// element (unknown at inference: axis 0 in the spec, x's shape out).
absl::StatusOr<CumSumSpec> DynamicCumSumSpec(const Primitive& p, TensorType x, int64_t axis);

// dynamic_one_hot(indices, depth){axis, ...}: one_hot's shape (OneHotShapeWithDepth)
// with depth >= 1 when a number.
absl::StatusOr<AxisShape> DynamicOneHotShape(const Primitive& p, TensorType indices,
                                             int64_t depth);

// dynamic_split(x, sizes){axis}: one piece per entry of `sizes` (entries >= 0
// summing to x's dim at axis; an unknown entry gives an unknown piece dim).
absl::StatusOr<SplitShapes> DynamicSplitShape(const Primitive& p, TensorType x,
                                              absl::Span<const int64_t> sizes);

// dynamic_tile(x, repeats): ONNX Tile, out_i = x_i * repeats[i] with one entry >= 0
// per dim of x.
absl::StatusOr<Shape> DynamicTileShape(const Primitive& p, TensorType x,
                                       absl::Span<const int64_t> repeats);
// dynamic_tile_grad(dy, x, repeats): dy (x's dtype) must have the tile's shape;
// out is x's shape.
absl::StatusOr<Shape> DynamicTileGradShape(const Primitive& p, TensorType dy, TensorType x,
                                           absl::Span<const int64_t> repeats);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_DYNAMIC_INDEX_OPS_H_
