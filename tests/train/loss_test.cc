// The losses of tools/train/loss.h against direct computations in double:
// cross_entropy and nll over scores of rank 2, 3 and 4 (torch's K-dimensional
// case: the mean over every position), mse and bce_with_logits; and the
// refusals of outputs a loss does not fit.
#include "tools/train/loss.h"

#include <cmath>
#include <string>
#include <vector>

#include "backends/executor.h"
#include "gtest/gtest.h"
#include "ops/registry.h"

namespace kgrad {
namespace train {
namespace {

double Score(int64_t i) { return std::sin(0.7 * i + 0.3) * 2.5; }

// The loss of scores shaped `shape` (values Score(i)) against `target`, run
// through BuildLoss.
double RunLoss(LossKind kind, const Shape& shape, const Tensor& target, const CrossEntropyOptions& ce = {}) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "loss");
  const AbstractPtr type = MakeAbstractTensor(DType::kFloat64, shape);
  AnfNode* out = b.Param("out", type);
  absl::StatusOr<AbstractPtr> tt = LossTargetType(kind, type, "out", ce);
  EXPECT_TRUE(tt.ok()) << tt.status();
  EXPECT_EQ(AsTensor(*tt)->shape(), target.shape());
  AnfNode* t = b.Param("target", *tt);
  FuncGraph* g = b.Return(BuildLoss(b, kind, out, t, *AsTensor(type), ce)).value();
  Tensor x = *Tensor::Zeros(DType::kFloat64, shape);
  for (int64_t i = 0; i < x.NumElements(); ++i) x.mutable_data<double>()[i] = Score(i);
  absl::StatusOr<std::unique_ptr<Executor>> e = Executor::Create(g);
  EXPECT_TRUE(e.ok()) << e.status();
  absl::StatusOr<Value> r = (*e)->Run({Value(x), Value(target)});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->tensor().ElementAsDouble(0) : NAN;
}

double RunLoss(LossKind kind, const Shape& shape, const std::vector<int64_t>& targets) {
  Shape ts = {shape[0]};
  ts.insert(ts.end(), shape.begin() + 2, shape.end());
  return RunLoss(kind, shape, Tensor::FromVector<int64_t>(ts, targets));
}

// -log_softmax over axis 1 at class k of position (i, p) of scores [N, C, inner].
double NegLogP(const Shape& shape, int64_t i, int64_t p, int64_t k) {
  const int64_t c = shape[1];
  int64_t inner = 1;
  for (size_t a = 2; a < shape.size(); ++a) inner *= shape[a];
  auto at = [&](int64_t j) { return Score((i * c + j) * inner + p); };
  double mx = -INFINITY, z = 0;
  for (int64_t j = 0; j < c; ++j) mx = std::max(mx, at(j));
  for (int64_t j = 0; j < c; ++j) z += std::exp(at(j) - mx);
  return -(at(k) - mx - std::log(z));
}

// mean over (n, positions) of -log_softmax over axis 1 (cross_entropy) or of
// -score (nll) at the target class.
double Reference(LossKind kind, const Shape& shape, const std::vector<int64_t>& targets) {
  const int64_t n = shape[0], c = shape[1];
  int64_t inner = 1;
  for (size_t a = 2; a < shape.size(); ++a) inner *= shape[a];
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < inner; ++p) {
      const int64_t t = targets[i * inner + p];
      sum += kind == LossKind::kNll ? -Score((i * c + t) * inner + p) : NegLogP(shape, i, p, t);
    }
  }
  return sum / static_cast<double>(n * inner);
}

TEST(LossTest, CrossEntropyAndNllOverEveryPositionOfKDimensionalScores) {
  for (LossKind kind : {LossKind::kCrossEntropy, LossKind::kNll}) {
    for (const Shape& shape : {Shape{4, 3}, Shape{2, 5, 3}, Shape{2, 4, 3, 2}}) {
      int64_t positions = shape[0];
      for (size_t a = 2; a < shape.size(); ++a) positions *= shape[a];
      std::vector<int64_t> targets;
      for (int64_t k = 0; k < positions; ++k) targets.push_back((3 * k + 1) % shape[1]);
      EXPECT_NEAR(RunLoss(kind, shape, targets), Reference(kind, shape, targets), 1e-13)
          << LossKindName(kind) << " " << ShapeToString(shape);
    }
  }
}

