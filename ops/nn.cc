#include "ops/nn.h"

#include <cmath>
#include <optional>
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

namespace kgrad {
namespace ops {
namespace {

// Input i of an op on the floating x: floating too, and of x's dtype.
absl::Status CheckLikeX(const Primitive& p, int i, TensorType x, TensorType t) {
  KGRAD_RETURN_IF_ERROR(CheckFloat(i, t));
  if (t.dtype == x.dtype) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("input ", i, " must be ", DTypeName(x.dtype), " like input 0, got ",
                   t.ToString(), " (the inputs of ", p.name(), " have the same dtype)"));
}

// `a`'s dims with those it does not know taken from `b`; nullopt when the ranks
// or two known dims differ.
std::optional<Shape> MergeShapes(TensorType a, TensorType b) {
  if (a.rank() != b.rank()) return std::nullopt;
  Shape out(a.shape.begin(), a.shape.end());
  for (int i = 0; i < a.rank(); ++i) {
    std::optional<int64_t> d = UnifyDims(out[i], b.shape[i]);
    if (!d.has_value()) return std::nullopt;
    out[i] = *d;
  }
  return out;
}

absl::StatusOr<double> EpsilonAttr(const Primitive& p, CheckedBy by) {
  const double eps = p.GetFloat("epsilon");
  if (eps >= 0 && std::isfinite(eps)) return eps;
  return absl::InvalidArgumentError(
      absl::StrCat("attribute 'epsilon'", by == CheckedBy::kInference ? " of " + p.name() : "",
                   " must be finite and >= 0, got ", eps));
}

// An affine parameter (scale or bias, input i) of x's dtype and of shape `want`
// (unknown dims on either side match anything).
absl::Status CheckAffine(const Primitive& p, int i, TensorType x, TensorType t,
                         absl::Span<const int64_t> want, CheckedBy by) {
  KGRAD_RETURN_IF_ERROR(CheckLikeX(p, i, x, t));
  bool ok = t.rank() == static_cast<int>(want.size());
  for (int d = 0; ok && d < t.rank(); ++d) {
    ok = t.shape[d] < 0 || want[d] < 0 || t.shape[d] == want[d];
  }
  if (ok) return absl::OkStatus();
  const bool inference = by == CheckedBy::kInference;
  return absl::InvalidArgumentError(
      absl::StrCat("input ", i, inference ? " must be of shape " : " must have shape ",
                   ShapeToString(want), ", got ", t.ToString()));
}

}  // namespace

// ----- Checks shared with the kernels ----------------------------------------------
absl::StatusOr<int> ParseSoftmax(const Primitive& p, TensorType x) {
  KGRAD_RETURN_IF_ERROR(CheckFloat(0, x));
  return AxisAttr(p, "axis", x);
}

absl::StatusOr<CrossEntropyAxis> ParseSoftmaxCrossEntropy(const Primitive& p, TensorType logits,
                                                          TensorType labels, CheckedBy by) {
  KGRAD_RETURN_IF_ERROR(CheckFloat(0, logits));
  KGRAD_RETURN_IF_ERROR(CheckLikeX(p, 1, logits, labels));
  std::optional<Shape> shape = MergeShapes(logits, labels);
  if (!shape.has_value()) {
    return absl::InvalidArgumentError(
        by == CheckedBy::kInference
            ? absl::StrCat("logits and labels must have the same shape, got ", logits.ToString(),
                           " and ", labels.ToString())
            : absl::StrCat("labels must have the shape of logits, got logits ", logits.ToString(),
                           " and labels ", labels.ToString()));
  }
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(p, "axis", logits));
  shape->erase(shape->begin() + axis);
  return CrossEntropyAxis{axis, *std::move(shape)};
}

absl::StatusOr<CrossEntropyAxis> ParseSoftmaxCrossEntropyKernel(
    const Primitive& p, const std::array<const Tensor*, 2>& in) {
  return ParseSoftmaxCrossEntropy(p, *in[0], *in[1], CheckedBy::kKernel);
}

