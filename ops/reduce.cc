// Reduction primitives. reduce_*{axes, keepdims} reduce over `axes` (empty: all
// axes; negative axes count from the end; repeats are an error) and keep reduced
// axes as size 1 when `keepdims`. argmax/argmin{axis, keepdims} return int64
// indices along one axis.
//
// Empty reductions (a reduced axis of size 0): sum is 0, prod is 1, mean is NaN
// (0/0, as in NumPy), logsumexp is -inf (log of an empty sum); max, min, argmax
// and argmin have no value and are errors, here when the size is known and in
// the kernels otherwise.
//
// Gradients: through keepdims(dy) broadcast back to x; reduce_max/min divide dy
// equally among tied extrema; reduce_prod is exact at zeros to the first order.
#include "ops/reduce.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/bprop_context.h"
#include "ops/op_def.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {
namespace {

bool IsArgReduce(PrimId id) { return id == PrimId::kArgmax || id == PrimId::kArgmin; }

// The dtypes reduction `id` accepts.
DTypeSet ReduceDTypes(PrimId id) {
  return id == PrimId::kReduceMean || id == PrimId::kLogsumexp ? kFloatTypes : kNumericTypes;
}

// Whether reduction `id` has no value over no elements.
bool NeedsElements(PrimId id) {
  return id == PrimId::kReduceMax || id == PrimId::kReduceMin || IsArgReduce(id);
}

// The dims `p` reduces, ascending: its `axes` (none: all) or its one `axis`.
absl::StatusOr<std::vector<int>> AxesOf(const Primitive& p, int rank) {
  if (!IsArgReduce(p.id())) return NormalizeAxes(p.GetInts("axes"), rank, true);
  KGRAD_ASSIGN_OR_RETURN(int axis, NormalizeAxis(p.GetInt("axis"), rank));
  return std::vector<int>{axis};
}

}  // namespace

absl::StatusOr<ReduceAxes> ParseReduceAxes(const Primitive& p, TensorType x) {
  KGRAD_RETURN_IF_ERROR(CheckDType(0, x, ReduceDTypes(p.id())));
  ReduceAxes r;
  KGRAD_ASSIGN_OR_RETURN(r.axes, AxesOf(p, x.rank()));
  r.reduced.assign(x.rank(), false);
  for (int a : r.axes) r.reduced[a] = true;
  const bool keepdims = p.GetBool("keepdims");
  for (int d = 0; d < x.rank(); ++d) {
    if (!r.reduced[d]) {
      r.out_shape.push_back(x.shape[d]);
      continue;
    }
    if (keepdims) r.out_shape.push_back(1);
    if (x.shape[d] == 0 && NeedsElements(p.id())) {
      return absl::InvalidArgumentError(absl::StrCat(
          p.name(), " over an empty axis: axis ", d, " of ", x.ToString(), " has size 0, and the ",
          p.name(), " of no elements is undefined"));
    }
  }
  r.out_dtype = IsArgReduce(p.id()) ? DType::kInt64 : x.dtype;
  return r;
}

ReduceGroups GroupReduceDims(absl::Span<const int64_t> in, const std::vector<bool>& reduced) {
  ReduceGroups g;
  for (size_t d = 0; d < in.size(); ++d) {
    (reduced[d] ? g.red_count : g.out_count) *= in[d];
    if (in[d] == 1) continue;
    if (!g.sizes.empty() && g.reduced.back() == reduced[d]) {
      g.sizes.back() *= in[d];  // row-major neighbours of one kind walk as one
    } else {
      g.sizes.push_back(in[d]);
      g.reduced.push_back(reduced[d]);
    }
  }
  return g;
}

