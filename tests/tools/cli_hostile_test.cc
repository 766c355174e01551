// The CLI on inputs a hostile or unlucky user gives it: deep outputs, NaNs, a
// condition of the wrong type, loops that do not end, arguments out of range.
// Each used to crash, run forever, or print something misleading.
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/value.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/cli_test_util.h"
#include "tools/cli_common.h"
#include "tools/npy.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string WriteFile(const std::string& name, const std::string& text) {
  std::string path = TempPath(name);
  std::ofstream(path) << text;
  return path;
}

std::string WriteNpy(const std::string& name, const Tensor& t) {
  std::string path = TempPath(name);
  EXPECT_TRUE(WriteNpyFile(t, path).ok());
  return path;
}

// main(c: f32[], a: f32[3], b: f32[3]) = switch(c, a, b)
constexpr char kFloatCondition[] = R"pb(
format_version: 1
entry: "main"
graphs {
  name: "main"
  parameters { name: "c" type { tensor { dtype: DT_FLOAT32 } } }
  parameters { name: "a" type { tensor { dtype: DT_FLOAT32 dims: 3 } } }
  parameters { name: "b" type { tensor { dtype: DT_FLOAT32 dims: 3 } } }
  nodes { name: "switch" constant { primitive { name: "switch" } } }
  nodes { name: "pick" apply { inputs: ["switch", "c", "a", "b"] } }
  output: "pick"
}
)pb";

// `run` type-checks as `grad` does: a float condition is refused by both (0.5 was
// taken as true by run).
TEST(CliHostileTest, RunRefusesWhatGradRefuses) {
  std::string file = WriteFile("float_condition.pbtxt", kFloatCondition);
  std::string c = WriteNpy("c.npy", Tensor::FromScalar<float>(0.5f));
  std::string v = WriteNpy("v.npy", Tensor::FromVector<float>({3}, {1, 2, 3}));
  CliResult run = Cli({"run", file, "--input", "c=" + c, "--input", "a=" + v, "--input", "b=" + v});
  EXPECT_EQ(run.status, 1);
  EXPECT_THAT(run.err, HasSubstr("switch condition must be a bool scalar or a bool[] tensor, got f32[]"));
  EXPECT_THAT(run.err, HasSubstr("node 'pick'"));
  CliResult grad = Cli({"grad", file, "-o", TempPath("g.pbtxt")});
  EXPECT_EQ(grad.status, 1);
  EXPECT_THAT(grad.err, HasSubstr("switch condition must be a bool scalar or a bool[] tensor, got f32[]"));
}

// A result nested 30,000 tuples deep crashed the printer; the type check now
// refuses it first, naming the limit.
TEST(CliHostileTest, DeepOutputTupleIsRefusedNamingTheLimit) {
  std::string text = R"pb(format_version: 1 entry: "main" graphs { name: "main"
    parameters { name: "x" type { tensor { dtype: DT_FLOAT32 dims: 1 } } }
    nodes { name: "mk" constant { primitive { name: "make_tuple" } } }
    nodes { name: "t0" apply { inputs: ["mk", "x"] } } )pb";
  for (int i = 1; i < 30'000; ++i) {
    absl::StrAppend(&text, "nodes { name: \"t", i, "\" apply { inputs: [\"mk\", \"t", i - 1, "\"] } }\n");
  }
  absl::StrAppend(&text, "output: \"t29999\" }\n");
  std::string file = WriteFile("deep_output.pbtxt", text);
  std::string x = WriteNpy("x1.npy", Tensor::FromVector<float>({1}, {4}));
  ExpectCliError({"run", file, "--input", "x=" + x}, 1, {"InferOptions::max_abstract_depth"});
}

// The printer itself is iterative, and names stay short at any depth.
TEST(CliHostileTest, SummaryOfAMillionDeepValueHasShortNames) {
  Value v = Value(Tensor::FromVector<float>({2}, {1, 2}));
  for (int i = 0; i < 1'000'000; ++i) v = Value::Tuple({std::move(v)});
  v = Value::Tuple({Value(Scalar::Int(7)), std::move(v)});
  std::ostringstream out;
  cli::PrintSummary(v, "out", out);
  EXPECT_EQ(out.str(), "out_0: 7\nout_leaf1: f32[2] min=1 max=2 mean=1.5 {1, 2}\n");
  EXPECT_EQ(cli::LeafName("out", {1, 0, 2}, 5), "out_1_0_2");
}

