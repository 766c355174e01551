// Run-time shapes (declared in ops/dynamic_shape_ops.h): primitives whose
// shape-like operands are integer tensors computed at run time, with ONNX's
// semantics (Shape, Size, Reshape, Expand, ConstantOfShape, Slice, Pad, Range).
// Inference reads what it knows of those operands from their shape values
// (core/abstract.h), so static and symbolic dims survive a shape computed in the
// graph; the checks and formulas, shared with the kernels, are in
// dynamic_shape_checks.cc. Then the gradient rules and the definitions.
#include "ops/dynamic_shape_ops.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/dim_symbol.h"
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

// ----- Operands at inference ----------------------------------------------------------
// The elements of shape-like input i as inference knows them: its shape value, or
// kUnknownValue for each element; nullopt when its length is not static. More
// than 2 * kMaxRank elements fit no operand here: an error.
absl::StatusOr<std::optional<Shape>> Elements(const InferCall& c, int i, const char* what,
                                              bool scalar = false) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorArg(c, i));
  KGRAD_RETURN_IF_ERROR(CheckShapeOperand(c.prim, i, what, *t, scalar));
  if (t->value()) return t->value();
  const int64_t n = scalar ? 1 : t->shape()[0];
  if (n < 0) return std::optional<Shape>();
  if (n > 2 * kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat(c.prim.name(), ": input ", i, " (", what,
                                                   ") has ", n, " entries, more than ",
                                                   2 * kMaxRank));
  }
  return std::optional<Shape>(Shape(n, kUnknownValue));
}

// Elements() where the output's rank is the operand's length: it must be static.
absl::StatusOr<Shape> StaticElements(const InferCall& c, int i, const char* what) {
  KGRAD_ASSIGN_OR_RETURN(std::optional<Shape> e, Elements(c, i, what));
  if (e) return *std::move(e);
  return absl::InvalidArgumentError(absl::StrCat(
      c.prim.name(), ": the length of input ", i, " (", what, ") gives the output's rank and ",
      "must be known statically, got ", AbstractToString(c.args[i])));
}

// dynamic_slice's (first = 1) or dynamic_slice_grad's (first = 2) starts, ends,
// axes and steps; nullopt when a length is not static.
struct SliceElements {
  Shape starts, ends;
  std::optional<Shape> axes, steps;
  SliceOperands View() const {
    SliceOperands s{starts, ends, std::nullopt, std::nullopt};
    if (axes) s.axes = absl::Span<const int64_t>(*axes);
    if (steps) s.steps = absl::Span<const int64_t>(*steps);
    return s;
  }
};
absl::StatusOr<std::optional<SliceElements>> SliceArgs(const InferCall& c, int first) {
  const char* names[] = {"starts", "ends", "axes", "steps"};
  std::optional<Shape> e[4];
  bool all_static = true;
  for (int k = 0; k < 4 && first + k < static_cast<int>(c.args.size()); ++k) {
    KGRAD_ASSIGN_OR_RETURN(e[k], Elements(c, first + k, names[k]));
    all_static &= e[k].has_value();
  }
  if (!all_static) return std::optional<SliceElements>();
  return std::optional<SliceElements>(SliceElements{*e[0], *e[1], e[2], e[3]});
}

// ----- Inference -----------------------------------------------------------------------
// shape_of(x) = i64[rank] of x's dims; its shape value is those dims (symbols
// included).
absl::StatusOr<AbstractPtr> InferShapeOf(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  Shape value;
  for (int64_t d : x->shape()) value.push_back(d == kUnknownDim ? kUnknownValue : d);
  return MakeAbstractShapeValue(DType::kInt64, {x->rank()}, std::move(value));
}

