// ONNX op mappings: the classification losses PyTorch exports for F.cross_entropy
// and F.nll_loss (the exporter fuses nll_loss(log_softmax(x)) into
// SoftmaxCrossEntropyLoss), as exact compositions:
//
//   logp       = log_softmax(scores, axis=1)     (SoftmaxCrossEntropyLoss only)
//   keep[n..]  = target[n..] != ignore_index     (when ignore_index is given)
//   t[n..]     = keep ? target[n..] : 0          (a safe index for the ignored)
//   w[n..]     = weight[t[n..]] * keep           (1 * keep without weights)
//   loss[n..]  = -sum_c logp[n, c, ..] * one_hot(t, C, axis=1)[n, c, ..] * w[n..]
//   reduction: none -> loss; sum -> sum(loss); mean -> sum(loss) / sum(w)
//              (the plain mean when there is neither weight nor ignore_index).
//
// one_hot picks the target's log-probability with a product that the existing
// rules differentiate (the cotangent of logp is -w * one_hot); its gradient in
// the integer target is zero, as it should be. A mean over only ignored targets is
// 0/0 = NaN, as in PyTorch and ONNX's reference.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"

namespace kgrad {
namespace onnx_import {
namespace {

struct LossInputs {
  ImportedValue logp;    // [N, C, d1, ...]
  ImportedValue target;  // [N, d1, ...], integer
  std::optional<ImportedValue> weight;  // [C]
};

absl::Status CheckShapes(NodeContext& c, const LossInputs& in) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, c.TensorType(in.logp));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(in.target));
  if (x->rank() < 2 || t->rank() != x->rank() - 1) {
    return c.Error(absl::StrCat("needs scores [N, C, d1, ...] and a target [N, d1, ...], got ",
                                x->ToString(), " and ", t->ToString()));
  }
  if (!IsInteger(t->dtype())) {
    return c.Error(absl::StrCat("the target must be an i32 or i64 tensor, got ", t->ToString()));
  }
  for (int i = 0; i < t->rank(); ++i) {
    int64_t a = x->shape()[i == 0 ? 0 : i + 1], b = t->shape()[i];
    if (!UnifyDims(a, b).has_value()) {
      return c.Error(absl::StrCat("the target ", t->ToString(), " does not match the scores ",
                                  x->ToString()));
    }
  }
  if (in.weight.has_value()) {
    KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* w, c.TensorType(*in.weight));
    if (w->rank() != 1 || w->dtype() != x->dtype() ||
        !UnifyDims(w->shape()[0], x->shape()[1]).has_value()) {
      return c.Error(absl::StrCat("the weight must be a [C] tensor of the scores' dtype, got ",
                                  w->ToString(), " for scores ", x->ToString()));
    }
  }
  return absl::OkStatus();
}

// The per-element weights w (null when every element weighs 1) and the safe target.
struct Picks {
  ImportedValue target;
  std::optional<ImportedValue> w;
};

absl::StatusOr<Picks> Weights(NodeContext& c, const LossInputs& in) {
  Picks p{in.target, in.weight};
  std::optional<ImportedValue> keep;
  if (c.HasAttr("ignore_index")) {
    KGRAD_ASSIGN_OR_RETURN(int64_t ignore, c.Int("ignore_index", 0));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue k, c.ScalarLike(in.target, static_cast<double>(ignore)));
    KGRAD_ASSIGN_OR_RETURN(keep, c.Emit(PrimId::kNotEqual, {in.target, k}));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue zero, c.ScalarLike(in.target, 0));
    KGRAD_ASSIGN_OR_RETURN(p.target, c.Emit(PrimId::kSelect, {*keep, in.target, zero}));
  }
  if (p.w.has_value()) {
    KGRAD_ASSIGN_OR_RETURN(p.w, c.Emit(PrimId::kGather, {*p.w, p.target}, {{"axis", int64_t{0}}}));
  }
  if (keep.has_value()) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue zero, c.ScalarLike(in.logp, 0));
    ImportedValue one;
    if (!p.w.has_value()) {
      KGRAD_ASSIGN_OR_RETURN(one, c.ScalarLike(in.logp, 1));
    }
    KGRAD_ASSIGN_OR_RETURN(p.w, c.Emit(PrimId::kSelect, {*keep, p.w.has_value() ? *p.w : one, zero}));
  }
  return p;
}

