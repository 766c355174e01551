#include "ops/nn.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/bprop_context.h"
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

// ----- Gradient rules -------------------------------------------------------------
AnfNode* ReduceMeanKeep(BpropContext& c, AnfNode* x, const std::vector<int64_t>& axes) {
  return c.Op(PrimId::kReduceMean, {x}, {{"axes", axes}, {"keepdims", true}});
}

// The normalised input of batch_norm / layer_norm, recomputed from x in the graph
// (so that it is differentiated again at higher order): xhat = (x - mean) * rstd,
// rstd = rsqrt(var + eps), mean and biased var over `axes` (kept as size 1).
struct Normalized {
  AnfNode* xhat;
  AnfNode* rstd;
};

absl::StatusOr<Normalized> Normalize(BpropContext& c, const std::vector<int64_t>& axes) {
  KGRAD_ASSIGN_OR_RETURN(AnfNode* eps, c.ScalarLike(c.prim().GetFloat("epsilon"), 0));
  AnfNode* centered = c.Sub(c.I(0), ReduceMeanKeep(c, c.I(0), axes));
  AnfNode* var = ReduceMeanKeep(c, c.Square(centered), axes);
  AnfNode* rstd = c.Op(PrimId::kRsqrt, {c.Add(var, eps)});
  return Normalized{c.Mul(centered, rstd), rstd};
}

// dx of a normalisation over `axes` from g = dL/dxhat:
// rstd * (g - mean(g) - xhat * mean(g * xhat)).
AnfNode* NormalizeGrad(BpropContext& c, const Normalized& n, AnfNode* g,
                       const std::vector<int64_t>& axes) {
  AnfNode* proj = c.Mul(n.xhat, ReduceMeanKeep(c, c.Mul(g, n.xhat), axes));
  return c.Mul(n.rstd, c.Sub(c.Sub(g, ReduceMeanKeep(c, g, axes)), proj));
}

// Forward: y = softmax(x) along axis.  Backward: dx = y * (dy - sum(dy * y, axis)).
absl::Status BpropSoftmax(BpropContext& c) {
  AnfNode* y = c.Out();
  AnfNode* dot = c.ReduceSum(c.Mul(c.Dout(), y), {c.prim().GetInt("axis")}, true);
  c.SetGrad(0, c.Mul(y, c.Sub(c.Dout(), dot)));
  return absl::OkStatus();
}

// Forward: y = log_softmax(x) along axis.
// Backward: dx = dy - exp(y) * sum(dy, axis)  (exp(y) = softmax(x)).
absl::Status BpropLogSoftmax(BpropContext& c) {
  AnfNode* total = c.ReduceSum(c.Dout(), {c.prim().GetInt("axis")}, true);
  c.SetGrad(0, c.Sub(c.Dout(), c.Mul(c.Exp(c.Out()), total)));
  return absl::OkStatus();
}

// Forward: l = -sum(labels * log_softmax(x), axis).
// Backward: dx = (softmax(x) * sum(labels, axis) - labels) * dl,
// dlabels = -log_softmax(x) * dl, dl with `axis` restored as size 1 (the labels
// need not sum to 1, hence the sum).
absl::Status BpropSoftmaxCrossEntropy(BpropContext& c) {
  int64_t axis = c.prim().GetInt("axis");
  AnfNode* logp = c.Op(PrimId::kLogSoftmax, {c.I(0)}, {{"axis", axis}});
  // expand_dims's axis counts in the rank of dl (one less), so a negative axis
  // of the logits names the same position there.
  AnfNode* dl = c.Op(PrimId::kExpandDims, {c.Dout()}, {{"axis", axis}});
  AnfNode* mass = c.ReduceSum(c.I(1), {axis}, true);
  c.SetGrad(0, c.Mul(c.Sub(c.Mul(c.Exp(logp), mass), c.I(1)), dl));
  c.SetGrad(1, c.Neg(c.Mul(logp, dl)));
  return absl::OkStatus();
}

// Forward: l[n] = -log_softmax(x)[n, labels[n]], x of shape [N, C].
// Backward: dx = (softmax(x) - one_hot(labels, C)) * dl[:, None]; the integer
// labels get nothing.
absl::Status BpropSparseSoftmaxCrossEntropy(BpropContext& c) {
  KGRAD_ASSIGN_OR_RETURN(Shape shape, c.InShape(0));
  KGRAD_ASSIGN_OR_RETURN(DType dtype, c.InDType(0));
  int64_t classes = shape.size() == 2 ? shape[1] : kUnknownDim;
  if (classes == kUnknownDim) {
    return c.Error(
        "the gradient rule needs the number of classes (dim 1 of the logits) for one_hot, "
        "which inference did not determine (declare the graph's parameter types)");
  }
  AnfNode* target = c.Op(PrimId::kOneHot, {c.I(1)},
                         {{"depth", classes}, {"dtype", dtype}, {"axis", int64_t{-1}}});
  AnfNode* p = c.Op(PrimId::kSoftmax, {c.I(0)}, {{"axis", int64_t{-1}}});
  AnfNode* dl = c.Op(PrimId::kExpandDims, {c.Dout()}, {{"axis", int64_t{-1}}});
  c.SetGrad(0, c.Mul(c.Sub(p, target), dl));
  return absl::OkStatus();
}

