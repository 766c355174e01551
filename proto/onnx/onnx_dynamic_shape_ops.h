// The run-time forms of ONNX's shape ops: used by their mappings
// (onnx_shape_ops.cc) when a shape, bounds, pads or range input is computed at
// run time (a graph input, or a Shape chain on symbolic dims that did not fold),
// each emits the primitive that reads that input as a tensor (ops/
// dynamic_shape_ops.cc). Inference keeps whatever the input's shape value knows
// (numbers and dim symbols), so static dims stay static downstream.
#ifndef KGRAD_PROTO_ONNX_ONNX_DYNAMIC_SHAPE_OPS_H_
#define KGRAD_PROTO_ONNX_ONNX_DYNAMIC_SHAPE_OPS_H_

#include <string>

#include "proto/onnx/onnx_context.h"

namespace kgrad {
namespace onnx_import {

// Whether input `i` (if present) is known at import time.
bool IsConstantInput(const NodeContext& c, int i);
// Input `i` as a 1-D integer tensor whose length inference knows (the rank or
// the number of entries an op reads from it); else an error naming `what`.
absl::StatusOr<ImportedValue> IntVector(NodeContext& c, int i, const char* what);
// id(x, v) of input 0 and input 1 as IntVector(c, 1, what): the ops whose second
// input is computed at run time and read as it is (Expand, Unsqueeze, Squeeze, Tile).
Outputs WithRunTimeInts(NodeContext& c, PrimId id, const char* what);

// Shape(x){start, end} / Size(x) as shape_of / size_of.
Outputs DynamicShape(NodeContext& c, const ImportedValue& x, int64_t start, int64_t end);
Outputs DynamicSize(NodeContext& c, const ImportedValue& x);
// Reshape(x, shape){allowzero}.
Outputs DynamicReshape(NodeContext& c, const ImportedValue& x, const ImportedValue& shape,
                       bool allowzero);
// Flatten(x){axis} when both sides of the axis hold dims that are not static.
Outputs DynamicFlatten(NodeContext& c, const ImportedValue& x, int64_t axis);
// Expand(x, shape).
Outputs DynamicExpand(NodeContext& c);
// Slice(x, starts, ends[, axes, steps]).
Outputs DynamicSlice(NodeContext& c);
// ConstantOfShape(shape){value}.
Outputs DynamicConstantOfShape(NodeContext& c, DType dtype, double value);
// Pad(x, pads[, constant_value]){mode} (opset 11+): constant, edge, reflect, wrap.
Outputs DynamicPad(NodeContext& c, const std::string& mode);
// Range(start, limit, delta).
Outputs DynamicRange(NodeContext& c);

// ----- Run-time counts and axes (onnx_dynamic_index_ops.cc) ---------------------------
// CumSum(x, axis){exclusive, reverse}, OneHot(indices, depth, values){axis},
// Split(x, split){axis} and Tile(x, repeats) with that input (OneHot: depth or
// values) computed at run time: dynamic_cumsum, dynamic_one_hot, dynamic_split,
// dynamic_tile.
Outputs DynamicCumSum(NodeContext& c);
Outputs DynamicOneHot(NodeContext& c);
Outputs DynamicSplit(NodeContext& c);
// Split of x along `axis` at run-time `sizes` (one per output), and into n equal
// parts of a dim that is not static.
Outputs DynamicSplitWith(NodeContext& c, const ImportedValue& x, const ImportedValue& sizes,
                         int64_t axis);
Outputs DynamicEqualSplit(NodeContext& c, const ImportedValue& x, int axis, int64_t n);
Outputs DynamicTile(NodeContext& c);

// Unsqueeze(x, axes) and Squeeze(x, axes) with axes computed at run time
// (dynamic_unsqueeze, dynamic_squeeze; ops/dynamic_axes_ops.cc).
Outputs DynamicUnsqueeze(NodeContext& c);
Outputs DynamicSqueeze(NodeContext& c);
// The sum (or with `mean` the mean) of x over the axes of input 1, computed at
// run time, as ReduceSum-13 / ReduceMean-18 with keepdims and
// noop_with_empty_axes: dynamic_reduce_sum, over the count of summed elements
// size_of(x) / size_of(sum) for the mean.
absl::StatusOr<ImportedValue> DynamicReduceSum(NodeContext& c, const ImportedValue& x,
                                               bool keepdims, bool noop, bool mean);

}  // namespace onnx_import
}  // namespace kgrad

#endif  // KGRAD_PROTO_ONNX_ONNX_DYNAMIC_SHAPE_OPS_H_