// size_of(x) = i64[] number of elements: known when the dims are numbers, a
// symbol s when the dims are s and 1s, 0 when a dim is 0.
absl::StatusOr<AbstractPtr> InferSizeOf(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  Shape numbers;
  int64_t symbol = kUnknownValue;
  int others = 0;
  for (int64_t d : x->shape()) {
    if (d == 0) return MakeAbstractShapeValue(DType::kInt64, {}, {0});
    if (d >= 0) {
      if (d != 1) numbers.push_back(d);
    } else {
      ++others;
      symbol = IsSymbolDim(d) ? d : kUnknownValue;
    }
  }
  absl::StatusOr<int64_t> n = CheckedNumElements(numbers);
  int64_t value = kUnknownValue;
  if (others == 0 && n.ok()) value = *n;
  if (others == 1 && numbers.empty()) value = symbol;
  return MakeAbstractShapeValue(DType::kInt64, {}, {value});
}

// dynamic_reshape(x, shape){allowzero}: x's elements in row-major order with the
// dims in `shape` (0: x's dim there unless allowzero; one -1: inferred).
absl::StatusOr<AbstractPtr> InferDynamicReshape(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(Shape target, StaticElements(c, 1, "shape"));
  KGRAD_ASSIGN_OR_RETURN(Shape out, DynamicReshapeShape(c.prim, *x, target));
  return WithShapeValue(MakeAbstractTensor(x->dtype(), std::move(out)), SameElementsValue(c));
}

// dynamic_broadcast_to(x, shape): x repeated to the NumPy broadcast of its shape
// and `shape` (ONNX Expand: either side may be the larger).
absl::StatusOr<AbstractPtr> InferDynamicBroadcastTo(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(Shape target, StaticElements(c, 1, "shape"));
  KGRAD_ASSIGN_OR_RETURN(Shape out, DynamicBroadcastShape(c.prim, *x, target));
  return MakeAbstractTensor(x->dtype(), std::move(out));
}

// dynamic_fill(shape){value, dtype}: a tensor of `shape` with every element `value`.
absl::StatusOr<AbstractPtr> InferDynamicFill(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(Shape target, StaticElements(c, 0, "shape"));
  KGRAD_ASSIGN_OR_RETURN(Shape out, DynamicFillShape(c.prim, target));
  return MakeAbstractTensor(c.prim.GetDType("dtype"), std::move(out));
}

// dynamic_slice(x, starts, ends[, axes[, steps]]): x[starts[i]:ends[i]:steps[i]]
// along axes[i], ONNX Slice bounds (negative from the end, clamped).
absl::StatusOr<AbstractPtr> InferDynamicSlice(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(std::optional<SliceElements> s, SliceArgs(c, 1));
  if (!s) return MakeAbstractTensor(x->dtype(), Shape(x->rank(), kUnknownDim));
  KGRAD_ASSIGN_OR_RETURN(SliceSpec spec, DynamicSliceSpec(c.prim, *x, s->View()));
  return MakeAbstractTensor(x->dtype(), std::move(spec.out));
}

// dynamic_slice_grad(dy, x, starts, ends[, axes[, steps]]): zeros shaped like x
// with dy written at the sliced positions (the adjoint of dynamic_slice).
absl::StatusOr<AbstractPtr> InferDynamicSliceGrad(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* dy, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 1));
  KGRAD_RETURN_IF_ERROR(CheckSameDType(0, *dy, 1, *x, CheckedBy::kInference));
  KGRAD_ASSIGN_OR_RETURN(std::optional<SliceElements> s, SliceArgs(c, 2));
  if (s) KGRAD_RETURN_IF_ERROR(DynamicSliceGradSpec(c.prim, *dy, *x, s->View()).status());
  return MakeAbstractTensor(x->dtype(), x->shape());
}

