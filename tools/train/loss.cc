#include "tools/train/loss.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kgrad {
namespace train {
namespace {

bool IsFloat(DType d) { return d == DType::kFloat32 || d == DType::kFloat64; }

AnfNode* Mean(GraphBuilder& b, AnfNode* x) { return b.Op(PrimId::kReduceMean, {x}); }

AnfNode* Scalar(GraphBuilder& b, DType d, double v) { return b.Const(Value(*Tensor::Full(d, {}, v))); }

// Scores [N, C, d1, ...] as [N * d1 * ..., C] and their targets [N, d1, ...] as
// [N * d1 * ...]: the class axis moved last, the rest flattened (torch's K-dim
// cross_entropy and nll average over all N * d1 * ... positions alike).
// Rank-2 scores are returned as they are.
std::pair<AnfNode*, AnfNode*> PerPosition(GraphBuilder& b, AnfNode* out, AnfNode* target,
                                          const AbstractTensor& out_type) {
  const int64_t rank = static_cast<int64_t>(out_type.shape().size());
  if (rank == 2) return {out, target};
  std::vector<int64_t> perm = {0};
  for (int64_t a = 2; a < rank; ++a) perm.push_back(a);
  perm.push_back(1);
  AnfNode* last = b.Op(PrimId::kTranspose, {out}, {{"perm", perm}});
  AnfNode* flat = b.Op(PrimId::kReshape, {last}, {{"shape", std::vector<int64_t>{-1, out_type.shape()[1]}}});
  return {flat, b.Op(PrimId::kReshape, {target}, {{"shape", std::vector<int64_t>{-1}}})};
}

// cross_entropy in its three forms (loss.h).
AnfNode* CrossEntropy(GraphBuilder& b, AnfNode* out, AnfNode* target, const AbstractTensor& out_type,
                      const CrossEntropyOptions& ce) {
  const DType d = out_type.dtype();
  const double e = ce.label_smoothing;
  const std::vector<int64_t> classes_axis = {1};
  if (ce.probability_targets) {
    AnfNode* q = target;
    if (e > 0) {
      const double c = static_cast<double>(out_type.shape()[1]);
      q = b.Op(PrimId::kAdd, {b.Op(PrimId::kMul, {q, Scalar(b, d, 1 - e)}), Scalar(b, d, e / c)});
    }
    AnfNode* logp = b.Op(PrimId::kLogSoftmax, {out}, {{"axis", int64_t{1}}});
    AnfNode* dot = b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {q, logp})}, {{"axes", classes_axis}});
    return b.Op(PrimId::kNeg, {Mean(b, dot)});
  }
  auto [scores, classes] = PerPosition(b, out, target, out_type);
  AnfNode* picked = Mean(b, b.Op(PrimId::kSparseSoftmaxCrossEntropy, {scores, classes}));
  if (e == 0) return picked;
  AnfNode* logp = b.Op(PrimId::kLogSoftmax, {out}, {{"axis", int64_t{1}}});
  AnfNode* uniform = b.Op(PrimId::kNeg, {Mean(b, b.Op(PrimId::kReduceMean, {logp}, {{"axes", classes_axis}}))});
  return b.Op(PrimId::kAdd, {b.Op(PrimId::kMul, {picked, Scalar(b, d, 1 - e)}),
                             b.Op(PrimId::kMul, {uniform, Scalar(b, d, e)})});
}

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
                                           const std::string& what, const CrossEntropyOptions& ce) {
  const AbstractTensor* t = AsTensor(out);
  auto refuse = [&](const std::string& want) {
    return absl::InvalidArgumentError(absl::StrCat("loss ", LossKindName(kind), " wants ", want, "; ",
                                                   what, " is ", out ? out->ToString() : "unknown"));
  };
  if (kind != LossKind::kCrossEntropy && (ce.probability_targets || ce.label_smoothing != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("probability targets and label smoothing are options of "
                                                   "loss cross_entropy, not ", LossKindName(kind)));
  }
  if (!(ce.label_smoothing >= 0 && ce.label_smoothing <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("label smoothing must be in [0, 1], got ", ce.label_smoothing));
  }
  if (t == nullptr || !IsFloat(t->dtype())) return refuse("a float tensor");
  switch (kind) {
    case LossKind::kNone:
      if (t->shape().size() != 0 && !(t->shape().size() == 1 && t->shape()[0] == 1)) {
        return refuse("one number (the model computes its own loss)");
      }
      return AbstractPtr(nullptr);
    case LossKind::kCrossEntropy:
    case LossKind::kNll: {
      const Shape& s = t->shape();
      if (s.size() < 2) return refuse("scores of rank 2 or more, [examples, classes, d1, ...]");
      const bool needs_classes = kind == LossKind::kNll || s.size() > 2 ||
                                 (ce.probability_targets && ce.label_smoothing > 0);
      if (needs_classes && s[1] < 0) return refuse("a known number of classes");
      if (ce.probability_targets) return out;
      Shape target = {s[0]};
      target.insert(target.end(), s.begin() + 2, s.end());
      return MakeAbstractTensor(DType::kInt64, target);
    }
    case LossKind::kMse:
    case LossKind::kBceWithLogits:
      return out;
  }
  return refuse("a known loss");
}

AnfNode* BuildLoss(GraphBuilder& b, LossKind kind, AnfNode* out, AnfNode* target,
                   const AbstractTensor& out_type, const CrossEntropyOptions& ce) {
  const DType d = out_type.dtype();
  switch (kind) {
    case LossKind::kNone:
      return b.Op(PrimId::kReshape, {out}, {{"shape", std::vector<int64_t>{}}});
    case LossKind::kCrossEntropy:
      return CrossEntropy(b, out, target, out_type, ce);
    case LossKind::kNll: {
      auto [scores, classes] = PerPosition(b, out, target, out_type);
      AnfNode* mask = b.Op(PrimId::kOneHot, {classes},
                           {{"depth", out_type.shape()[1]}, {"dtype", d}});
      AnfNode* picked = b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {scores, mask})},
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