absl::StatusOr<Shape> SparseSoftmaxCrossEntropyShape(TensorType logits, TensorType labels) {
  KGRAD_RETURN_IF_ERROR(CheckFloat(0, logits));
  if (logits.rank() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("input 0 must be logits of rank 2 [N, C], got ", logits.ToString()));
  }
  const int64_t n = logits.shape[0];
  const int64_t m = labels.rank() == 1 ? labels.shape[0] : kUnknownDim;
  if (!IsInteger(labels.dtype) || labels.rank() != 1 ||
      !UnifyDims(n, m).has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input 1 must be i32 or i64 labels ", ShapeToString({n}), ", got ", labels.ToString(),
        " (labels of rank 1 with one entry per row of logits: logits ", logits.ToString(),
        ", labels ", labels.ToString(), ")"));
  }
  return Shape{*UnifyDims(n, m)};
}

absl::Status LabelOutOfRange(int64_t label, int64_t position, int64_t classes) {
  return absl::OutOfRangeError(absl::StrCat("label ", label, " at position ", position,
                                            " is out of range [0, ", classes, ")"));
}

absl::StatusOr<NormAttrs> ParseBatchNorm(const Primitive& p, TensorType x, TensorType scale,
                                         TensorType bias, CheckedBy by) {
  KGRAD_RETURN_IF_ERROR(CheckFloat(0, x));
  if (x.rank() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("input 0 must be a tensor of rank >= 2, got ", x.ToString()));
  }
  NormAttrs a;
  KGRAD_ASSIGN_OR_RETURN(a.axis, AxisAttr(p, "axis", x));
  KGRAD_ASSIGN_OR_RETURN(a.epsilon, EpsilonAttr(p, by));
  const int64_t channels[1] = {x.shape[a.axis]};
  KGRAD_RETURN_IF_ERROR(CheckAffine(p, 1, x, scale, channels, by));
  KGRAD_RETURN_IF_ERROR(CheckAffine(p, 2, x, bias, channels, by));
  return a;
}

absl::StatusOr<NormAttrs> ParseLayerNorm(const Primitive& p, TensorType x, TensorType scale,
                                         TensorType bias, CheckedBy by) {
  KGRAD_RETURN_IF_ERROR(CheckFloat(0, x));
  NormAttrs a;
  KGRAD_ASSIGN_OR_RETURN(a.axis, AxisAttr(p, "begin_norm_axis", x));
  KGRAD_ASSIGN_OR_RETURN(a.epsilon, EpsilonAttr(p, by));
  const absl::Span<const int64_t> normalized = x.shape.subspan(a.axis);
  KGRAD_RETURN_IF_ERROR(CheckAffine(p, 1, x, scale, normalized, by));
  KGRAD_RETURN_IF_ERROR(CheckAffine(p, 2, x, bias, normalized, by));
  return a;
}

namespace {

// dy of a norm's gradient: x's dtype and shape (unknown dims match anything).
absl::Status CheckNormGradDy(const Primitive& p, TensorType x, TensorType dy) {
  KGRAD_RETURN_IF_ERROR(CheckLikeX(p, 2, x, dy));
  if (MergeShapes(x, dy).has_value()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("input 2 (dy) must be shaped like input 0 ",
                                                 x.ToString(), ", got ", dy.ToString()));
}

}  // namespace

absl::StatusOr<NormAttrs> ParseBatchNormGrad(const Primitive& p, TensorType x, TensorType scale,
                                             TensorType dy, CheckedBy by) {
  KGRAD_ASSIGN_OR_RETURN(NormAttrs a, ParseBatchNorm(p, x, scale, scale, by));
  KGRAD_RETURN_IF_ERROR(CheckNormGradDy(p, x, dy));
  return a;
}

absl::StatusOr<NormAttrs> ParseLayerNormGrad(const Primitive& p, TensorType x, TensorType scale,
                                             TensorType dy, CheckedBy by) {
  KGRAD_ASSIGN_OR_RETURN(NormAttrs a, ParseLayerNorm(p, x, scale, scale, by));
  KGRAD_RETURN_IF_ERROR(CheckNormGradDy(p, x, dy));
  return a;
}

absl::StatusOr<NormAttrs> ParseBatchNormGradKernel(const Primitive& p,
                                                   const std::array<const Tensor*, 3>& in) {
  return ParseBatchNormGrad(p, *in[0], *in[1], *in[2], CheckedBy::kKernel);
}

absl::StatusOr<NormAttrs> ParseLayerNormGradKernel(const Primitive& p,
                                                   const std::array<const Tensor*, 3>& in) {
  return ParseLayerNormGrad(p, *in[0], *in[1], *in[2], CheckedBy::kKernel);
}

