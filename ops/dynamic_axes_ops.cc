// Run-time axes (declared in ops/dynamic_axes_ops.h): dynamic_unsqueeze,
// dynamic_squeeze and dynamic_reduce_sum, ONNX's Unsqueeze, Squeeze and
// ReduceSum-13 when their axes input is computed at run time. The axes come in as
// their elements (shape values at inference, numbers in the kernels) and go
// through one set of checks and formulas, first below; then the inference, the
// gradient rules and the definitions.
#include "ops/dynamic_axes_ops.h"

#include <algorithm>
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
#include "ops/op_def.h"
#include "ops/op_util.h"
#include "ops/shape_checks.h"
#include "ops/shape_value.h"

namespace kgrad {
namespace ops {
namespace {

// ----- Checks and formulas, shared with the kernels -----------------------------------
// The axes that are numbers, normalised against `rank` (counted from the end when
// negative), in entry order; `*all_numbers` tells whether every entry was one.
// Out of range (`against` names what gives the rank) and repeated axes are errors.
absl::StatusOr<std::vector<int>> NumberAxes(const Primitive& p, int rank,
                                            absl::Span<const int64_t> axes,
                                            const std::string& against, bool* all_numbers) {
  std::vector<bool> seen(rank, false);
  std::vector<int> out;
  *all_numbers = true;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = axes[i];
    if (!IsValueNumber(a)) {
      *all_numbers = false;
      continue;
    }
    if (a < -rank || a >= rank) {
      return PrimError(p, absl::StrCat("axis ", a, " (entry ", i, " of input 1, axes ",
                                   ValuesString(axes), ") is out of range [", -rank, ", ", rank,
                                   ") for ", against));
    }
    const int axis = static_cast<int>(a < 0 ? a + rank : a);
    if (seen[axis]) {
      return PrimError(p, absl::StrCat("axis ", a, " is repeated in input 1 (axes) ",
                                   ValuesString(axes)));
    }
    seen[axis] = true;
    out.push_back(axis);
  }
  return out;
}

// More axes than x has dims: some would repeat.
absl::Status CheckAxesCount(const Primitive& p, TensorType x, absl::Span<const int64_t> axes) {
  if (axes.size() <= static_cast<size_t>(x.rank())) return absl::OkStatus();
  return PrimError(p, absl::StrCat("input 1 (axes) ", ValuesString(axes), " has more entries than ",
                               "input 0, ", x.ToString(), ", has dims"));
}

}  // namespace

absl::StatusOr<Shape> DynamicUnsqueezeShape(const Primitive& p, TensorType x,
                                            absl::Span<const int64_t> axes) {
  const size_t rank = x.shape.size() + axes.size();
  if (rank > static_cast<size_t>(kMaxRank)) {
    return PrimError(p, absl::StrCat("input 1 (axes) ", ValuesString(axes), " would give input 0, ",
                                 x.ToString(), ", rank ", rank, ", more than ", kMaxRank));
  }
  const int r = static_cast<int>(rank);
  bool known = false;
  KGRAD_ASSIGN_OR_RETURN(std::vector<int> at,
                         NumberAxes(p, r, axes, absl::StrCat("the output's rank ", r), &known));
  // Where the 1s go is unknown when an axis is not a number: every dim may move
  // (unless all of x's are 1).
  const bool ones = std::all_of(x.shape.begin(), x.shape.end(), [](int64_t d) { return d == 1; });
  Shape out(r, known || ones ? 1 : kUnknownDim);
  std::vector<bool> inserted(r, !known);
  for (int a : at) inserted[a] = true;
  size_t k = 0;
  for (int d = 0; d < r; ++d) {
    if (!inserted[d]) out[d] = x.shape[k++];
  }
  return out;
}

absl::StatusOr<Shape> DynamicSqueezeShape(const Primitive& p, TensorType x,
                                          absl::Span<const int64_t> axes) {
  KGRAD_RETURN_IF_ERROR(CheckAxesCount(p, x, axes));
  bool known = false;
  KGRAD_ASSIGN_OR_RETURN(
      std::vector<int> at,
      NumberAxes(p, x.rank(), axes, absl::StrCat("input 0, ", x.ToString()), &known));
  std::vector<bool> dropped(x.rank(), false);
  for (int a : at) {
    if (x.shape[a] >= 0 && x.shape[a] != 1) {  // a symbol or unknown: the kernel checks
      return PrimError(p, absl::StrCat("dim ", a, " of input 0, ", x.ToString(), ", has size ",
                                   x.shape[a], ", not 1: it cannot be squeezed (axes ",
                                   ValuesString(axes), ")"));
    }
    dropped[a] = true;
  }
  if (!known) return Shape(x.rank() - axes.size(), kUnknownDim);
  Shape out;
  for (int d = 0; d < x.rank(); ++d) {
    if (!dropped[d]) out.push_back(x.shape[d]);
  }
  return out;
}

absl::StatusOr<DynamicReduceSpec> DynamicReduceSumSpec(
    const Primitive& p, TensorType x, std::optional<absl::Span<const int64_t>> axes) {
  KGRAD_RETURN_IF_ERROR(CheckDType(0, x, kNumericTypes));
  const bool keepdims = p.GetBool("keepdims");
  const int rank = x.rank();
  DynamicReduceSpec s;
  // 1. Unknown length (inference only): each dim x's or 1, so 1 where x's is.
  if (!axes) {
    if (!keepdims) {
      return PrimError(p, "without keepdims the length of input 1 (axes) gives the output's rank "
                      "and must be known statically");
    }
    for (int64_t d : x.shape) s.out.push_back(d == 1 ? 1 : kUnknownDim);
    return s;
  }
  // 2. No axes: the identity (noop_with_empty_axes), or a sum over every dim.
  if (axes->empty()) {
    if (p.GetBool("noop_with_empty_axes")) {
      s.identity = true;
      s.out.assign(x.shape.begin(), x.shape.end());
      return s;
    }
    for (int d = 0; d < rank; ++d) s.axes.push_back(d);
    if (keepdims) s.out.assign(rank, 1);
    return s;
  }
  // 3. The axes checked; those that are numbers are certainly reduced.
  KGRAD_RETURN_IF_ERROR(CheckAxesCount(p, x, *axes));
  bool known = false;
  KGRAD_ASSIGN_OR_RETURN(std::vector<int> at,
                         NumberAxes(p, rank, *axes, absl::StrCat("input 0, ", x.ToString()),
                                    &known));
  std::vector<bool> reduced(rank, false);
  for (int a : at) reduced[a] = true;
  if (!known && !keepdims) {
    s.out.assign(rank - axes->size(), kUnknownDim);
    return s;
  }
  // 4. The output: reduced dims 1 (kept) or dropped; with axes left unknown a
  // kept dim may be reduced, so only its 1s are sure.
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) {
      if (keepdims) s.out.push_back(1);
      s.axes.push_back(d);
    } else {
      s.out.push_back(known || x.shape[d] == 1 ? x.shape[d] : kUnknownDim);
    }
  }
  return s;
}

