// Shape and data-movement primitives: inference, gradient rules (the adjoints)
// and definitions. The checks and shape formulas that inference and the kernels
// share are in shape_checks.cc (declared in ops/shape_checks.h).
// Semantics are fixed by the gradient rules that rely on them; each inference
// function states its primitive's math in one line. Unknown dims (kUnknownDim)
// propagate: a check that depends on an unknown dim is left to the kernel.
#include "ops/shape_ops.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/bprop_context.h"
#include "ops/op_def.h"
#include "ops/op_util.h"
#include "ops/shape_checks.h"
#include "ops/shape_value.h"

namespace kgrad {
namespace ops {
namespace {

// ----- Inference -----------------------------------------------------------------------
// Each function states its primitive's math in one line; the checks and shapes
// are the functions of shape_checks.cc.
AbstractPtr TensorLike(const AbstractTensor* t, Shape shape) {
  return MakeAbstractTensor(t->dtype(), std::move(shape));
}

// The output shape in what the functions above return.
const Shape& OutOf(const Shape& s) { return s; }
const Shape& OutOf(const AxisShape& s) { return s.out; }
const Shape& OutOf(const SliceSpec& s) { return s.out; }
const Shape& OutOf(const Padding& s) { return s.out; }

// No shape value (ops/shape_value.h) for the output.
std::optional<Shape> NoValue(const InferCall&) { return std::nullopt; }

// An op whose output has input 0's dtype and the shape that kFn(prim, input 0,
// ..., input N-1) gives, each input a tensor, and the shape value kValue gives.
template <size_t N, auto kFn, auto kValue = NoValue>
absl::StatusOr<AbstractPtr> InferWith(const InferCall& c) {
  std::array<const AbstractTensor*, N> in;
  for (size_t i = 0; i < N; ++i) {
    KGRAD_ASSIGN_OR_RETURN(in[i], TensorArg(c, static_cast<int>(i)));
  }
  auto r = std::apply([&](auto*... t) { return kFn(c.prim, *t...); }, in);
  if (!r.ok()) return r.status();
  return WithShapeValue(TensorLike(in[0], OutOf(*r)), kValue(c));
}

// reshape(x){shape}: x's elements in row-major order with a new shape.
constexpr InferFn InferReshape = InferWith<1, ReshapeShape, SameElementsValue>;
// reshape_like(x, ref): x reshaped to ref's shape.
constexpr InferFn InferReshapeLike = InferWith<2, ReshapeLikeShape>;
// broadcast_to(x){shape} / broadcast_to_like(x, ref): x repeated along its size-1
// and missing leading dims.
constexpr InferFn InferBroadcastTo = InferWith<1, BroadcastToShape>;
constexpr InferFn InferBroadcastToLike = InferWith<2, BroadcastToLikeShape>;
// sum_to(x){shape} / sum_to_like(x, ref): the adjoint of broadcast_to, x summed
// over the dims that a broadcast from the target would have created.
constexpr InferFn InferSumTo = InferWith<1, SumToShape>;
constexpr InferFn InferSumToLike = InferWith<2, SumToLikeShape>;
// expand_dims(x){axis} / squeeze(x){axes}: a size-1 dim added / removed.
constexpr InferFn InferExpandDims = InferWith<1, ExpandDimsShape, SameElementsValue>;
constexpr InferFn InferSqueeze = InferWith<1, SqueezeShape, SameElementsValue>;
// gather(params, indices){axis}: out[a.., j.., b..] = params[a.., indices[j..], b..].
constexpr InferFn InferGather = InferWith<2, GatherShape, GatherValue>;
// scatter_add(input, indices, updates){axis}: input with updates[a.., j.., b..]
// added at [a.., indices[j..], b..] (the adjoint of gather in params).
constexpr InferFn InferScatterAdd = InferWith<3, ScatterAddShape>;
// pad(x){pads, value}: x surrounded by pads[2i] leading and pads[2i+1] trailing
// elements equal to `value` on dim i.
constexpr InferFn InferPad = InferWith<1, ParsePad>;

// transpose(x){perm}: out.shape[i] = x.shape[perm[i]].
absl::StatusOr<AbstractPtr> InferTranspose(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int> perm, TransposePerm(c.prim, x->rank()));
  Shape out;
  for (int p : perm) out.push_back(x->shape()[p]);
  return TensorLike(x, std::move(out));
}

// concat(x0, x1, ...){axis}: the inputs joined along `axis`.
absl::StatusOr<AbstractPtr> InferConcat(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<TensorType> xs, TensorArgs(c));
  KGRAD_ASSIGN_OR_RETURN(AxisShape s, ConcatShape(c.prim, xs));
  return WithShapeValue(MakeAbstractTensor(xs[0].dtype, std::move(s.out)), ConcatValue(c));
}

// slice(x){begin, end, strides}: x[begin:end:strides] per dim, NumPy-style bounds.
absl::StatusOr<AbstractPtr> InferSlice(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(SliceSpec s, ParseSlice(c.prim, *x));
  std::optional<Shape> value;
  if (s.out.size() == 1) value = SliceValue(c, s.begin[0], s.stride[0], s.out[0]);
  return WithShapeValue(TensorLike(x, std::move(s.out)), value);
}

// split(x){axis, sizes}: a tuple of consecutive pieces of x along `axis`.
absl::StatusOr<AbstractPtr> InferSplit(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(SplitShapes s, SplitShape(c.prim, *x));
  std::vector<AbstractPtr> parts;
  for (Shape& part : s.parts) parts.push_back(TensorLike(x, std::move(part)));
  return MakeAbstractTuple(std::move(parts));
}

// slice_grad(dy, x_ref){begin, end, strides}: zeros shaped like x_ref with dy
// written at the sliced positions (the adjoint of slice).
absl::StatusOr<AbstractPtr> InferSliceGrad(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* dy, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ref, TensorArg(c, 1));
  KGRAD_RETURN_IF_ERROR(ParseSliceGrad(c.prim, *dy, *ref).status());
  return TensorLike(dy, ref->shape());
}