// Forward: y = xhat * scale + bias (scale, bias [C] along `axis`),
// xhat = (x - mean) * rsqrt(var + eps), batch mean and biased var over every dim
// but `axis` (training mode).
// Backward: dbias = sum(dy), dscale = sum(dy * xhat) over those dims,
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale.
absl::Status BpropBatchNorm(BpropContext& c) {
  KGRAD_ASSIGN_OR_RETURN(int rank, c.InRank(0));
  absl::StatusOr<int> axis = NormalizeAxis(c.prim().GetInt("axis"), rank);
  if (!axis.ok()) return c.Error(std::string(axis.status().message()));
  std::vector<int64_t> reduced;
  std::vector<int64_t> channel_shape(rank, 1);  // scale as [1, .., C, .., 1]
  for (int d = 0; d < rank; ++d) {
    if (d != *axis) reduced.push_back(d);
  }
  channel_shape[*axis] = -1;
  KGRAD_ASSIGN_OR_RETURN(Normalized n, Normalize(c, reduced));
  AnfNode* scale = c.Op(PrimId::kReshape, {c.I(1)}, {{"shape", channel_shape}});
  c.SetGrad(0, NormalizeGrad(c, n, c.Mul(c.Dout(), scale), reduced));
  c.SetGrad(1, c.ReduceSum(c.Mul(c.Dout(), n.xhat), reduced, false));
  c.SetGrad(2, c.ReduceSum(c.Dout(), reduced, false));
  return absl::OkStatus();
}

// Forward: y = xhat * scale + bias (scale, bias shaped like the trailing dims),
// xhat = (x - mean) * rsqrt(var + eps) over the dims [begin_norm_axis, rank).
// Backward: dbias = sum_to(dy), dscale = sum_to(dy * xhat) (over the leading
// dims), dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale.
absl::Status BpropLayerNorm(BpropContext& c) {
  KGRAD_ASSIGN_OR_RETURN(int rank, c.InRank(0));
  absl::StatusOr<int> begin = NormalizeAxis(c.prim().GetInt("begin_norm_axis"), rank);
  if (!begin.ok()) return c.Error(std::string(begin.status().message()));
  std::vector<int64_t> normalized;
  for (int d = *begin; d < rank; ++d) normalized.push_back(d);
  KGRAD_ASSIGN_OR_RETURN(Normalized n, Normalize(c, normalized));
  c.SetGrad(0, NormalizeGrad(c, n, c.Mul(c.Dout(), c.I(1)), normalized));
  c.SetGrad(1, c.SumToInput(c.Mul(c.Dout(), n.xhat), 1));
  c.SetGrad(2, c.SumToInput(c.Dout(), 2));
  return absl::OkStatus();
}

// Forward: y = x * keep / (1 - rate), keep a fixed mask of (seed, element index).
// Backward: dx = dropout(dy) with the same rate and seed (the same mask).
absl::Status BpropDropout(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kDropout, {c.Dout()}, c.prim().attrs()));
  return absl::OkStatus();
}

PrimitiveDef WithBprop(PrimitiveDef d, BpropFn bprop) {
  d.bprop = bprop;
  return d;
}

}  // namespace

void RegisterNnOps(std::vector<PrimitiveDef>* defs) {
  const AttrSpec axis = IntAttr("axis", -1);
  defs->push_back(WithBprop(MakeDef(PrimId::kSoftmax, 1, 1, InferSoftmax, {axis}), BpropSoftmax));
  defs->push_back(
      WithBprop(MakeDef(PrimId::kLogSoftmax, 1, 1, InferSoftmax, {axis}), BpropLogSoftmax));
  defs->push_back(WithBprop(
      MakeDef(PrimId::kSoftmaxCrossEntropy, 2, 2, InferSoftmaxCrossEntropy, {axis}),
      BpropSoftmaxCrossEntropy));
  defs->push_back(
      WithBprop(MakeDef(PrimId::kSparseSoftmaxCrossEntropy, 2, 2, InferSparseSoftmaxCrossEntropy),
                BpropSparseSoftmaxCrossEntropy));
  defs->push_back(WithBprop(MakeDef(PrimId::kBatchNorm, 3, 3, InferBatchNorm,
                                    {FloatAttr("epsilon", 1e-5), IntAttr("axis", 1)}),
                            BpropBatchNorm));
  defs->push_back(WithBprop(MakeDef(PrimId::kLayerNorm, 3, 3, InferLayerNorm,
                                    {IntAttr("begin_norm_axis", -1), FloatAttr("epsilon", 1e-5)}),
                            BpropLayerNorm));
  PrimitiveDef dropout = WithBprop(
      MakeDef(PrimId::kDropout, 1, 1, InferDropout, {FloatAttr("rate", 0.5), IntAttr("seed", 0)}),
      BpropDropout);
  dropout.linear = true;  // a fixed mask times x
  defs->push_back(std::move(dropout));
}

}  // namespace ops
}  // namespace kgrad
