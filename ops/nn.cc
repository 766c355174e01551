#include "ops/nn.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {
namespace {

// Shape `a` with the dims of `b` filled in where `a` does not know them; error when
// two known dims differ. `what` names the two inputs.
absl::StatusOr<Shape> MergeShapes(const AbstractTensor* a, const AbstractTensor* b,
                                  absl::string_view what) {
  if (a->rank() != b->rank()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must have the same shape, got ",
                                                   a->ToString(), " and ", b->ToString()));
  }
  Shape out = a->shape();
  for (int i = 0; i < a->rank(); ++i) {
    int64_t d = b->shape()[i];
    if (out[i] == kUnknownDim) {
      out[i] = d;
    } else if (d != kUnknownDim && d != out[i]) {
      return absl::InvalidArgumentError(absl::StrCat(what, " must have the same shape, got ",
                                                     a->ToString(), " and ", b->ToString()));
    }
  }
  return out;
}

// A float tensor of the same dtype as input 0.
absl::StatusOr<const AbstractTensor*> FloatLikeFirst(const InferCall& c, int i) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, FloatTensorArg(c, i));
  KGRAD_RETURN_IF_ERROR(SameDType(c, {0, i}));
  return t;
}

// An axis attribute checked against the rank of `t`.
absl::StatusOr<int> AxisAttr(const InferCall& c, const AbstractTensor* t, const std::string& name) {
  absl::StatusOr<int> axis = NormalizeAxis(c.prim.GetInt(name), t->rank());
  if (!axis.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' of ", c.prim.name(),
                                                   " on ", t->ToString(), ": ",
                                                   axis.status().message()));
  }
  return *axis;
}

// softmax(x){axis}: exp(x - max) / sum(exp(x - max)) along axis.
// log_softmax(x){axis}: x - max - log(sum(exp(x - max))) along axis.
absl::StatusOr<AbstractPtr> InferSoftmax(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, FloatTensorArg(c, 0));
  KGRAD_RETURN_IF_ERROR(AxisAttr(c, x, "axis").status());
  return c.args[0];
}

// softmax_cross_entropy(logits, labels){axis}: -sum(labels * log_softmax(logits))
// along axis, which is removed from the shape.
absl::StatusOr<AbstractPtr> InferSoftmaxCrossEntropy(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* logits, FloatTensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* labels, FloatLikeFirst(c, 1));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, MergeShapes(logits, labels, "logits and labels"));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(c, logits, "axis"));
  shape.erase(shape.begin() + axis);
  return MakeAbstractTensor(logits->dtype(), std::move(shape));
}

// sparse_softmax_cross_entropy(logits[N, C], labels[N]): -log_softmax(logits)[n,
// labels[n]]; labels outside [0, C) are a run-time error.
absl::StatusOr<AbstractPtr> InferSparseSoftmaxCrossEntropy(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* logits, FloatTensorArg(c, 0));
  if (logits->rank() != 2) return ArgError(c, 0, "logits of rank 2 [N, C]");
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* labels, TensorArg(c, 1));
  if (!IsInteger(labels->dtype()) || labels->rank() != 1) {
    return ArgError(c, 1, "i32 or i64 labels of rank 1 [N]");
  }
  int64_t n = logits->shape()[0], m = labels->shape()[0];
  if (n != kUnknownDim && m != kUnknownDim && n != m) {
    return absl::InvalidArgumentError(
        absl::StrCat("labels must have one entry per row of logits: logits ", logits->ToString(),
                     ", labels ", labels->ToString()));
  }
  return MakeAbstractTensor(logits->dtype(), {n == kUnknownDim ? m : n});
}

absl::Status EpsilonAttr(const InferCall& c) {
  double eps = c.prim.GetFloat("epsilon");
  if (!(eps >= 0) || !std::isfinite(eps)) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'epsilon' of ", c.prim.name(),
                                                   " must be finite and >= 0, got ", eps));
  }
  return absl::OkStatus();
}