TEST(CliHostileTest, NanResultsAreSaidToBeNan) {
  std::string file = WriteFile("log.pbtxt", R"pb(format_version: 1 entry: "main" graphs {
    name: "main" parameters { name: "x" type { tensor { dtype: DT_FLOAT32 dims: 3 } } }
    nodes { name: "log" constant { primitive { name: "log" } } }
    nodes { name: "y" apply { inputs: ["log", "x"] } } output: "y" })pb");
  CliResult all =
      Cli({"run", file, "--input", "x=" + WriteNpy("neg.npy", Tensor::FromVector<float>({3}, {-1, -2, -3}))});
  ASSERT_EQ(all.status, 0) << all.err;
  EXPECT_THAT(all.out, HasSubstr("out: f32[3] all 3 values NaN"));
  EXPECT_THAT(all.out, Not(HasSubstr("min=inf")));
  CliResult some =
      Cli({"run", file, "--input", "x=" + WriteNpy("mixed.npy", Tensor::FromVector<float>({3}, {-1, 1, 1}))});
  ASSERT_EQ(some.status, 0) << some.err;
  EXPECT_THAT(some.out, HasSubstr("min=0 max=0 mean=0 (1 of 3 NaN, left out)"));
}

TEST(CliHostileTest, CheckAtANanInputSaysSo) {
  std::string file = WriteFile("sqrt.pbtxt", R"pb(format_version: 1 entry: "main" graphs {
    name: "main" parameters { name: "x" type { tensor { dtype: DT_FLOAT64 dims: 2 } } }
    nodes { name: "sqrt" constant { primitive { name: "sqrt" } } }
    nodes { name: "y" apply { inputs: ["sqrt", "x"] } } output: "y" })pb");
  std::string x = WriteNpy("neg64.npy", Tensor::FromVector<double>({2}, {-1, -4}));
  CliResult r = Cli({"check", file, "--input", "x=" + x});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.out, HasSubstr("the function is NaN near the input"));
  EXPECT_THAT(r.out, HasSubstr("the derivative is NaN"));
  EXPECT_THAT(r.out, Not(HasSubstr("max rel err 0")));
}

TEST(CliHostileTest, WrtOutOfRangeIsReportedAsTyped) {
  ExpectCliError({"grad", "examples/while_loop.pbtxt", "--wrt", "-5", "-o", TempPath("w.pbtxt")}, 1,
                 {"graph 'main' has no input -5: it takes 2 inputs (valid positions -2 to 1)"});
  CliResult r = Cli({"grad", "examples/while_loop.pbtxt", "--wrt", "2", "-o", TempPath("w.pbtxt")});
  EXPECT_THAT(r.err, HasSubstr("has no input 2"));
}

// A loop that would run for hours stops at the tail-call budget or the deadline.
TEST(CliHostileTest, RunawayLoopsStop) {
  const std::string x = "x=examples/data/x3.npy";
  ExpectCliError(
      {"run", "examples/while_loop.pbtxt", "--input", x, "--input", "n=1000000000000", "--max-tail-calls", "1000"}, 1,
      {"more than ExecutorOptions::max_tail_calls = 1000 tail calls"});
  ExpectCliError(
      {"run", "examples/while_loop.pbtxt", "--input", x, "--input", "n=1000000000000", "--max-seconds", "0.2"}, 1,
      {"the run took longer than ExecutorOptions::max_run_seconds = 0.2 s", "graph '"});
  CliResult r = Cli({"run", "examples/while_loop.pbtxt", "--input", x, "--input", "n=3", "--max-seconds", "soon"});
  EXPECT_THAT(r.err, HasSubstr("--max-seconds wants a positive number of seconds, got 'soon'"));
  r = Cli({"run", "examples/while_loop.pbtxt", "--input", x, "--input", "n=3", "--max-tail-calls", "-4"});
  EXPECT_THAT(r.err, HasSubstr("--max-tail-calls wants a positive whole number, got '-4'"));
  r = Cli({"run", "examples/while_loop.pbtxt", "--input", x, "--input", "n=3", "--max-seconds", "60"});
  EXPECT_EQ(r.status, 0) << r.err;
}

// f(x) = 1 + f(x): no base case. The message names f, not the entry.
TEST(CliHostileTest, RunawayRecursionNamesTheGraphThatRecurses) {
  std::string file = WriteFile("runaway.pbtxt", R"pb(format_version: 1 entry: "main"
    graphs { name: "main" parameters { name: "x" type { tensor { dtype: DT_FLOAT64 dims: 2 } } }
      nodes { name: "f" constant { graph: "f" } } nodes { name: "y" apply { inputs: ["f", "x"] } }
      output: "y" }
    graphs { name: "f" parameters { name: "v" }
      nodes { name: "self" constant { graph: "f" } } nodes { name: "add" constant { primitive { name: "add" } } }
      nodes { name: "again" apply { inputs: ["self", "v"] } }
      nodes { name: "plus" apply { inputs: ["add", "again", "v"] } } output: "plus" })pb");
  for (const char* command : {"grad", "jvp"}) {
    CliResult r = Cli({command, file, "-o", TempPath("r.pbtxt")});
    EXPECT_EQ(r.status, 1) << command;
    EXPECT_THAT(r.err, HasSubstr("graph 'f' never returns")) << command;
    EXPECT_THAT(r.err, HasSubstr("graph 'main', which calls it")) << command;
  }
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
