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
#include "ops/op_util.h"

namespace kgrad {
namespace ops {
namespace {

using DTypeMask = uint32_t;
constexpr DTypeMask Bit(DType t) { return DTypeMask{1} << static_cast<int>(t); }
constexpr DTypeMask kFloatTypes = Bit(DType::kFloat32) | Bit(DType::kFloat64);
constexpr DTypeMask kNumericTypes = kFloatTypes | Bit(DType::kInt32) | Bit(DType::kInt64);

absl::StatusOr<const AbstractTensor*> ReduceInput(const InferCall& c, DTypeMask allowed) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorArg(c, 0));
  if ((allowed & Bit(t->dtype())) == 0) {
    return ArgError(c, 0, allowed == kFloatTypes ? "a f32 or f64 tensor"
                                                 : "a f32, f64, i32 or i64 tensor");
  }
  return t;
}

// Error when `axis` of `t` is known to be empty and the reduction needs an element.
absl::Status CheckNotEmpty(const InferCall& c, const AbstractTensor* t, int axis) {
  if (t->shape()[axis] != 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      c.prim.name(), " over an empty axis: axis ", axis, " of ", t->ToString(),
      " has size 0, and the ", c.prim.name(), " of no elements is undefined"));
}

// The input shape with `axes` (sorted) removed, or set to 1 when `keepdims`.
Shape ReducedShape(const Shape& in, const std::vector<int>& axes, bool keepdims) {
  Shape out;
  size_t next = 0;
  for (int d = 0; d < static_cast<int>(in.size()); ++d) {
    bool reduced = next < axes.size() && axes[next] == d;
    if (reduced) ++next;
    if (!reduced) {
      out.push_back(in[d]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  return out;
}

// reduce_*(x){axes, keepdims}: same dtype as x, reduced shape.
template <DTypeMask kAllowed, bool kNeedsElements>
absl::StatusOr<AbstractPtr> InferReduce(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, ReduceInput(c, kAllowed));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int> axes,
                         NormalizeAxes(c.prim.GetInts("axes"), x->rank(), true));
  if (kNeedsElements) {
    for (int a : axes) KGRAD_RETURN_IF_ERROR(CheckNotEmpty(c, x, a));
  }
  return MakeAbstractTensor(x->dtype(),
                            ReducedShape(x->shape(), axes, c.prim.GetBool("keepdims")));
}

// argmax/argmin(x){axis, keepdims}: int64 indices, `axis` removed (or kept as 1).
absl::StatusOr<AbstractPtr> InferArgReduce(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, ReduceInput(c, kNumericTypes));
  KGRAD_ASSIGN_OR_RETURN(int axis, NormalizeAxis(c.prim.GetInt("axis"), x->rank()));
  KGRAD_RETURN_IF_ERROR(CheckNotEmpty(c, x, axis));
  return MakeAbstractTensor(DType::kInt64,
                            ReducedShape(x->shape(), {axis}, c.prim.GetBool("keepdims")));
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

PrimitiveDef ReduceDef(PrimId id, InferFn infer, BpropFn bprop) {
  PrimitiveDef d = MakeDef(id, 1, 1, infer, ReduceAttrs());
  d.bprop = bprop;
  return d;
}

}  // namespace

void RegisterReduceOps(std::vector<PrimitiveDef>* defs) {
  // reduce_sum(x) = sum of x over axes; linear.
  PrimitiveDef sum = ReduceDef(PrimId::kReduceSum, InferReduce<kNumericTypes, false>,
                               BpropReduceSum);
  sum.linear = true;
  defs->push_back(std::move(sum));
  // reduce_mean(x) = reduce_sum(x) / (number of reduced elements); linear.
  PrimitiveDef mean = ReduceDef(PrimId::kReduceMean, InferReduce<kFloatTypes, false>,
                                BpropReduceMean);
  mean.linear = true;
  defs->push_back(std::move(mean));
  // reduce_prod(x) = product of x over axes.
  defs->push_back(
      ReduceDef(PrimId::kReduceProd, InferReduce<kNumericTypes, false>, BpropReduceProd));
  // reduce_max(x) = largest element over axes (NaN if any is NaN).
  defs->push_back(
      ReduceDef(PrimId::kReduceMax, InferReduce<kNumericTypes, true>, BpropReduceExtremum));
  // reduce_min(x) = smallest element over axes (NaN if any is NaN).
  defs->push_back(
      ReduceDef(PrimId::kReduceMin, InferReduce<kNumericTypes, true>, BpropReduceExtremum));
  // logsumexp(x) = m + log(sum exp(x - m)), m = max over axes (finite m only).
  defs->push_back(ReduceDef(PrimId::kLogsumexp, InferReduce<kFloatTypes, false>, BpropLogsumexp));
  // argmax(x) = index of the first largest element along axis (a NaN counts as
  // largest); integer output, no gradient.
  PrimitiveDef argmax = MakeDef(PrimId::kArgmax, 1, 1, InferArgReduce,
                                {IntAttr("axis", -1), BoolAttr("keepdims", false)});
  argmax.zero_gradient = true;
  defs->push_back(std::move(argmax));
  // argmin(x) = index of the first smallest element along axis (a NaN counts as
  // smallest); integer output, no gradient.
  PrimitiveDef argmin = MakeDef(PrimId::kArgmin, 1, 1, InferArgReduce,
                                {IntAttr("axis", -1), BoolAttr("keepdims", false)});
  argmin.zero_gradient = true;
  defs->push_back(std::move(argmin));
}

}  // namespace ops
}  // namespace kgrad
