// Shape primitives: definitions (attributes, inference, bprop rules), and each
// op's attribute parse, input checks and shape formula, written once for
// inference and the kernels of every backend.
//
// The functions take the operands' types as TensorTypes (ops/op_util.h), made
// from inference's AbstractTensors (dims may be kUnknownDim: a check that needs
// an unknown dim is skipped and the formula gives kUnknownDim there) or from the
// kernels' Tensors; kernels then trust the result. The functions check the
// operands' dtypes (numeric, index) too; that each input is a tensor at all the
// callers check first (TensorArg, KernelContext::TensorAt: "input 1 must be a
// tensor, got ...").
#ifndef KGRAD_OPS_SHAPE_OPS_H_
#define KGRAD_OPS_SHAPE_OPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {

void RegisterShapeOps(std::vector<PrimitiveDef>* defs);

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
// depth) and the output shape.
absl::StatusOr<AxisShape> OneHotShape(const Primitive& p, TensorType indices);

// ----- Element-wise indexing and scans (index_ops.cc) -------------------------------
// gather_elements, scatter_elements and cumsum, registered by RegisterShapeOps.
void RegisterIndexOps(std::vector<PrimitiveDef>* defs);

// gather_elements(data, indices){axis}: i32 or i64 indices of data's rank, on
// every dim but axis no larger than data; out has indices' shape (data's dtype).
absl::StatusOr<AxisShape> GatherElementsShape(const Primitive& p, TensorType data,
                                              TensorType indices);

// scatter_elements{reduction}: how an update combines with the element it hits.
enum class ScatterReduction { kNone, kAdd, kMul, kMax, kMin };
absl::StatusOr<ScatterReduction> ParseScatterReduction(const Primitive& p);
// scatter_elements(data, indices, updates){axis, reduction}: indices as for
// gather_elements, updates of data's dtype and indices' shape, a numeric data for
// a reduction other than none; out has data's shape.
struct ScatterElementsSpec {
  int axis = 0;
  ScatterReduction reduction = ScatterReduction::kNone;
  Shape out;
};
absl::StatusOr<ScatterElementsSpec> ParseScatterElements(const Primitive& p, TensorType data,
                                                         TensorType indices, TensorType updates);

// cumsum(x){axis, exclusive, reverse}: a numeric x; out has x's shape.
struct CumSumSpec {
  int axis = 0;
  bool exclusive = false, reverse = false;
  Shape out;
};
absl::StatusOr<CumSumSpec> ParseCumSum(const Primitive& p, TensorType x);

// The error for an index of gather_elements / scatter_elements outside
// [-dim, dim) of `data` at `axis` (OutOfRange: a bad value, not a bad graph).
absl::Status ElementIndexOutOfRange(int64_t index, int64_t position, int axis, TensorType data);

// ----- Run-time shapes (dynamic_shape_ops.cc, dynamic_shape_checks.cc) --------------
// shape_of, size_of, dynamic_reshape, dynamic_broadcast_to, dynamic_fill,
// dynamic_slice(_grad), dynamic_pad and dynamic_range (ONNX's Shape, Size,
// Reshape, Expand, ConstantOfShape, Slice, Pad and Range), registered by
// RegisterShapeOps. Their shape-like operands are i32/i64 tensors computed at run
// time. The formulas below take those operands' elements: the numbers the kernels
// read, or at inference their shape values (numbers, dim symbols, kUnknownValue),
// so that one formula serves both; the output dims are then numbers, symbols or
// kUnknownDim. Errors name the primitive and the operand.
void RegisterDynamicShapeOps(std::vector<PrimitiveDef>* defs);

// Input `i` of `p` (called `what`) as a shape-like operand: an i32 or i64 tensor of
// rank 1, or of rank 0 when `scalar`.
absl::Status CheckShapeOperand(const Primitive& p, int i, const char* what, TensorType t,
                               bool scalar = false);

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

