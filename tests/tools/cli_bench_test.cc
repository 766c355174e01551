// `kgrad bench`: forward, step and Jvp timings of a graph file or an ONNX model
// with random or given inputs and symbolic dims sized by --dim; and its errors.
// (What is asserted is the report and that every timing is a positive number,
// never a speed: timings belong to benchmarks.)
#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/cli_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

// The median of the report line starting with `what`, or -1.
double Median(const std::string& out, const std::string& what) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(what + " ", 0) != 0) continue;
    std::istringstream l(line.substr(line.find("median") + 6));
    double v = -1;
    l >> v;
    return v;
  }
  return -1;
}

TEST(CliBenchTest, TimesForwardStepAndJvpOfAGraphFile) {
  CliResult r = Cli({"bench", "examples/mlp.pbtxt", "--input", "x=examples/data/mlp_x.npy", "--grad", "--jvp",
                     "--repeat", "3", "--warmup", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("graph 'mlp', 3 runs after 1 warm-up"));
  EXPECT_GT(Median(r.out, "forward"), 0);
  EXPECT_GT(Median(r.out, "step"), 0);
  EXPECT_GT(Median(r.out, "jvp"), 0);
  EXPECT_THAT(r.out, HasSubstr("step/forward"));
  EXPECT_THAT(r.out, HasSubstr("jvp/forward"));
}

TEST(CliBenchTest, SymbolicDimsOfAnOnnxModelTakeTheirSizeFromDim) {
  ExpectCliError({"bench", "tests/onnx/data/dyn_resnet.onnx", "--repeat", "2"}, 1,
                 {"has dim 'batch': give its size with --dim batch=N"});
  CliResult r = Cli({"bench", "tests/onnx/data/dyn_resnet.onnx", "--dim", "batch=2", "--grad", "--repeat", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_GT(Median(r.out, "forward"), 0);
  EXPECT_GT(Median(r.out, "step"), 0);
  EXPECT_LT(Median(r.out, "jvp"), 0);  // not asked for
}

TEST(CliBenchTest, FlushDenormalsIsReported) {
  CliResult r = Cli({"bench", "examples/mlp.pbtxt", "--input", "x=examples/data/mlp_x.npy", "--grad", "--repeat", "2",
                     "--warmup", "0", "--flush-denormals"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("graph 'mlp', 2 runs after 0 warm-up, subnormals flushed"));
  EXPECT_GT(Median(r.out, "step"), 0);
}

// The milliseconds of the profile line for `prim` after the line `header`, or -1.
double ProfileMs(const std::string& out, const std::string& header, const std::string& prim) {
  std::istringstream in(out.substr(std::min(out.size(), out.find(header))));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line) && line.rfind("  ", 0) == 0) {
    std::istringstream l(line);
    std::string name;
    double ms = -1;
    l >> name >> ms;
    if (name == prim) return ms;
  }
  return -1;
}

TEST(CliBenchTest, ProfileGivesTheTimePerPrimitiveOfEachPass) {
  CliResult r = Cli({"bench", "examples/mlp.pbtxt", "--input", "x=examples/data/mlp_x.npy", "--grad", "--jvp",
                     "--repeat", "2", "--warmup", "1", "--profile"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const std::string header : {"profile of the forward, per run:", "profile of the step, per run:",
                                   "profile of the jvp, per run:"}) {
    SCOPED_TRACE(header);
    ASSERT_THAT(r.out, HasSubstr(header));
    EXPECT_GT(ProfileMs(r.out, header, "matmul"), 0);
    EXPECT_GE(ProfileMs(r.out, header, "total"), ProfileMs(r.out, header, "matmul"));
    EXPECT_LT(ProfileMs(r.out, header, "conv2d"), 0);  // the MLP has none
  }
  // The step runs the forward's matmuls and the backward's: more matmul calls.
  EXPECT_THAT(r.out, HasSubstr("(2 calls)"));
  // Without --profile, no profile.
  r = Cli({"bench", "examples/mlp.pbtxt", "--input", "x=examples/data/mlp_x.npy", "--repeat", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("profile of")));
}

// The number on the report line starting with `what`, or -1.
double Figure(const std::string& out, const std::string& what) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(what + " ", 0) != 0) continue;
    std::istringstream l(line.substr(what.size()));
    double v = -1;
    l >> v;
    return v;
  }
  return -1;
}