absl::StatusOr<NormAttrs> ParseBatchNormKernel(const Primitive& p,
                                               const std::array<const Tensor*, 3>& in) {
  return ParseBatchNorm(p, *in[0], *in[1], *in[2], CheckedBy::kKernel);
}

absl::StatusOr<NormAttrs> ParseLayerNormKernel(const Primitive& p,
                                               const std::array<const Tensor*, 3>& in) {
  return ParseLayerNorm(p, *in[0], *in[1], *in[2], CheckedBy::kKernel);
}

absl::StatusOr<DropoutAttrs> ParseDropout(const Primitive& p, TensorType x) {
  KGRAD_RETURN_IF_ERROR(CheckFloat(0, x));
  const double rate = p.GetFloat("rate");
  if (!(rate >= 0 && rate < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'rate' of ", p.name(), " must be in [0, 1), got ", rate));
  }
  return DropoutAttrs{rate, static_cast<uint64_t>(p.GetInt("seed"))};
}

absl::Status CheckDynamicDropout(const Primitive& p, TensorType x, TensorType rate) {
  KGRAD_RETURN_IF_ERROR(CheckFloat(0, x));
  KGRAD_RETURN_IF_ERROR(CheckLikeX(p, 1, x, rate));
  // A dim not known here is checked by the kernels.
  if (rate.rank() == 0 || (rate.rank() == 1 && (rate.shape[0] == 1 || rate.shape[0] < 0))) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("input 1 (rate) of ", p.name(),
                                                 " must be one value (rank 0 or shape [1]), got ",
                                                 rate.ToString()));
}

absl::StatusOr<DropoutAttrs> ParseDynamicDropout(const Primitive& p, const Tensor& x, const Tensor& rate) {
  KGRAD_RETURN_IF_ERROR(CheckDynamicDropout(p, x, rate));
  const double r = rate.ElementAsDouble(0);
  if (!(r >= 0 && r < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("input 1 (rate) of ", p.name(), " must be in [0, 1), got ", r));
  }
  return DropoutAttrs{r, static_cast<uint64_t>(p.GetInt("seed"))};
}

namespace {

// ----- Inference -------------------------------------------------------------------
// softmax(x){axis}: exp(x - max) / sum(exp(x - max)) along axis.
// log_softmax(x){axis}: x - max - log(sum(exp(x - max))) along axis.
absl::StatusOr<AbstractPtr> InferSoftmax(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_RETURN_IF_ERROR(ParseSoftmax(c.prim, *x).status());
  return c.args[0];
}

// softmax_cross_entropy(logits, labels){axis}: -sum(labels * log_softmax(logits))
// along axis, which is removed from the shape.
absl::StatusOr<AbstractPtr> InferSoftmaxCrossEntropy(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* logits, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* labels, TensorArg(c, 1));
  KGRAD_ASSIGN_OR_RETURN(CrossEntropyAxis ce, ParseSoftmaxCrossEntropy(c.prim, *logits, *labels,
                                                                       CheckedBy::kInference));
  return MakeAbstractTensor(logits->dtype(), std::move(ce.out));
}

// sparse_softmax_cross_entropy(logits[N, C], labels[N]): -log_softmax(logits)[n,
// labels[n]]; labels outside [0, C) are a run-time error.
absl::StatusOr<AbstractPtr> InferSparseSoftmaxCrossEntropy(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* logits, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* labels, TensorArg(c, 1));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, SparseSoftmaxCrossEntropyShape(*logits, *labels));
  return MakeAbstractTensor(logits->dtype(), std::move(shape));
}

// batch_norm(x, scale[C], bias[C]){epsilon, axis}: training-mode normalisation,
// y = (x - mean_c) * rsqrt(var_c + eps) * scale[c] + bias[c] with the batch
// mean and biased variance of channel c (the dim `axis`) over all other dims.
// layer_norm(x, scale, bias){begin_norm_axis, epsilon}: normalises over the dims
// [begin_norm_axis, rank): y = (x - mean) * rsqrt(var + eps) * scale + bias,
// scale and bias of shape x.shape[begin_norm_axis:].
template <auto kParse>
absl::StatusOr<AbstractPtr> InferNorm(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* scale, TensorArg(c, 1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* bias, TensorArg(c, 2));
  KGRAD_RETURN_IF_ERROR(kParse(c.prim, *x, *scale, *bias, CheckedBy::kInference).status());
  return c.args[0];
}
constexpr auto InferBatchNorm = InferNorm<ParseBatchNorm>;
constexpr auto InferLayerNorm = InferNorm<ParseLayerNorm>;