// dynamic_pad(x, pads){value}: pads[i] elements equal to `value` before and
// pads[i + rank] after dim i (negative pads crop).
absl::StatusOr<AbstractPtr> InferDynamicPad(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(std::optional<Shape> pads, Elements(c, 1, "pads"));
  if (!pads) return MakeAbstractTensor(x->dtype(), Shape(x->rank(), kUnknownDim));
  KGRAD_ASSIGN_OR_RETURN(Padding s, DynamicPadSpec(c.prim, *x, *pads));
  return MakeAbstractTensor(x->dtype(), std::move(s.out));
}

// dynamic_range(start, limit, delta) = [start, start + delta, ...] while short of
// limit: max(ceil((limit - start) / delta), 0) elements. Integer bounds with known
// values give the length and the elements as a shape value.
absl::StatusOr<AbstractPtr> InferDynamicRange(const InferCall& c) {
  const char* names[] = {"start", "limit", "delta"};
  const AbstractTensor* in[3];
  for (int i = 0; i < 3; ++i) {
    KGRAD_ASSIGN_OR_RETURN(in[i], TensorArg(c, i));
    KGRAD_RETURN_IF_ERROR(CheckDType(i, *in[i], kNumericTypes));
    KGRAD_RETURN_IF_ERROR(CheckSameDType(0, *in[0], i, *in[i], CheckedBy::kInference));
    if (in[i]->rank() != 0) {
      return ArgError(c, i, absl::StrCat("a rank-0 tensor (", names[i], ")"));
    }
  }
  const DType dtype = in[0]->dtype();
  int64_t v[3];
  for (int i = 0; i < 3; ++i) {
    const bool known = in[i]->value() && (*in[i]->value())[0] != kUnknownValue &&
                       !IsSymbolDim((*in[i]->value())[0]);
    if (!known) return MakeAbstractTensor(dtype, {kUnknownDim});
    v[i] = (*in[i]->value())[0];
  }
  KGRAD_ASSIGN_OR_RETURN(int64_t n, RangeLength(c.prim, v[0], v[1], v[2]));
  Shape value;
  for (int64_t k = 0; k < n && k < kMaxShapeValue; ++k) value.push_back(v[0] + k * v[2]);
  return MakeAbstractShapeValue(dtype, {n}, std::move(value));
}

// ----- Gradient rules ----------------------------------------------------------------------
// The data input of each differentiable op here enters linearly, so each rule is
// the adjoint; the shape-like operands are integers and get nothing.

// Forward: y = dynamic_reshape(x, shape).  Backward: dx = reshape_like(dy, x).
absl::Status BpropDynamicReshape(BpropContext& c) {
  c.SetGrad(0, c.ReshapeLike(c.Dout(), c.I(0)));
  return absl::OkStatus();
}

// Forward: y = dynamic_broadcast_to(x, shape), x repeated along the broadcast dims.
// Backward: dx = sum_to(dy, x.shape) (sum_to_like(dy, x) when x's dims are not
// static), the sum over the repeats.
absl::Status BpropDynamicBroadcastTo(BpropContext& c) {
  c.SetGrad(0, c.SumToInput(c.Dout(), 0));
  return absl::OkStatus();
}

// The slice operands of the forward application from input `first` on.
std::vector<AnfNode*> SliceOperandsOf(BpropContext& c, int first) {
  std::vector<AnfNode*> ops;
  for (int i = first; i < c.num_inputs(); ++i) ops.push_back(c.I(i));
  return ops;
}

// Forward: y = dynamic_slice(x, starts, ends, axes, steps), y = S x with S the
// 0/1 selection of the sliced positions.
// Backward: dx = S^T dy = dynamic_slice_grad(dy, x, starts, ends, axes, steps):
// zeros shaped like x with dy written at the sliced positions.
absl::Status BpropDynamicSlice(BpropContext& c) {
  std::vector<AnfNode*> args = {c.Dout(), c.I(0)};
  for (AnfNode* n : SliceOperandsOf(c, 1)) args.push_back(n);
  c.SetGrad(0, c.Op(PrimId::kDynamicSliceGrad, std::move(args)));
  return absl::OkStatus();
}

