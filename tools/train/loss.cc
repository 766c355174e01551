#include "tools/train/loss.h"

#include "absl/strings/str_cat.h"

namespace kgrad {
namespace train {
namespace {

bool IsFloat(DType d) { return d == DType::kFloat32 || d == DType::kFloat64; }

AnfNode* Mean(GraphBuilder& b, AnfNode* x) { return b.Op(PrimId::kReduceMean, {x}); }

AnfNode* Scalar(GraphBuilder& b, DType d, double v) { return b.Const(Value(*Tensor::Full(d, {}, v))); }

}  // namespace

absl::StatusOr<LossKind> ParseLossKind(absl::string_view name) {
  if (name == "none") return LossKind::kNone;
  if (name == "cross_entropy") return LossKind::kCrossEntropy;
  if (name == "nll") return LossKind::kNll;
  if (name == "mse") return LossKind::kMse;
  if (name == "bce_with_logits") return LossKind::kBceWithLogits;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown loss '", name, "' (cross_entropy, nll, mse, bce_with_logits or none)"));
}

std::string LossKindName(LossKind kind) {
  switch (kind) {
    case LossKind::kNone:
      return "none";
    case LossKind::kCrossEntropy:
      return "cross_entropy";
    case LossKind::kNll:
      return "nll";
    case LossKind::kMse:
      return "mse";
    case LossKind::kBceWithLogits:
      return "bce_with_logits";
  }
  return "?";
}

absl::StatusOr<AbstractPtr> LossTargetType(LossKind kind, const AbstractPtr& out,
                                           const std::string& what) {
  const AbstractTensor* t = AsTensor(out);
  auto refuse = [&](const std::string& want) {
    return absl::InvalidArgumentError(absl::StrCat("loss ", LossKindName(kind), " wants ", want, "; ",
                                                   what, " is ", out ? out->ToString() : "unknown"));
  };
  if (t == nullptr || !IsFloat(t->dtype())) return refuse("a float tensor");
  switch (kind) {
    case LossKind::kNone:
      if (t->shape().size() != 0 && !(t->shape().size() == 1 && t->shape()[0] == 1)) {
        return refuse("one number (the model computes its own loss)");
      }
      return AbstractPtr(nullptr);
    case LossKind::kCrossEntropy:
    case LossKind::kNll:
      if (t->shape().size() != 2) return refuse("scores of rank 2, [examples, classes]");
      if (kind == LossKind::kNll && t->shape()[1] < 0) {
        return refuse("a known number of classes");
      }
      return MakeAbstractTensor(DType::kInt64, Shape{t->shape()[0]});
    case LossKind::kMse:
    case LossKind::kBceWithLogits:
      return out;
  }
  return refuse("a known loss");
}

AnfNode* BuildLoss(GraphBuilder& b, LossKind kind, AnfNode* out, AnfNode* target,
                   const AbstractTensor& out_type) {
  const DType d = out_type.dtype();
  switch (kind) {
    case LossKind::kNone:
      return b.Op(PrimId::kReshape, {out}, {{"shape", std::vector<int64_t>{}}});
    case LossKind::kCrossEntropy:
      return Mean(b, b.Op(PrimId::kSparseSoftmaxCrossEntropy, {out, target}));
    case LossKind::kNll: {
      AnfNode* mask = b.Op(PrimId::kOneHot, {target},
                           {{"depth", out_type.shape()[1]}, {"dtype", d}});
      AnfNode* picked = b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {out, mask})},
                             {{"axes", std::vector<int64_t>{1}}});
      return b.Op(PrimId::kNeg, {Mean(b, picked)});
    }
    case LossKind::kMse:
      return Mean(b, b.Op(PrimId::kSquare, {b.Op(PrimId::kSub, {out, target})}));
    case LossKind::kBceWithLogits: {
      AnfNode* m = b.Op(PrimId::kRelu, {b.Op(PrimId::kNeg, {out})});
      AnfNode* lin = b.Op(PrimId::kMul, {b.Op(PrimId::kSub, {Scalar(b, d, 1), target}), out});
      AnfNode* e1 = b.Op(PrimId::kExp, {b.Op(PrimId::kNeg, {m})});
      AnfNode* e2 = b.Op(PrimId::kExp, {b.Op(PrimId::kSub, {b.Op(PrimId::kNeg, {out}), m})});
      AnfNode* lse = b.Op(PrimId::kLog, {b.Op(PrimId::kAdd, {e1, e2})});
      return Mean(b, b.Op(PrimId::kAdd, {b.Op(PrimId::kAdd, {lin, m}), lse}));
    }
  }
  return out;
}

}  // namespace train
}  // namespace kgrad
