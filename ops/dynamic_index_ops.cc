// Run-time counts and axes (declared in ops/dynamic_index_ops.h):
// cumsum, one_hot, split and ONNX Tile with the axis, depth, split sizes or
// repeats read from an integer tensor computed at run time (ONNX's CumSum,
// OneHot, Split and Tile when that input is not a constant). As for the run-time
// shapes (dynamic_shape_ops.cc), inference reads what it knows of that operand
// from its shape value, and one formula per op serves inference and the kernels:
// first those checks and formulas, then inference, the gradient rules and the
// definitions.
#include "ops/dynamic_index_ops.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/dim_symbol.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/bprop_context.h"
#include "ops/index_ops.h"
#include "ops/op_def.h"
#include "ops/op_util.h"
#include "ops/shape_checks.h"

namespace kgrad {
namespace ops {
// ----- The checks and formulas of ops/dynamic_index_ops.h ------------------------------
absl::StatusOr<CumSumSpec> DynamicCumSumSpec(const Primitive& p, TensorType x, int64_t axis) {
  KGRAD_RETURN_IF_ERROR(CheckDType(0, x, kNumericTypes));
  CumSumSpec s{0, p.GetBool("exclusive"), p.GetBool("reverse"),
               Shape(x.shape.begin(), x.shape.end())};
  if (!IsValueNumber(axis)) return s;
  absl::StatusOr<int> a = NormalizeAxis(axis, x.rank());
  if (!a.ok()) {
    return PrimError(p, absl::StrCat("input 1 (axis) ", axis, " is out of range for input 0, ",
                                 x.ToString(), " (an axis in [", -x.rank(), ", ", x.rank(), "))"));
  }
  s.axis = *a;
  return s;
}

absl::StatusOr<AxisShape> DynamicOneHotShape(const Primitive& p, TensorType indices,
                                             int64_t depth) {
  if (IsValueNumber(depth) && (depth < 1 || depth > kMaxElements)) {
    return PrimError(p, absl::StrCat("input 1 (depth) must be in [1, ", kMaxElements, "], got ",
                                 depth));
  }
  return OneHotShapeWithDepth(p, indices, ValueAsDim(depth));
}

absl::StatusOr<SplitShapes> DynamicSplitShape(const Primitive& p, TensorType x,
                                              absl::Span<const int64_t> sizes) {
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(p, "axis", x));
  if (sizes.empty()) return PrimError(p, "input 1 (sizes) must not be empty");
  int64_t total = 0;
  bool known = true;
  for (int64_t s : sizes) {
    if (IsValueNumber(s) && (s < 0 || s > kMaxElements)) {
      return PrimError(p, absl::StrCat("input 1 (sizes) has an entry outside [0, ", kMaxElements,
                                   "]: ", ValuesString(sizes)));
    }
    known &= IsValueNumber(s);
    if (IsValueNumber(s)) total += s;
  }
  const int64_t dim = x.shape[axis];
  if (known && dim >= 0 && total != dim) {
    return PrimError(p, absl::StrCat("input 1 (sizes) ", ValuesString(sizes), " sums to ", total,
                                 ", but must sum to dim ", axis, " of input 0, ", x.ToString(),
                                 ", ", dim));
  }
  SplitShapes out{axis, {}};
  for (int64_t s : sizes) {
    out.parts.emplace_back(x.shape.begin(), x.shape.end());
    // A single piece is the whole dim, its symbol included.
    out.parts.back()[axis] = sizes.size() == 1 && !IsValueNumber(s) ? dim : ValueAsDim(s);
  }
  return out;
}

absl::StatusOr<Shape> DynamicTileShape(const Primitive& p, TensorType x,
                                       absl::Span<const int64_t> repeats) {
  if (repeats.size() != static_cast<size_t>(x.rank())) {
    return PrimError(p, absl::StrCat("input 1 (repeats) must have one entry per dim of input 0, ",
                                 x.ToString(), ", got ", ValuesString(repeats)));
  }
  Shape out(x.shape.begin(), x.shape.end());
  for (int i = 0; i < x.rank(); ++i) {
    const int64_t r = repeats[i], d = x.shape[i];
    if (!IsValueNumber(r)) {
      if (d != 0) out[i] = kUnknownDim;
      continue;
    }
    if (r < 0 || r > kMaxElements) {
      return PrimError(p, absl::StrCat("input 1 (repeats) has an entry outside [0, ", kMaxElements,
                                   "]: ", ValuesString(repeats)));
    }
    if (d > 0 && r > 0 && d > kMaxElements / r) {
      return PrimError(p, absl::StrCat("tiling dim ", i, " of input 0, ", x.ToString(), ", ", r,
                                   " times gives more than ", kMaxElements, " elements"));
    }
    if (r != 1) out[i] = d >= 0 ? d * r : (r == 0 ? 0 : kUnknownDim);
  }
  if (IsFullyKnown(out)) {
    absl::StatusOr<int64_t> n = CheckedNumElements(out);
    if (!n.ok()) return PrimError(p, n.status().message());
  }
  return out;
}

absl::StatusOr<Shape> DynamicTileGradShape(const Primitive& p, TensorType dy, TensorType x,
                                           absl::Span<const int64_t> repeats) {
  KGRAD_RETURN_IF_ERROR(CheckDType(0, dy, kNumericTypes));
  KGRAD_ASSIGN_OR_RETURN(Shape tiled, DynamicTileShape(p, x, repeats));
  bool ok = dy.dtype == x.dtype && dy.rank() == x.rank();
  for (int d = 0; ok && d < dy.rank(); ++d) ok = UnifyDims(dy.shape[d], tiled[d]).has_value();
  if (!ok) {
    return PrimError(p, absl::StrCat("input 0 (dy) must have the dtype of input 1 and the tile's ",
                                 "shape ", ShapeToString(tiled), ", got ", dy.ToString()));
  }
  return Shape(x.shape.begin(), x.shape.end());
}

namespace {

// ----- Operands at inference ----------------------------------------------------------
// More entries than this in a sizes or repeats operand is an error (a split into
// that many pieces is not a model).
constexpr int64_t kMaxOperandLength = 1 << 16;

// The elements of rank-1 input i as inference knows them: its shape value, or
// kUnknownValue for each element; nullopt when its length is not static.
absl::StatusOr<std::optional<Shape>> VectorElements(const InferCall& c, int i, const char* what) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorArg(c, i));
  KGRAD_RETURN_IF_ERROR(CheckShapeOperand(c.prim, i, what, *t));
  if (t->value()) return t->value();
  const int64_t n = t->shape()[0];
  if (n < 0) return std::optional<Shape>();
  if (n > kMaxOperandLength) {
    return PrimError(c.prim, absl::StrCat("input ", i, " (", what, ") has ", n, " entries, more than ",
                                      kMaxOperandLength));
  }
  return std::optional<Shape>(Shape(n, kUnknownValue));
}