namespace {

// ----- Inference -----------------------------------------------------------------------------
// The axes (input 1) as inference knows them: its shape value, or kUnknownValue for
// each entry; nullopt when its length is not static.
absl::StatusOr<std::optional<Shape>> AxesElements(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorArg(c, 1));
  KGRAD_RETURN_IF_ERROR(CheckShapeOperand(c.prim, 1, "axes", *t));
  if (t->value()) return t->value();
  const int64_t n = t->shape()[0];
  if (n < 0) return std::optional<Shape>();
  if (n > kMaxRank) {
    return PrimError(c.prim, absl::StrCat("input 1 (axes) has ", n, " entries, more than ", kMaxRank));
  }
  return std::optional<Shape>(Shape(n, kUnknownValue));
}

// AxesElements() where the output's rank depends on the axes' length.
absl::StatusOr<Shape> StaticAxes(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(std::optional<Shape> axes, AxesElements(c));
  if (axes) return *std::move(axes);
  return PrimError(c.prim, absl::StrCat("the length of input 1 (axes) gives the output's rank and ",
                                    "must be known statically, got ",
                                    AbstractToString(c.args[1])));
}

// dynamic_unsqueeze(x, axes): x with a 1 inserted at each axis of the output.
// A shape value passes (a scalar made a 1-element vector).
absl::StatusOr<AbstractPtr> InferDynamicUnsqueeze(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(Shape axes, StaticAxes(c));
  KGRAD_ASSIGN_OR_RETURN(Shape out, DynamicUnsqueezeShape(c.prim, *x, axes));
  return WithShapeValue(MakeAbstractTensor(x->dtype(), std::move(out)), SameElementsValue(c));
}

