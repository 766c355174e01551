// ONNX op mappings: constants, shapes and data movement. Shape arguments known at
// import time (constants, or Shape chains folded on static dims) become
// attributes; those computed at run time go to the run-time forms of
// onnx_dynamic_shape_ops.cc.
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"
#include "proto/onnx/onnx_dynamic_shape_ops.h"
#include "proto/onnx/onnx_tensor.h"

namespace kgrad {
namespace onnx_import {
namespace {

absl::StatusOr<const AbstractTensor*> StaticShape(NodeContext& c, const ImportedValue& v) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(v));
  if (!t->shape_known()) return c.Error(absl::StrCat("needs a static input shape, got ", t->ToString()));
  return t;
}

Tensor Int64s(const std::vector<int64_t>& v) {
  return Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v);
}

// x[..., idx[k], ...] along `axis`: the exact lowering of every op below that reads
// a fixed pattern of positions along a static axis (negative-step slices, edge,
// reflect and wrap padding, tiling). gather's adjoint scatters the cotangent back,
// adding where a position is read more than once.
absl::StatusOr<ImportedValue> GatherAlong(NodeContext& c, const ImportedValue& x, int axis,
                                          const std::vector<int64_t>& idx) {
  return c.Emit(PrimId::kGather, {x, c.Const(Int64s(idx))}, {{"axis", int64_t{axis}}});
}

// Constant{value | value_float | value_floats | value_int | value_ints}.
Outputs Constant(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(0, 0));
  if (c.node().attribute_size() != 1) return c.Error("needs exactly one value attribute");
  const onnx::AttributeProto& a = c.node().attribute(0);
  if (a.name() == "value" && a.type() == onnx::AttributeProto::TENSOR) {
    absl::StatusOr<Tensor> t = TensorFromOnnx(a.t(), c.importer().options().limits);
    if (!t.ok()) return c.Error(t.status().message());
    return std::vector<ImportedValue>{c.Const(*std::move(t))};
  }
  if (a.name() == "value_float" && a.type() == onnx::AttributeProto::FLOAT) {
    return std::vector<ImportedValue>{c.Const(Tensor::FromScalar<float>(a.f()))};
  }
  if (a.name() == "value_int" && a.type() == onnx::AttributeProto::INT) {
    return std::vector<ImportedValue>{c.Const(Tensor::FromScalar<int64_t>(a.i()))};
  }
  if (a.name() == "value_floats" && a.type() == onnx::AttributeProto::FLOATS) {
    std::vector<float> v(a.floats().begin(), a.floats().end());
    return std::vector<ImportedValue>{c.Const(Tensor::FromVector<float>({static_cast<int64_t>(v.size())}, v))};
  }
  if (a.name() == "value_ints" && a.type() == onnx::AttributeProto::INTS) {
    return std::vector<ImportedValue>{c.Const(Int64s({a.ints().begin(), a.ints().end()}))};
  }
  return c.Error(absl::StrCat("attribute '", a.name(), "' is not supported (value, value_float(s), value_int(s) are)"));
}

// ConstantOfShape(shape){value: one-element tensor, default float 0}.
Outputs ConstantOfShape(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  DType dtype = DType::kFloat32;
  double value = 0;
  if (const onnx::AttributeProto* a = c.Attr("value")) {
    if (a->type() != onnx::AttributeProto::TENSOR) return c.Error("attribute 'value' must be a tensor");
    absl::StatusOr<Tensor> t = TensorFromOnnx(a->t(), c.importer().options().limits);
    if (!t.ok()) return c.Error(t.status().message());
    if (t->NumElements() != 1) return c.Error("attribute 'value' must hold one element");
    dtype = t->dtype();
    value = t->ElementAsDouble(0);
  }
  if (!IsConstantInput(c, 0)) return DynamicConstantOfShape(c, dtype, value);
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> shape, c.ConstInts(0));
  return OneOutput(c.Emit(PrimId::kFill, {}, {{"shape", shape}, {"value", value}, {"dtype", dtype}}));
}

