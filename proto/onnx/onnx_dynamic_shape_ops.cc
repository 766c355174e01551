// The run-time forms of ONNX's shape ops (see onnx_dynamic_shape_ops.h).
#include "proto/onnx/onnx_dynamic_shape_ops.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"

namespace kgrad {
namespace onnx_import {
absl::StatusOr<ImportedValue> IntVector(NodeContext& c, int i, const char* what) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue v, c.Input(i));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(v));
  if (!IsInteger(t->dtype()) || t->rank() != 1 || t->shape()[0] < 0) {
    return c.Error(absl::StrCat("input ", i, " (", what,
                                ") must be a 1-D integer tensor of static length, got ",
                                t->ToString()));
  }
  return v;
}

namespace {

// Input `i` as a one-element tensor (ONNX's scalars may be [] or [1]).
absl::StatusOr<ImportedValue> ScalarInput(NodeContext& c, int i, const char* what) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue v, c.Input(i));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(v));
  if (t->rank() == 0) return v;
  if (t->rank() == 1 && t->shape()[0] == 1) {
    return c.Emit(PrimId::kReshape, {v}, {{"shape", std::vector<int64_t>{}}});
  }
  return c.Error(absl::StrCat("input ", i, " (", what, ") must be a scalar, got ", t->ToString()));
}

Tensor Int64s(const std::vector<int64_t>& v) {
  return Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v);
}

// prod(shape_of(x)[begin:end]) as a 1-element i64 vector (1 for an empty range).
absl::StatusOr<ImportedValue> DimProduct(NodeContext& c, const ImportedValue& shape, int64_t begin,
                                         int64_t end) {
  if (begin == end) return c.Const(Int64s({1}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue part,
                         c.Emit(PrimId::kSlice, {shape},
                                {{"begin", std::vector<int64_t>{begin}},
                                 {"end", std::vector<int64_t>{end}},
                                 {"strides", std::vector<int64_t>{1}}}));
  return c.Emit(PrimId::kReduceProd, {part},
                {{"axes", std::vector<int64_t>{0}}, {"keepdims", true}});
}

}  // namespace

Outputs WithRunTimeInts(NodeContext& c, PrimId id, const char* what) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue v, IntVector(c, 1, what));
  return OneOutput(c.Emit(id, {x, v}));
}

bool IsConstantInput(const NodeContext& c, int i) {
  if (!c.HasInput(i)) return true;
  absl::StatusOr<ImportedValue> v = c.Input(i);
  return v.ok() && v->constant.has_value();
}

Outputs DynamicShape(NodeContext& c, const ImportedValue& x, int64_t start, int64_t end) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue shape, c.Emit(PrimId::kShapeOf, {x}));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  if (start == 0 && end == t->rank()) return std::vector<ImportedValue>{shape};
  return OneOutput(c.Emit(PrimId::kSlice, {shape},
                          {{"begin", std::vector<int64_t>{start}},
                           {"end", std::vector<int64_t>{end}},
                           {"strides", std::vector<int64_t>{1}}}));
}

Outputs DynamicSize(NodeContext& c, const ImportedValue& x) {
  return OneOutput(c.Emit(PrimId::kSizeOf, {x}));
}

Outputs DynamicReshape(NodeContext& c, const ImportedValue& x, const ImportedValue& shape,
                       bool allowzero) {
  return OneOutput(c.Emit(PrimId::kDynamicReshape, {x, shape}, {{"allowzero", allowzero}}));
}

// [prod(dims[:axis]), prod(dims[axis:])] computed from shape_of(x) at run time.
Outputs DynamicFlatten(NodeContext& c, const ImportedValue& x, int64_t axis) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue shape, c.Emit(PrimId::kShapeOf, {x}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue outer, DimProduct(c, shape, 0, axis));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue inner, DimProduct(c, shape, axis, t->rank()));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue target,
                         c.Emit(PrimId::kConcat, {outer, inner}, {{"axis", int64_t{0}}}));
  return DynamicReshape(c, x, target, /*allowzero=*/true);
}

Outputs DynamicExpand(NodeContext& c) {
  return WithRunTimeInts(c, PrimId::kDynamicBroadcastTo, "shape");
}

