// kgrad grad --split, and the split (ad/split.h) of models imported from
// PyTorch's ONNX exports in training mode (a small ResNet and torchvision's
// r3d_18, batch norm throughout): fwd then bwd equal value_and_grad of the whole
// bit for bit; the residuals are printed and bad uses are errors.
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "ad/grad_operation.h"
#include "ad/split.h"
#include "backends/executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/cli_test_util.h"
#include "tools/cli_common.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

TEST(CliSplitTest, WritesBothGraphsAndTheResiduals) {
  const std::string out = TempPath("mlp_split.pbtxt");
  CliResult r = Cli({"grad", "examples/mlp.pbtxt", "--split", "-o", out});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("graph 'fwd_mlp' (the entry"));
  EXPECT_THAT(r.out, HasSubstr("graph 'bwd_mlp'"));
  EXPECT_THAT(r.out, HasSubstr("residuals: 3 (140 bytes): r1, h, r3"));
  CliResult printed = Cli({"print", out});
  EXPECT_THAT(printed.out, HasSubstr("@bwd_mlp(%r1 : f32[5,2], %h : f32[5,3], %r3 : f32[5,2], %dout : f32[])"));
  EXPECT_THAT(printed.out, HasSubstr("@fwd_mlp(%x : f32[5,4], %labels : f32[5,2])"));
}

TEST(CliSplitTest, VerifyRunsBothHalvesAgainstTheWhole) {
  for (const char* file : {"examples/mlp.pbtxt", "tests/onnx/data/resnet_train.onnx"}) {
    CliResult r = Cli({"grad", file, "--split", "--wrt", "weights", "--verify", "-o",
                       TempPath("verified.pb")});
    ASSERT_EQ(r.status, 0) << file << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr("verified: fwd then bwd against value_and_grad run whole"));
    EXPECT_THAT(r.out, HasSubstr("values: all equal")) << file;
  }
}

// A graph whose value is a tuple: bwd takes a tuple sensitivity, --verify
// passes ones in every element.
TEST(CliSplitTest, TupleValuedGraphs) {
  const std::string model = TempPath("tuple_value.pbtxt");
  std::ofstream(model) << R"pb(
    format_version: 1
    entry: "main"
    graphs {
      name: "main"
      parameters { name: "x" type { tensor { dtype: DT_FLOAT32 dims: 3 } } }
      nodes { name: "sin" constant { primitive { name: "sin" } } }
      nodes { name: "tup" constant { primitive { name: "make_tuple" } } }
      nodes { name: "s" apply { inputs: "sin" inputs: "x" } }
      nodes { name: "t" apply { inputs: "tup" inputs: "s" inputs: "x" } }
      output: "t"
    }
  )pb";
  CliResult r = Cli({"grad", model, "--split", "--verify", "-o", TempPath("tuple_split.pbtxt")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("residuals: 1 (12 bytes): x"));
  EXPECT_THAT(r.out, HasSubstr("values: all equal"));
}

TEST(CliSplitTest, BadUsesAreErrors) {
  ExpectCliError({"grad", "examples/mlp.pbtxt", "--verify", "-o", TempPath("c.pb")}, 1,
                 {"--verify goes with --split"});
  ExpectCliError({"grad", "examples/mlp.pbtxt", "--split", "--sens", "-o", TempPath("a.pb")}, 1,
                 {"--split writes fwd", "drop --sens"});
  ExpectCliError({"grad", "examples/while_loop.pbtxt", "--split", "--wrt", "0", "-o", TempPath("b.pb")},
                 1, {"cuts flat gradients only"});
}

// Every element of `v` (tuples flattened), widened.
void Flatten(const Value& v, std::vector<double>* out) {
  if (v.is_tuple()) {
    for (const Value& e : v.tuple()) Flatten(e, out);
    return;
  }
  const Tensor& t = v.tensor();
  for (int64_t i = 0; i < t.NumElements(); ++i) out->push_back(t.data<float>()[i]);
}

// The model's inputs: the images uniform in [-1, 1), the class indices in [0, 5).
std::vector<Value> Inputs(FuncGraph* f) {
  std::mt19937_64 rng(11);
  std::vector<Value> args;
  for (Parameter* p : f->parameters()) {
    const AbstractTensor* t = AsTensor(p->declared());
    int64_t n = 1;
    for (int64_t d : t->shape()) n *= d;
    if (t->dtype() == DType::kInt64) {
      std::vector<int64_t> v(n);
      for (int64_t& e : v) e = static_cast<int64_t>(rng() % 5);
      args.push_back(Value(Tensor::FromVector<int64_t>(t->shape(), v)));
    } else {
      std::vector<float> v(n);
      std::uniform_real_distribution<float> u(-1, 1);
      for (float& e : v) e = u(rng);
      args.push_back(Value(Tensor::FromVector<float>(t->shape(), v)));
    }
  }
  return args;
}

TEST(CliSplitTest, ImportedTrainingModeResNetsSplitExactly) {
  for (const char* file : {"tests/onnx/data/resnet_train.onnx", "tests/onnx/data/r3d_18_train.onnx"}) {
    SCOPED_TRACE(file);
    absl::StatusOr<std::unique_ptr<Module>> m = cli::LoadModule(file);
    ASSERT_TRUE(m.ok()) << m.status();
    FuncGraph* f = (*m)->entry();
    ValueAndGradOptions o;
    o.argnums = {0};
    for (const auto& w : (*m)->weights()) o.weights.push_back(w.get());
    const std::vector<Value> args = Inputs(f);
    absl::StatusOr<FuncGraph*> whole = ValueAndGrad(**m, f, o);
    ASSERT_TRUE(whole.ok()) << whole.status();
    absl::StatusOr<Value> want = RunGraph(*whole, args);
    ASSERT_TRUE(want.ok()) << want.status();
    absl::StatusOr<SplitGradient> s = SplitGrad(**m, f, o);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_GT(s->residuals.size(), 10u);
    EXPECT_GT(s->residual_bytes, 0);
    absl::StatusOr<Value> fwd = RunGraph(s->fwd, args);
    ASSERT_TRUE(fwd.ok()) << fwd.status();
    std::vector<Value> bwd_args(fwd->tuple().begin() + 1, fwd->tuple().end());
    bwd_args.push_back(Value(Tensor::FromScalar<float>(1.0f)));
    absl::StatusOr<Value> grads = RunGraph(s->bwd, bwd_args);
    ASSERT_TRUE(grads.ok()) << grads.status();
    std::vector<double> got, expected;
    Flatten(fwd->tuple()[0], &got);
    Flatten(*grads, &got);
    Flatten(*want, &expected);
    EXPECT_GT(expected.size(), 1000u);
    EXPECT_EQ(got, expected);
  }
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