// Shape(x){start, end}: the static dims of x as an int64 constant, else shape_of.
Outputs ShapeOp(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  int64_t rank = t->rank();
  KGRAD_ASSIGN_OR_RETURN(int64_t start, c.Int("start", 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t end, c.Int("end", rank));
  auto clamp = [rank](int64_t i) { return std::clamp(i < 0 ? i + rank : i, int64_t{0}, rank); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  if (!t->shape_known()) return DynamicShape(c, x, start, end);
  return std::vector<ImportedValue>{
      c.Const(Int64s(std::vector<int64_t>(t->shape().begin() + start, t->shape().begin() + end)))};
}

Outputs Size(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  if (!t->shape_known()) return DynamicSize(c, x);
  return std::vector<ImportedValue>{c.Const(Tensor::FromScalar<int64_t>(NumElementsOf(t->shape())))};
}

// Reshape(x, shape){allowzero=0}: a 0 copies x's dim (unless allowzero), one -1 is
// inferred. A target computed at run time, or one that copies two dims that are
// not static, is read at run time (dynamic_reshape).
Outputs Reshape(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(int64_t allowzero, c.Int("allowzero", 0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue target, c.Input(1));
  if (!target.constant.has_value()) return DynamicReshape(c, x, target, allowzero != 0);
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> shape, c.ConstInts(1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  if (shape.size() > static_cast<size_t>(kMaxRank)) return c.Error("target rank too large");
  bool has_minus = std::count(shape.begin(), shape.end(), int64_t{-1}) > 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && allowzero == 0) {
      if (static_cast<int>(i) >= t->rank()) return c.Error("a 0 in the shape names a missing input dim");
      shape[i] = t->shape()[i];
      if (shape[i] >= 0) continue;
      // A copied symbolic dim becomes the -1 (reshape solves it by cancelling
      // symbols); a second one needs the shape at run time.
      if (has_minus) return DynamicReshape(c, x, target, allowzero != 0);
      shape[i] = -1;
      has_minus = true;
    } else if (shape[i] < -1) {
      return c.Error(absl::StrCat("bad target dim ", shape[i]));
    }
  }
  return OneOutput(c.Emit(PrimId::kReshape, {x}, {{"shape", shape}}));
}

// Flatten(x){axis=1} = reshape to [prod(dims[:axis]), prod(dims[axis:])]; one side
// may hold symbolic dims (it becomes the -1: [batch,512,1,1] -> [-1,512], which
// reshape infers as [batch,512]); with both sides not static, the products are
// taken at run time.
Outputs Flatten(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", 1));
  if (axis < 0) axis += t->rank();
  if (axis < 0 || axis > t->rank()) return c.Error(absl::StrCat("axis out of range for ", t->ToString()));
  absl::Span<const int64_t> dims = t->shape();
  const bool outer_known = IsFullyKnown(dims.subspan(0, axis));
  const bool inner_known = IsFullyKnown(dims.subspan(axis));
  if (!outer_known && !inner_known) return DynamicFlatten(c, x, axis);
  const int64_t outer = outer_known ? NumElementsOf(dims.subspan(0, axis)) : -1;
  const int64_t inner = inner_known ? NumElementsOf(dims.subspan(axis)) : -1;
  return OneOutput(c.Emit(PrimId::kReshape, {x}, {{"shape", std::vector<int64_t>{outer, inner}}}));
}

Outputs Transpose(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> perm, c.Ints("perm", {}));
  return OneOutput(c.Emit(PrimId::kTranspose, {x}, {{"perm", perm}}));
}

// Axes from input 1 (opset 13+) or the attribute (before).
absl::StatusOr<std::vector<int64_t>> AxesArg(NodeContext& c) {
  if (c.HasInput(1)) return c.ConstInts(1);
  return c.Ints("axes", {});
}

// Unsqueeze(x, axes): expand_dims at each axis of the output, in increasing order
// (dynamic_unsqueeze when the axes are computed at run time).
Outputs Unsqueeze(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 2));
  if (!IsConstantInput(c, 1)) return DynamicUnsqueeze(c);
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesArg(c));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  int64_t out_rank = t->rank() + static_cast<int64_t>(axes.size());
  for (int64_t& a : axes) {
    if (a < 0) a += out_rank;
    if (a < 0 || a >= out_rank) return c.Error(absl::StrCat("axis out of range for output rank ", out_rank));
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return c.Error("repeated axis");
  for (int64_t a : axes) {
    KGRAD_ASSIGN_OR_RETURN(x, c.Emit(PrimId::kExpandDims, {x}, {{"axis", a}}));
  }
  return std::vector<ImportedValue>{x};
}

