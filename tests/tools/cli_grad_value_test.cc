// kgrad grad --value and --has-aux on tests/tools/testdata/tanh_aux.pbtxt: the
// written graph run on x = [.5, -1, 2], w = [.3, -.7, 1.1] and its outputs read
// back from .npy files, against values computed by hand:
//   f(x, w)   = sum(tanh(x * w)) = tanh(.15) + tanh(.7) + tanh(2.2) = 1.728995940771933
//   df/dx     = (1 - tanh^2(x * w)) * w
//   df/dw     = (1 - tanh^2(x * w)) * x
#include <cmath>
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

constexpr char kFile[] = "tests/tools/testdata/tanh_aux.pbtxt";
const std::vector<double> kX = {0.5, -1.0, 2.0};
const std::vector<double> kW = {0.3, -0.7, 1.1};
constexpr double kValue = 1.728995940771933;

// (1 - tanh^2(x * w)) * other, elementwise.
std::vector<double> TanhGrad(const std::vector<double>& other) {
  std::vector<double> g;
  for (size_t i = 0; i < kX.size(); ++i) {
    double t = std::tanh(kX[i] * kW[i]);
    g.push_back((1 - t * t) * other[i]);
  }
  return g;
}

std::string WriteVector(const std::string& name, const std::vector<double>& v) {
  Tensor t = Tensor::Create(DType::kFloat64, {static_cast<int64_t>(v.size())}).value();
  for (size_t i = 0; i < v.size(); ++i) t.mutable_data<double>()[i] = v[i];
  std::string path = TempPath(name + ".npy");
  EXPECT_TRUE(WriteNpyFile(t, path).ok());
  return path;
}

// `grad` with `flags` writes a graph file; `run` of it at x (and w, unless the
// graph is `weighted`) writes its outputs to a folder, whose path is returned.
std::string GradAndRun(const std::string& tag, std::vector<std::string> flags, bool with_w = true) {
  std::string graph_file = TempPath(tag + ".pb");
  std::vector<std::string> grad = {"grad", kFile, "-o", graph_file};
  grad.insert(grad.end(), flags.begin(), flags.end());
  CliResult r = Cli(grad);
  EXPECT_EQ(r.status, 0) << tag << ": " << r.err;
  std::string dir = TempPath(tag + "_out");
  std::vector<std::string> run = {"run", graph_file, "--input", "x=" + WriteVector(tag + "_x", kX), "--output", dir};
  if (with_w) {
    run.push_back("--input");
    run.push_back("w=" + WriteVector(tag + "_w", kW));
  }
  r = Cli(run);
  EXPECT_EQ(r.status, 0) << tag << ": " << r.err;
  return dir;
}

// The values of DIR/leaf.npy (empty, after a failure, when it cannot be read).
std::vector<double> Leaf(const std::string& dir, const std::string& leaf) {
  absl::StatusOr<Tensor> t = ReadNpyFile(dir + "/" + leaf + ".npy");
  EXPECT_TRUE(t.ok()) << leaf << ": " << t.status();
  std::vector<double> v;
  if (!t.ok()) return v;
  for (int64_t i = 0; i < t->NumElements(); ++i) v.push_back(t->ElementAsDouble(i));
  return v;
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << what << "[" << i << "]";
}

