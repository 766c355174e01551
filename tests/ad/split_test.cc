// The forward/backward split of a gradient (ad/split.h): fwd then bwd give the
// value and the gradients of the whole bit for bit, for the MLP and the conv net
// (batch norm included), with respect to inputs and weights; the residuals
// follow the residual forms (sin's x, or its cos x under save_outputs); loops
// are refused with the node named.
#include "ad/split.h"

#include <string>
#include <vector>

#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "examples/programs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/grad_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

// Every element of every tensor of `v` (tuples flattened), as doubles.
void Flatten(const Value& v, std::vector<double>* out) {
  if (v.is_tuple()) {
    for (const Value& e : v.tuple()) Flatten(e, out);
    return;
  }
  const Tensor& t = v.tensor();
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    out->push_back(t.dtype() == DType::kFloat64 ? t.data<double>()[i] : t.data<float>()[i]);
  }
}

ValueAndGradOptions AllOf(Module& m, FuncGraph* f, bool weights) {
  ValueAndGradOptions o;
  o.argnums.clear();
  for (size_t i = 0; i < f->parameters().size(); ++i) {
    if (f->parameters()[i]->name() != "labels") o.argnums.push_back(static_cast<int>(i));
  }
  if (weights) {
    for (const auto& w : m.weights()) o.weights.push_back(w.get());
  }
  return o;
}

// fwd then bwd (sensitivity one) against value_and_grad of the whole, at `args`.
void ExpectSplitEqualsWhole(Module& m, FuncGraph* f, const ValueAndGradOptions& o,
                            const std::vector<Value>& args, size_t* num_residuals = nullptr) {
  absl::StatusOr<FuncGraph*> whole = ValueAndGrad(m, f, o);
  ASSERT_TRUE(whole.ok()) << whole.status();
  absl::StatusOr<Value> want = RunGraph(*whole, args);
  ASSERT_TRUE(want.ok()) << want.status();

  absl::StatusOr<SplitGradient> s = SplitGrad(m, f, o);
  ASSERT_TRUE(s.ok()) << s.status();
  if (num_residuals != nullptr) *num_residuals = s->residuals.size();
  ASSERT_EQ(s->bwd->parameters().size(), s->residuals.size() + 1);
  absl::StatusOr<Value> fwd = RunGraph(s->fwd, args);
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  ASSERT_EQ(fwd->tuple().size(), s->residuals.size() + 1);
  std::vector<Value> bwd_args(fwd->tuple().begin() + 1, fwd->tuple().end());
  const Tensor& value = fwd->tuple()[0].tensor();
  absl::StatusOr<Tensor> ones = Tensor::Full(value.dtype(), value.shape(), 1.0);
  ASSERT_TRUE(ones.ok()) << ones.status();
  bwd_args.push_back(Value(*ones));
  absl::StatusOr<Value> grads = RunGraph(s->bwd, bwd_args);
  ASSERT_TRUE(grads.ok()) << grads.status();

  std::vector<double> got, expected;
  Flatten(fwd->tuple()[0], &got);
  Flatten(*grads, &got);
  Flatten(*want, &expected);
  EXPECT_GT(expected.size(), 1u);
  EXPECT_EQ(got, expected);
}

TEST(SplitTest, MlpInputsAndWeights) {
  Module m(DefaultRegistry());
  FuncGraph* f = programs::Mlp(&m, 8, {6, 5, 3}, DType::kFloat64);
  size_t residuals = 0;
  ExpectSplitEqualsWhole(m, f, AllOf(m, f, true), programs::RandomInputs(f, 4), &residuals);
  EXPECT_GT(residuals, 2u);
}

TEST(SplitTest, ConvNetWithBatchNorm) {
  for (bool weights : {false, true}) {
    Module m(DefaultRegistry());
    FuncGraph* f = programs::ConvNet(&m, 4, 12, 3, 4, 5, DType::kFloat64, /*batch_norm=*/true);
    ExpectSplitEqualsWhole(m, f, AllOf(m, f, weights), programs::RandomInputs(f, 6));
  }
}

// f(x) = sum(sin(x) * x): what bwd takes from fwd under each form of sin.
std::vector<std::string> ResidualTypes(const std::string& policy) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {4});
  AnfNode* s = b.Op(PrimId::kSin, {x});
  s->set_name("s");
  FuncGraph* f = b.Return(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {s, x})})).value();
  ValueAndGradOptions o;
  o.residuals = policy;
  absl::StatusOr<SplitGradient> split = SplitGrad(m, f, o);
  EXPECT_TRUE(split.ok()) << split.status();
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < split->bwd->parameters().size(); ++i) {
    out.push_back(split->bwd->parameters()[i]->name());
  }
  std::vector<Value> args = {RandomOperands({{4}}, 2)[0]};
  ExpectSplitEqualsWhole(m, f, o, args);
  return out;
}

TEST(SplitTest, ResidualsFollowTheResidualForms) {
  // save_inputs: x and sin x (read by mul's rule).
  EXPECT_THAT(ResidualTypes(""), ::testing::UnorderedElementsAre("x", "s"));
  // save_outputs: cos x computed in the forward pass joins them.
  std::vector<std::string> saved = ResidualTypes("sin=save_outputs");
  EXPECT_EQ(saved.size(), 3u);
}

TEST(SplitTest, LoopsAreRefusedNamingTheNode) {
  Module m(DefaultRegistry());
  FuncGraph* f = programs::HornerLoop(&m, 3, DType::kFloat64);
  ValueAndGradOptions o;
  absl::StatusOr<SplitGradient> s = SplitGrad(m, f, o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("cuts flat gradients only"));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("node"));
}

TEST(SplitTest, OptionsItCannotSplitAreErrors) {
  Module m(DefaultRegistry());
  FuncGraph* f = programs::Mlp(&m, 2, {3, 2}, DType::kFloat64);
  ValueAndGradOptions o;
  o.has_aux = true;
  EXPECT_FALSE(SplitGrad(m, f, o).ok());
  o.has_aux = false;
  o.as_operator = true;
  EXPECT_FALSE(SplitGrad(m, f, o).ok());
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