// torch's F.cross_entropy with class probabilities and with label_smoothing:
// the target distribution q (given, or one-hot) mixed as (1 - e) q + e / C.
TEST(LossTest, CrossEntropyWithProbabilitiesAndLabelSmoothing) {
  for (const Shape& shape : {Shape{3, 4}, Shape{2, 3, 5}}) {
    const int64_t n = shape[0], c = shape[1], inner = shape.size() > 2 ? shape[2] : 1;
    Tensor probs = *Tensor::Zeros(DType::kFloat64, shape);
    std::vector<int64_t> classes;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t p = 0; p < inner; ++p) {
        classes.push_back((i + 2 * p) % c);
        double z = 0;
        for (int64_t k = 0; k < c; ++k) z += 1 + k + i + p;
        for (int64_t k = 0; k < c; ++k) probs.mutable_data<double>()[(i * c + k) * inner + p] = (1 + k + i + p) / z;
      }
    }
    for (double e : {0.0, 0.1, 1.0}) {
      double soft = 0, hard = 0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t p = 0; p < inner; ++p) {
          for (int64_t k = 0; k < c; ++k) {
            const double q = probs.data<double>()[(i * c + k) * inner + p];
            const double onehot = k == classes[i * inner + p] ? 1 : 0;
            soft += ((1 - e) * q + e / c) * NegLogP(shape, i, p, k);
            hard += ((1 - e) * onehot + e / c) * NegLogP(shape, i, p, k);
          }
        }
      }
      CrossEntropyOptions ce;
      ce.label_smoothing = e;
      Shape ts = {n};
      if (shape.size() > 2) ts.push_back(inner);
      EXPECT_NEAR(RunLoss(LossKind::kCrossEntropy, shape, Tensor::FromVector<int64_t>(ts, classes), ce),
                  hard / (n * inner), 1e-13) << ShapeToString(shape) << " e " << e;
      ce.probability_targets = true;
      EXPECT_NEAR(RunLoss(LossKind::kCrossEntropy, shape, probs, ce), soft / (n * inner), 1e-13)
          << ShapeToString(shape) << " e " << e;
    }
  }
}

TEST(LossTest, TargetTypesFollowTheScores) {
  absl::StatusOr<AbstractPtr> t =
      LossTargetType(LossKind::kCrossEntropy, MakeAbstractTensor(DType::kFloat32, {kUnknownDim, 7, 5, 6}), "y");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(AsTensor(*t)->dtype(), DType::kInt64);
  EXPECT_EQ(AsTensor(*t)->shape(), (Shape{kUnknownDim, 5, 6}));
  t = LossTargetType(LossKind::kMse, MakeAbstractTensor(DType::kFloat32, {3, 2}), "y");
  EXPECT_EQ(AsTensor(*t)->shape(), (Shape{3, 2}));
}

TEST(LossTest, RefusesOutputsTheLossDoesNotFit) {
  auto message = [](LossKind kind, AbstractPtr out) {
    absl::StatusOr<AbstractPtr> t = LossTargetType(kind, out, "output 0 of graph 'g'");
    EXPECT_FALSE(t.ok());
    return std::string(t.status().message());
  };
  EXPECT_EQ(message(LossKind::kCrossEntropy, MakeAbstractTensor(DType::kFloat32, {5})),
            "loss cross_entropy wants scores of rank 2 or more, [examples, classes, d1, ...]; output 0 of "
            "graph 'g' is f32[5]");
  EXPECT_NE(message(LossKind::kCrossEntropy, MakeAbstractTensor(DType::kFloat32, {2, kUnknownDim, 4}))
                .find("wants a known number of classes"),
            std::string::npos);
  EXPECT_NE(message(LossKind::kNll, MakeAbstractTensor(DType::kInt64, {2, 3})).find("wants a float tensor"),
            std::string::npos);
  EXPECT_NE(message(LossKind::kNone, MakeAbstractTensor(DType::kFloat64, {2})).find("wants one number"),
            std::string::npos);
  CrossEntropyOptions ce;
  ce.label_smoothing = 0.1;
  absl::StatusOr<AbstractPtr> t = LossTargetType(LossKind::kMse, MakeAbstractTensor(DType::kFloat32, {2}), "y", ce);
  EXPECT_EQ(t.status().message(),
            "probability targets and label smoothing are options of loss cross_entropy, not mse");
  ce.label_smoothing = 1.5;
  t = LossTargetType(LossKind::kCrossEntropy, MakeAbstractTensor(DType::kFloat32, {2, 3}), "y", ce);
  EXPECT_EQ(t.status().message(), "label smoothing must be in [0, 1], got 1.5");
  ce.label_smoothing = 0.1;
  ce.probability_targets = true;
  t = LossTargetType(LossKind::kCrossEntropy, MakeAbstractTensor(DType::kFloat32, {2, kUnknownDim}), "y", ce);
  EXPECT_NE(t.status().message().find("wants a known number of classes"), std::string::npos) << t.status();
  ce.label_smoothing = 0;
  t = LossTargetType(LossKind::kCrossEntropy, MakeAbstractTensor(DType::kFloat32, {2, kUnknownDim}), "y", ce);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(AsTensor(*t)->dtype(), DType::kFloat32);  // probabilities, shaped like the scores
}

}  // namespace
}  // namespace train
}  // namespace kgrad