// Omitted axes (with steps given) are 0..n-1 for the n starts.
Outputs DynamicSlice(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue starts, IntVector(c, 1, "starts"));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue ends, IntVector(c, 2, "ends"));
  std::vector<ImportedValue> args = {x, starts, ends};
  if (c.HasInput(3)) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue axes, IntVector(c, 3, "axes"));
    args.push_back(axes);
  } else if (c.HasInput(4)) {
    std::vector<int64_t> axes(AsTensor(starts.type)->shape()[0]);
    for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
    args.push_back(c.Const(Int64s(axes)));
  }
  if (c.HasInput(4)) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue steps, IntVector(c, 4, "steps"));
    args.push_back(steps);
  }
  return OneOutput(c.Emit(PrimId::kDynamicSlice, args));
}

Outputs DynamicConstantOfShape(NodeContext& c, DType dtype, double value) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue shape, IntVector(c, 0, "shape"));
  return OneOutput(c.Emit(PrimId::kDynamicFill, {shape}, {{"value", value}, {"dtype", dtype}}));
}

namespace {

// Edge, reflect and wrap padding with pads known at run time: along every dim i,
// a gather of the positions k in [-b_i, d_i + e_i) mapped into [0, d_i) as the
// static form's PadSource maps them (edge: clamp; wrap: k mod d; reflect: r = k
// mod 2(d - 1), then r < d ? r : 2(d - 1) - r). Negative pads crop (k starts
// inside). Reflect pads must be < d, as the static form checks at import: a
// position k outside [1 - d, 2(d - 1)] reads index d, which gather refuses.
Outputs PadByGathers(NodeContext& c, const std::string& mode, ImportedValue x,
                     const ImportedValue& pads) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  const int rank = t->rank();
  if (AsTensor(pads.type)->shape()[0] != 2 * rank) {
    return c.Error(absl::StrCat("pads must have ", 2 * rank, " entries for ", t->ToString()));
  }
  auto op = [&](PrimId id, std::vector<ImportedValue> args) { return c.Emit(id, args); };
  auto at = [&](const ImportedValue& v, int64_t i) {
    return c.Emit(PrimId::kGather, {v, c.Const(Tensor::FromScalar<int64_t>(i))}, {{"axis", int64_t{0}}});
  };
  auto i64 = [&](int64_t v) { return c.Const(Tensor::FromScalar<int64_t>(v)); };
  KGRAD_ASSIGN_OR_RETURN(ImportedValue shape, c.Emit(PrimId::kShapeOf, {x}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue wide, c.Emit(PrimId::kCast, {pads}, {{"dtype", DType::kInt64}}));
  for (int i = 0; i < rank; ++i) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue d, at(shape, i));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue b, at(wide, i));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue e, at(wide, rank + i));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue start, op(PrimId::kNeg, {b}));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue limit, op(PrimId::kAdd, {d, e}));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue k, op(PrimId::kDynamicRange, {start, limit, i64(1)}));
    ImportedValue src;
    if (mode == "edge") {
      KGRAD_ASSIGN_OR_RETURN(ImportedValue last, op(PrimId::kSub, {d, i64(1)}));
      KGRAD_ASSIGN_OR_RETURN(src, op(PrimId::kMaximum, {k, i64(0)}));
      KGRAD_ASSIGN_OR_RETURN(src, op(PrimId::kMinimum, {src, last}));
    } else if (mode == "wrap") {
      KGRAD_ASSIGN_OR_RETURN(src, op(PrimId::kMod, {k, d}));
    } else {  // reflect
      KGRAD_ASSIGN_OR_RETURN(ImportedValue last, op(PrimId::kSub, {d, i64(1)}));
      KGRAD_ASSIGN_OR_RETURN(ImportedValue period, op(PrimId::kAdd, {last, last}));
      KGRAD_ASSIGN_OR_RETURN(ImportedValue lo, op(PrimId::kNeg, {last}));
      KGRAD_ASSIGN_OR_RETURN(ImportedValue above, op(PrimId::kGreaterEqual, {k, lo}));
      KGRAD_ASSIGN_OR_RETURN(ImportedValue below, op(PrimId::kLessEqual, {k, period}));
      KGRAD_ASSIGN_OR_RETURN(ImportedValue valid, op(PrimId::kLogicalAnd, {above, below}));
      KGRAD_ASSIGN_OR_RETURN(period, op(PrimId::kMaximum, {period, i64(1)}));  // d = 1: all 0
      KGRAD_ASSIGN_OR_RETURN(ImportedValue r, op(PrimId::kMod, {k, period}));
      KGRAD_ASSIGN_OR_RETURN(ImportedValue back, op(PrimId::kSub, {period, r}));
      KGRAD_ASSIGN_OR_RETURN(ImportedValue inside, op(PrimId::kLess, {r, d}));
      KGRAD_ASSIGN_OR_RETURN(src, op(PrimId::kSelect, {inside, r, back}));
      KGRAD_ASSIGN_OR_RETURN(src, op(PrimId::kSelect, {valid, src, d}));
    }
    KGRAD_ASSIGN_OR_RETURN(x, c.Emit(PrimId::kGather, {x, src}, {{"axis", int64_t{i}}}));
  }
  return std::vector<ImportedValue>{x};
}

}  // namespace

