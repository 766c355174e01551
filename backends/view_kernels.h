// The shape kernels that one implementation serves on every device, and what
// the kernels of every backend share around the ops/ checks:
//  - the inputs in the form the ops/ checks take (ops::TensorType), and the
//    output shape a shape function of ops/shape_checks.h gives them;
//  - the kernels that only relabel a tensor's shape (views::, reshape,
//    reshape_like, expand_dims, squeeze): the output shares the input's buffer;
//  - the data-movement kernels (moves::, transpose, broadcast_to, slice,
//    slice_grad, pad, concat, split): copies between a dense tensor and a strided
//    view of another, on top of the backend's copy (its `Mover`).
// Backends register these next to their own shape kernels. This library does
// not depend on ops/: the ops/ functions come in as template arguments from the
// backends, which do (e.g. views::View<ops::ReshapeShape>).
#ifndef KGRAD_BACKENDS_VIEW_KERNELS_H_
#define KGRAD_BACKENDS_VIEW_KERNELS_H_

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/kernel.h"
#include "core/shape.h"
#include "core/status_macros.h"

namespace kgrad {

// ----- Inputs for the ops/ checks ----------------------------------------------------------
// The first `n` inputs (every input for -1) as `Type`s (ops::TensorType, made
// from a Tensor), each of which must be a tensor.
template <typename Type>
absl::StatusOr<std::vector<Type>> InputTypes(const KernelContext& ctx, int n = -1) {
  const size_t count = n < 0 ? ctx.num_inputs() : static_cast<size_t>(n);
  std::vector<Type> types;
  types.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.TensorAt(i));
    types.push_back(Type(*t));
  }
  return types;
}

// The output shape that `fn`, a shape function of ops/shape_checks.h, gives input 0
// (x) and, when it takes a second operand (a *_like op's ref), input 1.
template <typename Fn>
absl::StatusOr<Shape> OutputShape(const KernelContext& ctx, Fn fn) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  if constexpr (std::is_invocable_v<Fn, const Primitive&, const Tensor&>) {
    return fn(ctx.prim(), *x);
  } else {
    KGRAD_ASSIGN_OR_RETURN(const Tensor* ref, ctx.TensorAt(1));
    return fn(ctx.prim(), *x, *ref);
  }
}

// ----- Strided views -----------------------------------------------------------------------
// Part of a dense row-major tensor: elements of an index space `dims` at element
// `strides` (0 repeats) from `offset`. A data-movement kernel copies between
// such a view of one tensor and the dense other tensor.
struct StridedView {
  Shape dims, strides;
  int64_t offset = 0;
};
// x (shape `in`) with its dims permuted: view dim i is x's dim perm[i].
StridedView TransposedView(const Shape& in, absl::Span<const int> perm);
// x (shape `in`) broadcast to `target` (stride 0 on the dims it repeats).
StridedView BroadcastView(const Shape& in, const Shape& target);
// The elements of a tensor of shape `in` that a slice takes: per dim from `begin`
// in steps of `step`, `dims` of them.
StridedView SliceView(const Shape& in, absl::Span<const int64_t> begin,
                      absl::Span<const int64_t> step, const Shape& dims);
// The block of shape `block` whose first element is at index `start` of a tensor
// of shape `whole` (pad's input inside its output).
StridedView BlockView(const Shape& whole, absl::Span<const int64_t> start, const Shape& block);
// The same for a block that starts at `start` along `axis` and at 0 elsewhere
// (concat's inputs inside its output, split's outputs inside its input).
StridedView AxisBlockView(const Shape& whole, int axis, int64_t start, const Shape& block);

namespace views {

// Input 0 with `shape`, sharing its buffer. The caller checked that the element
// count is the same. The input is moved out so that a uniquely owned buffer
// stays uniquely owned.
absl::StatusOr<Value> ShareAs(KernelContext& ctx, const Shape& shape);

// reshape, reshape_like, expand_dims, squeeze: input 0 relabelled with the shape
// that `kShapeFn` (ReshapeShape, ReshapeLikeShape, ...) gives it.
template <auto kShapeFn>
absl::StatusOr<Value> View(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(Shape shape, OutputShape(ctx, kShapeFn));
  return ShareAs(ctx, shape);
}

}  // namespace views