namespace {

// reduce_*(x){axes, keepdims} and argmax/argmin(x){axis, keepdims}. Each
// reduction's dtypes and whether it needs elements are one table (ReduceDTypes,
// NeedsElements), read by ParseReduceAxes, which the kernels call too.
absl::StatusOr<AbstractPtr> InferReduce(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(ReduceAxes r, ParseReduceAxes(c.prim, *x));
  return MakeAbstractTensor(r.out_dtype, std::move(r.out_shape));
}


// ----- Gradient rules ---------------------------------------------------------------
// A reduction maps x to y of the reduced shape. Its rules bring dy (and y) back to
// x's rank in keepdims form (a size-1 dim at every reduced axis) and let it
// broadcast against x. Only x's rank is needed, never its dims: the rules work
// with unknown dims.

// The reduced axes of input 0, sorted and non-negative ([] means all).
absl::StatusOr<std::vector<int>> ReducedAxes(BpropContext& c) {
  KGRAD_ASSIGN_OR_RETURN(int rank, c.InRank(0));
  absl::StatusOr<std::vector<int>> axes = NormalizeAxes(c.prim().GetInts("axes"), rank, true);
  if (!axes.ok()) return c.Error(std::string(axes.status().message()));
  return axes;
}

// `v`, shaped like the output, in keepdims form: expand_dims at each reduced axis
// (nothing to do when keepdims). Leading reduced axes are left out: NumPy
// broadcasting supplies them (x[2,3,4] over axes {0, 2}: v[3] -> v[3,1]).
AnfNode* KeepDims(BpropContext& c, AnfNode* v, const std::vector<int>& axes) {
  if (c.prim().GetBool("keepdims")) return v;
  size_t leading = 0;
  while (leading < axes.size() && axes[leading] == static_cast<int>(leading)) ++leading;
  for (size_t k = leading; k < axes.size(); ++k) {
    int64_t axis = axes[k] - static_cast<int>(leading);
    v = c.Op(PrimId::kExpandDims, {v}, {{"axis", axis}});
  }
  return v;
}

// reduce_sum(v) over the primitive's axes, with keepdims.
AnfNode* SumKeepDims(BpropContext& c, AnfNode* v) {
  return c.ReduceSum(v, c.prim().GetInts("axes"), /*keepdims=*/true);
}

// Forward: y = sum of x over axes.  Backward: dx = broadcast_to_like(keepdims(dy), x).
absl::Status BpropReduceSum(BpropContext& c) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<int> axes, ReducedAxes(c));
  c.SetGrad(0, c.BroadcastToLike(KeepDims(c, c.Dout(), axes), c.I(0)));
  return absl::OkStatus();
}

// Forward: y = (sum of x over axes) / n, n the number of reduced elements.
// Backward: dx = broadcast_to_like(keepdims(dy) / n, x); n is a constant when the
// reduced dims are known, else reduce_sum(ones_like(x)){axes, keepdims}.
absl::Status BpropReduceMean(BpropContext& c) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<int> axes, ReducedAxes(c));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, c.InShape(0));
  double n = 1;
  bool known = true;
  for (int a : axes) {
    known &= shape[a] >= 0;
    n *= static_cast<double>(shape[a]);
  }
  AnfNode* count = nullptr;
  if (known) {
    KGRAD_ASSIGN_OR_RETURN(count, c.ScalarLike(n, 0));
  } else {
    count = SumKeepDims(c, c.OnesLike(c.I(0)));
  }
  c.SetGrad(0, c.BroadcastToLike(c.Div(KeepDims(c, c.Dout(), axes), count), c.I(0)));
  return absl::OkStatus();
}

// Forward: y = max (or min) of x over axes.
// Backward: dx = m * keepdims(dy) / reduce_sum(m){axes, keepdims}, with the argmax
// mask m = (x == keepdims(y)) as 0/1: dy is divided equally among tied maxima
// (a NaN maximum matches nothing and gives NaN).
absl::Status BpropReduceExtremum(BpropContext& c) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<int> axes, ReducedAxes(c));
  KGRAD_ASSIGN_OR_RETURN(AnfNode* zero, c.ScalarLike(0.0, 0));
  KGRAD_ASSIGN_OR_RETURN(AnfNode* one, c.ScalarLike(1.0, 0));
  AnfNode* hit = c.Op(PrimId::kEqual, {c.I(0), KeepDims(c, c.Out(), axes)});
  AnfNode* mask = c.Select(hit, one, zero);
  AnfNode* share = c.Div(KeepDims(c, c.Dout(), axes), SumKeepDims(c, mask));
  c.SetGrad(0, c.Mul(mask, share));
  return absl::OkStatus();
}