// batch_norm_grad(x, scale, dy){epsilon, axis} and layer_norm_grad(x, scale,
// dy){begin_norm_axis, epsilon}: (dx, dscale, dbias) of the norm at x with scale
// (its bias does not enter), shaped like (x, scale, scale).
template <auto kParse>
absl::StatusOr<AbstractPtr> InferNormGrad(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* scale, TensorArg(c, 1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* dy, TensorArg(c, 2));
  KGRAD_RETURN_IF_ERROR(kParse(c.prim, *x, *scale, *dy, CheckedBy::kInference).status());
  return MakeAbstractTuple({c.args[0], c.args[1], c.args[1]});
}
constexpr auto InferBatchNormGrad = InferNormGrad<ParseBatchNormGrad>;
constexpr auto InferLayerNormGrad = InferNormGrad<ParseLayerNormGrad>;

// dropout(x){rate, seed}: x * keep / (1 - rate), keep[i] = u(seed, i) >= rate with
// the counter-based hash of backends/cpu/dropout_hash.h.
absl::StatusOr<AbstractPtr> InferDropout(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_RETURN_IF_ERROR(ParseDropout(c.prim, *x).status());
  return c.args[0];
}

// random_uniform_like(x){low, high, seed, dtype} and random_normal_like(x){mean,
// scale, seed, dtype}: a float tensor of x's shape whose element i is a draw of
// the counter-based hash at (seed, i) (backends/cpu/dropout_hash.h): the same
// numbers for the same seed, shape and attributes, on every device.
absl::StatusOr<AbstractPtr> InferRandomLike(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  const DType t = c.prim.GetDType("dtype");
  if (t != DType::kFloat32 && t != DType::kFloat64) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.prim.name(), ": attribute 'dtype' must be f32 or f64, got ", DTypeName(t)));
  }
  return MakeAbstractTensor(t, x->shape());
}

absl::StatusOr<AbstractPtr> InferDynamicDropout(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* rate, TensorArg(c, 1));
  KGRAD_RETURN_IF_ERROR(CheckDynamicDropout(c.prim, *x, *rate));
  return c.args[0];
}

// ----- Gradient rules -------------------------------------------------------------
// The primitive's axis attribute `name`, normalised against input 0's rank.
absl::StatusOr<int> BpropAxis(BpropContext& c, const std::string& name, int rank) {
  absl::StatusOr<int> axis = NormalizeAxis(c.prim().GetInt(name), rank);
  if (!axis.ok()) return c.Error(std::string(axis.status().message()));
  return axis;
}

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
// Residuals: save_outputs (default) y; save_inputs, recompute x, y again.
absl::Status BpropSoftmax(BpropContext& c) {
  AnfNode* y = c.OutOrRecomputed();
  AnfNode* dot = c.ReduceSum(c.Mul(c.Dout(), y), {c.prim().GetInt("axis")}, true);
  c.SetGrad(0, c.Mul(y, c.Sub(c.Dout(), dot)));
  return absl::OkStatus();
}