// Squeeze(x, axes): squeeze (dynamic_squeeze when the axes are computed at run time).
Outputs Squeeze(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 2));
  if (!IsConstantInput(c, 1)) return DynamicSqueeze(c);
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesArg(c));
  return OneOutput(c.Emit(PrimId::kSqueeze, {x}, {{"axes", axes}}));
}

Outputs Concat(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1024));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", 0));
  std::vector<ImportedValue> xs;
  for (int i = 0; i < c.num_inputs(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(i));
    xs.push_back(x);
  }
  return OneOutput(c.Emit(PrimId::kConcat, xs, {{"axis", axis}}));
}

// Split(x[, split]){axis, split (before opset 13), num_outputs (18)}: equal parts
// for each output when no sizes are given.
Outputs Split(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", 0));
  std::vector<int64_t> sizes;
  if (c.HasInput(1)) {
    if (!IsConstantInput(c, 1)) return DynamicSplit(c);
    KGRAD_ASSIGN_OR_RETURN(sizes, c.ConstInts(1));
  } else {
    KGRAD_ASSIGN_OR_RETURN(sizes, c.Ints("split", {}));
  }
  int n = c.node().output_size();
  if (n < 1) return c.Error("has no outputs");
  if (sizes.empty()) {
    KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
    absl::StatusOr<int> a = NormalizeAxis(axis, t->rank());
    if (!a.ok()) return c.Error(a.status().message());
    int64_t dim = t->shape()[*a];
    if (dim < 0) return DynamicEqualSplit(c, x, *a, n);
    int64_t part = (dim + n - 1) / n;  // the last part may be smaller (opset 18)
    for (int i = 0; i < n; ++i) sizes.push_back(std::min(part, dim - part * i));
    if (sizes.back() <= 0) return c.Error(absl::StrCat("cannot split ", dim, " into ", n, " parts"));
  }
  if (static_cast<int>(sizes.size()) != n) {
    return c.Error(absl::StrCat(sizes.size(), " split sizes for ", n, " outputs"));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue parts, c.Emit(PrimId::kSplit, {x}, {{"axis", axis}, {"sizes", sizes}}));
  std::vector<ImportedValue> outs;
  for (int i = 0; i < n; ++i) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue p, c.Item(parts, i));
    outs.push_back(p);
  }
  return outs;
}

// Whether every entry of an integer constant is >= 0 (nothing to wrap).
bool NonNegative(const Tensor& t) {
  for (int64_t k = 0; k < t.NumElements(); ++k) {
    if (t.ElementAsDouble(k) < 0) return false;
  }
  return true;
}

// Dim `axis` of x as a scalar of idx's dtype: a constant when x's type knows it
// (`dim` >= 0), else shape_of(x)[axis] at run time.
absl::StatusOr<ImportedValue> RunTimeDim(NodeContext& c, const ImportedValue& x, int axis,
                                         const ImportedValue& idx, int64_t dim) {
  if (dim >= 0) return c.ScalarLike(idx, static_cast<double>(dim));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue shape, c.Emit(PrimId::kShapeOf, {x}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue d, c.Emit(PrimId::kGather, {shape, c.Const(Tensor::FromScalar<int64_t>(axis))},
                                                 {{"axis", int64_t{0}}}));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ti, c.TensorType(idx));
  if (ti->dtype() == DType::kInt64) return d;
  return c.Emit(PrimId::kCast, {d}, {{"dtype", ti->dtype()}});
}

// Gather(x, indices){axis}: negative indices count from the end (fixed at import
// for constant indices of a known dim, by a select at run time otherwise, against
// the run-time dim where x's type leaves it unknown).
Outputs Gather(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue idx, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  absl::StatusOr<int> a = NormalizeAxis(axis, t->rank());
  if (!a.ok()) return c.Error(a.status().message());
  int64_t dim = t->shape()[*a];
  if (idx.constant.has_value() && dim >= 0 &&
      (idx.constant->dtype() == DType::kInt64 || idx.constant->dtype() == DType::kInt32)) {
    Tensor fixed = Tensor::Create(DType::kInt64, idx.constant->shape()).value();
    for (int64_t k = 0; k < fixed.NumElements(); ++k) {
      int64_t i = static_cast<int64_t>(idx.constant->ElementAsDouble(k));
      if (i < -dim || i >= dim) return c.Error(absl::StrCat("index ", i, " out of range for dim ", dim));
      fixed.mutable_data<int64_t>()[k] = i < 0 ? i + dim : i;
    }
    idx = c.Const(std::move(fixed));
  } else if (!idx.constant.has_value() || !NonNegative(*idx.constant)) {
    // idx + dim where idx < 0, computed at run time; dim too when x's type leaves
    // it unknown (out[:, -1] on a symbolic sequence axis).
    KGRAD_ASSIGN_OR_RETURN(ImportedValue n, RunTimeDim(c, x, *a, idx, dim));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue zero, c.ScalarLike(idx, 0));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue neg, c.Emit(PrimId::kLess, {idx, zero}));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue wrapped, c.Emit(PrimId::kAdd, {idx, n}));
    KGRAD_ASSIGN_OR_RETURN(idx, c.Emit(PrimId::kSelect, {neg, wrapped, idx}));
  }
  return OneOutput(c.Emit(PrimId::kGather, {x, idx}, {{"axis", axis}}));
}

