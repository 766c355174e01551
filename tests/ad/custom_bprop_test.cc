// Custom bprops (MindSpore's Cell.bprop) that read weights and captured values:
// their sensitivities come from the custom bprop, checked with numbers against
// finite differences; a custom bprop that leaves them out is refused at transform
// time, naming the graph, never silently zero.
#include <cmath>

#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

AbstractPtr F64(Shape s) { return MakeAbstractTensor(DType::kFloat64, std::move(s)); }

// f(x) = sum(x * w), w a weight of f64[3].
struct WeightedSum {
  Module m{DefaultRegistry()};
  Parameter* w;
  FuncGraph* f;
  WeightedSum() {
    w = m.AddWeight("w", Tensor::FromVector<double>({3}, {0.5, -1.5, 2.0})).value();
    GraphBuilder b(&m, "f");
    AnfNode* x = b.Param("x", F64({3}));
    f = b.Return(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {x, w})})).value();
  }
  // custom(x, out, dout) = (dout * w, scale * dout * x) when `with_weight`, else
  // only the input sensitivity.
  void SetCustomBprop(bool with_weight, double scale) {
    GraphBuilder cb(&m, "f_bprop");
    AnfNode* x = cb.Param("x", F64({3}));
    cb.Param("out", MakeAbstractTensor(DType::kFloat64, {}));
    AnfNode* dout = cb.Param("dout", MakeAbstractTensor(DType::kFloat64, {}));
    AnfNode* dx = cb.Op(PrimId::kMul, {dout, w});
    std::vector<AnfNode*> outs{dx};
    if (with_weight) {
      AnfNode* s = cb.Const(Value(Tensor::FromScalar<double>(scale)));
      outs.push_back(cb.Op(PrimId::kMul, {s, cb.Op(PrimId::kMul, {dout, x})}));
    }
    f->set_custom_bprop(cb.Return(cb.Tuple(outs)).value());
  }
  // Central differences of f in w along each coordinate, at x.
  std::vector<double> NumericWeightGradient(const Value& x) {
    auto e = Executor::Create(f).value();
    std::vector<double> w0 = ToDoubles(Value(*w->default_value()).tensor());
    std::vector<double> g;
    const double eps = 1e-6;
    for (size_t i = 0; i < w0.size(); ++i) {
      std::vector<double> plus = w0, minus = w0;
      plus[i] += eps;
      minus[i] -= eps;
      double fp = e->Run({x}, {{"w", Vec(plus).tensor()}})->tensor().ElementAsDouble(0);
      double fm = e->Run({x}, {{"w", Vec(minus).tensor()}})->tensor().ElementAsDouble(0);
      g.push_back((fp - fm) / (2 * eps));
    }
    return g;
  }
};

TEST(CustomBpropTest, ScalesTheWeightGradient) {
  WeightedSum s;
  s.SetCustomBprop(/*with_weight=*/true, /*scale=*/2.0);
  GradOptions o;
  o.argnums = {0};
  o.weights = {s.w};
  absl::StatusOr<FuncGraph*> g = Grad(s.m, s.f, o);
  ASSERT_TRUE(g.ok()) << g.status();
  Value x = Vec({1.0, 2.0, -3.0});
  absl::StatusOr<Value> r = RunGraph(*g, {x});
  ASSERT_TRUE(r.ok()) << r.status();
  // (dx, (dw,)): dx = w as the true gradient, dw = 2 * (the true gradient, x).
  std::vector<double> dx = ToDoubles(r->tuple()[0].tensor());
  std::vector<double> dw = ToDoubles(r->tuple()[1].tuple()[0].tensor());
  std::vector<double> numeric = s.NumericWeightGradient(x);
  std::vector<double> w = {0.5, -1.5, 2.0};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(dx[i], w[i], 1e-12);
    EXPECT_NEAR(numeric[i], ToDoubles(x.tensor())[i], 1e-6);  // the forward is what it says
    EXPECT_NEAR(dw[i], 2.0 * numeric[i], 1e-6) << i;
  }
}

TEST(CustomBpropTest, LeavingOutAReadWeightIsRefusedNamingIt) {
  WeightedSum s;
  s.SetCustomBprop(/*with_weight=*/false, 0);
  GradOptions o;
  o.argnums = {0};
  o.weights = {s.w};
  absl::StatusOr<FuncGraph*> g = Grad(s.m, s.f, o);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("custom bprop 'f_bprop' of graph 'f' returns 1 values"));
  EXPECT_THAT(g.status().message(), HasSubstr("must return 2"));
  EXPECT_THAT(g.status().message(), HasSubstr("weight 'w'"));
  // Differentiating only the input does not help: the weight is read all the same,
  // and its gradient must not silently be zero for a later caller either.
  o.weights = {};
  EXPECT_FALSE(Grad(s.m, s.f, o).ok());
}

// outer(x, y) = inner(x) with inner(z) = z * y capturing y; the custom bprop of
// inner gives dz = dout * y and dy = 3 * dout * z (three times the truth).
TEST(CustomBpropTest, CapturedValueGetsItsSensitivityFromTheCustomBprop) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "outer");
  AnfNode* x = b.Param("x", F64({2}));
  AnfNode* y = b.Param("y", F64({2}));
  GraphBuilder ib(&m, "inner", b.graph());
  AnfNode* z = ib.Param("z", F64({2}));
  FuncGraph* inner = ib.Return(ib.Op(PrimId::kMul, {z, y})).value();
  GraphBuilder cb(&m, "inner_bprop", b.graph());
  AnfNode* cz = cb.Param("z", F64({2}));
  cb.Param("out", F64({2}));
  AnfNode* dout = cb.Param("dout", F64({2}));
  AnfNode* three = cb.Const(Value(Tensor::FromScalar<double>(3.0)));
  inner->set_custom_bprop(
      cb.Return(cb.Tuple({cb.Op(PrimId::kMul, {dout, y}),
                          cb.Op(PrimId::kMul, {three, cb.Op(PrimId::kMul, {dout, cz})})}))
          .value());
  FuncGraph* outer = b.Return(b.Op(PrimId::kReduceSum, {b.Call(inner, {x})})).value();
  absl::StatusOr<FuncGraph*> g = GradOperation(/*get_all=*/true)(m, outer);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Value> r = RunGraph(*g, {Vec({1.5, -2.0}), Vec({4.0, 0.25})});
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<double> dx = ToDoubles(r->tuple()[0].tensor());
  std::vector<double> dy = ToDoubles(r->tuple()[1].tensor());
  EXPECT_DOUBLE_EQ(dx[0], 4.0);
  EXPECT_DOUBLE_EQ(dx[1], 0.25);
  EXPECT_DOUBLE_EQ(dy[0], 3 * 1.5);
  EXPECT_DOUBLE_EQ(dy[1], 3 * -2.0);
}

TEST(CustomBpropTest, WrongNumberOfSensitivitiesNamesWhatIsExpected) {
  WeightedSum s;
  GraphBuilder cb(&s.m, "f_bprop3");
  AnfNode* x = cb.Param("x", F64({3}));
  cb.Param("out", MakeAbstractTensor(DType::kFloat64, {}));
  cb.Param("dout", MakeAbstractTensor(DType::kFloat64, {}));
  s.f->set_custom_bprop(cb.Return(cb.Tuple({x, x, x})).value());
  absl::StatusOr<FuncGraph*> g = GradOperation()(s.m, s.f);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("returns 3 values; it must return 2: one sensitivity per input (1), then one for each value it reads from outside, in this order: weight 'w'"));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
