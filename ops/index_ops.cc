// Element-wise indexing and scans (declared in ops/index_ops.h): gather_elements,
// scatter_elements and cumsum, with ONNX's semantics (GatherElements,
// ScatterElements, CumSum). Their checks and shapes, shared by inference and the
// kernels, then inference, the gradient rules and the definitions.
#include "ops/index_ops.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/bprop_context.h"
#include "ops/op_def.h"
#include "ops/op_util.h"
#include "ops/shape_checks.h"

namespace kgrad {
namespace ops {
namespace {

bool DimsMatch(int64_t a, int64_t b) { return a == b || a < 0 || b < 0; }

absl::Status CheckIndexTensor(TensorType t, int i) {
  if (IsInteger(t.dtype)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("input ", i, " must be an i32 or i64 index tensor, got ", t.ToString()));
}

// indices (input 1) index `data` element by element along `axis`: the same rank
// and, on every other dim, no more than data's size (known dims only).
absl::Status CheckElementIndices(TensorType data, TensorType indices, int axis) {
  KGRAD_RETURN_IF_ERROR(CheckIndexTensor(indices, 1));
  bool ok = indices.rank() == data.rank();
  for (int d = 0; ok && d < data.rank(); ++d) {
    ok = d == axis || data.shape[d] < 0 || indices.shape[d] <= data.shape[d];
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "input 1 (indices) must have the rank of input 0 (", data.ToString(),
      ") and no dim larger than its dim but on axis ", axis, ", got ", indices.ToString()));
}

}  // namespace

// ----- The checks and formulas of ops/index_ops.h ---------------------------------------
absl::StatusOr<AxisShape> GatherElementsShape(const Primitive& p, TensorType data,
                                              TensorType indices) {
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(p, "axis", data));
  KGRAD_RETURN_IF_ERROR(CheckElementIndices(data, indices, axis));
  return AxisShape{axis, Shape(indices.shape.begin(), indices.shape.end())};
}

absl::StatusOr<ScatterReduction> ParseScatterReduction(const Primitive& p) {
  const std::string& r = p.GetString("reduction");
  if (r == "none") return ScatterReduction::kNone;
  if (r == "add") return ScatterReduction::kAdd;
  if (r == "mul") return ScatterReduction::kMul;
  if (r == "max") return ScatterReduction::kMax;
  if (r == "min") return ScatterReduction::kMin;
  return absl::InvalidArgumentError(absl::StrCat(p.name(), ": attribute 'reduction' must be ",
                                                 "none, add, mul, max or min, got '", r, "'"));
}

absl::StatusOr<ScatterElementsSpec> ParseScatterElements(const Primitive& p, TensorType data,
                                                         TensorType indices, TensorType updates) {
  KGRAD_ASSIGN_OR_RETURN(ScatterReduction reduction, ParseScatterReduction(p));
  if (reduction != ScatterReduction::kNone) {
    KGRAD_RETURN_IF_ERROR(CheckDType(0, data, kNumericTypes));
  }
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(p, "axis", data));
  KGRAD_RETURN_IF_ERROR(CheckElementIndices(data, indices, axis));
  bool ok = updates.dtype == data.dtype && updates.rank() == indices.rank();
  for (int d = 0; ok && d < indices.rank(); ++d) {
    ok = DimsMatch(updates.shape[d], indices.shape[d]);
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input 2 (updates) must have input 0's dtype and input 1's shape, got ", updates.ToString(),
        " for data ", data.ToString(), " and indices ", indices.ToString()));
  }
  return ScatterElementsSpec{axis, reduction, Shape(data.shape.begin(), data.shape.end())};
}

absl::StatusOr<CumSumSpec> ParseCumSum(const Primitive& p, TensorType x) {
  KGRAD_RETURN_IF_ERROR(CheckDType(0, x, kNumericTypes));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(p, "axis", x));
  return CumSumSpec{axis, p.GetBool("exclusive"), p.GetBool("reverse"),
                    Shape(x.shape.begin(), x.shape.end())};
}

absl::Status ElementIndexOutOfRange(int64_t index, int64_t position, int axis, TensorType data) {
  const int64_t dim = data.shape[axis];
  return absl::OutOfRangeError(absl::StrCat("index ", index, " (at position ", position,
                                            " of the indices) is out of range [", -dim, ", ", dim,
                                            ") for dim ", axis, " of ", data.ToString()));
}

namespace {

// ----- Inference -----------------------------------------------------------------------
// gather_elements(data, indices){axis}: out[i] = data[i with i[axis] replaced by
// indices[i]] (negative indices count from the end); out has indices' shape.
absl::StatusOr<AbstractPtr> InferGatherElements(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* data, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* indices, TensorArg(c, 1));
  KGRAD_ASSIGN_OR_RETURN(AxisShape s, GatherElementsShape(c.prim, *data, *indices));
  return MakeAbstractTensor(data->dtype(), std::move(s.out));
}

// scatter_elements(data, indices, updates){axis, reduction}: data with, for each
// position i of indices, out[i with i[axis] = indices[i]] = updates[i] (none) or
// combined with it by +, *, max or min, in the indices' row-major order.
absl::StatusOr<AbstractPtr> InferScatterElements(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* data, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* indices, TensorArg(c, 1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* updates, TensorArg(c, 2));
  KGRAD_ASSIGN_OR_RETURN(ScatterElementsSpec s,
                         ParseScatterElements(c.prim, *data, *indices, *updates));
  return MakeAbstractTensor(data->dtype(), std::move(s.out));
}