// Expand(x, shape) = broadcast_to(x){broadcast(x.shape, shape)} (bidirectional).
Outputs Expand(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  if (!IsConstantInput(c, 1)) return DynamicExpand(c);
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> shape, c.ConstInts(1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  if (shape.size() > static_cast<size_t>(kMaxRank)) return c.Error("target rank too large");
  absl::StatusOr<Shape> out = BroadcastShapes(t->shape(), shape);
  if (!out.ok()) return c.Error(out.status().message());
  if (*out == t->shape()) return std::vector<ImportedValue>{x};
  if (!IsFullyKnown(*out)) return DynamicExpand(c);  // x's dims not static meet dims > 1
  return OneOutput(c.Emit(PrimId::kBroadcastTo, {x}, {{"shape", std::vector<int64_t>(out->begin(), out->end())}}));
}

// The positions a negative-step slice reads along a dim of length `dim`, NumPy's
// rules: start and end count from the end when negative and are clamped to
// [-1, dim - 1]; positions start, start + step, ... while > end.
std::vector<int64_t> ReversedPositions(int64_t start, int64_t end, int64_t step, int64_t dim) {
  auto clamp = [dim](int64_t v) {
    if (v < 0) v = v < -dim ? -1 : v + dim;
    return std::min(v, dim - 1);
  };
  std::vector<int64_t> idx;
  for (int64_t i = clamp(start), e = clamp(end); i > e; i += step) idx.push_back(i);
  return idx;
}

// Slice(x, starts, ends[, axes, steps]) = slice(x){begin, end, strides} over the dims
// with positive steps (bounds clamped NumPy-style), then a gather of the positions
// each negative-step dim reads. A dim that is not static keeps the bounds as given
// (slice clamps them at run time the same way); a negative step there, or bounds
// computed at run time, make it a dynamic_slice.
Outputs Slice(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(3, 5));
  for (int i = 1; i <= 4; ++i) {
    if (!IsConstantInput(c, i)) return DynamicSlice(c);
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> starts, c.ConstInts(1));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> ends, c.ConstInts(2));
  std::vector<int64_t> axes, steps(starts.size(), 1);
  for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (c.HasInput(3)) {
    KGRAD_ASSIGN_OR_RETURN(axes, c.ConstInts(3));
  }
  if (c.HasInput(4)) {
    KGRAD_ASSIGN_OR_RETURN(steps, c.ConstInts(4));
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return c.Error("starts, ends, axes and steps must have equal lengths");
  }
  int rank = t->rank();
  std::vector<int64_t> begin(rank, 0), end(t->shape().begin(), t->shape().end()), stride(rank, 1);
  for (int64_t& e : end) {
    if (e < 0) e = std::numeric_limits<int64_t>::max();  // the whole dim
  }
  std::vector<std::pair<int, std::vector<int64_t>>> reversed;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    absl::StatusOr<int> a = NormalizeAxis(axes[i], rank);
    if (!a.ok()) return c.Error(a.status().message());
    if (seen[*a]) return c.Error(absl::StrCat("axis ", axes[i], " is repeated"));
    seen[*a] = true;
    if (steps[i] == 0) return c.Error("steps must be non-zero");
    int64_t dim = t->shape()[*a];
    if (dim < 0) {
      if (steps[i] < 0) return DynamicSlice(c);
      begin[*a] = starts[i];
      end[*a] = ends[i];
      stride[*a] = steps[i];
      continue;
    }
    if (steps[i] < 0) {
      reversed.emplace_back(*a, ReversedPositions(starts[i], ends[i], steps[i], dim));
      continue;
    }
    auto clamp = [dim](int64_t v) { return std::clamp(v < 0 ? v + dim : v, int64_t{0}, dim); };
    begin[*a] = clamp(starts[i]);
    end[*a] = std::max(clamp(ends[i]), begin[*a]);
    stride[*a] = steps[i];
  }
  KGRAD_ASSIGN_OR_RETURN(x, c.Emit(PrimId::kSlice, {x}, {{"begin", begin}, {"end", end}, {"strides", stride}}));
  for (const auto& [axis, idx] : reversed) {
    KGRAD_ASSIGN_OR_RETURN(x, GatherAlong(c, x, axis, idx));
  }
  return std::vector<ImportedValue>{x};
}

