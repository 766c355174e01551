// kgrad's training artifacts follow torch.optim (issue 45): models exported by
// torch in training mode, STEPS steps of each optimizer configuration of
// make_finetune_fixtures.py on torch's batches; the loss of every step and every
// weight afterwards must match torch's within 1e-4 (max|a - b| / max|b| per
// tensor): in float64 (the artifacts of the model widened) against torch's
// float64 run, and in float32 against torch's float32 run wherever torch's own
// float32 result is within 1e-4 of its float64 one. Elsewhere the run is chaotic
// and is judged in float64 only, as the brief asks: resnet18 on 64x64 images,
// whose last BatchNorms see 16 values per channel, leaves torch's own float32
// losses off its float64 ones within 3 steps and its weights 8% to 85% off after
// 20 (the whole run is then judged in float64); Adam turns the rounding noise of
// a gradient that is exactly 0 (attention's key bias) into steps of size lr
// (that tensor is listed and not compared in float32). Data: tests/train/data (small models, committed), or the
// directory and models in KGRAD_FINETUNE_DIR / KGRAD_FINETUNE_MODELS (the live
// test, finetune_torch_live_test.sh, with torchvision's resnet18).
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "proto/onnx/onnx_import.h"
#include "tests/train/finetune_config.h"
#include "tools/float64.h"
#include "tools/npy.h"
#include "tools/train/artifacts.h"
#include "tools/train/training_session.h"

namespace kgrad {
namespace train {
namespace {

constexpr int kSteps = 20;
constexpr double kTolerance = 1e-4;

std::string DataDir() {
  const char* d = std::getenv("KGRAD_FINETUNE_DIR");
  return d != nullptr ? d : "tests/train/data";
}

std::vector<std::string> Models() {
  const char* m = std::getenv("KGRAD_FINETUNE_MODELS");
  return absl::StrSplit(m != nullptr ? m : "resnet,encoder", ',');
}

Tensor Npy(const std::string& file) {
  absl::StatusOr<Tensor> t = ReadNpyFile(absl::StrCat(DataDir(), "/", file));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

double MaxAbs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.NumElements(); ++i) m = std::max(m, std::fabs(t.ElementAsDouble(i)));
  return m;
}

double RelativeError(const Tensor& got, const Tensor& want) {
  double d = 0;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    d = std::max(d, std::fabs(got.ElementAsDouble(i) - want.ElementAsDouble(i)));
  }
  return d / std::max(MaxAbs(want), 1e-30);
}

class FinetuneTorchTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string, bool>> {};

TEST_P(FinetuneTorchTest, FollowsTorchOptim) {
  const auto& [model, config, f64] = GetParam();
  const std::string onnx = absl::StrCat(DataDir(), "/", model, ".onnx");
  absl::StatusOr<std::unique_ptr<Module>> m = ImportOnnxFile(onnx, DefaultRegistry(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  if (f64) {
    m = ToFloat64(**m);
    ASSERT_TRUE(m.ok()) << m.status();
  }
  const std::string run = absl::StrCat(model, "_", config, f64 ? "_f64" : "");
  auto input = [&](const std::string& file) { return f64 ? WidenToFloat64(Value(Npy(file))) : Value(Npy(file)); };
  ArtifactOptions o;
  o.loss = model == "encoder" ? LossKind::kMse : LossKind::kCrossEntropy;
  o.optimizer = FinetuneConfig(config);
  absl::StatusOr<TrainingArtifacts> a = MakeTrainingArtifacts(std::move(*m), o, onnx);
  ASSERT_TRUE(a.ok()) << a.status();
  const std::string dir = absl::StrCat(::testing::TempDir(), "/", run);
  ASSERT_TRUE(WriteTrainingArtifacts(*a, dir).ok());
  absl::StatusOr<std::unique_ptr<TrainingSession>> s = TrainingSession::Open(dir);
  ASSERT_TRUE(s.ok()) << s.status();
  const Tensor losses = Npy(run + "_loss.npy");
  const Tensor exact = f64 ? losses : Npy(absl::StrCat(run, "_f64_loss.npy"));
  // A run whose float32 losses torch itself cannot keep on the exact (float64)
  // trajectory is chaotic in float32: judged in float64 only.
  bool chaotic_run = false;
  for (int step = 0; step < kSteps; ++step) {
    const double want = losses.ElementAsDouble(step), ideal = exact.ElementAsDouble(step);
    chaotic_run = chaotic_run || std::fabs(want - ideal) > kTolerance * std::fabs(ideal);
  }
  double worst_loss = 0;
  for (int step = 0; step < kSteps; ++step) {
    absl::StatusOr<double> loss =
        (*s)->TrainStep({input(absl::StrCat(model, "_x_", step, ".npy")),
                         input(absl::StrCat(model, "_target_", step, ".npy"))});
    ASSERT_TRUE(loss.ok()) << loss.status();
    ASSERT_TRUE(std::isfinite(*loss)) << "step " << step;
    if (chaotic_run) continue;
    const double want = losses.ElementAsDouble(step);
    worst_loss = std::max(worst_loss, std::fabs(*loss - want) / std::fabs(want));
    EXPECT_LE(std::fabs(*loss - want), kTolerance * std::fabs(want)) << "step " << step;
  }
  if (chaotic_run) {
    std::cout << run << ": chaotic in float32 (torch's own float32 losses leave its float64 ones by more than "
              << kTolerance << "), judged in float64 only\n";
    return;
  }
  EXPECT_EQ((*s)->step(), kSteps);
  double worst = 0;
  std::string worst_name, chaotic;
  for (const std::string& name : (*s)->trainable()) {
    const Tensor want = Npy(absl::StrCat(run, "_w_", name, ".npy"));
    if (!f64) {
      const double torch_own = RelativeError(want, Npy(absl::StrCat(run, "_f64_w_", name, ".npy")));
      if (torch_own > kTolerance) {
        absl::StrAppend(&chaotic, " ", name, " (torch float32 off its float64 by ", torch_own, ")");
        continue;
      }
    }
    const double e = RelativeError((*s)->weights().at(name), want);
    if (e > worst) worst = e, worst_name = name;
    EXPECT_LE(e, kTolerance) << name;
  }
  std::cout << run << ": " << (*s)->trainable().size() << " weights, worst relative difference "
            << worst << " (" << worst_name << "), losses " << worst_loss
            << (chaotic.empty() ? "" : "; chaotic, not compared:") << chaotic << "\n";
}

std::vector<std::tuple<std::string, std::string, bool>> Cases() {
  std::vector<std::tuple<std::string, std::string, bool>> cases;
  for (const std::string& m : Models()) {
    for (const std::string& c : FinetuneConfigs()) {
      for (bool f64 : {false, true}) cases.emplace_back(m, c, f64);
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Torch, FinetuneTorchTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param) +
                                  (std::get<2>(info.param) ? "_f64" : "_f32");
                         });

}  // namespace
}  // namespace train
}  // namespace kgrad
