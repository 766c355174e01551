// The kgrad CLI on the bundled examples: print, dot and run, with expected values
// (the MLP loss was computed with NumPy from the same weights and inputs; the other
// examples by hand, in comments).
#include "tools/cli.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/cli_test_util.h"
#include "tools/npy.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(CliTest, PrintShowsTheIrOfEveryExample) {
  for (const char* f : {"mlp", "closure", "if_else", "while_loop"}) {
    CliResult r = Cli({"print", std::string("examples/") + f + ".pbtxt"});
    EXPECT_EQ(r.status, 0) << f << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr(" = ")) << f;
    EXPECT_THAT(r.out, HasSubstr("return")) << f;
  }
  CliResult r = Cli({"print", "examples/closure.pbtxt"});
  EXPECT_THAT(r.out, HasSubstr("@apply_scale(%v : f32[3]) {  # free: $w, %s"));
  EXPECT_THAT(r.out, HasSubstr("%s = exp($w) : f32[3]"));
}

TEST(CliTest, DotIsBalancedGraphviz) {
  for (const char* f : {"mlp", "closure", "if_else", "while_loop"}) {
    CliResult r = Cli({"dot", std::string("examples/") + f + ".pbtxt"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.out, StartsWith("digraph kgrad {"));
    int depth = 0;
    for (char c : r.out) depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    EXPECT_EQ(depth, 0) << f;
    EXPECT_THAT(r.out, HasSubstr("->"));
  }
}

// dot --grad: the forward and the gradient graph side by side, each a top-level
// cluster; the closure's graph is a cluster inside its parent's cluster.
TEST(CliTest, DotDrawsTheGradientBesideTheForwardGraph) {
  CliResult r = Cli({"dot", "examples/closure.pbtxt", "--grad", "--optimize"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("label=\"@main\""));
  EXPECT_THAT(r.out, HasSubstr("label=\"@grad_main\""));
  size_t main_at = r.out.find("label=\"@main\"");
  size_t nested_at = r.out.find("label=\"@apply_scale\"");
  ASSERT_NE(nested_at, std::string::npos);
  // Nested: between @main's label and the closing brace of @main's cluster, i.e.
  // before any brace closes at @main's depth.
  int depth = 0;
  for (size_t i = main_at; i < nested_at; ++i) depth += r.out[i] == '{' ? 1 : r.out[i] == '}' ? -1 : 0;
  EXPECT_EQ(depth, 1);
  // The K-transform's intermediate graphs are gone after optimisation.
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("fprop")));
  ExpectCliError({"dot", "examples/closure.pbtxt", "--grad", "--wrt", "bogus"}, 1,
                 {"--wrt wants all, weights or input positions"});
}