// The position that padding mode `mode` reads for cell k (in [-before, dim + after))
// of a dim of length `dim`: edge repeats the border, reflect mirrors without
// repeating it, wrap is periodic.
int64_t PadSource(const std::string& mode, int64_t k, int64_t dim) {
  if (mode == "edge") return std::clamp(k, int64_t{0}, dim - 1);
  if (mode == "wrap") return ((k % dim) + dim) % dim;
  if (dim == 1) return 0;
  int64_t period = 2 * (dim - 1), r = ((k % period) + period) % period;
  return r < dim ? r : period - r;
}

// The pads as [begins..., ends...] over every dim, from input 1 (opset 11+) or the
// attribute, scattered onto `axes` (input 3, opset 18).
absl::StatusOr<std::vector<int64_t>> ReadPads(NodeContext& c, int rank) {
  std::vector<int64_t> pads;
  if (c.HasInput(1)) {
    KGRAD_ASSIGN_OR_RETURN(pads, c.ConstInts(1));
  } else {
    KGRAD_ASSIGN_OR_RETURN(pads, c.Ints("pads", {}));
  }
  std::vector<int64_t> axes;
  for (int i = 0; i < rank; ++i) axes.push_back(i);
  if (c.HasInput(3)) {
    KGRAD_ASSIGN_OR_RETURN(axes, c.ConstInts(3));
  }
  const int n = static_cast<int>(axes.size());
  if (static_cast<int>(pads.size()) != 2 * n) {
    return c.Error(absl::StrCat(pads.size(), " pads for ", n, " axes (want ", 2 * n, ")"));
  }
  std::vector<int64_t> full(2 * rank, 0);
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<int> a = NormalizeAxis(axes[i], rank);
    if (!a.ok()) return c.Error(a.status().message());
    full[*a] = pads[i];
    full[*a + rank] = pads[i + n];
  }
  return full;
}

// Pad(x, pads[, constant_value, axes]){mode=constant|edge|reflect|wrap}; pads are
// [begins..., ends...], negative ones crop. Constant mode crops with slice and pads
// with pad; the other modes gather the positions PadSource names, per padded dim.
Outputs Pad(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 4));
  KGRAD_ASSIGN_OR_RETURN(std::string mode, c.String("mode", "constant"));
  if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap") {
    return c.Error(absl::StrCat("mode '", mode, "' is not one of constant, edge, reflect, wrap"));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  const int rank = t->rank();
  if (!IsConstantInput(c, 1) || (mode == "constant" && !IsConstantInput(c, 2))) {
    return DynamicPad(c, mode);
  }
  KGRAD_ASSIGN_OR_RETURN(double value, c.Float("value", 0));
  if (c.HasInput(2)) {
    KGRAD_ASSIGN_OR_RETURN(Tensor v, c.ConstInput(2));
    if (v.NumElements() != 1) return c.Error("constant_value must hold one element");
    value = v.ElementAsDouble(0);
  }
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ReadPads(c, rank));
  for (int i = 0; i < rank; ++i) {
    int64_t before = pads[i], after = pads[i + rank];
    if (before == 0 && after == 0) continue;
    if (mode == "constant" && before >= 0 && after >= 0) continue;
    KGRAD_ASSIGN_OR_RETURN(int64_t dim, c.StaticDim(x, i, "padded dim"));
    if (dim + before + after < 0 || (mode != "constant" && dim == 0)) {
      return c.Error(absl::StrCat("pads ", before, ", ", after, " do not fit dim ", i, " of ", t->ToString()));
    }
    if (mode == "reflect" && (before >= dim || after >= dim)) {
      return c.Error(absl::StrCat("reflect pads must be < the dim (", dim, "), got ", before, ", ", after));
    }
    std::vector<int64_t> idx;
    for (int64_t k = -before; k < dim + after; ++k) {
      idx.push_back(mode == "constant" ? k : PadSource(mode, k, dim));
    }
    if (mode == "constant") {  // crop only: keep the cells inside x
      idx.erase(std::remove_if(idx.begin(), idx.end(), [dim](int64_t k) { return k < 0 || k >= dim; }),
                idx.end());
      pads[i] = std::max<int64_t>(before, 0);
      pads[i + rank] = std::max<int64_t>(after, 0);
    } else {
      pads[i] = pads[i + rank] = 0;
    }
    KGRAD_ASSIGN_OR_RETURN(x, GatherAlong(c, x, i, idx));
  }
  std::vector<int64_t> interleaved;
  bool all_zero = true;
  for (int i = 0; i < rank; ++i) {
    interleaved.push_back(pads[i]);
    interleaved.push_back(pads[i + rank]);
    all_zero = all_zero && pads[i] == 0 && pads[i + rank] == 0;
  }
  if (all_zero) return std::vector<ImportedValue>{x};
  return OneOutput(c.Emit(PrimId::kPad, {x}, {{"pads", interleaved}, {"value", value}}));
}