// ----- Data movement -----------------------------------------------------------------------
// A backend's `Mover` is a type with
//   static absl::Status ViewToDense(KernelContext& ctx, const StridedView& v,
//                                   const Tensor& src, const Tensor& dst);
//     (view v of src copied into dst, dense; same dtype)
//   static absl::Status DenseToView(KernelContext& ctx, const Tensor& src,
//                                   const StridedView& v, const Tensor& dst);
//     (src, dense, copied into view v of dst)
//   static absl::Status Fill(KernelContext& ctx, const Tensor& t, double value);
// The `k...` template arguments are the ops/shape_checks.h functions named.
namespace moves {

// A new tensor holding view `v` of `x`.
template <typename Mover>
absl::StatusOr<Value> Dense(KernelContext& ctx, const Tensor& x, const StridedView& v) {
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x.dtype(), v.dims));
  KGRAD_RETURN_IF_ERROR(Mover::ViewToDense(ctx, v, x, out));
  return Value(std::move(out));
}

// A new tensor of `shape` holding `value`, with `x` written into its view `v`.
template <typename Mover>
absl::StatusOr<Value> Embedded(KernelContext& ctx, const Tensor& x, const Shape& shape,
                               double value, const StridedView& v) {
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x.dtype(), shape));
  KGRAD_RETURN_IF_ERROR(Mover::Fill(ctx, out, value));
  KGRAD_RETURN_IF_ERROR(Mover::DenseToView(ctx, x, v, out));
  return Value(std::move(out));
}

// transpose; kPerm: TransposePerm.
template <typename Mover, auto kPerm>
absl::StatusOr<Value> Transpose(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int> perm, kPerm(ctx.prim(), x->rank()));
  return Dense<Mover>(ctx, *x, TransposedView(x->shape(), perm));
}

// broadcast_to, broadcast_to_like; kShapeFn: BroadcastToShape, BroadcastToLikeShape.
template <typename Mover, auto kShapeFn>
absl::StatusOr<Value> BroadcastTo(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(Shape target, OutputShape(ctx, kShapeFn));
  const Tensor& x = ctx.input(0).tensor();
  if (NumElementsOf(target) == x.NumElements()) return views::ShareAs(ctx, target);
  return Dense<Mover>(ctx, x, BroadcastView(x.shape(), target));
}

// slice; kParse: ParseSlice.
template <typename Mover, auto kParse>
absl::StatusOr<Value> Slice(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(auto s, kParse(ctx.prim(), *x));
  if (s.out == x->shape()) return std::move(ctx.mutable_input(0));  // the whole tensor
  return Dense<Mover>(ctx, *x, SliceView(x->shape(), s.begin, s.stride, s.out));
}

// slice_grad: zeros shaped like input 1 with input 0 in the slice; kParse:
// ParseSliceGrad.
template <typename Mover, auto kParse>
absl::StatusOr<Value> SliceGrad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* dy, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* ref, ctx.TensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(auto s, kParse(ctx.prim(), *dy, *ref));
  const Shape& shape = ref->shape();
  return Embedded<Mover>(ctx, *dy, shape, 0.0, SliceView(shape, s.begin, s.stride, s.out));
}

// pad; kParse: ParsePad.
template <typename Mover, auto kParse>
absl::StatusOr<Value> Pad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(auto s, kParse(ctx.prim(), *x));
  return Embedded<Mover>(ctx, *x, s.out, ctx.prim().GetFloat("value"),
                         BlockView(s.out, s.before, x->shape()));
}

// concat; kShapeFn: ConcatShape, which takes Type (TensorType) operands.
template <typename Mover, typename Type, auto kShapeFn>
absl::StatusOr<Value> Concat(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<Type> in, InputTypes<Type>(ctx));
  KGRAD_ASSIGN_OR_RETURN(auto s, kShapeFn(ctx.prim(), in));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(ctx.input(0).tensor().dtype(), s.out));
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i).tensor();
    const StridedView block = AxisBlockView(s.out, s.axis, offset, x.shape());
    KGRAD_RETURN_IF_ERROR(Mover::DenseToView(ctx, x, block, out));
    offset += x.dim(s.axis);
  }
  return Value(std::move(out));
}

// The tuple of consecutive pieces of x along s.axis with the shapes s.parts (a
// SplitShapes; split and dynamic_split).
template <typename Mover, typename Shapes>
absl::StatusOr<Value> SplitInto(KernelContext& ctx, const Tensor& x, const Shapes& s) {
  std::vector<Value> parts;
  int64_t offset = 0;
  for (const Shape& part : s.parts) {
    const StridedView block = AxisBlockView(x.shape(), s.axis, offset, part);
    KGRAD_ASSIGN_OR_RETURN(Value v, Dense<Mover>(ctx, x, block));
    parts.push_back(std::move(v));
    offset += part[s.axis];
  }
  return Value::Tuple(std::move(parts));
}

// split; kShapeFn: SplitShape.
template <typename Mover, auto kShapeFn>
absl::StatusOr<Value> Split(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(auto s, kShapeFn(ctx.prim(), *x));
  return SplitInto<Mover>(ctx, *x, s);
}

}  // namespace moves
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_VIEW_KERNELS_H_