// An affine parameter (scale or bias, input i) of shape `want`.
absl::Status AffineArg(const InferCall& c, int i, absl::Span<const int64_t> want) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* p, FloatLikeFirst(c, i));
  bool ok = p->rank() == static_cast<int>(want.size());
  for (int d = 0; ok && d < p->rank(); ++d) {
    int64_t have = p->shape()[d];
    ok = have == kUnknownDim || want[d] == kUnknownDim || have == want[d];
  }
  if (!ok) return ArgError(c, i, absl::StrCat("of shape ", ShapeToString(want)));
  return absl::OkStatus();
}

// batch_norm(x, scale[C], bias[C]){epsilon, axis}: training-mode normalisation,
// y = (x - mean_c) * rsqrt(var_c + eps) * scale[c] + bias[c] with the batch
// mean and biased variance of channel c (the dim `axis`) over all other dims.
absl::StatusOr<AbstractPtr> InferBatchNorm(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, FloatTensorArg(c, 0));
  if (x->rank() < 2) return ArgError(c, 0, "a tensor of rank >= 2");
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(c, x, "axis"));
  KGRAD_RETURN_IF_ERROR(EpsilonAttr(c));
  Shape channels = {x->shape()[axis]};
  KGRAD_RETURN_IF_ERROR(AffineArg(c, 1, channels));
  KGRAD_RETURN_IF_ERROR(AffineArg(c, 2, channels));
  return c.args[0];
}

// layer_norm(x, scale, bias){begin_norm_axis, epsilon}: normalises over the dims
// [begin_norm_axis, rank): y = (x - mean) * rsqrt(var + eps) * scale + bias,
// scale and bias of shape x.shape[begin_norm_axis:].
absl::StatusOr<AbstractPtr> InferLayerNorm(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, FloatTensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(int begin, AxisAttr(c, x, "begin_norm_axis"));
  KGRAD_RETURN_IF_ERROR(EpsilonAttr(c));
  absl::Span<const int64_t> normalized(x->shape().data() + begin, x->rank() - begin);
  KGRAD_RETURN_IF_ERROR(AffineArg(c, 1, normalized));
  KGRAD_RETURN_IF_ERROR(AffineArg(c, 2, normalized));
  return c.args[0];
}

// dropout(x){rate, seed}: x * keep / (1 - rate), keep[i] = u(seed, i) >= rate with
// the counter-based hash of backends/cpu/dropout_hash.h.
absl::StatusOr<AbstractPtr> InferDropout(const InferCall& c) {
  KGRAD_RETURN_IF_ERROR(FloatTensorArg(c, 0).status());
  double rate = c.prim.GetFloat("rate");
  if (!(rate >= 0 && rate < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'rate' of dropout must be in [0, 1), got ", rate));
  }
  return c.args[0];
}

}  // namespace

void RegisterNnOps(std::vector<PrimitiveDef>* defs) {
  defs->push_back(MakeDef(PrimId::kSoftmax, 1, 1, InferSoftmax, {IntAttr("axis", -1)}));
  defs->push_back(MakeDef(PrimId::kLogSoftmax, 1, 1, InferSoftmax, {IntAttr("axis", -1)}));
  defs->push_back(
      MakeDef(PrimId::kSoftmaxCrossEntropy, 2, 2, InferSoftmaxCrossEntropy, {IntAttr("axis", -1)}));
  defs->push_back(
      MakeDef(PrimId::kSparseSoftmaxCrossEntropy, 2, 2, InferSparseSoftmaxCrossEntropy));
  defs->push_back(MakeDef(PrimId::kBatchNorm, 3, 3, InferBatchNorm,
                          {FloatAttr("epsilon", 1e-5), IntAttr("axis", 1)}));
  defs->push_back(MakeDef(PrimId::kLayerNorm, 3, 3, InferLayerNorm,
                          {IntAttr("begin_norm_axis", -1), FloatAttr("epsilon", 1e-5)}));
  PrimitiveDef dropout =
      MakeDef(PrimId::kDropout, 1, 1, InferDropout, {FloatAttr("rate", 0.5), IntAttr("seed", 0)});
  dropout.linear = true;  // a fixed mask times x
  defs->push_back(std::move(dropout));
}

}  // namespace ops
}  // namespace kgrad
