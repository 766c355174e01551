// Run-time shapes: shape_of, size_of, dynamic_reshape, dynamic_broadcast_to,
// dynamic_fill, dynamic_slice(_grad), dynamic_pad and dynamic_range (ONNX's
// Shape, Size, Reshape, Expand, ConstantOfShape, Slice, Pad and Range). Their
// shape-like operands are i32/i64 tensors computed at run time
// (CheckShapeOperand, ops/shape_checks.h). The formulas below take those
// operands' elements: the numbers the kernels read, or at inference their shape
// values (numbers, dim symbols, kUnknownValue), so that one formula serves both;
// the output dims are then numbers, symbols or kUnknownDim. Errors name the
// primitive and the operand. Definitions in dynamic_shape_ops.cc, the formulas
// in dynamic_shape_checks.cc.
#ifndef KGRAD_OPS_DYNAMIC_SHAPE_OPS_H_
#define KGRAD_OPS_DYNAMIC_SHAPE_OPS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "ops/op_util.h"
#include "ops/shape_checks.h"

namespace kgrad {
namespace ops {

void RegisterDynamicShapeOps(std::vector<PrimitiveDef>* defs);

// dynamic_reshape(x, shape){allowzero}: ONNX Reshape. A 0 copies x's dim there
// (unless allowzero), one -1 is inferred from the element count.
absl::StatusOr<Shape> DynamicReshapeShape(const Primitive& p, TensorType x,
                                          absl::Span<const int64_t> target);
// dynamic_broadcast_to(x, shape): ONNX Expand, the NumPy broadcast of x's shape
// and `target` (both ways).
absl::StatusOr<Shape> DynamicBroadcastShape(const Primitive& p, TensorType x,
                                            absl::Span<const int64_t> target);
// dynamic_fill(shape): `target` as dims (entries >= 0).
absl::StatusOr<Shape> DynamicFillShape(const Primitive& p, absl::Span<const int64_t> target);

// dynamic_slice's operands 1 to 4 (axes and steps optional: 0..n-1 and 1s).
struct SliceOperands {
  absl::Span<const int64_t> starts, ends;
  std::optional<absl::Span<const int64_t>> axes, steps;
};
// ONNX Slice (opset 10+): per sliced axis the clamped first element, the step and
// the count (SliceSpec as slice's); dims not sliced are kept whole.
absl::StatusOr<SliceSpec> DynamicSliceSpec(const Primitive& p, TensorType x,
                                           const SliceOperands& s);
// dynamic_slice_grad(dy, x, ...): the slice of x, which dy (x's dtype) must match.
absl::StatusOr<SliceSpec> DynamicSliceGradSpec(const Primitive& p, TensorType dy, TensorType x,
                                               const SliceOperands& s);
// dynamic_pad(x, pads){value}: pads = [b_0..b_{r-1}, e_0..e_{r-1}], negative ones
// crop; out_i = x_i + b_i + e_i >= 0, `before` = b.
absl::StatusOr<Padding> DynamicPadSpec(const Primitive& p, TensorType x,
                                       absl::Span<const int64_t> pads);
// dynamic_range(start, limit, delta): max(ceil((limit - start) / delta), 0)
// elements; delta 0 is an error (integers exactly, floats in double).
absl::StatusOr<int64_t> RangeLength(const Primitive& p, int64_t start, int64_t limit,
                                    int64_t delta);
absl::StatusOr<int64_t> RangeLength(const Primitive& p, double start, double limit, double delta);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_DYNAMIC_SHAPE_OPS_H_