// A constant_value computed at run time pads with zeros and adds the value where
// the zero-padded ones are not (exact; its gradient is the sum over the padding):
//   y = dynamic_pad(x, pads) + v * (1 - dynamic_pad(ones_like(x), pads)).
Outputs DynamicPad(NodeContext& c, const std::string& mode) {
  if (c.HasInput(3)) return c.Error("pads or a value computed at run time with an axes input are not supported");
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue pads, IntVector(c, 1, "pads"));
  if (mode != "constant") return PadByGathers(c, mode, x, pads);
  if (!c.HasInput(2) || IsConstantInput(c, 2)) {
    double value = 0;
    if (c.HasInput(2)) {
      KGRAD_ASSIGN_OR_RETURN(Tensor v, c.ConstInput(2));
      if (v.NumElements() != 1) return c.Error("constant_value must hold one element");
      value = v.ElementAsDouble(0);
    }
    return OneOutput(c.Emit(PrimId::kDynamicPad, {x, pads}, {{"value", value}}));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue v, ScalarInput(c, 2, "constant_value"));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue padded, c.Emit(PrimId::kDynamicPad, {x, pads}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue ones, c.Emit(PrimId::kOnesLike, {x}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue inside, c.Emit(PrimId::kDynamicPad, {ones, pads}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue one, c.ScalarLike(x, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue outside, c.Emit(PrimId::kSub, {one, inside}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue fill, c.Emit(PrimId::kMul, {v, outside}));
  return OneOutput(c.Emit(PrimId::kAdd, {padded, fill}));
}

Outputs DynamicRange(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue start, ScalarInput(c, 0, "start"));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue limit, ScalarInput(c, 1, "limit"));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue delta, ScalarInput(c, 2, "delta"));
  return OneOutput(c.Emit(PrimId::kDynamicRange, {start, limit, delta}));
}

Outputs DynamicUnsqueeze(NodeContext& c) {
  return WithRunTimeInts(c, PrimId::kDynamicUnsqueeze, "axes");
}

Outputs DynamicSqueeze(NodeContext& c) {
  return WithRunTimeInts(c, PrimId::kDynamicSqueeze, "axes");
}

// The mean divides by the count n / m (n = size_of(x), m = size_of(sum), at
// least 1 so that an empty output divides nothing by 0): exact, as the sizes are
// integers; an empty reduced axis gives 0 / 0 = NaN, as reduce_mean.
absl::StatusOr<ImportedValue> DynamicReduceSum(NodeContext& c, const ImportedValue& x,
                                               bool keepdims, bool noop, bool mean) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue axes, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  if (mean && !IsFloating(t->dtype())) {
    return c.Error(absl::StrCat("the mean of ", t->ToString(), " over axes computed at run time ",
                                "needs a floating input"));
  }
  KGRAD_ASSIGN_OR_RETURN(
      ImportedValue sum,
      c.Emit(PrimId::kDynamicReduceSum, {x, axes},
             {{"keepdims", keepdims}, {"noop_with_empty_axes", noop}}));
  if (!mean) return sum;
  KGRAD_ASSIGN_OR_RETURN(ImportedValue n, c.Emit(PrimId::kSizeOf, {x}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue m, c.Emit(PrimId::kSizeOf, {sum}));
  KGRAD_ASSIGN_OR_RETURN(m, c.Emit(PrimId::kMaximum, {m, c.Const(Tensor::FromScalar<int64_t>(1))}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue count, c.Emit(PrimId::kDiv, {n, m}));
  KGRAD_ASSIGN_OR_RETURN(count, c.Emit(PrimId::kCast, {count}, {{"dtype", t->dtype()}}));
  return c.Emit(PrimId::kDiv, {sum, count});
}

}  // namespace onnx_import
}  // namespace kgrad
