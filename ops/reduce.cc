// Reduction primitives. reduce_*{axes, keepdims} reduce over `axes` (empty: all
// axes; negative axes count from the end; repeats are an error) and keep reduced
// axes as size 1 when `keepdims`. argmax/argmin{axis, keepdims} return int64
// indices along one axis.
//
// Empty reductions (a reduced axis of size 0): sum is 0, prod is 1, mean is NaN
// (0/0, as in NumPy), logsumexp is -inf (log of an empty sum); max, min, argmax
// and argmin have no value and are errors, here when the size is known and in
// the kernels otherwise.
#include "ops/reduce.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
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

std::vector<AttrSpec> ReduceAttrs() {
  return {IntsAttr("axes", {}), BoolAttr("keepdims", false)};
}

PrimitiveDef ReduceDef(PrimId id, InferFn infer) {
  return MakeDef(id, 1, 1, infer, ReduceAttrs());
}

}  // namespace

void RegisterReduceOps(std::vector<PrimitiveDef>* defs) {
  // reduce_sum(x) = sum of x over axes; linear.
  PrimitiveDef sum = ReduceDef(PrimId::kReduceSum, InferReduce<kNumericTypes, false>);
  sum.linear = true;
  defs->push_back(std::move(sum));
  // reduce_mean(x) = reduce_sum(x) / (number of reduced elements); linear.
  PrimitiveDef mean = ReduceDef(PrimId::kReduceMean, InferReduce<kFloatTypes, false>);
  mean.linear = true;
  defs->push_back(std::move(mean));
  // reduce_prod(x) = product of x over axes.
  defs->push_back(ReduceDef(PrimId::kReduceProd, InferReduce<kNumericTypes, false>));
  // reduce_max(x) = largest element over axes (NaN if any is NaN).
  defs->push_back(ReduceDef(PrimId::kReduceMax, InferReduce<kNumericTypes, true>));
  // reduce_min(x) = smallest element over axes (NaN if any is NaN).
  defs->push_back(ReduceDef(PrimId::kReduceMin, InferReduce<kNumericTypes, true>));
  // logsumexp(x) = m + log(sum exp(x - m)), m = max over axes (finite m only).
  defs->push_back(ReduceDef(PrimId::kLogsumexp, InferReduce<kFloatTypes, false>));
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