// one_hot(indices){depth, on_value, off_value, dtype, axis}: a new dim of size
// depth at `axis`, on_value where its position equals the index, else off_value.
absl::StatusOr<AbstractPtr> InferOneHot(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* indices, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(AxisShape s, OneHotShape(c.prim, *indices));
  return MakeAbstractTensor(c.prim.GetDType("dtype"), std::move(s.out));
}

// cast(x){dtype}: x converted elementwise (float->int truncates, ->bool is != 0).
absl::StatusOr<AbstractPtr> InferCast(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  return WithShapeValue(MakeAbstractTensor(c.prim.GetDType("dtype"), x->shape()), CastValue(c));
}

// fill(){shape, value, dtype}: a tensor of `shape` with every element `value`.
absl::StatusOr<AbstractPtr> InferFill(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(Shape shape, ShapeAttr(c.prim, "shape"));
  return MakeAbstractTensor(c.prim.GetDType("dtype"), std::move(shape));
}

// ----- Gradient rules ------------------------------------------------------------------
// Every differentiable op here is linear in its data input, so each rule is the
// adjoint: reshape <-> reshape, transpose <-> inverse transpose, broadcast_to <->
// sum_to, slice <-> slice_grad, pad -> slice, gather <-> scatter_add, concat <->
// split. The rules of the adjoints map back, so grad-of-grad closes over this
// family. Reference inputs of the *_like ops (and slice_grad's x_ref) give only a
// shape: they get no gradient.

// Forward: y = reshape(x){shape}.  Backward: dx = reshape_like(dy, x).
// (Also for reshape_like(x, ref), expand_dims and squeeze: the same elements in the
// same order with another shape; ref gets nothing.)
absl::Status BpropReshape(BpropContext& c) {
  c.SetGrad(0, c.ReshapeLike(c.Dout(), c.I(0)));
  return absl::OkStatus();
}

// Forward: y = transpose(x){perm}, y.shape[i] = x.shape[perm[i]].
// Backward: dx = transpose(dy){inverse(perm)} (perm [] reverses, its own inverse).
absl::Status BpropTranspose(BpropContext& c) {
  const int rank = static_cast<int>(c.prim().GetInts("perm").size());
  absl::StatusOr<std::vector<int>> perm = TransposePerm(c.prim(), rank);
  if (!perm.ok()) return c.Error(std::string(perm.status().message()));
  std::vector<int64_t> inverse(perm->size());
  for (int i = 0; i < rank; ++i) inverse[(*perm)[i]] = i;
  c.SetGrad(0, c.Transpose(c.Dout(), std::move(inverse)));
  return absl::OkStatus();
}