// ----- Run-time counts and axes (dynamic_index_ops.cc) -----------------------------
// dynamic_cumsum, dynamic_one_hot, dynamic_split and dynamic_tile(_grad) (ONNX's
// CumSum, OneHot, Split and Tile with the axis, depth, split sizes or repeats
// computed at run time), registered by RegisterShapeOps. As for the run-time
// shapes, the formulas take the operand's elements: numbers from the kernels;
// numbers, dim symbols or kUnknownValue at inference.
void RegisterDynamicIndexOps(std::vector<PrimitiveDef>* defs);

// Input `i` of `p` (called `what`) as a one-element operand: an i32 or i64 tensor
// of rank 0 or shape [1] (ONNX's scalars).
absl::Status CheckScalarOperand(const Primitive& p, int i, const char* what, TensorType t);

// The element of one-element input i of an inference call (checked as
// CheckScalarOperand checks it): its shape value, or kUnknownValue when
// inference does not know it.
absl::StatusOr<int64_t> ScalarOperandElement(const InferCall& c, int i, const char* what);

// dynamic_cumsum(x, axis){exclusive, reverse}: cumsum's spec with the axis an
// element (unknown at inference: axis 0 in the spec, x's shape out).
absl::StatusOr<CumSumSpec> DynamicCumSumSpec(const Primitive& p, TensorType x, int64_t axis);

// one_hot's shape with `depth` given (a number, symbol or kUnknownDim), and
// dynamic_one_hot(indices, depth){axis, ...}: depth >= 1 when a number.
absl::StatusOr<AxisShape> OneHotShapeWithDepth(const Primitive& p, TensorType indices,
                                               int64_t depth);
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

// ----- Selection by value (selection_ops.cc) -----------------------------------------
// topk and nonzero (ONNX's TopK and NonZero), registered by RegisterShapeOps: the
// positions of their outputs depend on the input's values.
void RegisterSelectionOps(std::vector<PrimitiveDef>* defs);

// topk(x, k){axis, largest, sorted}: the k largest (smallest unless `largest`)
// elements of x along axis and their indices, in order (largest first, or
// smallest first), equal elements by ascending index; a NaN counts as larger
// than every number (NumPy's sort order). x is numeric of rank >= 1; k is a
// one-element operand (CheckScalarOperand) whose element is given here: a
// number in [0, dim] (dim: x's dim at axis, checked when known), or at inference
// a dim symbol or kUnknownValue, which the output dim at axis then is (as ?).
// `sorted` = 0 allows any order (ONNX), so the sorted order serves both.
struct TopKSpec {
  int axis = 0;
  int64_t k = 0;  // the output dim at axis (a number, a symbol or kUnknownDim)
  bool largest = true;
  Shape out;      // the values' and the indices' shape
};
absl::StatusOr<TopKSpec> TopKShape(const Primitive& p, TensorType x, int64_t k);

// nonzero(x): the coordinates of x's nonzero elements (true, != 0; NaN counts),
// in row-major order, as an i64 [rank(x), count] tensor (NumPy's nonzero stacked;
// [0, count] for a rank-0 x, as ONNX says). `count` is known only when x has no
// elements (0); inference gives kUnknownDim otherwise.
Shape NonZeroShape(TensorType x, int64_t count);

// ----- Run-time axes (dynamic_axes_ops.cc) --------------------------------------------
// dynamic_unsqueeze, dynamic_squeeze and dynamic_reduce_sum (ONNX's Unsqueeze,
// Squeeze and ReduceSum-13 with an axes tensor), registered by RegisterShapeOps.
// Input 1 (axes) is an i32/i64 tensor of rank 1 computed at run time; the
// formulas take its elements as the run-time shapes' formulas do (numbers, or at
// inference also dim symbols and kUnknownValue). Axes are counted from the end
// when negative; out of range and repeated axes are errors, checked for the
// numbers; an axis that is not a number leaves unknown the dims it could move.
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

#endif  // KGRAD_OPS_SHAPE_OPS_H_