TEST(CliTest, RunComputesTheExamples) {
  // MLP: NumPy gives 0.9439756 for these weights and inputs.
  CliResult r = Cli({"run", "examples/mlp.pbtxt", "--input", "x=examples/data/mlp_x.npy", "--input",
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
  CliResult r =
      Cli({"run", "examples/while_loop.pbtxt", "--input", "x=examples/data/x3.npy", "--input", "n=2", "--output", dir});
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

struct Example {
  const char* name;
  std::vector<std::string> inputs;  // --input values for run
};

std::vector<Example> Examples() {
  return {{"mlp", {"x=examples/data/mlp_x.npy", "labels=examples/data/mlp_labels.npy"}},
          {"closure", {"x=examples/data/x3.npy"}},
          {"if_else", {"x=examples/data/x4.npy"}},
          {"while_loop", {"x=examples/data/x3.npy", "n=3"}}};
}

TEST(CliTest, GradCheckAndJvpOnEveryExample) {
  std::string dir = ::testing::TempDir();
  for (const Example& e : Examples()) {
    std::string file = std::string("examples/") + e.name + ".pbtxt";
    for (const char* opt : {"", "--optimize"}) {
      std::string out = dir + "/" + e.name + "_grad" + (*opt ? "_opt" : "") + ".pbtxt";
      std::vector<std::string> args = {"grad", file, "-o", out};
      if (*opt) args.push_back(opt);
      CliResult r = Cli(args);
      ASSERT_EQ(r.status, 0) << e.name << ": " << r.err;
      EXPECT_THAT(r.out, HasSubstr("wrote " + out));
      // The gradient graph is the entry of the written file and runs on the same inputs.
      std::vector<std::string> run = {"run", out};
      for (const std::string& in : e.inputs) {
        run.push_back("--input");
        run.push_back(in);
      }
      r = Cli(run);
      EXPECT_EQ(r.status, 0) << e.name << ": " << r.err;
      EXPECT_THAT(r.out, ::testing::ContainsRegex("out(_0)?: f32"));
    }
    std::vector<std::string> check = {"check", file, "--order", "2", "--seed", "5"};
    if (std::string(e.name) == "while_loop") {
      check.push_back("--input");
      check.push_back("n=3");
    }
    CliResult r = Cli(check);
    EXPECT_EQ(r.status, 0) << e.name << ": " << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("PASSED (rerun with --seed 5)"));
    EXPECT_THAT(r.out, HasSubstr("vjp order 2"));
    EXPECT_THAT(r.out, HasSubstr("jvp order 1"));
    r = Cli({"jvp", file, "-o", dir + "/" + e.name + "_jvp.pb"});
    EXPECT_EQ(r.status, 0) << e.name << ": " << r.err;
  }
}

TEST(CliTest, GradOfTheWhileLoopHasTheExpectedValues) {
  // out = x^2 + x + 1 (n = 3), so d(sum out)/dx = 2x + 1 at [.5, -1, 2] = [2, -1, 5].
  std::string out = ::testing::TempDir() + "/while_grad.pb";
  ASSERT_EQ(Cli({"grad", "examples/while_loop.pbtxt", "--wrt", "0", "-o", out}).status, 0);
  CliResult r = Cli({"run", out, "--input", "x=examples/data/x3.npy", "--input", "n=3"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("{2, -1, 5}"));
}

TEST(CliTest, ErrorsAreClearAndExitNonZero) {
  ExpectCliError({"run", "examples/mlp.pbtxt", "--input", "x=examples/data/mlp_x.npy"}, 1, {"needs input 'labels'"});
  ExpectCliError({"run", "examples/mlp.pbtxt", "--input", "x=examples/data/x3.npy", "--input",
                  "labels=examples/data/mlp_labels.npy"},
                 1, {"input 'x' must be f32[5,4], got f32[3]"});
  ExpectCliError({"print", "examples/missing.pbtxt"}, 1, {"cannot open"});
  ExpectCliError({"frobnicate"}, 2, {});
  CliResult r = Cli({"help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("usage: kgrad COMMAND FILE"));
  // Per-command help: the command's own lines only.
  r = Cli({"grad", "--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, StartsWith("usage: kgrad grad FILE -o OUT"));
  EXPECT_THAT(r.out, HasSubstr("--optimize runs the post-AD optimiser"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("jvp FILE")));
  r = Cli({"help", "demo"});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, StartsWith("usage: kgrad demo [--steps N]"));
  ExpectCliError({"help", "frobnicate"}, 2, {});
}

// The demo trains for real: the loss it reports at the end is far below the
// loss of the initial weights (log(3) ~ 1.1 for three balanced classes).
TEST(CliTest, DemoLossFalls) {
  CliResult r = Cli({"demo", "--steps", "200"});
  ASSERT_EQ(r.status, 0) << r.err;
  double first = 0, last = 0;
  size_t at = r.out.rfind("\nloss ");
  ASSERT_NE(at, std::string::npos) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at + 1, "loss %lf -> %lf", &first, &last), 2) << r.out;
  EXPECT_NEAR(first, std::log(3.0), 0.1);
  EXPECT_LT(last, 0.6 * first);
  EXPECT_TRUE(r.err.empty());  // no progress bar when stderr is not a terminal
  ExpectCliError({"demo", "--lr", "-1"}, 1, {"--lr wants a positive number"});
  ExpectCliError({"demo", "--steps", "x"}, 1, {"--steps wants an integer"});
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