// Forward: y = log_softmax(x) along axis.
// Backward: dx = dy - exp(y) * S, S = sum(dy, axis) (exp(y) = softmax(x)).
// Where exp(y) > 1/2 (a dominant class) this is a cancellation, dy - S against
// a (1 - exp(y)) S that float32's exp(y) rounds away: a confident prediction's
// loss gradient kept three digits (tests/precision). There it is computed as
// (dy - S) - expm1(y) * S, the same value, whose parts do not cancel (a one-hot
// dy has dy - S = 0 exactly at its class).
// Residuals: save_outputs (default) y; save_inputs, recompute x, y again.
absl::Status BpropLogSoftmax(BpropContext& c) {
  AnfNode* y = c.OutOrRecomputed();
  AnfNode* total = c.ReduceSum(c.Dout(), {c.prim().GetInt("axis")}, true);
  KGRAD_ASSIGN_OR_RETURN(AnfNode* half, c.ScalarLike(-0.69314718055994531, 0));  // log(1/2)
  AnfNode* dominant = c.Op(PrimId::kGreater, {y, half});
  AnfNode* near_one = c.Sub(c.Sub(c.Dout(), total), c.Mul(c.Op(PrimId::kExpm1, {y}), total));
  c.SetGrad(0, c.Select(dominant, near_one, c.Sub(c.Dout(), c.Mul(c.Exp(y), total))));
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
// labels get nothing. softmax - 1 at the label is expm1(log_softmax), so
// dx = (t * expm1(lp) + (1 - t) * exp(lp)) * dl with t = one_hot(labels) and
// lp = log_softmax(x): no cancellation when the label's probability is near 1
// (a confident prediction; tests/precision).
absl::Status BpropSparseSoftmaxCrossEntropy(BpropContext& c) {
  KGRAD_ASSIGN_OR_RETURN(Shape shape, c.InShape(0));
  KGRAD_ASSIGN_OR_RETURN(DType dtype, c.InDType(0));
  int64_t classes = shape.size() == 2 ? shape[1] : kUnknownDim;
  if (classes < 0) {
    return c.Error(
        "the gradient rule needs the number of classes (dim 1 of the logits) for one_hot, "
        "which inference did not determine (declare the graph's parameter types)");
  }
  AnfNode* target = c.Op(PrimId::kOneHot, {c.I(1)},
                         {{"depth", classes}, {"dtype", dtype}, {"axis", int64_t{-1}}});
  AnfNode* lp = c.Op(PrimId::kLogSoftmax, {c.I(0)}, {{"axis", int64_t{-1}}});
  AnfNode* dl = c.Op(PrimId::kExpandDims, {c.Dout()}, {{"axis", int64_t{-1}}});
  KGRAD_ASSIGN_OR_RETURN(AnfNode* one, c.ScalarLike(1, 0));
  AnfNode* at_label = c.Mul(target, c.Op(PrimId::kExpm1, {lp}));
  AnfNode* elsewhere = c.Mul(c.Sub(one, target), c.Exp(lp));
  c.SetGrad(0, c.Mul(c.Add(at_label, elsewhere), dl));
  return absl::OkStatus();
}

// Where a norm's statistics and affine parameters live: the axes its mean and
// variance reduce over (kept as size 1), and, for batch_norm, the scale as
// [1, .., C, .., 1] (layer_norm's scale broadcasts as it is).
struct NormLayout {
  std::vector<int64_t> axes;
  std::vector<int64_t> channel_shape;  // empty for layer_norm
};

absl::StatusOr<NormLayout> BatchNormLayout(BpropContext& c) {
  KGRAD_ASSIGN_OR_RETURN(int rank, c.InRank(0));
  KGRAD_ASSIGN_OR_RETURN(int axis, BpropAxis(c, "axis", rank));
  NormLayout l;
  l.channel_shape.assign(rank, 1);
  l.channel_shape[axis] = -1;
  for (int d = 0; d < rank; ++d) {
    if (d != axis) l.axes.push_back(d);
  }
  return l;
}

absl::StatusOr<NormLayout> LayerNormLayout(BpropContext& c) {
  KGRAD_ASSIGN_OR_RETURN(int rank, c.InRank(0));
  KGRAD_ASSIGN_OR_RETURN(int begin, BpropAxis(c, "begin_norm_axis", rank));
  NormLayout l;
  for (int d = begin; d < rank; ++d) l.axes.push_back(d);
  return l;
}

// An affine parameter (or its cotangent) in a form that broadcasts against x.
AnfNode* Broadcastable(BpropContext& c, const NormLayout& l, AnfNode* v) {
  if (l.channel_shape.empty()) return v;
  return c.Op(PrimId::kReshape, {v}, {{"shape", l.channel_shape}});
}

// A value shaped like x summed to the affine parameters' shape (input 1).
AnfNode* SumToAffine(BpropContext& c, const NormLayout& l, AnfNode* v) {
  if (l.channel_shape.empty()) return c.SumToInput(v, 1);
  return c.ReduceSum(v, l.axes, false);
}

// Forward: y = xhat * scale + bias, xhat = (x - mean) * rsqrt(var + eps), batch
// mean and biased var over every dim but `axis` (batch_norm, training mode) or
// over the dims from begin_norm_axis on (layer_norm).
// Backward: (dx, dscale, dbias) = batch_norm_grad / layer_norm_grad(x, scale,
// dy), one kernel: dbias = sum'(dy), dscale = sum'(dy * xhat),
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale (sum' over
// the dims scale broadcasts along). The kernel keeps the statistics and sums in
// double: over a tiny batch dx is a near-cancellation (xhat^2 ~ 1 at two values
// per channel) that float32 steps lose (tests/precision).
absl::Status BpropNorm(BpropContext& c, PrimId grad) {
  AnfNode* g = c.Op(grad, {c.I(0), c.I(1), c.Dout()}, c.prim().attrs());
  for (int i = 0; i < 3; ++i) c.SetGrad(i, c.GetItem(g, i));
  return absl::OkStatus();
}

absl::Status BpropBatchNorm(BpropContext& c) { return BpropNorm(c, PrimId::kBatchNormGrad); }
absl::Status BpropLayerNorm(BpropContext& c) { return BpropNorm(c, PrimId::kLayerNormGrad); }

// Forward: (dx, ds, db) = norm_grad(x, s, dy) as above; with h = xhat,
// r = rstd, g = dy * s and Q(u) = u - mean(u) - h * mean(u * h):
// dx = r Q(g), ds = sum'(dy h), db = sum'(dy).
// Backward, for the cotangents (A, B, E) (B and E broadcast like s):
//   ddy = s r Q(A) + B h + E     (Q is self-adjoint),
//   ds  = sum'(dy r Q(A)),
//   dx  = r Q(B dy) - r^2 (h (mean(A g_c) - 3 mean(g h) mean(A h))
//                          + mean(g h) (A - mean(A)) + mean(A h) g_c),   g_c = g - mean(g),
// the x-derivative of <A, dx> + <B, ds> through mean, var and xhat (checked
// against central differences in float64, tests/ad/nn_grad_test).
absl::Status BpropNormGrad(BpropContext& c, const NormLayout& l) {
  KGRAD_ASSIGN_OR_RETURN(Normalized n, Normalize(c, l.axes));
  auto mean = [&](AnfNode* v) { return ReduceMeanKeep(c, v, l.axes); };
  AnfNode* a = c.GetItem(c.Dout(), 0);
  AnfNode* b = Broadcastable(c, l, c.GetItem(c.Dout(), 1));
  AnfNode* e = Broadcastable(c, l, c.GetItem(c.Dout(), 2));
  AnfNode* s = Broadcastable(c, l, c.I(1));
  AnfNode* dy = c.I(2);
  AnfNode* g = c.Mul(dy, s);
  AnfNode* qa = NormalizeGrad(c, n, a, l.axes);  // r Q(A)
  c.SetGrad(2, c.Add(c.Add(c.Mul(s, qa), c.Mul(b, n.xhat)), e));
  c.SetGrad(1, SumToAffine(c, l, c.Mul(dy, qa)));
  KGRAD_ASSIGN_OR_RETURN(AnfNode* three, c.ScalarLike(3, 0));
  AnfNode* gc = c.Sub(g, mean(g));
  AnfNode* gh = mean(c.Mul(g, n.xhat));
  AnfNode* ah = mean(c.Mul(a, n.xhat));
  AnfNode* along_h = c.Mul(n.xhat, c.Sub(mean(c.Mul(a, gc)), c.Mul(three, c.Mul(gh, ah))));
  AnfNode* inner = c.Add(c.Add(along_h, c.Mul(gh, c.Sub(a, mean(a)))), c.Mul(ah, gc));
  c.SetGrad(0, c.Sub(NormalizeGrad(c, n, c.Mul(b, dy), l.axes), c.Mul(c.Square(n.rstd), inner)));
  return absl::OkStatus();
}

absl::Status BpropBatchNormGrad(BpropContext& c) {
  KGRAD_ASSIGN_OR_RETURN(NormLayout l, BatchNormLayout(c));
  return BpropNormGrad(c, l);
}

absl::Status BpropLayerNormGrad(BpropContext& c) {
  KGRAD_ASSIGN_OR_RETURN(NormLayout l, LayerNormLayout(c));
  return BpropNormGrad(c, l);
}

// Forward: y = x * keep / (1 - rate), keep a fixed mask of (seed, element index).
// Backward: dx = dropout(dy) with the same rate and seed (the same mask).
absl::Status BpropDropout(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kDropout, {c.Dout()}, c.prim().attrs()));
  return absl::OkStatus();
}

