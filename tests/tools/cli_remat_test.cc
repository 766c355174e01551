// kgrad grad --remat: the called graphs are marked in the output file, the
// optimised gradient recomputes behind remat_barrier, and its values equal those
// of the gradient without remat.
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/cli_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// main(x, w) = sum(layer(layer(x, w), w)), layer(x, w) = tanh(x * w), f32[3].
constexpr char kTwoLayers[] = R"pb(
  format_version: 1
  entry: "main"
  graphs {
    name: "layer"
    parameters { name: "x" type { tensor { dtype: DT_FLOAT32 dims: 3 } } }
    parameters { name: "w" type { tensor { dtype: DT_FLOAT32 dims: 3 } } }
    nodes { name: "mul" constant { primitive { name: "mul" } } }
    nodes { name: "tanh" constant { primitive { name: "tanh" } } }
    nodes { name: "m" apply { inputs: "mul" inputs: "x" inputs: "w" } }
    nodes { name: "y" apply { inputs: "tanh" inputs: "m" } }
    output: "y"
  }
  graphs {
    name: "main"
    parameters { name: "x" type { tensor { dtype: DT_FLOAT32 dims: 3 } } }
    parameters { name: "w" type { tensor { dtype: DT_FLOAT32 dims: 3 } } }
    nodes { name: "layer_fn" constant { graph: "layer" } }
    nodes { name: "sum" constant { primitive { name: "reduce_sum" } } }
    nodes { name: "h1" apply { inputs: "layer_fn" inputs: "x" inputs: "w" } }
    nodes { name: "h2" apply { inputs: "layer_fn" inputs: "h1" inputs: "w" } }
    nodes { name: "s" apply { inputs: "sum" inputs: "h2" } }
    output: "s"
  }
)pb";

std::string WriteModel() {
  std::string path = TempPath("two_layers.pbtxt");
  std::ofstream(path) << kTwoLayers;
  return path;
}

std::string RunGrad(const std::string& grad_file) {
  CliResult r = Cli({"run", grad_file, "--input", "x=examples/data/x3.npy", "--input",
                     "w=examples/data/x3.npy"});
  EXPECT_EQ(r.status, 0) << r.err;
  return r.out;
}

TEST(CliRematTest, GradWithRematMarksRecomputesAndMatches) {
  std::string model = WriteModel();
  std::string plain = TempPath("plain.pbtxt");
  CliResult r = Cli({"grad", model, "--optimize", "-o", plain});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* policy : {"nothing_saveable", "dots_saveable"}) {
    std::string out = TempPath(std::string(policy) + ".pbtxt");
    r = Cli({"grad", model, "--optimize", "--remat", policy, "-o", out});
    ASSERT_EQ(r.status, 0) << r.err;
    CliResult printed = Cli({"print", out});
    ASSERT_EQ(printed.status, 0) << printed.err;
    EXPECT_THAT(printed.out, HasSubstr(std::string("@layer(%x : f32[3], %w : f32[3]) remat=") + policy));
    EXPECT_THAT(printed.out, Not(HasSubstr("@main(%x : f32[3], %w : f32[3]) remat")));
    EXPECT_THAT(printed.out, HasSubstr("remat_barrier("));
    EXPECT_EQ(RunGrad(out), RunGrad(plain)) << policy;
  }
  CliResult printed = Cli({"print", plain});
  EXPECT_THAT(printed.out, Not(HasSubstr("remat")));
}

TEST(CliRematTest, UnknownPolicyIsAnError) {
  ExpectCliError({"grad", WriteModel(), "--remat", "sometimes", "-o", TempPath("x.pb")}, 1,
                 {"--remat: unknown remat policy 'sometimes'"});
}

TEST(CliRematTest, UsageMentionsRemat) {
  CliResult r = Cli({"grad", "--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("[--remat nothing_saveable|dots_saveable|everything_saveable]"));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