// Forward: y = broadcast_to(x){shape} (or broadcast_to_like(x, ref)).
// Backward: dx = sum_to(dy, x.shape) (sum_to_like(dy, x) when x's dims are unknown).
absl::Status BpropBroadcastTo(BpropContext& c) {
  c.SetGrad(0, c.SumToInput(c.Dout(), 0));
  return absl::OkStatus();
}

// Forward: y = sum_to(x){shape} (or sum_to_like(x, ref)).  Backward: dx =
// broadcast_to_like(dy, x). A target of higher rank than x has only leading 1s
// beyond x's rank (x broadcasts to it); those are squeezed from dy first.
absl::Status BpropSumTo(BpropContext& c) {
  absl::StatusOr<int> x_rank = c.InRank(0);
  if (!x_rank.ok()) return x_rank.status();
  const AbstractTensor* out = AsTensor(c.OutAbs());
  if (out == nullptr) return c.Error("the gradient rule needs the rank of the output");
  AnfNode* dy = c.Dout();
  if (out->rank() > *x_rank) {
    std::vector<int64_t> lead;
    for (int i = 0; i < out->rank() - *x_rank; ++i) lead.push_back(i);
    dy = c.Op(PrimId::kSqueeze, {dy}, {{"axes", std::move(lead)}});
  }
  c.SetGrad(0, c.BroadcastToLike(dy, c.I(0)));
  return absl::OkStatus();
}

// The pieces of dy along `axis` when some input's size there is not static:
// dx_i = dynamic_slice(dy, [o_i], [o_i + n_i], [axis]) with n_i = shape_of(x_i)[axis]
// and o_i the running sum, all at run time.
void ConcatAdjointAtRunTime(BpropContext& c, int axis) {
  auto i64 = [&](int64_t v) { return c.Const(Value(Tensor::FromVector<int64_t>({1}, {v}))); };
  AnfNode* offset = i64(0);
  AnfNode* axes = i64(axis);
  for (int i = 0; i < c.num_inputs(); ++i) {
    AnfNode* size = c.Op(PrimId::kSlice, {c.Op(PrimId::kShapeOf, {c.I(i)})},
                         {{"begin", std::vector<int64_t>{axis}},
                          {"end", std::vector<int64_t>{axis + 1}},
                          {"strides", std::vector<int64_t>{1}}});
    AnfNode* end = c.Op(PrimId::kAdd, {offset, size});
    c.SetGrad(i, c.Op(PrimId::kDynamicSlice, {c.Dout(), offset, end, axes}));
    offset = end;
  }
}

// Forward: y = concat(x_0, ..., x_n){axis}.
// Backward: (dx_0, ..., dx_n) = split(dy){axis, sizes = [x_i.shape[axis]...]}, or
// the same pieces cut at run time when a size is not static.
absl::Status BpropConcat(BpropContext& c) {
  absl::StatusOr<int> rank = c.InRank(0);
  if (!rank.ok()) return rank.status();
  absl::StatusOr<int> axis = NormalizeAxis(c.prim().GetInt("axis"), *rank);
  if (!axis.ok()) return c.Error(std::string(axis.status().message()));
  std::vector<int64_t> sizes;
  for (int i = 0; i < c.num_inputs(); ++i) {
    absl::StatusOr<Shape> s = c.InShape(i);
    if (!s.ok()) return s.status();
    int64_t d = static_cast<int>(s->size()) == *rank ? (*s)[*axis] : kUnknownDim;
    if (d < 0) {
      ConcatAdjointAtRunTime(c, *axis);
      return absl::OkStatus();
    }
    sizes.push_back(d);
  }
  AnfNode* parts = c.Op(PrimId::kSplit, {c.Dout()},
                        {{"axis", int64_t{*axis}}, {"sizes", std::move(sizes)}});
  for (int i = 0; i < c.num_inputs(); ++i) c.SetGrad(i, c.GetItem(parts, i));
  return absl::OkStatus();
}

