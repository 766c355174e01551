// `kgrad train-artifacts` and `kgrad train DIR`: artifacts written, a shuffled
// run with evaluation, checkpoints every K steps, a resumed run that ends with
// the same weights file for file as an uninterrupted one, and the refusals.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/cli_test_util.h"
#include "tools/npy.h"

namespace kgrad {
namespace {

using testing::Cli;
using testing::CliResult;
using testing::ExpectCliError;
using testing::TempPath;

constexpr char kModel[] = "tests/train/data/resnet.onnx";

// 40 examples: the fixture's first 10 batches of 4.
void WriteData(const std::string& x, const std::string& t) {
  std::vector<float> xs;
  std::vector<int64_t> ts;
  for (int s = 0; s < 10; ++s) {
    Tensor bx = *ReadNpyFile(absl::StrCat("tests/train/data/resnet_x_", s, ".npy"));
    Tensor bt = *ReadNpyFile(absl::StrCat("tests/train/data/resnet_target_", s, ".npy"));
    xs.insert(xs.end(), bx.data<float>(), bx.data<float>() + bx.NumElements());
    ts.insert(ts.end(), bt.data<int64_t>(), bt.data<int64_t>() + bt.NumElements());
  }
  ASSERT_TRUE(WriteNpyFile(Tensor::FromVector<float>({40, 3, 32, 32}, xs), x).ok());
  ASSERT_TRUE(WriteNpyFile(Tensor::FromVector<int64_t>({40}, ts), t).ok());
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> Artifacts(const std::string& dir) {
  return {"train-artifacts", kModel, "--loss", "cross_entropy", "--optimizer", "adamw", "--lr", "2e-3",
          "--schedule", "cosine", "--t-max", "30", "--warmup-steps", "3", "-o", dir};
}

TEST(CliFinetuneTest, TrainsEvaluatesAndResumesBitIdentically) {
  const std::string x = TempPath("ft_x.npy"), t = TempPath("ft_t.npy");
  WriteData(x, t);
  const std::string a = TempPath("ft_a"), b = TempPath("ft_b");
  CliResult made = Cli(Artifacts(a));
  ASSERT_EQ(made.status, 0) << made.err;
  EXPECT_NE(made.out.find("26 weights trained, 0 frozen, 16 not read by the model"), std::string::npos) << made.out;
  EXPECT_NE(made.out.find("inputs: x f32[batch,3,32,32], target i64[batch]"), std::string::npos) << made.out;
  ASSERT_EQ(Cli(Artifacts(b)).status, 0);
  const std::vector<std::string> data = {"--data", "x=" + x, "--data", "target=" + t, "--batch", "6",
                                         "--shuffle", "--seed", "5", "--eval", "x=" + x, "--eval", "target=" + t};
  std::vector<std::string> straight = {"train", a, "--epochs", "3", "--output", a + "/out"};
  straight.insert(straight.end(), data.begin(), data.end());
  CliResult run = Cli(straight);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("40 examples, batches of 6 (7 per epoch, last partial one kept), 3 epochs, adamw"),
            std::string::npos) << run.out;
  EXPECT_NE(run.out.find("epoch 3/3 eval loss "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("21 steps, last loss "), std::string::npos) << run.out;

  std::vector<std::string> part = {"train", b, "--epochs", "1", "--save-every", "2"};
  part.insert(part.end(), data.begin(), data.end());
  ASSERT_EQ(Cli(part).status, 0);
  std::vector<std::string> rest = {"train", b, "--epochs", "3", "--resume", "--output", b + "/out"};
  rest.insert(rest.end(), data.begin(), data.end());
  CliResult resumed = Cli(rest);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resumed at step 7"), std::string::npos) << resumed.out;
  for (const char* w : {"fc.weight", "fc.bias", "stem.0.weight", "block2.conv3.weight", "block1.bn1.weight"}) {
    const std::string wa = ReadAll(absl::StrCat(a, "/out/", w, ".npy"));
    EXPECT_FALSE(wa.empty()) << w;
    EXPECT_EQ(wa, ReadAll(absl::StrCat(b, "/out/", w, ".npy"))) << w;
  }
}

TEST(CliFinetuneTest, RefusesBadOptionsAndData) {
  const std::string x = TempPath("bad_x.npy"), t = TempPath("bad_t.npy");
  WriteData(x, t);
  const std::string dir = TempPath("ft_bad");
  ASSERT_EQ(Cli(Artifacts(dir)).status, 0);
  ExpectCliError({"train-artifacts", kModel, "--optimizer", "adamw", "--nesterov", "-o", dir}, 1,
                 {"--nesterov is an option of sgd and momentum"});
  ExpectCliError({"train-artifacts", kModel, "--optimizer", "sgd", "--amsgrad", "-o", dir}, 1,
                 {"--amsgrad is an option of adam and adamw"});
  ExpectCliError({"train-artifacts", kModel, "--loss", "hinge", "-o", dir}, 1, {"unknown loss 'hinge'"});
  ExpectCliError({"train-artifacts", kModel, "--t-max", "5", "-o", dir}, 1, {"--t-max is an option of --schedule cosine"});
  ExpectCliError({"train-artifacts", "tests/train/data/encoder.onnx", "--loss", "none", "-o", dir}, 1,
                 {"loss none wants one number", "encoder.onnx"});
  ExpectCliError({"train", dir, "--data", "x=" + x, "--data", "target=" + x}, 1,
                 {"input 'target': wrong dtype", "i64[batch]"});
  ExpectCliError({"train", dir, "--data", "x=" + x}, 1, {"no data for input 'target'"});
  ExpectCliError({"train", dir, "--data", "x=" + x, "--data", "target=" + t, "--data", "y=" + t}, 1,
                 {"data 'y' is not an input of the steps (x, target)"});
  ExpectCliError({"train", dir, "--data", "x=" + x, "--data", "target=" + t, "--batch", "0"}, 1,
                 {"--batch wants a whole number of at least 1"});
  ExpectCliError({"train", dir, "--data", "x=" + x, "--data", "target=" + t, "--resume"}, 1,
                 {"last.ckpt: cannot open"});
}

}  // namespace
}  // namespace kgrad