// Tile(x, repeats): each dim with repeats r > 1 gathers [0..d) r times; repeats
// computed at run time, or > 1 on a dim that is not static: dynamic_tile.
Outputs Tile(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  if (!IsConstantInput(c, 1)) return DynamicTile(c);
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, c.ConstInts(1));
  if (static_cast<int>(repeats.size()) != t->rank()) {
    return c.Error(absl::StrCat(repeats.size(), " repeats for ", t->ToString()));
  }
  for (int i = 0; i < t->rank(); ++i) {
    if (repeats[i] != 1 && t->shape()[i] < 0) return DynamicTile(c);
  }
  for (int i = 0; i < t->rank(); ++i) {
    if (repeats[i] < 0) return c.Error(absl::StrCat("repeats must be >= 0, got ", repeats[i]));
    if (repeats[i] == 1) continue;
    KGRAD_ASSIGN_OR_RETURN(int64_t dim, c.StaticDim(x, i, "tiled dim"));
    if (dim * repeats[i] > c.importer().options().max_folded_elements) {
      return c.Error(absl::StrCat("tiling dim ", i, " (", dim, ") ", repeats[i], " times is too large"));
    }
    std::vector<int64_t> idx;
    for (int64_t r = 0; r < repeats[i]; ++r) {
      for (int64_t k = 0; k < dim; ++k) idx.push_back(k);
    }
    KGRAD_ASSIGN_OR_RETURN(x, GatherAlong(c, x, i, idx));
  }
  return std::vector<ImportedValue>{x};
}

// Trilu(x[, k]){upper=1}: x where column - row >= k (upper) or <= k (lower) over
// the last two dims, else 0: a select with a mask, constant for a constant k,
// else compared at run time from the constant column - row table.
Outputs Trilu(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(int64_t upper, c.Int("upper", 1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  if (t->rank() < 2) return c.Error(absl::StrCat("needs rank >= 2, got ", t->ToString()));
  KGRAD_ASSIGN_OR_RETURN(int64_t rows, c.StaticDim(x, -2, "row count"));
  KGRAD_ASSIGN_OR_RETURN(int64_t cols, c.StaticDim(x, -1, "column count"));
  if (rows * cols > c.importer().options().max_folded_elements) return c.Error("matrix too large");
  std::vector<int64_t> diff;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) diff.push_back(j - i);
  }
  ImportedValue k;
  if (c.HasInput(1)) {
    KGRAD_ASSIGN_OR_RETURN(k, c.Input(1));
    KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tk, c.TensorType(k));
    if (tk->dtype() != DType::kInt64 || (tk->shape_known() && NumElementsOf(tk->shape()) != 1)) {
      return c.Error(absl::StrCat("k must be a one-element i64 tensor, got ", tk->ToString()));
    }
    KGRAD_ASSIGN_OR_RETURN(k, c.Emit(PrimId::kReshape, {k}, {{"shape", std::vector<int64_t>{}}}));
  } else {
    k = c.Const(Tensor::FromScalar<int64_t>(0));
  }
  ImportedValue table = c.Const(Tensor::FromVector<int64_t>({rows, cols}, diff));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue mask,
                         c.Emit(upper != 0 ? PrimId::kGreaterEqual : PrimId::kLessEqual, {table, k}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue zero, c.ScalarLike(x, 0));
  return OneOutput(c.Emit(PrimId::kSelect, {mask, x, zero}));
}