// cumsum(x){axis, exclusive, reverse}: out[.., k, ..] = sum of x[.., j, ..] over
// j <= k (j < k exclusive; j >= k, j > k reversed).
absl::StatusOr<AbstractPtr> InferCumSum(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(CumSumSpec s, ParseCumSum(c.prim, *x));
  return MakeAbstractTensor(x->dtype(), std::move(s.out));
}

// ----- Gradient rules ----------------------------------------------------------------------
AttrMap ScatterAttrs(int64_t axis, const char* reduction) {
  return {{"axis", axis}, {"reduction", std::string(reduction)}};
}

// Forward: y = gather_elements(data, indices){axis}.
// Backward: ddata = scatter_elements(zeros_like(data), indices, dy){axis, add}
// (repeated indices accumulate); indices get nothing.
absl::Status BpropGatherElements(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kScatterElements, {c.ZerosLike(c.I(0)), c.I(1), c.Dout()},
                    ScatterAttrs(c.prim().GetInt("axis"), "add")));
  return absl::OkStatus();
}

// Under reduction none, which updates reach y: with repeated indices only the
// last write (in the indices' row-major order) survives, as the kernel applies
// them. Each update gets its number 1, 2, ... (i64, row-major), the numbers are
// scattered like the updates, and an update survives where the number gathered
// back from its target is its own.
AnfNode* Survivors(BpropContext& c, int64_t axis) {
  AnfNode* ones = c.Cast(c.OnesLike(c.I(2)), DType::kInt64);
  AnfNode* flat = c.Op(PrimId::kReshape, {ones}, {{"shape", std::vector<int64_t>{-1}}});
  AnfNode* numbers = c.ReshapeLike(c.Op(PrimId::kCumSum, {flat}, {{"axis", int64_t{0}}}), c.I(2));
  AnfNode* board =
      c.Op(PrimId::kScatterElements, {c.Cast(c.ZerosLike(c.I(0)), DType::kInt64), c.I(1), numbers},
           ScatterAttrs(axis, "none"));
  AnfNode* back = c.Op(PrimId::kGatherElements, {board, c.I(1)}, {{"axis", axis}});
  return c.Op(PrimId::kEqual, {back, numbers});
}

// Forward: y = scatter_elements(data, indices, updates){axis, reduction}.
// Backward, reduction none: ddata = dy with the written positions zeroed,
//   scatter_elements(dy, indices, zeros_like(updates)){axis, none};
//   dupdates = gather_elements(dy, indices){axis} where the update survives
//   (Survivors: the last of repeated indices), 0 elsewhere.
// Backward, reduction add: ddata = dy, dupdates = gather_elements(dy, indices).
// mul, max and min have no rule here (their sensitivities depend on which
// updates tie or are zero): differentiating them is an error.
absl::Status BpropScatterElements(BpropContext& c) {
  const int64_t axis = c.prim().GetInt("axis");
  KGRAD_ASSIGN_OR_RETURN(ScatterReduction r, ParseScatterReduction(c.prim()));
  if (r != ScatterReduction::kNone && r != ScatterReduction::kAdd) {
    return c.Error(absl::StrCat("scatter_elements with reduction '",
                                c.prim().GetString("reduction"),
                                "' has no gradient rule (only none and add are differentiable)"));
  }
  AnfNode* dupdates = c.Op(PrimId::kGatherElements, {c.Dout(), c.I(1)}, {{"axis", axis}});
  if (r == ScatterReduction::kNone) {
    c.SetGrad(0, c.Op(PrimId::kScatterElements, {c.Dout(), c.I(1), c.ZerosLike(c.I(2))},
                      ScatterAttrs(axis, "none")));
    dupdates = c.Select(Survivors(c, axis), dupdates, c.ZerosLike(c.I(2)));
  } else {
    c.SetGrad(0, c.Dout());
  }
  c.SetGrad(2, dupdates);
  return absl::OkStatus();
}

// Forward: y = cumsum(x){axis, exclusive, reverse}, y_k = sum_{j in S(k)} x_j.
// Backward: dx_j = sum_{k : j in S(k)} dy_k, the same sum run the other way:
// dx = cumsum(dy){axis, exclusive, !reverse}.
absl::Status BpropCumSum(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kCumSum, {c.Dout()},
                    {{"axis", c.prim().GetInt("axis")},
                     {"exclusive", c.prim().GetBool("exclusive")},
                     {"reverse", !c.prim().GetBool("reverse")}}));
  return absl::OkStatus();
}

}  // namespace

// ----- Definitions -------------------------------------------------------------------------
void RegisterIndexOps(std::vector<PrimitiveDef>* defs) {
  const AttrSpec axis0 = IntAttr("axis", 0);
  defs->push_back(OpDef(PrimId::kGatherElements, 2, 2, InferGatherElements, {axis0})
                      .Bprop(BpropGatherElements)
                      .ZeroIfAny({0})
                      .Linear());
  // Zero data and zero updates give zeros under every reduction.
  defs->push_back(
      OpDef(PrimId::kScatterElements, 3, 3, InferScatterElements,
            {axis0, AttrSpec{"reduction", AttrType::kString, AttrValue(std::string("none"))}})
          .Bprop(BpropScatterElements)
          .ZeroIfAll({0, 2}));
  defs->push_back(OpDef(PrimId::kCumSum, 1, 1, InferCumSum,
                        {axis0, BoolAttr("exclusive", false), BoolAttr("reverse", false)})
                      .Bprop(BpropCumSum)
                      .ZeroIfAny({0})
                      .Linear());
}

}  // namespace ops
}  // namespace kgrad