// Forward: (y_0, ..., y_n) = split(x){axis, sizes}.
// Backward: dx = concat(dy[0], ..., dy[n]){axis} (dy's unused elements are the
// zeros that the transform materialises for a tuple).
absl::Status BpropSplit(BpropContext& c) {
  size_t n = c.prim().GetInts("sizes").size();
  std::vector<AnfNode*> parts;
  for (size_t i = 0; i < n; ++i) parts.push_back(c.GetItem(c.Dout(), static_cast<int64_t>(i)));
  c.SetGrad(0, c.Op(PrimId::kConcat, std::move(parts), {{"axis", c.prim().GetInt("axis")}}));
  return absl::OkStatus();
}

// Forward: y = slice(x){begin, end, strides}.
// Backward: dx = slice_grad(dy, x){begin, end, strides} (zeros with dy scattered in).
absl::Status BpropSlice(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kSliceGrad, {c.Dout(), c.I(0)}, c.prim().attrs()));
  return absl::OkStatus();
}

// Forward: y = slice_grad(g, x_ref){begin, end, strides}.
// Backward: dg = slice(dy){begin, end, strides}; x_ref gets nothing.
absl::Status BpropSliceGrad(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kSlice, {c.Dout()}, c.prim().attrs()));
  return absl::OkStatus();
}

// Forward: y = gather(params, indices){axis}.
// Backward: dparams = scatter_add(zeros_like(params), indices, dy){axis} (repeated
// indices accumulate); indices are integers and get nothing.
absl::Status BpropGather(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kScatterAdd, {c.ZerosLike(c.I(0)), c.I(1), c.Dout()},
                    {{"axis", c.prim().GetInt("axis")}}));
  return absl::OkStatus();
}

// Forward: y = scatter_add(input, indices, updates){axis}.
// Backward: dinput = dy, dupdates = gather(dy, indices){axis}.
absl::Status BpropScatterAdd(BpropContext& c) {
  c.SetGrad(0, c.Dout());
  c.SetGrad(2, c.Op(PrimId::kGather, {c.Dout(), c.I(1)}, {{"axis", c.prim().GetInt("axis")}}));
  return absl::OkStatus();
}

// Forward: y = pad(x){pads, value}.  Backward: dx = dy[pads[2i] : d_i - pads[2i+1]]
// on every dim i, a slice with a negative end (or "to the end", the largest int64,
// clamped by slice) so that x's dims need not be known. The pad value is a
// constant: it gets nothing.
absl::Status BpropPad(BpropContext& c) {
  const std::vector<int64_t>& pads = c.prim().GetInts("pads");
  std::vector<int64_t> begin, end;
  for (size_t i = 0; i + 1 < pads.size(); i += 2) {
    begin.push_back(pads[i]);
    end.push_back(pads[i + 1] > 0 ? -pads[i + 1] : std::numeric_limits<int64_t>::max());
  }
  c.SetGrad(0, c.Op(PrimId::kSlice, {c.Dout()},
                    {{"begin", std::move(begin)}, {"end", std::move(end)}}));
  return absl::OkStatus();
}

// Forward: y = cast(x){dtype}.  Backward: dx = cast(dy){x.dtype} between floating
// types, f16 and bf16 included (dy itself when the dtypes are equal); zero (unset)
// for an integer or bool source or target, which carries no gradient.
absl::Status BpropCast(BpropContext& c) {
  DType to = c.prim().GetDType("dtype");
  if (!IsDifferentiable(to)) return absl::OkStatus();
  absl::StatusOr<DType> from = c.InDType(0);
  if (!from.ok()) return from.status();
  if (!IsDifferentiable(*from)) return absl::OkStatus();
  c.SetGrad(0, *from == to ? c.Dout() : c.Cast(c.Dout(), *from));
  return absl::OkStatus();
}

}  // namespace