// EyeLike(x){dtype, k=0}: ones where column - row == k over x's static 2-D shape.
Outputs EyeLike(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, StaticShape(c, x));
  if (t->rank() != 2) return c.Error(absl::StrCat("needs a 2-D input, got ", t->ToString()));
  KGRAD_ASSIGN_OR_RETURN(int64_t k, c.Int("k", 0));
  DType dtype = t->dtype();
  if (c.HasAttr("dtype")) {
    KGRAD_ASSIGN_OR_RETURN(int64_t code, c.Int("dtype", 0));
    absl::StatusOr<DType> d = DTypeFromOnnx(static_cast<int32_t>(code));
    if (!d.ok()) return c.Error(absl::StrCat("attribute 'dtype': ", d.status().message()));
    dtype = *d;
  }
  const int64_t rows = t->shape()[0], cols = t->shape()[1];
  if (rows * cols > c.importer().options().max_folded_elements) return c.Error("matrix too large");
  std::vector<double> eye(static_cast<size_t>(rows * cols), 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    if (i + k >= 0 && i + k < cols) eye[i * cols + i + k] = 1;
  }
  ImportedValue v = c.Const(Tensor::FromVector<double>({rows, cols}, eye));
  if (dtype == DType::kFloat64) return std::vector<ImportedValue>{v};
  return OneOutput(c.Emit(PrimId::kCast, {v}, {{"dtype", dtype}}));
}

// reshape -> transpose -> reshape, the form of DepthToSpace and SpaceToDepth.
absl::StatusOr<ImportedValue> Shuffle(NodeContext& c, const ImportedValue& x, std::vector<int64_t> split,
                                      std::vector<int64_t> perm, std::vector<int64_t> out) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Emit(PrimId::kReshape, {x}, {{"shape", split}}));
  KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kTranspose, {y}, {{"perm", perm}}));
  return c.Emit(PrimId::kReshape, {y}, {{"shape", out}});
}

// DepthToSpace(x){blocksize b, mode=DCR|CRD}: [N, C, H, W] -> [N, C/b^2, H*b, W*b];
// SpaceToDepth(x){blocksize b}: the inverse of DCR. N may be dynamic.
template <bool kToSpace>
Outputs BlockShuffle(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(int64_t b, c.Int("blocksize", 0));
  KGRAD_ASSIGN_OR_RETURN(std::string mode, c.String("mode", "DCR"));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  if (t->rank() != 4) return c.Error(absl::StrCat("needs [N, C, H, W], got ", t->ToString()));
  KGRAD_ASSIGN_OR_RETURN(int64_t ch, c.StaticDim(x, 1, "channel count"));
  KGRAD_ASSIGN_OR_RETURN(int64_t h, c.StaticDim(x, 2, "height"));
  KGRAD_ASSIGN_OR_RETURN(int64_t w, c.StaticDim(x, 3, "width"));
  if (b < 1 || (kToSpace && ch % (b * b) != 0) || (!kToSpace && (h % b != 0 || w % b != 0))) {
    return c.Error(absl::StrCat("blocksize ", b, " does not divide ", t->ToString()));
  }
  if (!kToSpace) {
    return OneOutput(Shuffle(c, x, {-1, ch, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4}, {-1, ch * b * b, h / b, w / b}));
  }
  const int64_t co = ch / (b * b);
  if (mode == "DCR") {
    return OneOutput(Shuffle(c, x, {-1, b, b, co, h, w}, {0, 3, 4, 1, 5, 2}, {-1, co, h * b, w * b}));
  }
  if (mode != "CRD") return c.Error(absl::StrCat("mode must be DCR or CRD, got '", mode, "'"));
  return OneOutput(Shuffle(c, x, {-1, co, b, b, h, w}, {0, 1, 4, 2, 5, 3}, {-1, co, h * b, w * b}));
}