// Forward: y = x * keep / (1 - r), keep[i] = u(seed, i) >= r.
// Backward: dx = dynamic_dropout(dy, r) (the same mask); dr = sum(dy * y) / (1 - r):
// the mask changes with r only where u(seed, i) == r (a null set, like relu's
// kink), so dy/dr = x * keep / (1 - r)^2 = y / (1 - r) almost everywhere.
absl::Status BpropDynamicDropout(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kDynamicDropout, {c.Dout(), c.I(1)}, c.prim().attrs()));
  KGRAD_ASSIGN_OR_RETURN(AnfNode* one, c.ScalarLike(1, 1));
  AnfNode* dot = c.ReduceSum(c.Mul(c.Dout(), c.Out()), {}, false);
  c.SetGrad(1, c.ReshapeLike(c.Div(dot, c.Sub(one, c.I(1))), c.I(1)));
  return absl::OkStatus();
}

}  // namespace

void RegisterNnOps(std::vector<PrimitiveDef>* defs) {
  const AttrSpec axis = IntAttr("axis", -1);
  defs->push_back(OpDef(PrimId::kSoftmax, 1, 1, InferSoftmax, {axis}).Bprop(BpropSoftmax));
  defs->push_back(OpDef(PrimId::kLogSoftmax, 1, 1, InferSoftmax, {axis}).Bprop(BpropLogSoftmax));
  defs->push_back(OpDef(PrimId::kSoftmaxCrossEntropy, 2, 2, InferSoftmaxCrossEntropy, {axis})
                      .Bprop(BpropSoftmaxCrossEntropy));
  defs->push_back(OpDef(PrimId::kSparseSoftmaxCrossEntropy, 2, 2, InferSparseSoftmaxCrossEntropy)
                      .Bprop(BpropSparseSoftmaxCrossEntropy));
  defs->push_back(OpDef(PrimId::kBatchNorm, 3, 3, InferBatchNorm,
                        {FloatAttr("epsilon", 1e-5), IntAttr("axis", 1)})
                      .Bprop(BpropBatchNorm));
  defs->push_back(OpDef(PrimId::kLayerNorm, 3, 3, InferLayerNorm,
                        {IntAttr("begin_norm_axis", -1), FloatAttr("epsilon", 1e-5)})
                      .Bprop(BpropLayerNorm));
  defs->push_back(OpDef(PrimId::kBatchNormGrad, 3, 3, InferBatchNormGrad,
                        {FloatAttr("epsilon", 1e-5), IntAttr("axis", 1)})
                      .Bprop(BpropBatchNormGrad));
  defs->push_back(OpDef(PrimId::kLayerNormGrad, 3, 3, InferLayerNormGrad,
                        {IntAttr("begin_norm_axis", -1), FloatAttr("epsilon", 1e-5)})
                      .Bprop(BpropLayerNormGrad));
  // dropout(x) = a fixed mask times x: linear.
  defs->push_back(
      OpDef(PrimId::kDropout, 1, 1, InferDropout, {FloatAttr("rate", 0.5), IntAttr("seed", 0)})
          .Bprop(BpropDropout)
          .ZeroIfAny({0})
          .Linear());
  // x gives only the shape: no gradient.
  defs->push_back(OpDef(PrimId::kRandomUniformLike, 1, 1, InferRandomLike,
                        {FloatAttr("low", 0.0), FloatAttr("high", 1.0), IntAttr("seed", 0),
                         DTypeAttr("dtype", DType::kFloat32)})
                      .ZeroGradient());
  defs->push_back(OpDef(PrimId::kRandomNormalLike, 1, 1, InferRandomLike,
                        {FloatAttr("mean", 0.0), FloatAttr("scale", 1.0), IntAttr("seed", 0),
                         DTypeAttr("dtype", DType::kFloat32)})
                      .ZeroGradient());
  // Linear in x only: the scale 1 / (1 - rate) is not linear in the rate.
  defs->push_back(OpDef(PrimId::kDynamicDropout, 2, 2, InferDynamicDropout, {IntAttr("seed", 0)})
                      .Bprop(BpropDynamicDropout)
                      .ZeroIfAny({0}));
}

}  // namespace ops
}  // namespace kgrad
