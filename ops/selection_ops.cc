// Selection by value (declared in ops/selection_ops.h): topk and nonzero, with
// ONNX's semantics (TopK, NonZero). Which elements come out, and where, depends on
// the input's values: topk's output dim is its k operand (static when inference
// knows k's value, else unknown), nonzero's count is known only at run time. Their
// checks and shapes, shared by inference and the kernels, then inference, the
// gradient rule and the definitions.
#include "ops/selection_ops.h"

#include <cstdint>
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

namespace kgrad {
namespace ops {

// ----- The checks and formulas of ops/selection_ops.h ----------------------------------
absl::StatusOr<TopKSpec> TopKShape(const Primitive& p, TensorType x, int64_t k) {
  KGRAD_RETURN_IF_ERROR(CheckDType(0, x, kNumericTypes));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(p, "axis", x));
  const int64_t dim = x.shape[axis];
  if (IsValueNumber(k) && k < 0) {
    return PrimError(p, absl::StrCat("input 1 (k) must be >= 0, got ", k));
  }
  if (IsValueNumber(k) && dim >= 0 && k > dim) {
    return PrimError(p, absl::StrCat("input 1 (k) ", k, " is larger than dim ", axis,
                                     " of input 0, ", x.ToString(), ", ", dim));
  }
  TopKSpec s{axis, ValueAsDim(k), p.GetBool("largest"), Shape(x.shape.begin(), x.shape.end())};
  // Nothing to take from an empty axis, whatever k turns out to be.
  if (dim == 0) s.k = 0;
  s.out[axis] = s.k;
  return s;
}

Shape NonZeroShape(TensorType x, int64_t count) {
  return {x.rank(), count};
}

absl::StatusOr<UniqueSpec> UniqueShape(const Primitive& p, TensorType x, int64_t count) {
  KGRAD_RETURN_IF_ERROR(CheckDType(0, x, kAllTypes | kNarrowIntegerTypes));
  const std::vector<int64_t>& axes = p.GetInts("axis");
  UniqueSpec s;
  if (axes.size() > 1) return PrimError(p, absl::StrCat("attribute 'axis' must be empty or one axis, got ", axes.size()));
  if (axes.empty()) {
    s.len = 1;
    for (int64_t d : x.shape) s.len = d < 0 || s.len < 0 ? kUnknownDim : s.len * d;
    s.y = {count};
    return s;
  }
  if (axes[0] < -x.rank() || axes[0] >= x.rank()) {
    return PrimError(p, absl::StrCat("axis ", axes[0], " is out of range for ", x.ToString()));
  }
  s.axis = static_cast<int>(axes[0] < 0 ? axes[0] + x.rank() : axes[0]);
  for (int i = 0; i < x.rank(); ++i) {
    int64_t& part = i < s.axis ? s.outer : i == s.axis ? s.len : s.inner;
    if (i == s.axis) {
      part = x.shape[i];
    } else {
      part = x.shape[i] < 0 || part < 0 ? kUnknownDim : part * x.shape[i];
    }
  }
  s.y = Shape(x.shape.begin(), x.shape.end());
  s.y[s.axis] = count;
  return s;
}

namespace {

// unique(x){axis, sorted}: (y, indices, inverse, counts); the count of distinct
// elements is known at inference only for an empty x.
absl::StatusOr<AbstractPtr> InferUnique(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(UniqueSpec probe, UniqueShape(c.prim, *x, kUnknownDim));
  const int64_t count = probe.len == 0 ? 0 : kUnknownDim;
  KGRAD_ASSIGN_OR_RETURN(UniqueSpec s, UniqueShape(c.prim, *x, count));
  return MakeAbstractTuple({MakeAbstractTensor(x->dtype(), s.y), MakeAbstractTensor(DType::kInt64, {count}),
                            MakeAbstractTensor(DType::kInt64, {s.len}),
                            MakeAbstractTensor(DType::kInt64, {count})});
}

// ----- Inference -----------------------------------------------------------------------
// topk(x, k){axis, largest, sorted}: (values, indices), both shaped like x with k
// at axis; indices are i64 positions along axis.
absl::StatusOr<AbstractPtr> InferTopK(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t k, ScalarOperandElement(c, 1, "k"));
  KGRAD_ASSIGN_OR_RETURN(TopKSpec s, TopKShape(c.prim, *x, k));
  return MakeAbstractTuple({MakeAbstractTensor(x->dtype(), s.out),
                            MakeAbstractTensor(DType::kInt64, s.out)});
}

// nonzero(x): i64 [rank(x), count], the count known only when x is empty.
absl::StatusOr<AbstractPtr> InferNonZero(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  bool empty = false;
  for (int64_t d : x->shape()) empty |= d == 0;
  return MakeAbstractTensor(DType::kInt64, NonZeroShape(*x, empty ? 0 : kUnknownDim));
}

// ----- Gradient rules ----------------------------------------------------------------------
// Forward: (v, i) = topk(x, k){axis, largest, sorted}, v = gather_elements(x, i){axis}
// with i held fixed (the selection is locally constant where no values tie).
// Backward: dx = scatter_elements(zeros_like(x), i, dv){axis, add}, dv placed
// at the positions it was taken from (distinct along axis, so add is a plain
// write; its own rule gives grad-of-grad); the indices and k get nothing.
absl::Status BpropTopK(BpropContext& c) {
  AnfNode* indices = c.GetItem(c.Out(), 1);
  c.SetGrad(0, c.Op(PrimId::kScatterElements,
                    {c.ZerosLike(c.I(0)), indices, c.GetItem(c.Dout(), 0)},
                    {{"axis", c.prim().GetInt("axis")}, {"reduction", std::string("add")}}));
  return absl::OkStatus();
}

}  // namespace

// ----- Definitions -------------------------------------------------------------------------
void RegisterSelectionOps(std::vector<PrimitiveDef>* defs) {
  defs->push_back(OpDef(PrimId::kTopK, 2, 2, InferTopK,
                        {IntAttr("axis", -1), BoolAttr("largest", true), BoolAttr("sorted", true)})
                      .Bprop(BpropTopK));
  // Integer coordinates: no gradient.
  defs->push_back(OpDef(PrimId::kNonZero, 1, 1, InferNonZero).ZeroGradient());
  // Selection of distinct values: not differentiable (as torch.unique), no gradient.
  defs->push_back(OpDef(PrimId::kUnique, 1, 1, InferUnique, {IntsAttr("axis", {}), BoolAttr("sorted", true)})
                      .ZeroGradient());
}

}  // namespace ops
}  // namespace kgrad