absl::StatusOr<ImportedValue> Reduce(NodeContext& c, const ImportedValue& loss,
                                     const std::optional<ImportedValue>& w) {
  KGRAD_ASSIGN_OR_RETURN(std::string reduction, c.String("reduction", "mean"));
  AttrMap all = {{"axes", std::vector<int64_t>{}}, {"keepdims", false}};
  if (reduction == "none") return loss;
  if (reduction == "sum") return c.Emit(PrimId::kReduceSum, {loss}, all);
  if (reduction != "mean") {
    return c.Error(absl::StrCat("reduction must be none, sum or mean, got '", reduction, "'"));
  }
  if (!w.has_value()) return c.Emit(PrimId::kReduceMean, {loss}, all);
  KGRAD_ASSIGN_OR_RETURN(ImportedValue total, c.Emit(PrimId::kReduceSum, {loss}, all));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue weight, c.Emit(PrimId::kReduceSum, {*w}, all));
  return c.Emit(PrimId::kDiv, {total, weight});
}

// The negative log-likelihood of `in`, reduced as the node says.
absl::StatusOr<ImportedValue> Nll(NodeContext& c, const LossInputs& in) {
  KGRAD_RETURN_IF_ERROR(CheckShapes(c, in));
  KGRAD_ASSIGN_OR_RETURN(int64_t classes, c.StaticDim(in.logp, 1, "class count"));
  KGRAD_ASSIGN_OR_RETURN(Picks p, Weights(c, in));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, c.TensorType(in.logp));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue hot,
                         c.Emit(PrimId::kOneHot, {p.target},
                                {{"depth", classes}, {"axis", int64_t{1}}, {"dtype", x->dtype()}}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue picked, c.Emit(PrimId::kMul, {in.logp, hot}));
  KGRAD_ASSIGN_OR_RETURN(picked, c.Emit(PrimId::kReduceSum, {picked},
                                        {{"axes", std::vector<int64_t>{1}}, {"keepdims", false}}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue loss, c.Emit(PrimId::kNeg, {picked}));
  if (p.w.has_value()) {
    KGRAD_ASSIGN_OR_RETURN(loss, c.Emit(PrimId::kMul, {loss, *p.w}));
  }
  return Reduce(c, loss, p.w);
}

absl::StatusOr<LossInputs> ReadInputs(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 3));
  LossInputs in;
  KGRAD_ASSIGN_OR_RETURN(in.logp, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(in.target, c.Input(1));
  if (c.HasInput(2)) {
    KGRAD_ASSIGN_OR_RETURN(in.weight, c.Input(2));
  }
  return in;
}

// NegativeLogLikelihoodLoss(input, target[, weight]){ignore_index, reduction}.
Outputs NegativeLogLikelihoodLoss(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(LossInputs in, ReadInputs(c));
  return OneOutput(Nll(c, in));
}

// SoftmaxCrossEntropyLoss(scores, labels[, weights]){ignore_index, reduction} ->
// (loss, log_prob): the NLL of log_softmax(scores) along the class axis 1.
Outputs SoftmaxCrossEntropyLoss(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(2));
  KGRAD_ASSIGN_OR_RETURN(LossInputs in, ReadInputs(c));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, c.TensorType(in.logp));
  if (x->rank() < 2) return c.Error(absl::StrCat("needs scores [N, C, ...], got ", x->ToString()));
  KGRAD_ASSIGN_OR_RETURN(in.logp, c.Emit(PrimId::kLogSoftmax, {in.logp}, {{"axis", int64_t{1}}}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue loss, Nll(c, in));
  return std::vector<ImportedValue>{loss, in.logp};
}

}  // namespace

void AddLossOps(OpTable* t) {
  AddMappings(t, {{"NegativeLogLikelihoodLoss", NegativeLogLikelihoodLoss},
                  {"SoftmaxCrossEntropyLoss", SoftmaxCrossEntropyLoss}});
}

}  // namespace onnx_import
}  // namespace kgrad
