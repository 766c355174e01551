// The ONNX ops whose training form differs from inference (BatchNormalization,
// Dropout) and the losses (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss),
// imported from hand-built models and checked against naive references written
// here from the ONNX spec; plus the import errors they report.
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ad/grad_operation.h"
#include "tests/onnx/onnx_model_builder.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/testing/graph_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

using ::testing::HasSubstr;

Tensor Floats(const Shape& shape, const std::vector<float>& v) { return Tensor::FromVector<float>(shape, v); }

std::vector<float> Ramp(int n, float scale, float shift) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(std::sin(i * 1.7f + 0.3f) * scale + shift);
  return v;
}

OnnxModelBuilder DropoutModel(double ratio, bool training, int64_t seed) {
  OnnxModelBuilder b(14);
  b.Input("x", DType::kFloat32, {8, 64});
  b.Constant("ratio", Tensor::FromScalar<float>(static_cast<float>(ratio)));
  b.Constant("training", Tensor::FromScalar<bool>(training));
  onnx::NodeProto& n = b.Node("Dropout", {"x", "ratio", "training"}, {"y", "mask"});
  SetAttr(n, "seed", seed);
  b.Output("y").Output("mask");
  return b;
}

TEST(OnnxDropout, TrainingScalesKeptValuesAndReportsTheMask) {
  Tensor x = Floats({8, 64}, Ramp(512, 2, 0.5));
  absl::StatusOr<std::vector<Tensor>> out = DropoutModel(0.25, true, 7).Run({x});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = (*out)[0];
  const Tensor& mask = (*out)[1];
  ASSERT_EQ(mask.TypeString(), "bool[8,64]");
  int kept = 0;
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    bool k = mask.data<bool>()[i];
    kept += k;
    EXPECT_FLOAT_EQ(y.data<float>()[i], k ? x.data<float>()[i] / 0.75f : 0.0f) << i;
  }
  // 512 draws with keep probability 0.75: 384 expected, sd 9.8.
  EXPECT_GT(kept, 384 - 50);
  EXPECT_LT(kept, 384 + 50);
  // The mask is a function of the seed: the same again, a different one elsewhere.
  absl::StatusOr<std::vector<Tensor>> again = DropoutModel(0.25, true, 7).Run({x});
  absl::StatusOr<std::vector<Tensor>> other = DropoutModel(0.25, true, 8).Run({x});
  ASSERT_TRUE(again.ok() && other.ok());
  EXPECT_TRUE(TensorsEqual((*again)[1], mask));
  EXPECT_FALSE(TensorsEqual((*other)[1], mask));
}

TEST(OnnxDropout, GradientIsTheMaskScaled) {
  absl::StatusOr<std::unique_ptr<Module>> m = DropoutModel(0.5, true, 3).Import();
  ASSERT_TRUE(m.ok()) << m.status();
  Tensor x = Floats({8, 64}, Ramp(512, 1, 0));
  absl::StatusOr<Value> fwd = RunGraph((*m)->entry(), {x});
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  const Tensor mask = fwd->tuple()[1].tensor();
  // d<ct, y>/dx with ct = ones: keep / (1 - ratio). The mask output is a bool
  // and takes no cotangent.
  GradOptions o;
  o.sens_param = true;
  absl::StatusOr<FuncGraph*> g = Grad(**m, (*m)->entry(), o);
  ASSERT_TRUE(g.ok()) << g.status();
  Tensor ones = Tensor::Full(DType::kFloat32, {8, 64}, 1).value();
  Tensor no_mask = Tensor::Zeros(DType::kBool, {8, 64}).value();
  absl::StatusOr<Value> dx = RunGraph(*g, {x, Value::Tuple({ones, no_mask})});
  ASSERT_TRUE(dx.ok()) << dx.status();
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    EXPECT_FLOAT_EQ(dx->tensor().data<float>()[i], mask.data<bool>()[i] ? 2.0f : 0.0f) << i;
  }
}