// Range(start, limit, delta), all constants: max(ceil((limit - start) / delta), 0)
// values start + i * delta, in the inputs' dtype.
Outputs Range(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(3, 3));
  for (int i = 0; i < 3; ++i) {
    if (!IsConstantInput(c, i)) return DynamicRange(c);
  }
  double v[3];
  DType dtype = DType::kFloat32;
  for (int i = 0; i < 3; ++i) {
    KGRAD_ASSIGN_OR_RETURN(Tensor t, c.ConstInput(i));
    if (t.NumElements() != 1) return c.Error(absl::StrCat("input ", i, " must be a scalar"));
    if (i > 0 && t.dtype() != dtype) return c.Error("start, limit and delta must share a dtype");
    dtype = t.dtype();
    v[i] = t.ElementAsDouble(0);
  }
  if (v[2] == 0) return c.Error("delta must be non-zero");
  double n = std::max(std::ceil((v[1] - v[0]) / v[2]), 0.0);
  if (!(n <= static_cast<double>(c.importer().options().max_folded_elements))) {
    return c.Error(absl::StrCat("range of ", n, " elements is too large"));
  }
  std::vector<double> out(static_cast<size_t>(n));
  for (size_t i = 0; i < out.size(); ++i) out[i] = v[0] + static_cast<double>(i) * v[2];
  ImportedValue r = c.Const(Tensor::FromVector<double>({static_cast<int64_t>(out.size())}, out));
  if (dtype == DType::kFloat64) return std::vector<ImportedValue>{r};
  return OneOutput(c.Emit(PrimId::kCast, {r}, {{"dtype", dtype}}));
}

// OneHot(indices, depth, values){axis=-1} = one_hot(indices mod depth){depth,
// on_value, off_value, axis} in the values' dtype; indices in [-depth, depth)
// wrap, others give an all-off row (ONNX leaves them undefined). A depth or values
// computed at run time: dynamic_one_hot (a bool one selecting between the values).
Outputs OneHot(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(3, 3));
  if (!IsConstantInput(c, 1) || !IsConstantInput(c, 2)) return DynamicOneHot(c);
  KGRAD_ASSIGN_OR_RETURN(ImportedValue idx, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(Tensor depth_t, c.ConstInput(1));
  KGRAD_ASSIGN_OR_RETURN(Tensor values, c.ConstInput(2));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", -1));
  if (depth_t.NumElements() != 1) return c.Error("depth must hold one element");
  if (values.NumElements() != 2) return c.Error("values must be [off_value, on_value]");
  int64_t depth = static_cast<int64_t>(depth_t.ElementAsDouble(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ti, c.TensorType(idx));
  if (!IsInteger(ti->dtype())) {
    KGRAD_ASSIGN_OR_RETURN(idx, c.Emit(PrimId::kCast, {idx}, {{"dtype", DType::kInt64}}));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue zero, c.ScalarLike(idx, 0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue n, c.ScalarLike(idx, static_cast<double>(depth)));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue neg, c.Emit(PrimId::kLess, {idx, zero}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue wrapped, c.Emit(PrimId::kAdd, {idx, n}));
  KGRAD_ASSIGN_OR_RETURN(idx, c.Emit(PrimId::kSelect, {neg, wrapped, idx}));
  return OneOutput(c.Emit(PrimId::kOneHot, {idx},
                    {{"depth", depth}, {"axis", axis}, {"dtype", values.dtype()},
                     {"off_value", values.ElementAsDouble(0)}, {"on_value", values.ElementAsDouble(1)}}));
}

}  // namespace

void AddShapeOps(OpTable* t) {
  AddMappings(t, {{"Constant", Constant}, {"ConstantOfShape", ConstantOfShape}, {"Shape", ShapeOp},
                  {"Size", Size}, {"Reshape", Reshape}, {"Flatten", Flatten},
                  {"Transpose", Transpose}, {"Unsqueeze", Unsqueeze}, {"Squeeze", Squeeze},
                  {"Concat", Concat}, {"Split", Split}, {"Gather", Gather}, {"Expand", Expand},
                  {"Slice", Slice}, {"Pad", Pad}, {"Tile", Tile}, {"Trilu", Trilu},
                  {"EyeLike", EyeLike}, {"DepthToSpace", BlockShuffle<true>},
                  {"SpaceToDepth", BlockShuffle<false>}, {"Range", Range}, {"OneHot", OneHot}});
}

}  // namespace onnx_import
}  // namespace kgrad
