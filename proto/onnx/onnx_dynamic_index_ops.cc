// The run-time forms of ONNX's CumSum, OneHot, Split and Tile (see
// onnx_dynamic_shape_ops.h): used by their mappings (onnx_index_ops.cc,
// onnx_shape_ops.cc) when the axis, depth, split or repeats input is not known at
// import time. Each emits the primitive that reads that input as a tensor
// (ops/dynamic_index_ops.cc), which checks its values when the model runs.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_dynamic_shape_ops.h"

namespace kgrad {
namespace onnx_import {
namespace {

// Input `i` as a rank-0 i64 (ONNX's scalars may be [] or [1]; a float one is cast,
// truncating, as OneHot's spec says of its depth).
absl::StatusOr<ImportedValue> ScalarInt64(NodeContext& c, int i, const char* what) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue v, c.Input(i));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(v));
  if (t->dtype() == DType::kBool || (t->rank() != 0 && (t->rank() != 1 || t->shape()[0] != 1))) {
    return c.Error(absl::StrCat("input ", i, " (", what, ") must be a numeric scalar, got ",
                                t->ToString()));
  }
  if (t->rank() == 1) {
    KGRAD_ASSIGN_OR_RETURN(v, c.Emit(PrimId::kReshape, {v}, {{"shape", std::vector<int64_t>{}}}));
  }
  if (t->dtype() == DType::kInt64) return v;
  return c.Emit(PrimId::kCast, {v}, {{"dtype", DType::kInt64}});
}

// Element k of the 2-element `values` as a rank-0 tensor.
absl::StatusOr<ImportedValue> ValueAt(NodeContext& c, const ImportedValue& values, int64_t k) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue e, c.Emit(PrimId::kSlice, {values},
                                                 {{"begin", std::vector<int64_t>{k}},
                                                  {"end", std::vector<int64_t>{k + 1}},
                                                  {"strides", std::vector<int64_t>{1}}}));
  return c.Emit(PrimId::kReshape, {e}, {{"shape", std::vector<int64_t>{}}});
}

// values computed at run time: a bool dynamic_one_hot selects between them.
Outputs OneHotWithRunTimeValues(NodeContext& c, const ImportedValue& idx,
                                const ImportedValue& depth, int64_t axis) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue values, c.Input(2));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(values));
  if (t->rank() != 1 || t->shape()[0] != 2) {
    return c.Error(absl::StrCat("values must be [off_value, on_value], got ", t->ToString()));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue mask,
                         c.Emit(PrimId::kDynamicOneHot, {idx, depth},
                                {{"axis", axis}, {"dtype", DType::kBool}}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue off, ValueAt(c, values, 0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue on, ValueAt(c, values, 1));
  return OneOutput(c.Emit(PrimId::kSelect, {mask, on, off}));
}

}  // namespace

Outputs DynamicCumSum(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue axis, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(int64_t exclusive, c.Int("exclusive", 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t reverse, c.Int("reverse", 0));
  return OneOutput(c.Emit(PrimId::kDynamicCumSum, {x, axis},
                          {{"exclusive", exclusive != 0}, {"reverse", reverse != 0}}));
}

// Indices in [-depth, 0) wrap (depth added at run time), as the constant form.
Outputs DynamicOneHot(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue idx, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue depth, ScalarInt64(c, 1, "depth"));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", -1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ti, c.TensorType(idx));
  if (ti->dtype() != DType::kInt64) {
    KGRAD_ASSIGN_OR_RETURN(idx, c.Emit(PrimId::kCast, {idx}, {{"dtype", DType::kInt64}}));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue zero, c.ScalarLike(idx, 0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue neg, c.Emit(PrimId::kLess, {idx, zero}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue wrapped, c.Emit(PrimId::kAdd, {idx, depth}));
  KGRAD_ASSIGN_OR_RETURN(idx, c.Emit(PrimId::kSelect, {neg, wrapped, idx}));
  if (!IsConstantInput(c, 2)) return OneHotWithRunTimeValues(c, idx, depth, axis);
  KGRAD_ASSIGN_OR_RETURN(Tensor values, c.ConstInput(2));
  if (values.NumElements() != 2) return c.Error("values must be [off_value, on_value]");
  return OneOutput(c.Emit(PrimId::kDynamicOneHot, {idx, depth},
                          {{"axis", axis},
                           {"dtype", values.dtype()},
                           {"off_value", values.ElementAsDouble(0)},
                           {"on_value", values.ElementAsDouble(1)}}));
}

// The split input's length must be static: it is the number of outputs.
Outputs DynamicSplit(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue sizes, IntVector(c, 1, "split"));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", 0));
  return DynamicSplitWith(c, x, sizes, axis);
}

// n equal parts of a dim d known at run time, the last smaller when d is not a
// multiple (opset 18), as the static form computes them: part = ceil(d / n),
// size_i = min(part, d - part * i); a part that would be empty becomes -1, which
// dynamic_split refuses (the static form refuses it at import).
Outputs DynamicEqualSplit(NodeContext& c, const ImportedValue& x, int axis, int64_t n) {
  auto i64 = [&](int64_t v) { return c.Const(Tensor::FromScalar<int64_t>(v)); };
  std::vector<int64_t> index(n);
  for (int64_t i = 0; i < n; ++i) index[i] = i;
  KGRAD_ASSIGN_OR_RETURN(ImportedValue shape, c.Emit(PrimId::kShapeOf, {x}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue d, c.Emit(PrimId::kGather, {shape, i64(axis)}, {{"axis", int64_t{0}}}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue up, c.Emit(PrimId::kAdd, {d, i64(n - 1)}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue part, c.Emit(PrimId::kDiv, {up, i64(n)}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue used,
                         c.Emit(PrimId::kMul, {part, c.Const(Tensor::FromVector<int64_t>({n}, index))}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue left, c.Emit(PrimId::kSub, {d, used}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue sizes, c.Emit(PrimId::kMinimum, {part, left}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue positive, c.Emit(PrimId::kGreater, {sizes, i64(0)}));
  KGRAD_ASSIGN_OR_RETURN(sizes, c.Emit(PrimId::kSelect, {positive, sizes, i64(-1)}));
  return DynamicSplitWith(c, x, sizes, axis);
}

Outputs DynamicSplitWith(NodeContext& c, const ImportedValue& x, const ImportedValue& sizes,
                         int64_t axis) {
  const int64_t n = AsTensor(sizes.type)->shape()[0];
  if (n != c.node().output_size()) {
    return c.Error(absl::StrCat(n, " split sizes for ", c.node().output_size(), " outputs"));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue parts,
                         c.Emit(PrimId::kDynamicSplit, {x, sizes}, {{"axis", axis}}));
  std::vector<ImportedValue> outs;
  for (int64_t i = 0; i < n; ++i) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue p, c.Item(parts, static_cast<int>(i)));
    outs.push_back(p);
  }
  return outs;
}

Outputs DynamicTile(NodeContext& c) { return WithRunTimeInts(c, PrimId::kDynamicTile, "repeats"); }

}  // namespace onnx_import
}  // namespace kgrad