// Forward: y = dynamic_slice_grad(g, x_ref, starts, ends, axes, steps) = S^T g.
// Backward: dg = S dy = dynamic_slice(dy, starts, ends, axes, steps); x_ref only
// gives a shape and gets nothing. (The pair closes: grad-of-grad stays in it.)
absl::Status BpropDynamicSliceGrad(BpropContext& c) {
  std::vector<AnfNode*> args = {c.Dout()};
  for (AnfNode* n : SliceOperandsOf(c, 2)) args.push_back(n);
  c.SetGrad(0, c.Op(PrimId::kDynamicSlice, std::move(args)));
  return absl::OkStatus();
}

// Forward: y = dynamic_pad(x, pads){value}: on dim i, b_i = pads[i] elements
// before and e_i = pads[i + r] after (negative: cropped), so y_i = x_i + b_i + e_i
// and x's element k sits at k + b_i in y (when kept).
// Backward: dx = dynamic_pad(dy, neg(pads)){value 0}: padding with -b_i, -e_i
// takes back exactly the window x occupies in y, and where the forward cropped
// (b_i < 0) it pads those elements of x, which reached no output, with zero
// sensitivity. One op covers both signs (a dynamic_slice could not pad the
// cropped part back), the negation happens at run time, and the rule maps to
// itself (neg(neg(pads)) = pads), so grad-of-grad closes. `value` is a constant
// and gets nothing; neither do the integer pads.
absl::Status BpropDynamicPad(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kDynamicPad, {c.Dout(), c.Neg(c.I(1))}, {{"value", 0.0}}));
  return absl::OkStatus();
}

}  // namespace

// ----- Definitions -------------------------------------------------------------------------
void RegisterDynamicShapeOps(std::vector<PrimitiveDef>* defs) {
  defs->push_back(OpDef(PrimId::kShapeOf, 1, 1, InferShapeOf).ZeroGradient());
  defs->push_back(OpDef(PrimId::kSizeOf, 1, 1, InferSizeOf).ZeroGradient());
  defs->push_back(OpDef(PrimId::kDynamicReshape, 2, 2, InferDynamicReshape,
                        {BoolAttr("allowzero", false)})
                      .Bprop(BpropDynamicReshape)
                      .ZeroIfAny({0})
                      .Linear());
  defs->push_back(OpDef(PrimId::kDynamicBroadcastTo, 2, 2, InferDynamicBroadcastTo)
                      .Bprop(BpropDynamicBroadcastTo)
                      .ZeroIfAny({0})
                      .Linear());
  defs->push_back(OpDef(PrimId::kDynamicFill, 1, 1, InferDynamicFill,
                        {FloatAttr("value", 0.0), DTypeAttr("dtype", DType::kFloat32)})
                      .ZeroGradient());
  defs->push_back(OpDef(PrimId::kDynamicSlice, 3, 5, InferDynamicSlice)
                      .Bprop(BpropDynamicSlice)
                      .ZeroIfAny({0})
                      .Linear());
  defs->push_back(OpDef(PrimId::kDynamicSliceGrad, 4, 6, InferDynamicSliceGrad)
                      .Bprop(BpropDynamicSliceGrad)
                      .ZeroIfAny({0})
                      .Linear());
  // Affine in x for a non-zero value (zeros in give `value` out): no zero rule,
  // not marked linear.
  defs->push_back(
      OpDef(PrimId::kDynamicPad, 2, 2, InferDynamicPad, {FloatAttr("value", 0.0)})
          .Bprop(BpropDynamicPad));
  // Like torch.arange, a range has no gradient in its bounds (piecewise constant
  // length; the elements' dependence on start and delta is not differentiated).
  defs->push_back(OpDef(PrimId::kDynamicRange, 3, 3, InferDynamicRange).ZeroGradient());
}

}  // namespace ops
}  // namespace kgrad