TEST(CliGradValueTest, ValueAndGradientsOfEveryInput) {
  CliResult r = Cli({"grad", kFile, "--value", "-o", TempPath("vag.pb")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("outputs: out_0 the value (of 'main'), out_1 the gradients"));
  EXPECT_THAT(r.out, HasSubstr("graph 'value_and_grad_main'"));
  for (const char* opt : {"", "--optimize"}) {
    std::string tag = std::string("vag") + (*opt ? "_opt" : "");
    std::vector<std::string> flags = {"--value"};
    if (*opt) flags.push_back(opt);
    std::string dir = GradAndRun(tag, flags);
    ExpectNear(Leaf(dir, "out_0"), {kValue}, tag + " value");
    ExpectNear(Leaf(dir, "out_1_0"), TanhGrad(kW), tag + " dx");
    ExpectNear(Leaf(dir, "out_1_1"), TanhGrad(kX), tag + " dw");
  }
  // Without --value, the same gradients and no value.
  std::string dir = GradAndRun("plain", {});
  ExpectNear(Leaf(dir, "out_0"), TanhGrad(kW), "plain dx");
  ExpectNear(Leaf(dir, "out_1"), TanhGrad(kX), "plain dw");
}

TEST(CliGradValueTest, ValueKeepsTheWrtChoice) {
  // One position: the gradient is the tensor itself, not a tuple of one.
  for (const char* wrt : {"1", "-1"}) {
    std::string tag = std::string("vag_wrt") + (wrt[0] == '-' ? "_neg" : "");
    std::string dir = GradAndRun(tag, {"--value", "--wrt", wrt});
    ExpectNear(Leaf(dir, "out_0"), {kValue}, tag + " value");
    ExpectNear(Leaf(dir, "out_1"), TanhGrad(kX), tag + " dw");
  }
  // The weights: weighted(x) = sum(tanh(x * v)) with v = w's values, so the value
  // is kValue and d/dv = (1 - tanh^2(x * v)) * x.
  std::string dir = GradAndRun("vag_weights", {"--value", "--wrt", "weights", "--graph", "weighted"},
                               /*with_w=*/false);
  ExpectNear(Leaf(dir, "out_0"), {kValue}, "weights value");
  ExpectNear(Leaf(dir, "out_1_0"), TanhGrad(kX), "dv");
}

// with_aux(x, w) = (f(x, w), x * x): the aux comes back as it is, and does not
// add its own derivative (2x) to df/dx.
TEST(CliGradValueTest, HasAuxDifferentiatesTheFirstOutputOnly) {
  CliResult r = Cli({"grad", kFile, "--graph", "with_aux", "--has-aux", "--wrt", "0", "-o", TempPath("aux.pb")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("outputs: out_0 the gradients, out_1 the aux (as 'with_aux' returns it)"));
  std::vector<double> x_squared = {0.25, 1.0, 4.0};
  std::string dir = GradAndRun("aux", {"--graph", "with_aux", "--has-aux", "--wrt", "0"});
  ExpectNear(Leaf(dir, "out_0"), TanhGrad(kW), "aux dx");
  ExpectNear(Leaf(dir, "out_1"), x_squared, "aux");
  // With --value: ((loss, aux), (dx, dw)).
  r = Cli({"grad", kFile, "--graph", "with_aux", "--has-aux", "--value", "-o", TempPath("vag_aux.pb")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("outputs: out_0_0 the value, out_0_1 the aux (of 'with_aux'), out_1 the gradients"));
  dir = GradAndRun("vag_aux", {"--graph", "with_aux", "--has-aux", "--value"});
  ExpectNear(Leaf(dir, "out_0_0"), {kValue}, "value");
  ExpectNear(Leaf(dir, "out_0_1"), x_squared, "aux");
  ExpectNear(Leaf(dir, "out_1_0"), TanhGrad(kW), "dx");
  ExpectNear(Leaf(dir, "out_1_1"), TanhGrad(kX), "dw");
}

TEST(CliGradValueTest, ErrorsNameTheGraphAndTheFlag) {
  // A tuple of three is not (loss, aux): JAX wants the aux values in one tuple.
  ExpectCliError({"grad", kFile, "--graph", "triple", "--has-aux", "-o", TempPath("e1.pb")}, 1,
                 {"has_aux: graph 'triple' must return a pair (value, aux)", "a tuple of 3"});
  // A single output, with and without --value.
  for (const char* value : {"--value", "--optimize"}) {
    CliResult r = Cli({"grad", kFile, "--has-aux", value, "-o", TempPath("e2.pb")});
    EXPECT_EQ(r.status, 1) << value;
    EXPECT_THAT(r.err, HasSubstr("has_aux: graph 'main' must return a pair (value, aux), but returns f64[]"));
  }
  ExpectCliError({"grad", kFile, "--value", "--sens", "-o", TempPath("e3.pb")}, 1, {"drop --sens or --value"});
  ExpectCliError({"grad", kFile, "--graph", "with_aux", "--has-aux", "--value", "--wrt", "2", "-o", TempPath("e4.pb")},
                 1, {"graph 'with_aux' has no input 2"});
  ExpectCliError({"grad", kFile, "--value=yes", "-o", TempPath("e5.pb")}, 1, {"--value takes no value"});
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