// ----- Inference -----------------------------------------------------------------------
// dynamic_cumsum(x, axis){exclusive, reverse}: cumsum along the run-time axis.
absl::StatusOr<AbstractPtr> InferDynamicCumSum(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, ScalarOperandElement(c, 1, "axis"));
  KGRAD_ASSIGN_OR_RETURN(CumSumSpec s, DynamicCumSumSpec(c.prim, *x, axis));
  return MakeAbstractTensor(x->dtype(), std::move(s.out));
}

// dynamic_one_hot(indices, depth){on_value, off_value, dtype, axis}: one_hot with a
// run-time depth; the new dim is depth's value when inference knows it.
absl::StatusOr<AbstractPtr> InferDynamicOneHot(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* indices, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t depth, ScalarOperandElement(c, 1, "depth"));
  KGRAD_ASSIGN_OR_RETURN(AxisShape s, DynamicOneHotShape(c.prim, *indices, depth));
  return MakeAbstractTensor(c.prim.GetDType("dtype"), std::move(s.out));
}

// dynamic_split(x, sizes){axis}: a tuple of len(sizes) consecutive pieces of x
// along axis; the number of pieces must be static.
absl::StatusOr<AbstractPtr> InferDynamicSplit(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(std::optional<Shape> sizes, VectorElements(c, 1, "sizes"));
  if (!sizes) {
    return PrimError(c.prim, absl::StrCat("the length of input 1 (sizes) gives the number of ",
                                      "outputs and must be known statically, got ",
                                      AbstractToString(c.args[1])));
  }
  KGRAD_ASSIGN_OR_RETURN(SplitShapes s, DynamicSplitShape(c.prim, *x, *sizes));
  std::vector<AbstractPtr> parts;
  for (Shape& part : s.parts) parts.push_back(MakeAbstractTensor(x->dtype(), std::move(part)));
  return MakeAbstractTuple(std::move(parts));
}

// The repeats (input i) as inference knows them; unknown for each dim of x when
// their length is not static. Built in place, not moved: moving a Shape (an
// InlinedVector) copies its whole inline buffer, the unset tail included, which
// GCC 12 reports as -Wmaybe-uninitialized (as in SqueezeShape).
absl::StatusOr<Shape> Repeats(const InferCall& c, int i, const AbstractTensor& x) {
  KGRAD_ASSIGN_OR_RETURN(std::optional<Shape> r, VectorElements(c, i, "repeats"));
  if (r) return absl::StatusOr<Shape>(absl::in_place, r->begin(), r->end());
  return absl::StatusOr<Shape>(absl::in_place, static_cast<size_t>(x.rank()), kUnknownValue);
}

