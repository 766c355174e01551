// TrainingSession and checkpoints: a run resumed from a checkpoint after step 10
// equals 20 uninterrupted steps bit for bit; an interrupted checkpoint write
// leaves the previous checkpoint whole; frozen weights keep their values; bad
// data, checkpoints of another model and models a loss does not fit are refused
// with errors naming the input or file; a data-parallel session on one rank
// trains as a plain one does.
#include "tools/train/training_session.h"

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/communicator.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "proto/onnx/onnx_import.h"
#include "tools/npy.h"
#include "tools/train/artifacts.h"

namespace kgrad {
namespace train {
namespace {

constexpr char kModel[] = "tests/train/data/resnet.onnx";

Value Npy(const std::string& file) {
  absl::StatusOr<Tensor> t = ReadNpyFile(absl::StrCat("tests/train/data/", file));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? Value(*t) : Value();
}

std::vector<Value> Batch(int step) {
  return {Npy(absl::StrCat("resnet_x_", step % 20, ".npy")), Npy(absl::StrCat("resnet_target_", step % 20, ".npy"))};
}

// Artifacts of the small ResNet in a fresh directory.
std::string MakeArtifacts(const std::string& name, ArtifactOptions o) {
  absl::StatusOr<std::unique_ptr<Module>> m = ImportOnnxFile(kModel, DefaultRegistry(), {});
  EXPECT_TRUE(m.ok()) << m.status();
  absl::StatusOr<TrainingArtifacts> a = MakeTrainingArtifacts(std::move(*m), o, kModel);
  EXPECT_TRUE(a.ok()) << a.status();
  const std::string dir = absl::StrCat(::testing::TempDir(), "/", name);
  EXPECT_TRUE(WriteTrainingArtifacts(*a, dir).ok());
  return dir;
}

std::unique_ptr<TrainingSession> Open(const std::string& dir, const std::string& checkpoint = "") {
  SessionOptions so;
  so.checkpoint = checkpoint;
  absl::StatusOr<std::unique_ptr<TrainingSession>> s = TrainingSession::Open(dir, so);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

void ExpectSameBits(const TrainingSession& a, const TrainingSession& b) {
  EXPECT_EQ(a.step(), b.step());
  for (const auto& [name, t] : a.weights()) EXPECT_TRUE(SameBits(t, b.weights().at(name))) << name;
  ASSERT_EQ(a.state().size(), b.state().size());
  for (size_t i = 0; i < a.state().size(); ++i) {
    EXPECT_TRUE(SameBits(a.state()[i].second, b.state()[i].second)) << a.state()[i].first;
  }
}

TEST(TrainingSessionTest, ResumeAfterTenStepsEqualsTwentyBitForBit) {
  ArtifactOptions o;
  o.optimizer = *DefaultOptimizerOptions("adamw");
  o.optimizer.schedule.kind = LrSchedule::Kind::kCosine;
  o.optimizer.schedule.t_max = 20;
  const std::string dir = MakeArtifacts("resume", o);
  std::unique_ptr<TrainingSession> straight = Open(dir);
  ASSERT_NE(straight, nullptr);
  for (int step = 0; step < 20; ++step) ASSERT_TRUE(straight->TrainStep(Batch(step)).ok());

  std::unique_ptr<TrainingSession> first = Open(dir);
  for (int step = 0; step < 10; ++step) ASSERT_TRUE(first->TrainStep(Batch(step)).ok());
  first->set_position({1, 3, 42});
  const std::string ckpt = dir + "/step10.ckpt";
  ASSERT_TRUE(first->SaveCheckpoint(ckpt).ok());
  first.reset();
  std::unique_ptr<TrainingSession> resumed = Open(dir, ckpt);
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(resumed->step(), 10);
  EXPECT_EQ(resumed->position().epoch, 1);
  EXPECT_EQ(resumed->position().batch, 3);
  EXPECT_EQ(resumed->position().seed, 42u);
  for (int step = 10; step < 20; ++step) ASSERT_TRUE(resumed->TrainStep(Batch(step)).ok());
  ExpectSameBits(*straight, *resumed);
  // And the run moved: the weights are not the initial ones.
  std::unique_ptr<TrainingSession> fresh = Open(dir);
  EXPECT_FALSE(SameBits(fresh->weights().at("fc.weight"), resumed->weights().at("fc.weight")));
}

TEST(TrainingSessionTest, InterruptedWriteLeavesThePreviousCheckpoint) {
  const std::string dir = MakeArtifacts("interrupted", {});
  std::unique_ptr<TrainingSession> s = Open(dir);
  ASSERT_TRUE(s->TrainStep(Batch(0)).ok());
  const std::string ckpt = dir + "/latest.ckpt";
  ASSERT_TRUE(s->SaveCheckpoint(ckpt).ok());
  // A write killed half-way leaves a partial PATH.tmp; PATH is untouched.
  {
    std::ofstream partial(ckpt + ".tmp", std::ios::binary);
    partial << "\x0a\x05garbage";
  }
  ASSERT_TRUE(s->TrainStep(Batch(1)).ok());
  // A write that fails (PATH.tmp cannot be created: a directory is in the way).
  ::unlink((ckpt + ".tmp").c_str());
  ASSERT_EQ(::mkdir((ckpt + ".tmp").c_str(), 0755), 0);
  const absl::Status failed = s->SaveCheckpoint(ckpt);
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find(ckpt + ".tmp"), std::string::npos) << failed;
  std::unique_ptr<TrainingSession> back = Open(dir, ckpt);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->step(), 1);
  // A truncated checkpoint is refused by name.
  {
    std::ofstream bad(dir + "/truncated.ckpt", std::ios::binary);
    bad << "\x08";
  }
  const absl::Status truncated = back->LoadCheckpoint(dir + "/truncated.ckpt");
  EXPECT_NE(truncated.message().find("truncated.ckpt: not a kgrad checkpoint"), std::string::npos) << truncated;
  EXPECT_EQ(back->step(), 1);  // unchanged
}

TEST(TrainingSessionTest, FrozenWeightsKeepTheirValuesAndGetNoState) {
  ArtifactOptions o;
  o.freeze = "^(stem|block1)\\.";
  o.optimizer = *DefaultOptimizerOptions("momentum");
  absl::StatusOr<std::unique_ptr<Module>> m = ImportOnnxFile(kModel, DefaultRegistry(), {});
  ASSERT_TRUE(m.ok());
  absl::StatusOr<TrainingArtifacts> a = MakeTrainingArtifacts(std::move(*m), o, kModel);
  ASSERT_TRUE(a.ok()) << a.status();
  for (const std::string& f : a->frozen) EXPECT_TRUE(f.rfind("stem.", 0) == 0 || f.rfind("block1.", 0) == 0) << f;
  // stem: conv, bn (2); block1: conv1, bn1 (2), conv2, bn2 (2), downsample conv, bn (2).
  EXPECT_EQ(a->frozen.size(), 12u);
  for (const std::string& u : a->unused) EXPECT_NE(u.find("running_"), std::string::npos) << u;
  const std::string dir = absl::StrCat(::testing::TempDir(), "/frozen");
  ASSERT_TRUE(WriteTrainingArtifacts(*a, dir).ok());
  std::unique_ptr<TrainingSession> s = Open(dir);
  std::unique_ptr<TrainingSession> initial = Open(dir);
  EXPECT_EQ(s->state().size(), s->trainable().size());  // one momentum buffer each
  for (int step = 0; step < 3; ++step) ASSERT_TRUE(s->TrainStep(Batch(step)).ok());
  for (const std::string& f : a->frozen) EXPECT_TRUE(SameBits(s->weights().at(f), initial->weights().at(f))) << f;
  EXPECT_FALSE(SameBits(s->weights().at("fc.bias"), initial->weights().at("fc.bias")));
}

TEST(TrainingSessionTest, RefusesBadDataAndForeignCheckpoints) {
  const std::string dir = MakeArtifacts("bad", {});
  std::unique_ptr<TrainingSession> s = Open(dir);
  ASSERT_EQ(s->input_names(), (std::vector<std::string>{"x", "target"}));
  std::vector<Value> b = Batch(0);
  auto message = [&](std::vector<Value> in) { return std::string(s->TrainStep(in).status().message()); };
  EXPECT_EQ(message({b[0]}), "the steps take 2 inputs (x, target), got 1");
  std::vector<Value> wrong = {b[0], Value(Tensor::FromVector<float>({4}, {0, 1, 2, 3}))};
  EXPECT_NE(message(wrong).find("input 'target': wrong dtype"), std::string::npos) << message(wrong);
  wrong = {b[0], Value(Tensor::FromVector<int64_t>({3}, {0, 1, 2}))};
  EXPECT_NE(message(wrong).find("input 'target': dim 0 is 3 but the same dim of input 'x' is 4"),
            std::string::npos) << message(wrong);
  wrong = {Value(Tensor::FromVector<float>({4, 3}, std::vector<float>(12))), b[1]};
  EXPECT_NE(message(wrong).find("input 'x': wrong rank"), std::string::npos) << message(wrong);
  EXPECT_EQ(s->step(), 0);

  // A checkpoint of another optimizer's artifacts, and of another model.
  ArtifactOptions sgd;
  sgd.optimizer = *DefaultOptimizerOptions("sgd");
  const std::string other = MakeArtifacts("other_optimizer", sgd);
  absl::Status st = s->LoadCheckpoint(other + "/checkpoint.ckpt");
  EXPECT_NE(st.message().find("other_optimizer/checkpoint.ckpt: "), std::string::npos) << st;
  absl::StatusOr<std::unique_ptr<Module>> enc = ImportOnnxFile("tests/train/data/encoder.onnx", DefaultRegistry(), {});
  ASSERT_TRUE(enc.ok());
  ArtifactOptions mse;
  mse.loss = LossKind::kMse;
  absl::StatusOr<TrainingArtifacts> ea = MakeTrainingArtifacts(std::move(*enc), mse, "encoder.onnx");
  ASSERT_TRUE(ea.ok()) << ea.status();
  const std::string edir = absl::StrCat(::testing::TempDir(), "/encoder");
  ASSERT_TRUE(WriteTrainingArtifacts(*ea, edir).ok());
  st = s->LoadCheckpoint(edir + "/checkpoint.ckpt");
  EXPECT_NE(st.message().find("(a checkpoint of another model?)"), std::string::npos) << st;
  EXPECT_EQ(s->step(), 0);
}

TEST(TrainingSessionTest, RefusesALossThatDoesNotFitTheOutput) {
  absl::StatusOr<std::unique_ptr<Module>> enc = ImportOnnxFile("tests/train/data/encoder.onnx", DefaultRegistry(), {});
  ASSERT_TRUE(enc.ok());
  ArtifactOptions o;  // none on a [batch, 5, 16] output
  o.loss = LossKind::kNone;
  absl::StatusOr<TrainingArtifacts> a = MakeTrainingArtifacts(std::move(*enc), o, "encoder.onnx");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("loss none wants one number (the model computes its own loss); output 0 of graph"),
            std::string::npos) << a.status();
  EXPECT_NE(a.status().message().find("encoder.onnx"), std::string::npos);
  absl::StatusOr<std::unique_ptr<Module>> m = ImportOnnxFile(kModel, DefaultRegistry(), {});
  ASSERT_TRUE(m.ok());
  o.loss = LossKind::kCrossEntropy;
  o.freeze = ".";
  a = MakeTrainingArtifacts(std::move(*m), o, kModel);
  EXPECT_NE(a.status().message().find("no weight left to train"), std::string::npos) << a.status();
  m = ImportOnnxFile(kModel, DefaultRegistry(), {});
  o.freeze = "(";
  a = MakeTrainingArtifacts(std::move(*m), o, kModel);
  EXPECT_NE(a.status().message().find("--freeze '(': "), std::string::npos) << a.status();
}

// The data-parallel step (train_step_unexpanded rewritten for the ranks, then
// expanded) on a group of one is the plain step: same gradients, same update.
// Across processes: tests/distributed/finetune_mpi_test.sh.
TEST(TrainingSessionTest, DataParallelOnOneRankTrainsAsThePlainStep) {
  ArtifactOptions o;
  o.optimizer = *DefaultOptimizerOptions("adamw");
  const std::string dir = MakeArtifacts("one_rank", o);
  std::unique_ptr<TrainingSession> plain = Open(dir);
  ASSERT_NE(plain, nullptr);
  LocalCommunicator one;
  SessionOptions so;
  so.data_parallel = true;
  so.executor.communicator = &one;
  absl::StatusOr<std::unique_ptr<TrainingSession>> dp = TrainingSession::Open(dir, so);
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ((*dp)->data_parallel_report().gradients, 26);
  EXPECT_GT((*dp)->data_parallel_report().bytes, 0);
  EXPECT_EQ(plain->data_parallel_report().gradients, 0);
  for (int step = 0; step < 3; ++step) {
    absl::StatusOr<double> a = plain->TrainStep(Batch(step));
    absl::StatusOr<double> b = (*dp)->TrainStep(Batch(step));
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_EQ(*a, *b) << "step " << step;
  }
  ExpectSameBits(*plain, **dp);

  so.executor.communicator = nullptr;
  dp = TrainingSession::Open(dir, so);
  EXPECT_NE(dp.status().message().find("a data-parallel session needs a communicator"), std::string::npos)
      << dp.status();
}

// Artifacts without train_step_unexpanded (an older kgrad's) open for plain
// training; a data-parallel session refuses them, naming the file and the graph.
TEST(TrainingSessionTest, DataParallelRefusesArtifactsWithoutTheUnexpandedStep) {
  absl::StatusOr<std::unique_ptr<Module>> m = ImportOnnxFile(kModel, DefaultRegistry(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  ArtifactOptions o;
  o.optimizer = *DefaultOptimizerOptions("sgd");
  absl::StatusOr<TrainingArtifacts> a = MakeTrainingArtifacts(std::move(*m), o, kModel);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_NE(a->train_step_unexpanded, nullptr);
  a->train_step_unexpanded->set_public(false);
  a->module->CollectGarbage();
  ASSERT_EQ(a->module->FindGraph(kTrainStepUnexpandedGraph), nullptr);
  const std::string dir = absl::StrCat(::testing::TempDir(), "/old_artifacts");
  ASSERT_TRUE(WriteTrainingArtifacts(*a, dir).ok());
  std::unique_ptr<TrainingSession> plain = Open(dir);
  ASSERT_NE(plain, nullptr);
  EXPECT_TRUE(plain->TrainStep(Batch(0)).ok());
  LocalCommunicator one;
  SessionOptions so;
  so.data_parallel = true;
  so.executor.communicator = &one;
  absl::StatusOr<std::unique_ptr<TrainingSession>> dp = TrainingSession::Open(dir, so);
  ASSERT_FALSE(dp.ok());
  EXPECT_NE(dp.status().message().find(dir + "/training.pb: no graph 'train_step_unexpanded' to train "
                                        "data-parallel"),
            std::string::npos) << dp.status();
}

}  // namespace
}  // namespace train
}  // namespace kgrad
