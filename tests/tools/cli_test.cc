// The kgrad CLI on the bundled examples: print, dot and run, with expected values
// (the MLP loss was computed with NumPy from the same weights and inputs; the other
// examples by hand, in comments).
#include "tools/cli.h"

#include <cstdio>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/npy.h"

namespace kgrad {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Result {
  int status;
  std::string out, err;
};

Result Cli(std::vector<std::string> args) {
  std::ostringstream out, err;
  int s = cli::Main(args, out, err);
  return {s, out.str(), err.str()};
}

TEST(CliTest, PrintShowsTheIrOfEveryExample) {
  for (const char* f : {"mlp", "closure", "if_else", "while_loop"}) {
    Result r = Cli({"print", std::string("examples/") + f + ".pbtxt"});
    EXPECT_EQ(r.status, 0) << f << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr(" = ")) << f;
    EXPECT_THAT(r.out, HasSubstr("return")) << f;
  }
  Result r = Cli({"print", "examples/closure.pbtxt"});
  EXPECT_THAT(r.out, HasSubstr("@apply_scale(%v : f32[3]) {  # free: $w, %s"));
  EXPECT_THAT(r.out, HasSubstr("%s = exp($w) : f32[3]"));
}

TEST(CliTest, DotIsBalancedGraphviz) {
  for (const char* f : {"mlp", "closure", "if_else", "while_loop"}) {
    Result r = Cli({"dot", std::string("examples/") + f + ".pbtxt"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.out, StartsWith("digraph kgrad {"));
    int depth = 0;
    for (char c : r.out) depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    EXPECT_EQ(depth, 0) << f;
    EXPECT_THAT(r.out, HasSubstr("->"));
  }
}

TEST(CliTest, RunComputesTheExamples) {
  // MLP: NumPy gives 0.9439756 for these weights and inputs.
  Result r = Cli({"run", "examples/mlp.pbtxt", "--input", "x=examples/data/mlp_x.npy", "--input",
                  "labels=examples/data/mlp_labels.npy"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("out: f32[] min=0.943976"));
  // closure: sum((x * e^w + w) * e^w + w) at x = [.5, -1, 2], w = [.1, -.2, .3] = 4.13635
  r = Cli({"run", "examples/closure.pbtxt", "--input", "x=examples/data/x3.npy"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("{4.13635}"));
  // if/else: sum(x) = 1.75 > 0, so x * x
  r = Cli({"run", "examples/if_else.pbtxt", "--input", "x=examples/data/x4.npy"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("{0.25, 1, 4, 0.0625}"));
  // while loop, n = 4: x^3 + x^2 + x + 1 at [.5, -1, 2] = [1.875, 0, 15]
  r = Cli({"run", "examples/while_loop.pbtxt", "--input", "x=examples/data/x3.npy", "--input", "n=4"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("{1.875, 0, 15}"));
}

TEST(CliTest, RunWritesNpyOutputsAndTakesWeightOverrides) {
  std::string dir = ::testing::TempDir() + "/kgrad_cli_out";
  Result r = Cli({"run", "examples/while_loop.pbtxt", "--input", "x=examples/data/x3.npy", "--input", "n=2",
                  "--output", dir});
  ASSERT_EQ(r.status, 0) << r.err;
  absl::StatusOr<Tensor> t = ReadNpyFile(dir + "/out.npy");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->TypeString(), "f32[3]");
  EXPECT_FLOAT_EQ(t->data<float>()[2], 3.0f);  // x + 1 at x = 2
  // w = 0: s = 1, out = sum(x) = 1.5
  Tensor zeros = Tensor::Zeros(DType::kFloat32, {3}).value();
  ASSERT_TRUE(WriteNpyFile(zeros, dir + "/w0.npy").ok());
  r = Cli({"run", "examples/closure.pbtxt", "--input", "x=examples/data/x3.npy", "--weight", "w=" + dir + "/w0.npy"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("{1.5}"));
}

TEST(CliTest, ErrorsAreClearAndExitNonZero) {
  Result r = Cli({"run", "examples/mlp.pbtxt", "--input", "x=examples/data/mlp_x.npy"});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("needs input 'labels'"));
  r = Cli({"run", "examples/mlp.pbtxt", "--input", "x=examples/data/x3.npy", "--input",
           "labels=examples/data/mlp_labels.npy"});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("input 'x' must be f32[5,4], got f32[3]"));
  r = Cli({"print", "examples/missing.pbtxt"});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot open"));
  r = Cli({"frobnicate"});
  EXPECT_EQ(r.status, 2);
  r = Cli({"help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("usage: kgrad COMMAND FILE"));
}

}  // namespace
}  // namespace kgrad