void RegisterShapeOps(std::vector<PrimitiveDef>* defs) {
  const AttrSpec shape = RequiredAttr("shape", AttrType::kInts);
  const AttrSpec axis0 = IntAttr("axis", 0);
  const std::vector<AttrSpec> slice = {RequiredAttr("begin", AttrType::kInts),
                                       RequiredAttr("end", AttrType::kInts),
                                       IntsAttr("strides", {})};
  defs->push_back(OpDef(PrimId::kReshape, 1, 1, InferReshape, {shape})
                      .Bprop(BpropReshape)
                      .ZeroIfAny({0})
                      .Linear());
  defs->push_back(OpDef(PrimId::kReshapeLike, 2, 2, InferReshapeLike)
                      .Bprop(BpropReshape)
                      .ZeroIfAny({0})
                      .Linear());
  defs->push_back(OpDef(PrimId::kTranspose, 1, 1, InferTranspose, {IntsAttr("perm", {})})
                      .Bprop(BpropTranspose)
                      .ZeroIfAny({0})
                      .Linear());
  defs->push_back(OpDef(PrimId::kBroadcastTo, 1, 1, InferBroadcastTo, {shape})
                      .Bprop(BpropBroadcastTo)
                      .ZeroIfAny({0})
                      .Linear());
  defs->push_back(OpDef(PrimId::kBroadcastToLike, 2, 2, InferBroadcastToLike)
                      .Bprop(BpropBroadcastTo)
                      .ZeroIfAny({0})
                      .Linear());
  defs->push_back(
      OpDef(PrimId::kSumTo, 1, 1, InferSumTo, {shape}).Bprop(BpropSumTo).ZeroIfAny({0}).Linear());
  defs->push_back(
      OpDef(PrimId::kSumToLike, 2, 2, InferSumToLike).Bprop(BpropSumTo).ZeroIfAny({0}).Linear());
  defs->push_back(
      OpDef(PrimId::kExpandDims, 1, 1, InferExpandDims, {RequiredAttr("axis", AttrType::kInt)})
          .Bprop(BpropReshape)
          .ZeroIfAny({0})
          .Linear());
  defs->push_back(OpDef(PrimId::kSqueeze, 1, 1, InferSqueeze, {IntsAttr("axes", {})})
                      .Bprop(BpropReshape)
                      .ZeroIfAny({0})
                      .Linear());
  defs->push_back(OpDef(PrimId::kConcat, 1, -1, InferConcat, {axis0}).Bprop(BpropConcat).Linear());
  defs->push_back(
      OpDef(PrimId::kSplit, 1, 1, InferSplit, {axis0, RequiredAttr("sizes", AttrType::kInts)})
          .Bprop(BpropSplit)
          .Linear());
  defs->push_back(
      OpDef(PrimId::kSlice, 1, 1, InferSlice, slice).Bprop(BpropSlice).ZeroIfAny({0}).Linear());
  defs->push_back(OpDef(PrimId::kSliceGrad, 2, 2, InferSliceGrad, slice)
                      .Bprop(BpropSliceGrad)
                      .ZeroIfAny({0})
                      .Linear());
  defs->push_back(OpDef(PrimId::kGather, 2, 2, InferGather, {axis0})
                      .Bprop(BpropGather)
                      .ZeroIfAny({0})
                      .Linear());
  defs->push_back(OpDef(PrimId::kScatterAdd, 3, 3, InferScatterAdd, {axis0})
                      .Bprop(BpropScatterAdd)
                      .ZeroIfAll({0, 2})
                      .Linear());
  // pad(x) with a constant value: zero in gives `value` out, so no zero rule.
  defs->push_back(OpDef(PrimId::kPad, 1, 1, InferPad,
                        {RequiredAttr("pads", AttrType::kInts), FloatAttr("value", 0.0)})
                      .Bprop(BpropPad)
                      .Linear());
  defs->push_back(
      OpDef(PrimId::kOneHot, 1, 1, InferOneHot,
            {RequiredAttr("depth", AttrType::kInt), FloatAttr("on_value", 1.0),
             FloatAttr("off_value", 0.0), DTypeAttr("dtype", DType::kFloat32), IntAttr("axis", -1)})
          .ZeroGradient());
  defs->push_back(OpDef(PrimId::kCast, 1, 1, InferCast, {RequiredAttr("dtype", AttrType::kDType)})
                      .Bprop(BpropCast)
                      .ZeroIfAny({0}));
  defs->push_back(OpDef(PrimId::kFill, 0, 0, InferFill,
                        {shape, FloatAttr("value", 0.0), DTypeAttr("dtype", DType::kFloat32)})
                      .ZeroGradient());
}

}  // namespace ops
}  // namespace kgrad