// dynamic_tile(x, repeats): x repeated repeats[i] times along each dim i.
absl::StatusOr<AbstractPtr> InferDynamicTile(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(Shape repeats, Repeats(c, 1, *x));
  KGRAD_ASSIGN_OR_RETURN(Shape out, DynamicTileShape(c.prim, *x, repeats));
  return MakeAbstractTensor(x->dtype(), std::move(out));
}

// dynamic_tile_grad(dy, x, repeats): the sum of dy's tiles, shaped like x.
absl::StatusOr<AbstractPtr> InferDynamicTileGrad(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* dy, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 1));
  KGRAD_ASSIGN_OR_RETURN(Shape repeats, Repeats(c, 2, *x));
  KGRAD_ASSIGN_OR_RETURN(Shape out, DynamicTileGradShape(c.prim, *dy, *x, repeats));
  return MakeAbstractTensor(x->dtype(), std::move(out));
}

// ----- Gradient rules ----------------------------------------------------------------------
// Each op is linear in its data input, so each rule is the adjoint; the integer
// axis, sizes and repeats get nothing.

// Forward: y = dynamic_cumsum(x, axis){exclusive, reverse}, y_k = sum_{j in S(k)} x_j.
// Backward: dx_j = sum_{k : j in S(k)} dy_k, the same sum run the other way (as
// cumsum's rule): dx = dynamic_cumsum(dy, axis){exclusive, !reverse}.
absl::Status BpropDynamicCumSum(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kDynamicCumSum, {c.Dout(), c.I(1)},
                    {{"exclusive", c.prim().GetBool("exclusive")},
                     {"reverse", !c.prim().GetBool("reverse")}}));
  return absl::OkStatus();
}

// Forward: (y_0, ..., y_n) = dynamic_split(x, sizes){axis}.
// Backward: dx = concat(dy[0], ..., dy[n]){axis}, as split's rule (dy's unused
// elements are the zeros that the transform materialises for a tuple).
absl::Status BpropDynamicSplit(BpropContext& c) {
  absl::StatusOr<Shape> sizes = c.InShape(1);
  if (!sizes.ok()) return sizes.status();
  if (sizes->size() != 1 || (*sizes)[0] < 0) {
    return c.Error("the gradient rule needs the static length of input 1 (sizes)");
  }
  std::vector<AnfNode*> parts;
  for (int64_t i = 0; i < (*sizes)[0]; ++i) parts.push_back(c.GetItem(c.Dout(), i));
  c.SetGrad(0, c.Op(PrimId::kConcat, std::move(parts), {{"axis", c.prim().GetInt("axis")}}));
  return absl::OkStatus();
}

// Forward: y = dynamic_tile(x, repeats) = T x, T copying x into every tile.
// Backward: dx = T^T dy = dynamic_tile_grad(dy, x, repeats), the sum of dy's tiles.
absl::Status BpropDynamicTile(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kDynamicTileGrad, {c.Dout(), c.I(0), c.I(1)}));
  return absl::OkStatus();
}

// Forward: y = dynamic_tile_grad(g, x_ref, repeats) = T^T g.
// Backward: dg = T dy = dynamic_tile(dy, repeats); x_ref only gives a shape and
// gets nothing. (The pair closes: grad-of-grad stays in it.)
absl::Status BpropDynamicTileGrad(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kDynamicTile, {c.Dout(), c.I(2)}));
  return absl::OkStatus();
}

}  // namespace

// ----- Definitions -------------------------------------------------------------------------
void RegisterDynamicIndexOps(std::vector<PrimitiveDef>* defs) {
  defs->push_back(OpDef(PrimId::kDynamicCumSum, 2, 2, InferDynamicCumSum,
                        {BoolAttr("exclusive", false), BoolAttr("reverse", false)})
                      .Bprop(BpropDynamicCumSum)
                      .ZeroIfAny({0})
                      .Linear());
  defs->push_back(OpDef(PrimId::kDynamicOneHot, 2, 2, InferDynamicOneHot,
                        {FloatAttr("on_value", 1.0), FloatAttr("off_value", 0.0),
                         DTypeAttr("dtype", DType::kFloat32), IntAttr("axis", -1)})
                      .ZeroGradient());
  defs->push_back(OpDef(PrimId::kDynamicSplit, 2, 2, InferDynamicSplit, {IntAttr("axis", 0)})
                      .Bprop(BpropDynamicSplit)
                      .Linear());
  defs->push_back(OpDef(PrimId::kDynamicTile, 2, 2, InferDynamicTile)
                      .Bprop(BpropDynamicTile)
                      .ZeroIfAny({0})
                      .Linear());
  defs->push_back(OpDef(PrimId::kDynamicTileGrad, 3, 3, InferDynamicTileGrad)
                      .Bprop(BpropDynamicTileGrad)
                      .ZeroIfAny({0})
                      .Linear());
}

}  // namespace ops
}  // namespace kgrad
