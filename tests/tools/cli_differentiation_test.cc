// Differentiation written in graph files (grad / value_and_grad nodes): the
// examples pass `kgrad check` at the orders their comments state, the training
// step graph trains with `kgrad train`, printing keeps the operators, and files
// whose operators cannot be expanded fail with a message naming the node.
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/cli_test_util.h"
#include "tools/npy.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

TEST(CliDifferentiationTest, ExamplesPassCheckAtTheirOrders) {
  struct Case {
    const char* file;
    const char* order;
    const char* entry;  // an order-`order` entry that must be in the report
  };
  for (const Case& c : {Case{"examples/gradient_penalty.pbtxt", "2", "vjp order 2  w1"},
                        Case{"examples/maml.pbtxt", "2", "vjp order 2  w "},
                        Case{"examples/train_step.pbtxt", "1", "vjp order 1  w2"}}) {
    for (const char* seed : {"1", "7"}) {
      CliResult r = Cli({"check", c.file, "--order", c.order, "--seed", seed});
      EXPECT_EQ(r.status, 0) << c.file << " seed " << seed << ":\n" << r.out << r.err;
      EXPECT_THAT(r.out, HasSubstr("PASSED")) << c.file;
      EXPECT_THAT(r.out, HasSubstr(c.entry)) << c.file;
    }
  }
}

// The losses `train` prints, one per step.
std::vector<double> Losses(const std::string& out) {
  std::vector<double> losses;
  std::istringstream in(out);
  std::string word;
  int step;
  double loss;
  while (in >> word) {
    if (word == "step" && in >> step >> word >> loss) losses.push_back(loss);
  }
  return losses;
}

TEST(CliDifferentiationTest, TrainingStepGraphTrainsWithTheLossFalling) {
  std::string dir = TempPath("train_out");
  CliResult r = Cli({"train", "examples/train_step.pbtxt", "--steps", "100", "--input", "x=examples/data/mlp_x.npy",
                     "--input", "labels=examples/data/mlp_labels.npy", "--output", dir});
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<double> losses = Losses(r.out);
  ASSERT_EQ(losses.size(), 100u) << r.out;
  // Step 1 is the loss of examples/mlp.pbtxt's weights (NumPy: 0.9439756).
  EXPECT_NEAR(losses[0], 0.9439756, 1e-5);
  for (size_t i = 1; i < losses.size(); ++i) EXPECT_LT(losses[i], losses[i - 1]) << "step " << i + 1;
  EXPECT_LT(losses.back(), 0.02);
  // The final weights, run through the plain MLP, give a loss below the last step's.
  CliResult run =
      Cli({"run", "examples/mlp.pbtxt", "--input", "x=examples/data/mlp_x.npy", "--input",
           "labels=examples/data/mlp_labels.npy", "--weight", "w1=" + dir + "/w1.npy", "--weight",
           "b1=" + dir + "/b1.npy", "--weight", "w2=" + dir + "/w2.npy", "--weight", "b2=" + dir + "/b2.npy"});
  ASSERT_EQ(run.status, 0) << run.err;
  std::istringstream in(run.out.substr(run.out.find("min=") + 4));
  double final_loss = 0;
  in >> final_loss;
  EXPECT_LT(final_loss, losses.back());
  EXPECT_GT(final_loss, 0.0);
}

TEST(CliDifferentiationTest, TrainRefusesAGraphThatIsNotAStep) {
  ExpectCliError({"train", "examples/mlp.pbtxt", "--steps", "3", "--input", "x=examples/data/mlp_x.npy", "--input",
                  "labels=examples/data/mlp_labels.npy"},
                 1, {"graph 'mlp' must return (loss, new_weights)"});
  ExpectCliError({"train", "examples/train_step.pbtxt", "--steps", "0"}, 1, {"--steps wants a whole number of at least 1"});
}

TEST(CliDifferentiationTest, PrintKeepsTheOperatorsAsWritten) {
  CliResult r = Cli({"print", "examples/maml.pbtxt"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("grad{has_aux=false, residuals=\"\", sens=false, weights=\"\", wrt=[0]}(@inner_loss)"));
}

TEST(CliDifferentiationTest, OperatorsThatCannotBeExpandedAreClearErrors) {
  ExpectCliError({"run", "tests/tools/testdata/j_unknown_operand.pbtxt", "--input", "x=examples/data/x3.npy"}, 1,
                 {"graph 'apply_j'", "J: cannot tell statically which function 'fn' is"});
  ExpectCliError({"run", "tests/tools/testdata/grad_passed_as_value.pbtxt", "--input", "x=examples/data/x3.npy"}, 1,
                 {"the differentiation operator 'grad' is passed as a value"});
  ExpectCliError({"check", "tests/tools/testdata/grad_of_itself.pbtxt"}, 1,
                 {"graph 'f'", "a graph that differentiates itself"});
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