// dynamic_squeeze(x, axes): x without the size-1 dims at the axes.
absl::StatusOr<AbstractPtr> InferDynamicSqueeze(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(Shape axes, StaticAxes(c));
  KGRAD_ASSIGN_OR_RETURN(Shape out, DynamicSqueezeShape(c.prim, *x, axes));
  return WithShapeValue(MakeAbstractTensor(x->dtype(), std::move(out)), SameElementsValue(c));
}

// dynamic_reduce_sum(x, axes){keepdims, noop_with_empty_axes}: the sum over the
// axes (all for [], none with noop_with_empty_axes).
absl::StatusOr<AbstractPtr> InferDynamicReduceSum(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(std::optional<Shape> axes, AxesElements(c));
  std::optional<absl::Span<const int64_t>> view;
  if (axes) view = absl::Span<const int64_t>(*axes);
  KGRAD_ASSIGN_OR_RETURN(DynamicReduceSpec s, DynamicReduceSumSpec(c.prim, *x, view));
  return MakeAbstractTensor(x->dtype(), std::move(s.out));
}

// ----- Gradient rules ------------------------------------------------------------------------
// Each op is linear in x; the integer axes get nothing.

// Forward: y = dynamic_unsqueeze(x, axes) or dynamic_squeeze(x, axes): x's
// elements in order, size-1 dims inserted or dropped.
// Backward: dx = reshape_like(dy, x).
absl::Status BpropReshapeBack(BpropContext& c) {
  c.SetGrad(0, c.ReshapeLike(c.Dout(), c.I(0)));
  return absl::OkStatus();
}

// Forward: y = dynamic_reduce_sum(x, axes){keepdims, noop} = R x, R the sum over
// the axes (every dim for [], none for [] with noop).
// Backward: dx = R^T dy = broadcast_to_like(k(dy), x), k(dy) dy in keepdims form:
// dy itself with keepdims, else dynamic_unsqueeze(dy, axes) (a 1 at each reduced
// axis; ReduceSum and Unsqueeze both count a negative axis against x's rank). The
// empty axes need no case of their own: summed over every dim, dy has rank 0 and
// unsqueeze([]) leaves it so for the broadcast; with noop, dy is shaped like x
// and both steps leave it as it is.
absl::Status BpropDynamicReduceSum(BpropContext& c) {
  AnfNode* dy = c.Dout();
  if (!c.prim().GetBool("keepdims")) dy = c.Op(PrimId::kDynamicUnsqueeze, {dy, c.I(1)});
  c.SetGrad(0, c.BroadcastToLike(dy, c.I(0)));
  return absl::OkStatus();
}

}  // namespace

// ----- Definitions ---------------------------------------------------------------------------
void RegisterDynamicAxesOps(std::vector<PrimitiveDef>* defs) {
  defs->push_back(OpDef(PrimId::kDynamicUnsqueeze, 2, 2, InferDynamicUnsqueeze)
                      .Bprop(BpropReshapeBack)
                      .ZeroIfAny({0})
                      .Linear());
  defs->push_back(OpDef(PrimId::kDynamicSqueeze, 2, 2, InferDynamicSqueeze)
                      .Bprop(BpropReshapeBack)
                      .ZeroIfAny({0})
                      .Linear());
  defs->push_back(OpDef(PrimId::kDynamicReduceSum, 2, 2, InferDynamicReduceSum,
                        {BoolAttr("keepdims", true), BoolAttr("noop_with_empty_axes", false)})
                      .Bprop(BpropDynamicReduceSum)
                      .ZeroIfAny({0})
                      .Linear());
}

}  // namespace ops
}  // namespace kgrad