// The step's peak above its inputs and outputs: for sum(max_pool2d(x)) with x
// of 8 x 16 x 32 x 32 (0.5 MiB), the outputs are the value (the pooled 0.125
// MiB) and the gradient (0.5 MiB), and what the step holds beside them is the
// seed gradient of the pooled value (ones, 0.125 MiB); the forward alone has no
// line.
TEST(CliBenchTest, StepPeakIsTheMemoryAboveItsInputsAndOutputs) {
  const std::string path = TempPath("bench_pool.pbtxt");
  std::ofstream(path) << R"(format_version: 1
entry: "pool"
graphs {
  name: "pool"
  parameters { name: "x" type { tensor { dtype: DT_FLOAT32 dims: 8 dims: 16 dims: 32 dims: 32 } } }
  nodes { name: "op" constant { primitive { name: "max_pool2d"
    attrs { key: "kernel" value { ints { values: 2 values: 2 } } } } } }
  nodes { name: "out" apply { inputs: ["op", "x"] } }
  output: "out"
}
)";
  CliResult r = Cli({"bench", path, "--grad", "--repeat", "2", "--warmup", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("the step's memory above its inputs and outputs"));
  EXPECT_DOUBLE_EQ(Figure(r.out, "peak"), 0.125);
  r = Cli({"bench", path, "--repeat", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_LT(Figure(r.out, "peak"), 0);
}

// main(x, w) = sum of four calls of layer(x, w) = tanh(tanh(x * w)), f32[65536]
// (0.25 MiB a tensor).
constexpr char kFourLayers[] = R"pb(
format_version: 1
entry: "main"
  graphs {
    name: "layer"
    parameters { name: "x" type { tensor { dtype: DT_FLOAT32 dims: 65536 } } }
    parameters { name: "w" type { tensor { dtype: DT_FLOAT32 dims: 65536 } } }
    nodes { name: "mul" constant { primitive { name: "mul" } } }
    nodes { name: "tanh" constant { primitive { name: "tanh" } } }
    nodes { name: "m" apply { inputs: "mul" inputs: "x" inputs: "w" } }
    nodes { name: "t" apply { inputs: "tanh" inputs: "m" } }
    nodes { name: "y" apply { inputs: "tanh" inputs: "t" } }
    output: "y"
  }
  graphs {
    name: "main"
    parameters { name: "x" type { tensor { dtype: DT_FLOAT32 dims: 65536 } } }
    parameters { name: "w" type { tensor { dtype: DT_FLOAT32 dims: 65536 } } }
    nodes { name: "layer_fn" constant { graph: "layer" } }
    nodes { name: "sum" constant { primitive { name: "reduce_sum" } } }
    nodes { name: "h1" apply { inputs: "layer_fn" inputs: "x" inputs: "w" } }
    nodes { name: "h2" apply { inputs: "layer_fn" inputs: "h1" inputs: "w" } }
    nodes { name: "h3" apply { inputs: "layer_fn" inputs: "h2" inputs: "w" } }
    nodes { name: "h4" apply { inputs: "layer_fn" inputs: "h3" inputs: "w" } }
    nodes { name: "s" apply { inputs: "sum" inputs: "h4" } }
    output: "s"
  }
)pb";

// --remat POLICY marks the called layers as kgrad grad --remat does (the
// gradients are checked there, cli_remat_test) and the step's peak is reported
// for each. Without remat the optimised step, elementwise throughout, fuses into
// passes that hold one 0.25 MiB tensor beside its inputs and outputs; under
// nothing_saveable it keeps the three inner segments' inputs (0.75 MiB), and
// the remat barriers split the fused passes. An unknown policy, and --remat
// without --grad, are errors.
TEST(CliBenchTest, RematPoliciesReportTheirStepPeak) {
  const std::string path = TempPath("bench_layers.pbtxt");
  std::ofstream(path) << kFourLayers;
  CliResult r = Cli({"bench", path, "--grad", "--repeat", "2", "--warmup", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_DOUBLE_EQ(Figure(r.out, "peak"), 0.25);
  for (const std::string policy : {"nothing_saveable", "dots_saveable", "everything_saveable"}) {
    SCOPED_TRACE(policy);
    r = Cli({"bench", path, "--grad", "--remat", policy, "--repeat", "2", "--warmup", "1"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_GT(Median(r.out, "step"), 0);
    EXPECT_GE(Figure(r.out, "peak"), 0.25);
  }
  ExpectCliError({"bench", path, "--grad", "--remat", "auto"}, 1,
                 {"--remat auto needs --memory-budget B"});
  ExpectCliError({"bench", path, "--grad", "--remat", "sometimes"}, 1,
                 {"--remat: unknown remat policy 'sometimes'"});
  ExpectCliError({"bench", path, "--remat", "nothing_saveable"}, 1,
                 {"--remat applies to the training step: give --grad too"});
}

// --residuals SPEC builds the step under that policy (cli_residuals_test checks
// its gradients) and reports its peak; like --remat it needs --grad.
TEST(CliBenchTest, ResidualPoliciesReportTheirStepPeak) {
  const std::string path = TempPath("bench_layers.pbtxt");
  std::ofstream(path) << kFourLayers;
  for (const std::string spec : {"tanh=save_inputs", "save_outputs", "save_only_these_names=y"}) {
    SCOPED_TRACE(spec);
    CliResult r = Cli({"bench", path, "--grad", "--residuals", spec, "--repeat", "2", "--warmup", "1"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_GT(Median(r.out, "step"), 0);
    EXPECT_GE(Figure(r.out, "peak"), 0.25);
  }
  ExpectCliError({"bench", path, "--grad", "--residuals", "tanh=keep"}, 1, {"unknown form 'keep'"});
  ExpectCliError({"bench", path, "--residuals", "save_inputs"}, 1,
                 {"--residuals applies to the training step: give --grad too"});
}

// --remat auto plans the step under --memory-budget (tools/remat_plan.h checks
// its gradients) and prints the plan; the peak line then meets the budget.
TEST(CliBenchTest, AutoRematMeetsItsBudget) {
  CliResult r = Cli({"bench", "examples/mlp.pbtxt", "--grad", "--remat", "auto", "--memory-budget",
                     "1.0", "--repeat", "2", "--warmup", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("remat auto: budget"));
  ExpectCliError({"bench", "examples/mlp.pbtxt", "--grad", "--memory-budget", "0.5"}, 1,
                 {"--memory-budget goes with --remat auto"});
  ExpectCliError({"bench", "examples/mlp.pbtxt", "--grad", "--remat", "auto", "--memory-budget", "x"},
                 1, {"--memory-budget wants bytes"});
}

TEST(CliBenchTest, BadArgumentsAreErrors) {
  ExpectCliError({"bench", "examples/mlp.pbtxt", "--repeat", "0"}, 1, {"--repeat wants a whole number of at least 1"});
  ExpectCliError({"bench", "examples/mlp.pbtxt", "--input", "nope=examples/data/x3.npy"}, 1,
                 {"graph 'mlp' has no input named 'nope'"});
  ExpectCliError({"bench", "examples/mlp.pbtxt", "--dim", "batch"}, 1, {"--dim wants NAME=SIZE"});
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