// Forward: y = product of x over axes.
// Backward: dx_i = keepdims(dy) * (product of the other elements of x_i's slice):
//   y / x_i                         where x_i != 0,
//   product of the nonzero elements where x_i is the slice's only zero,
//   0                               where the slice has another zero,
// computed with x_safe = (x == 0 ? 1 : x) so that no 0/0 is formed. The first
// derivative is exact at zeros; the second is exact except where a slice has
// exactly two zeros (d2y/dx_i dx_j for the two zeros comes out 0, not the product
// of the rest).
absl::Status BpropReduceProd(BpropContext& c) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<int> axes, ReducedAxes(c));
  KGRAD_ASSIGN_OR_RETURN(AnfNode* zero, c.ScalarLike(0.0, 0));
  KGRAD_ASSIGN_OR_RETURN(AnfNode* one, c.ScalarLike(1.0, 0));
  AnfNode* x = c.I(0);
  AnfNode* is_zero = c.Op(PrimId::kEqual, {x, zero});
  AnfNode* x_safe = c.Select(is_zero, one, x);
  AnfNode* zeros = SumKeepDims(c, c.Select(is_zero, one, zero));
  AnfNode* nonzero_prod = c.Op(PrimId::kReduceProd, {x_safe},
                               {{"axes", c.prim().GetInts("axes")}, {"keepdims", true}});
  AnfNode* at_zero = c.Select(c.Op(PrimId::kEqual, {zeros, one}), nonzero_prod, zero);
  AnfNode* others = c.Select(is_zero, at_zero, c.Div(KeepDims(c, c.Out(), axes), x_safe));
  c.SetGrad(0, c.Mul(KeepDims(c, c.Dout(), axes), others));
  return absl::OkStatus();
}

// Forward: y = ln(sum of e^x over axes).
// Backward: dx = keepdims(dy) * e^(x - keepdims(y)) (dy times the softmax weights).
absl::Status BpropLogsumexp(BpropContext& c) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<int> axes, ReducedAxes(c));
  AnfNode* weights = c.Exp(c.Sub(c.I(0), KeepDims(c, c.Out(), axes)));
  c.SetGrad(0, c.Mul(KeepDims(c, c.Dout(), axes), weights));
  return absl::OkStatus();
}

std::vector<AttrSpec> ReduceAttrs() {
  return {IntsAttr("axes", {}), BoolAttr("keepdims", false)};
}

OpDef ReduceDef(PrimId id, InferFn infer, BpropFn bprop) {
  return OpDef(id, 1, 1, infer, ReduceAttrs()).Bprop(bprop);
}

}  // namespace

void RegisterReduceOps(std::vector<PrimitiveDef>* defs) {
  // reduce_sum(x) = sum of x over axes; linear.
  defs->push_back(
      ReduceDef(PrimId::kReduceSum, InferReduce, BpropReduceSum).ZeroIfAny({0}).Linear());
  // reduce_mean(x) = reduce_sum(x) / (number of reduced elements); linear.
  defs->push_back(
      ReduceDef(PrimId::kReduceMean, InferReduce, BpropReduceMean).ZeroIfAny({0}).Linear());
  // reduce_prod(x) = product of x over axes.
  defs->push_back(ReduceDef(PrimId::kReduceProd, InferReduce, BpropReduceProd));
  // reduce_max(x) = largest element over axes (NaN if any is NaN).
  defs->push_back(ReduceDef(PrimId::kReduceMax, InferReduce, BpropReduceExtremum));
  // reduce_min(x) = smallest element over axes (NaN if any is NaN).
  defs->push_back(ReduceDef(PrimId::kReduceMin, InferReduce, BpropReduceExtremum));
  // logsumexp(x) = m + log(sum exp(x - m)), m = max over axes (finite m only).
  defs->push_back(ReduceDef(PrimId::kLogsumexp, InferReduce, BpropLogsumexp));
  // argmax(x) = index of the first largest element along axis (a NaN counts as
  // largest); integer output, no gradient.
  defs->push_back(
      OpDef(PrimId::kArgmax, 1, 1, InferReduce, {IntAttr("axis", -1), BoolAttr("keepdims", false)})
          .ZeroGradient());
  // argmin(x) = index of the first smallest element along axis (a NaN counts as
  // smallest); integer output, no gradient.
  defs->push_back(
      OpDef(PrimId::kArgmin, 1, 1, InferReduce, {IntAttr("axis", -1), BoolAttr("keepdims", false)})
          .ZeroGradient());
}

}  // namespace ops
}  // namespace kgrad