TEST(OnnxDropout, InferenceAndZeroRatioAreTheIdentityWithAFullMask) {
  Tensor x = Floats({8, 64}, Ramp(512, 1, 0));
  for (auto [ratio, training] : {std::pair<double, bool>{0.5, false}, {0.0, true}}) {
    absl::StatusOr<std::vector<Tensor>> out = DropoutModel(ratio, training, 1).Run({x});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(TensorsEqual((*out)[0], x));
    for (int64_t i = 0; i < x.NumElements(); ++i) ASSERT_TRUE((*out)[1].data<bool>()[i]);
  }
}

TEST(OnnxDropout, InferenceIgnoresARatioComputedAtRunTime) {
  OnnxModelBuilder b(13);
  b.Input("x", DType::kFloat32, {2, 3}).Input("r", DType::kFloat32, {});
  b.Node("Dropout", {"x", "r"}, {"y", "mask"});
  b.Output("y").Output("mask");
  Tensor x = Floats({2, 3}, Ramp(6, 1, 0));
  absl::StatusOr<std::vector<Tensor>> out = b.Run({x, Tensor::FromScalar<float>(0.3f)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsEqual((*out)[0], x));
  for (int64_t i = 0; i < 6; ++i) EXPECT_TRUE((*out)[1].data<bool>()[i]);
}

// Dropout(x, r, t){seed 7} with the ratio and the training mode graph inputs
// (or one of them a constant when `ratio` / `training` is given).
OnnxModelBuilder RunTimeDropoutModel(std::optional<float> ratio, std::optional<bool> training) {
  OnnxModelBuilder b(14);
  b.Input("x", DType::kFloat32, {8, 64});
  if (ratio) {
    b.Constant("r", Tensor::FromScalar<float>(*ratio));
  } else {
    b.Input("r", DType::kFloat32, {});
  }
  if (training) {
    b.Constant("t", Tensor::FromScalar<bool>(*training));
  } else {
    b.Input("t", DType::kBool, {});
  }
  SetAttr(b.Node("Dropout", {"x", "r", "t"}, {"y", "mask"}), "seed", int64_t{7});
  b.Output("y").Output("mask");
  return b;
}

int CountIn(const OnnxModelBuilder& b, PrimId id) {
  absl::StatusOr<std::unique_ptr<Module>> m = b.Import();
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? testing::CountPrim((*m)->entry(), id) : -1;
}

TEST(OnnxDropout, RatioAndTrainingModeComputedAtRunTime) {
  Tensor x = Floats({8, 64}, Ramp(512, 2, 0.5));
  const OnnxModelBuilder both = RunTimeDropoutModel(std::nullopt, std::nullopt);
  // Training: the same values and mask as with constants (one counter-based mask).
  absl::StatusOr<std::vector<Tensor>> fixed = DropoutModel(0.25, true, 7).Run({x});
  absl::StatusOr<std::vector<Tensor>> got =
      both.Run({x, Tensor::FromScalar<float>(0.25f), Tensor::FromScalar<bool>(true)});
  ASSERT_TRUE(fixed.ok() && got.ok()) << got.status();
  EXPECT_TRUE(TensorsEqual((*got)[0], (*fixed)[0]));
  EXPECT_TRUE(TensorsEqual((*got)[1], (*fixed)[1]));
  int dropped = 0;
  for (int64_t i = 0; i < 512; ++i) dropped += !(*got)[1].data<bool>()[i];
  EXPECT_GT(dropped, 50);
  // Ratio 0 in training, and inference with any ratio (even one out of range):
  // exactly the identity, every element kept.
  for (auto [ratio, training] : {std::pair<float, bool>{0, true}, {0.5f, false}, {3, false}}) {
    SCOPED_TRACE(absl::StrCat("ratio ", ratio, " training ", training));
    got = both.Run({x, Tensor::FromScalar<float>(ratio), Tensor::FromScalar<bool>(training)});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(TensorsEqual((*got)[0], x));
    ASSERT_EQ((*got)[1].TypeString(), "bool[8,64]");
    for (int64_t i = 0; i < 512; ++i) ASSERT_TRUE((*got)[1].data<bool>()[i]) << i;
  }
  // A ratio outside [0, 1) in training mode fails at run time.
  for (float bad : {1.0f, -0.5f, std::nanf("")}) {
    got = both.Run({x, Tensor::FromScalar<float>(bad), Tensor::FromScalar<bool>(true)});
    ASSERT_FALSE(got.ok());
    EXPECT_THAT(std::string(got.status().message()), HasSubstr("must be in [0, 1)"));
  }
  // One of them a constant: the other still read at run time.
  got = RunTimeDropoutModel(0.25f, std::nullopt).Run({x, Tensor::FromScalar<bool>(true)});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(TensorsEqual((*got)[1], (*fixed)[1]));
  got = RunTimeDropoutModel(std::nullopt, true).Run({x, Tensor::FromScalar<float>(0.25f)});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(TensorsEqual((*got)[0], (*fixed)[0]));
}

TEST(OnnxDropout, ConstantsKeepTheImportTimeForm) {
  // Constants: dropout{rate, seed} (y and the mask), or nothing at all.
  EXPECT_EQ(CountIn(RunTimeDropoutModel(0.25f, true), PrimId::kDropout), 2);
  EXPECT_EQ(CountIn(RunTimeDropoutModel(0.25f, true), PrimId::kDynamicDropout), 0);
  EXPECT_EQ(CountIn(RunTimeDropoutModel(std::nullopt, false), PrimId::kDynamicDropout), 0);
  EXPECT_EQ(CountIn(RunTimeDropoutModel(std::nullopt, false), PrimId::kDropout), 0);
  // Either computed at run time: dynamic_dropout (y and the mask), no switch.
  EXPECT_EQ(CountIn(RunTimeDropoutModel(std::nullopt, std::nullopt), PrimId::kDynamicDropout), 2);
  EXPECT_EQ(CountIn(RunTimeDropoutModel(std::nullopt, std::nullopt), PrimId::kSwitch), 0);
}

// d<ct, y>/dx = ct * keep / (1 - r); d<ct, y>/dr = <ct, y> / (1 - r) (the mask
// fixed: it moves only where a draw equals r).
TEST(OnnxDropout, GradientWithARatioComputedAtRunTime) {
  absl::StatusOr<std::unique_ptr<Module>> m = RunTimeDropoutModel(std::nullopt, true).Import();
  ASSERT_TRUE(m.ok()) << m.status();
  Tensor x = Floats({8, 64}, Ramp(512, 1, 0.25));
  const Tensor r = Tensor::FromScalar<float>(0.375f);
  absl::StatusOr<Value> fwd = RunGraph((*m)->entry(), {x, r});
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  const Tensor y = fwd->tuple()[0].tensor(), mask = fwd->tuple()[1].tensor();
  GradOptions o;
  o.argnums = {0, 1};
  o.sens_param = true;
  absl::StatusOr<FuncGraph*> g = Grad(**m, (*m)->entry(), o);
  ASSERT_TRUE(g.ok()) << g.status();
  Tensor ct = Floats({8, 64}, Ramp(512, 1, 1));
  const Tensor no_mask = Tensor::Zeros(DType::kBool, {8, 64}).value();
  absl::StatusOr<Value> d = RunGraph(*g, {x, r, Value::Tuple({ct, no_mask})});
  ASSERT_TRUE(d.ok()) << d.status();
  double dot = 0;
  for (int64_t i = 0; i < 512; ++i) {
    const float c = ct.data<float>()[i];
    EXPECT_FLOAT_EQ(d->tuple()[0].tensor().data<float>()[i], mask.data<bool>()[i] ? c / 0.625f : 0.0f) << i;
    dot += static_cast<double>(c) * y.data<float>()[i];
  }
  EXPECT_NEAR(d->tuple()[1].tensor().ElementAsDouble(0), dot / 0.625, 1e-4 * std::abs(dot));
}

TEST(OnnxDropout, BadRatioIsAnError) {
  OnnxModelBuilder b = DropoutModel(1.0, true, 1);
  absl::Status s = b.Import().status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("ratio must be in [0, 1)"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("(Dropout)"));
}

// x [N=3, C=2, L=4]; ONNX's training-mode definition with momentum 0.8.
TEST(OnnxBatchNorm, TrainingModeUsesBatchStatisticsAndUpdatesTheRunningOnes) {
  const std::vector<float> xs = Ramp(24, 3, 1);
  const std::vector<float> scale = {1.5f, 0.5f}, bias = {0.25f, -1}, mean = {0.1f, -0.2f},
                           var = {0.9f, 1.3f};
  for (int64_t opset : {9, 14}) {
    OnnxModelBuilder b(opset);
    b.Input("x", DType::kFloat32, {3, 2, 4});
    b.Initializer("s", Floats({2}, scale)).Initializer("b", Floats({2}, bias));
    b.Initializer("m", Floats({2}, mean)).Initializer("v", Floats({2}, var));
    std::vector<std::string> outs = {"y", "rm", "rv"};
    if (opset < 14) outs.insert(outs.end(), {"sm", "sv"});
    onnx::NodeProto& n = b.Node("BatchNormalization", {"x", "s", "b", "m", "v"}, outs);
    SetAttr(n, "momentum", 0.8);
    SetAttr(n, "epsilon", 1e-3);
    if (opset >= 14) SetAttr(n, "training_mode", int64_t{1});
    for (const std::string& o : outs) b.Output(o);
    absl::StatusOr<std::vector<Tensor>> out = b.Run({Floats({3, 2, 4}, xs)});
    ASSERT_TRUE(out.ok()) << out.status();
    for (int c = 0; c < 2; ++c) {
      double m = 0, v = 0;
      for (int i = 0; i < 3; ++i) {
        for (int l = 0; l < 4; ++l) m += xs[i * 8 + c * 4 + l] / 12.0;
      }
      for (int i = 0; i < 3; ++i) {
        for (int l = 0; l < 4; ++l) v += std::pow(xs[i * 8 + c * 4 + l] - m, 2) / 12.0;
      }
      for (int i = 0; i < 3; ++i) {
        for (int l = 0; l < 4; ++l) {
          int k = i * 8 + c * 4 + l;
          double want = (xs[k] - m) / std::sqrt(v + 1e-3) * scale[c] + bias[c];
          EXPECT_NEAR((*out)[0].data<float>()[k], want, 1e-5) << "opset " << opset << " y " << k;
        }
      }
      EXPECT_NEAR((*out)[1].data<float>()[c], mean[c] * 0.8 + m * 0.2, 1e-6) << "running mean";
      EXPECT_NEAR((*out)[2].data<float>()[c], var[c] * 0.8 + v * 0.2, 1e-6) << "running var";
      if (opset < 14) {
        EXPECT_NEAR((*out)[3].data<float>()[c], m, 1e-6) << "saved mean";
        EXPECT_NEAR((*out)[4].data<float>()[c], v, 1e-6) << "saved var";
      }
    }
  }
}

TEST(OnnxBatchNorm, SpatialZeroIsRefused) {
  OnnxModelBuilder b(9);
  b.Input("x", DType::kFloat32, {3, 2});
  for (const char* p : {"s", "b", "m", "v"}) b.Initializer(p, Floats({2}, {1, 1}));
  SetAttr(b.Node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"}), "spatial", int64_t{0});
  b.Output("y");
  EXPECT_THAT(std::string(b.Import().status().message()), HasSubstr("spatial=0"));
}

// The losses: scores [N=4, C=3], targets with an ignored one, class weights.
struct LossCase {
  const char* op;
  const char* reduction;
  bool weighted;
  bool ignore;
};

double NaiveLoss(const LossCase& c, const std::vector<float>& x, const std::vector<int64_t>& t,
                 const std::vector<float>& w) {
  double total = 0, weight = 0;
  std::vector<double> each;
  for (int n = 0; n < 4; ++n) {
    double lse = 0;
    for (int k = 0; k < 3; ++k) lse += std::exp(x[n * 3 + k]);
    double logp = std::string(c.op) == "NegativeLogLikelihoodLoss" ? x[n * 3 + t[n]]
                                                                    : x[n * 3 + t[n]] - std::log(lse);
    double wn = (c.ignore && t[n] == 1) ? 0 : c.weighted ? w[t[n]] : 1;
    total += -logp * wn;
    weight += wn;
  }
  std::string r = c.reduction;
  return r == "sum" ? total : total / weight;
}

class OnnxLossTest : public ::testing::TestWithParam<LossCase> {};

TEST_P(OnnxLossTest, MatchesTheSpec) {
  const LossCase& lc = GetParam();
  const std::vector<float> x = Ramp(12, 2, 0), w = {0.5f, 2.0f, 1.25f};
  const std::vector<int64_t> t = {2, 1, 0, 2};
  OnnxModelBuilder b(13);
  b.Input("x", DType::kFloat32, {4, 3}).Input("t", DType::kInt64, {4});
  std::vector<std::string> in = {"x", "t"};
  if (lc.weighted) {
    b.Constant("w", Floats({3}, w));
    in.push_back("w");
  }
  onnx::NodeProto& n = b.Node(lc.op, in, {"loss"});
  SetAttr(n, "reduction", std::string(lc.reduction));
  if (lc.ignore) SetAttr(n, "ignore_index", int64_t{1});
  b.Output("loss");
  absl::StatusOr<std::vector<Tensor>> out = b.Run({Floats({4, 3}, x), Tensor::FromVector<int64_t>({4}, t)});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].TypeString(), "f32[]");
  EXPECT_NEAR((*out)[0].data<float>()[0], NaiveLoss(lc, x, t, w), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Spec, OnnxLossTest,
    ::testing::Values(LossCase{"SoftmaxCrossEntropyLoss", "mean", false, false},
                    LossCase{"SoftmaxCrossEntropyLoss", "mean", true, true},
                    LossCase{"SoftmaxCrossEntropyLoss", "sum", true, false},
                    LossCase{"SoftmaxCrossEntropyLoss", "mean", false, true},
                    LossCase{"NegativeLogLikelihoodLoss", "mean", true, true},
                    LossCase{"NegativeLogLikelihoodLoss", "sum", false, true},
                    LossCase{"NegativeLogLikelihoodLoss", "mean", false, false}));

TEST(OnnxLoss, NoneReductionAndLogProbOutput) {
  const std::vector<float> x = Ramp(12, 2, 0);
  OnnxModelBuilder b(13);
  b.Input("x", DType::kFloat32, {4, 3}).Input("t", DType::kInt64, {4});
  SetAttr(b.Node("SoftmaxCrossEntropyLoss", {"x", "t"}, {"loss", "logp"}), "reduction", std::string("none"));
  b.Output("loss").Output("logp");
  absl::StatusOr<std::vector<Tensor>> out =
      b.Run({Floats({4, 3}, x), Tensor::FromVector<int64_t>({4}, {0, 1, 2, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].TypeString(), "f32[4]");
  ASSERT_EQ((*out)[1].TypeString(), "f32[4,3]");
  for (int n = 0; n < 4; ++n) {
    double lse = 0;
    for (int k = 0; k < 3; ++k) lse += std::exp(x[n * 3 + k]);
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR((*out)[1].data<float>()[n * 3 + k], x[n * 3 + k] - std::log(lse), 1e-5);
    }
    EXPECT_NEAR((*out)[0].data<float>()[n], -(*out)[1].data<float>()[n * 3 + (n % 3)], 1e-6);
  }
}

TEST(OnnxLoss, BadInputsAreErrorsNamingTheNode) {
  struct Bad {
    DType target;
    Shape target_shape;
    const char* reduction;
    const char* message;
  };
  for (const Bad& bad : {Bad{DType::kFloat32, {4}, "mean", "must be an i32 or i64 tensor"},
                         Bad{DType::kInt64, {4, 2}, "mean", "and a target [N, d1, ...]"},
                         Bad{DType::kInt64, {5}, "mean", "does not match the scores"},
                         Bad{DType::kInt64, {4}, "avg", "reduction must be none, sum or mean"}}) {
    OnnxModelBuilder b(13);
    b.Input("x", DType::kFloat32, {4, 3}).Input("t", bad.target, bad.target_shape);
    SetAttr(b.Node("NegativeLogLikelihoodLoss", {"x", "t"}, {"loss"}), "reduction",
            std::string(bad.reduction));
    b.Output("loss");
    absl::Status s = b.Import().status();
    EXPECT_THAT(std::string(s.message()), HasSubstr(bad.message));
    EXPECT_THAT(std::string(s.message()), HasSubstr("(NegativeLogLikelihoodLoss)"));
  }
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
