// kgrad grad --residuals and kgrad check --residuals: the forms asked of each
// rule show in the optimised gradient (sin's cos x in the forward, tanh's y
// recomputed behind remat_barrier), its values equal the default's, the checks
// pass to the second order under each policy, and bad policies are errors
// naming the item or the node.
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

// main(x) = sum(tanh(sin(x))), f32[3]; the sin is named s, the tanh t.
constexpr char kSinTanh[] = R"pb(
  format_version: 1
  entry: "main"
  graphs {
    name: "main"
    parameters { name: "x" type { tensor { dtype: DT_FLOAT32 dims: 3 } } }
    nodes { name: "sin" constant { primitive { name: "sin" } } }
    nodes { name: "tanh" constant { primitive { name: "tanh" } } }
    nodes { name: "sum" constant { primitive { name: "reduce_sum" } } }
    nodes { name: "s" apply { inputs: "sin" inputs: "x" } }
    nodes { name: "t" apply { inputs: "tanh" inputs: "s" } }
    nodes { name: "r" apply { inputs: "sum" inputs: "t" } }
    output: "r"
  }
)pb";

std::string WriteModel() {
  std::string path = TempPath("sin_tanh.pbtxt");
  std::ofstream(path) << kSinTanh;
  return path;
}

// The printed optimised value-and-gradient under `spec`, and its run's output.
struct Grad {
  std::string printed, values;
};
Grad GradUnder(const std::string& spec) {
  std::string out = TempPath("grad_" + std::to_string(std::hash<std::string>()(spec)) + ".pbtxt");
  std::vector<std::string> args = {"grad", WriteModel(), "--value", "--optimize", "-o", out};
  if (!spec.empty()) {
    args.push_back("--residuals");
    args.push_back(spec);
  }
  CliResult r = Cli(args);
  EXPECT_EQ(r.status, 0) << r.err;
  Grad g;
  g.printed = Cli({"print", out}).out;
  CliResult run = Cli({"run", out, "--input", "x=examples/data/x3.npy"});
  EXPECT_EQ(run.status, 0) << run.err;
  g.values = run.out;
  return g;
}

TEST(CliResidualsTest, FormsShowInTheGradientAndChangeNoValue) {
  const Grad plain = GradUnder("");
  EXPECT_THAT(plain.printed, HasSubstr("sin_grad("));
  EXPECT_THAT(plain.printed, Not(HasSubstr("remat_barrier(")));
  const Grad asked = GradUnder("sin=save_outputs, @t=save_inputs");
  EXPECT_THAT(asked.printed, HasSubstr(" cos("));
  EXPECT_THAT(asked.printed, Not(HasSubstr("sin_grad(")));
  EXPECT_THAT(asked.printed, HasSubstr("remat_barrier("));
  EXPECT_EQ(asked.values, plain.values);
  EXPECT_EQ(GradUnder("save_only_these_names=s").values, plain.values);
}

TEST(CliResidualsTest, ChecksPassUnderEachPolicy) {
  for (const char* spec : {"save_inputs", "save_outputs", "recompute", "save_only_these_names=t"}) {
    CliResult r = Cli({"check", WriteModel(), "--order", "2", "--seed", "3", "--residuals", spec});
    EXPECT_EQ(r.status, 0) << spec << ":\n" << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("PASSED")) << spec;
  }
}

TEST(CliResidualsTest, BadPoliciesAreErrors) {
  ExpectCliError({"grad", WriteModel(), "--residuals", "sin=keep", "-o", TempPath("x.pb")}, 1,
                 {"residual policy item 'sin=keep': unknown form 'keep'"});
  ExpectCliError({"grad", WriteModel(), "--residuals", "@u=recompute", "-o", TempPath("x.pb")}, 1,
                 {"names u, but no differentiated application"});
  ExpectCliError({"check", WriteModel(), "--residuals", "reduce_sum=save_outputs"}, 1,
                 {"cannot differentiate reduce_sum", "no residual forms"});
}

TEST(CliResidualsTest, UsageMentionsResiduals) {
  CliResult r = Cli({"grad", "--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("--residuals chooses what each rule saves"));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
