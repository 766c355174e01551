// The checks and shape formulas of the shape family (reshape, transpose, slice,
// pad, gather, ...; ops/shape_ops.h), and what the other shape families
// (ops/index_ops.h, ops/dynamic_shape_ops.h, ops/dynamic_index_ops.h,
// ops/dynamic_axes_ops.h, ops/selection_ops.h) build on: the error helpers, the
// parsed forms they share (AxisShape, SplitShapes, SliceSpec, Padding) and the
// checks of run-time shape operands. Each op's attribute parse, input checks and
// shape formula is written once, for inference and the kernels of every backend.
//
// The functions take the operands' types as TensorTypes (ops/op_util.h), made
// from inference's AbstractTensors (dims may be kUnknownDim: a check that needs
// an unknown dim is skipped and the formula gives kUnknownDim there) or from the
// kernels' Tensors; kernels then trust the result. The functions check the
// operands' dtypes (numeric, index) too; that each input is a tensor at all the
// callers check first (TensorArg, KernelContext::TensorAt: "input 1 must be a
// tensor, got ...").
#ifndef KGRAD_OPS_SHAPE_CHECKS_H_
#define KGRAD_OPS_SHAPE_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {

// "<prim>: what", for an error that concerns no single attribute.
absl::Status PrimError(const Primitive& p, absl::string_view what);
// A shape operand's elements as inference or a kernel sees them: "[2,-1,batch,?]".
std::string ValuesString(absl::Span<const int64_t> v);

// Attribute `attr` as a tensor shape: entries >= 0 (one may be -1 when
// `allow_infer`), at most kMaxRank of them, a product within kMaxElements.
absl::StatusOr<Shape> ShapeAttr(const Primitive& p, const char* attr, bool allow_infer = false);

// reshape{shape} (one -1 inferred from x's element count) and reshape_like.
absl::StatusOr<Shape> ReshapeShape(const Primitive& p, TensorType x);
absl::StatusOr<Shape> ReshapeLikeShape(const Primitive& p, TensorType x, TensorType ref);
// expand_dims{axis}: a 1 inserted at axis in [-rank-1, rank].
absl::StatusOr<Shape> ExpandDimsShape(const Primitive& p, TensorType x);
// squeeze{axes}: the named size-1 dims dropped (every size-1 dim for []).
absl::StatusOr<Shape> SqueezeShape(const Primitive& p, TensorType x);

// transpose{perm}: out.shape[i] = x.shape[perm[i]]; perm [] reverses the axes.
absl::StatusOr<std::vector<int>> TransposePerm(const Primitive& p, int rank);

// broadcast_to{shape} and broadcast_to_like: x's size-1 and missing leading dims
// repeated (NumPy, right-aligned).
absl::StatusOr<Shape> BroadcastToShape(const Primitive& p, TensorType x);
absl::StatusOr<Shape> BroadcastToLikeShape(const Primitive& p, TensorType x, TensorType ref);
// sum_to{shape} and sum_to_like, the adjoints: x numeric, the target must
// broadcast to x.
absl::StatusOr<Shape> SumToShape(const Primitive& p, TensorType x);
absl::StatusOr<Shape> SumToLikeShape(const Primitive& p, TensorType x, TensorType ref);
// The dims of x that sum_to to `out` (a valid target) adds up: size != 1 in x
// and 1 in `out` (right-aligned; dims `out` lacks count as 1).
std::vector<bool> SummedDims(absl::Span<const int64_t> x, absl::Span<const int64_t> out);

// An op's normalised axis attribute and its output shape.
struct AxisShape {
  int axis = 0;
  Shape out;
};

// concat(x0, x1, ...){axis}: every input of x0's dtype and rank and equal to it
// on every dim but axis.
absl::StatusOr<AxisShape> ConcatShape(const Primitive& p, absl::Span<const TensorType> xs);

// split(x){axis, sizes}: the pieces' shapes; the sizes sum to x's dim at axis.
struct SplitShapes {
  int axis = 0;
  std::vector<Shape> parts;
};
absl::StatusOr<SplitShapes> SplitShape(const Primitive& p, TensorType x);

// slice{begin, end, strides} of x, NumPy-style bounds (negative from the end,
// clamped): per dim the output size, the first element and the step (1 when at
// most one element is taken). Unknown dims of x give kUnknownDim in out and begin.
struct SliceSpec {
  Shape out, begin, stride;
};
absl::StatusOr<SliceSpec> ParseSlice(const Primitive& p, TensorType x);
// slice_grad(dy, ref){begin, end, strides}: the slice of ref, which dy must match.
absl::StatusOr<SliceSpec> ParseSliceGrad(const Primitive& p, TensorType dy, TensorType ref);

// gather(params, indices){axis}: i32 or i64 indices; out = params.shape[:axis] +
// indices.shape + params.shape[axis+1:].
absl::StatusOr<AxisShape> GatherShape(const Primitive& p, TensorType params, TensorType indices);
// scatter_add(input, indices, updates){axis}: a numeric input, i32 or i64
// indices, updates of input's dtype shaped like gather's output; out is input's
// shape (unknown dims filled from updates).
absl::StatusOr<AxisShape> ScatterAddShape(const Primitive& p, TensorType input, TensorType indices,
                                          TensorType updates);
// The error for an index of gather / scatter_add outside [0, dim) of `data` at
// `axis` (OutOfRange: a bad value, not a bad graph).
absl::Status IndexOutOfRange(int64_t index, int64_t position, int axis, TensorType data);

// pad{pads, value} of x: the output shape and the leading padding of each dim
// (pads[2i]).
struct Padding {
  Shape out, before;
};
absl::StatusOr<Padding> ParsePad(const Primitive& p, TensorType x);

// one_hot(indices){depth, axis, ...}: i32 or i64 indices; the new axis (of size
// depth) and the output shape. OneHotShapeWithDepth: the same with `depth` given
// (a number, symbol or kUnknownDim; dynamic_one_hot's).
absl::StatusOr<AxisShape> OneHotShape(const Primitive& p, TensorType indices);
absl::StatusOr<AxisShape> OneHotShapeWithDepth(const Primitive& p, TensorType indices,
                                               int64_t depth);

// ----- Run-time shape operands ----------------------------------------------------------
// The run-time families take shape-like operands (shapes, axes, counts) as i32/i64
// tensors computed at run time. Errors name the primitive and the operand.

// Input `i` of `p` (called `what`) as a shape-like operand: an i32 or i64 tensor of
// rank 1, or of rank 0 when `scalar`.
absl::Status CheckShapeOperand(const Primitive& p, int i, const char* what, TensorType t,
                               bool scalar = false);

// Input `i` of `p` (called `what`) as a one-element operand: an i32 or i64 tensor
// of rank 0 or shape [1] (ONNX's scalars).
absl::Status CheckScalarOperand(const Primitive& p, int i, const char* what, TensorType t);

// The element of one-element input i of an inference call (checked as
// CheckScalarOperand checks it): its shape value, or kUnknownValue when
// inference does not know it.
absl::StatusOr<int64_t> ScalarOperandElement(const InferCall& c, int i, const char* what);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_SHAPE_CHECKS_H_
