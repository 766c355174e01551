// The reverse-mode API with numbers (float64, to 1e-12 against derivatives worked
// by hand): ValueAndGrad over single, several and negative argnums and weights;
// has_aux; GradOperation's get_by_list, get_all and sens_param; stop_gradient on
// its own, in a closure, a loop and a switch; and the errors, each naming the graph.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/grad_test_util.h"
#include "tests/testing/graph_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr double kTol = 1e-12;
const std::vector<double> kX = {0.5, -1.0, 2.0};
const std::vector<double> kW = {0.3, -0.7, 1.1};

// Elementwise a * b, and (1 - tanh^2(x * w)) * other.
std::vector<double> Times(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size(); ++i) r.push_back(a[i] * b[i]);
  return r;
}
std::vector<double> TanhGrad(const std::vector<double>& x, const std::vector<double>& w,
                             const std::vector<double>& other) {
  std::vector<double> r;
  for (size_t i = 0; i < x.size(); ++i) {
    double t = std::tanh(x[i] * w[i]);
    r.push_back((1 - t * t) * other[i]);
  }
  return r;
}
double SumTanh(const std::vector<double>& x, const std::vector<double>& w) {
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += std::tanh(x[i] * w[i]);
  return s;
}

// `v` is a float64 tensor with `want` (to kTol); `what` names it on failure.
void ExpectValues(const Value& v, const std::vector<double>& want, const std::string& what) {
  ASSERT_TRUE(v.is_tensor()) << what << " is " << v.ToString();
  ASSERT_EQ(v.tensor().dtype(), DType::kFloat64) << what;
  ASSERT_EQ(v.tensor().NumElements(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(v.tensor().ElementAsDouble(i), want[i], kTol) << what << "[" << i << "]";
  }
}

// Element i of tuple `v`, or an error value when `v` has none (the tests then fail
// in ExpectValues).
Value At(const Value& v, size_t i) {
  if (!v.is_tuple() || v.tuple().size() <= i) return Value(Scalar::Int(-1));
  return v.tuple()[i];
}

// `g` (built without error) run at `args`.
Value RunOn(const absl::StatusOr<FuncGraph*>& g, std::vector<Value> args) {
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return Value(Scalar::Int(-1));
  absl::StatusOr<Value> r = RunGraph(*g, std::move(args));
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : Value(Scalar::Int(-1));
}

// f(x, w) = sum(tanh(x * w)), x and w f64[3].
FuncGraph* SumTanhGraph(Module* m) {
  GraphBuilder b(m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  AnfNode* w = b.Param("w", DType::kFloat64, {3});
  return b.Return(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kTanh, {b.Op(PrimId::kMul, {x, w})})})).value();
}

TEST(ValueAndGradTest, SingleArgnumGivesTheValueAndTheGradient) {
  Module m(DefaultRegistry());
  FuncGraph* f = SumTanhGraph(&m);
  Value r = RunOn(ValueAndGrad(m, f), {Vec(kX), Vec(kW)});  // argnums {0}
  ExpectValues(At(r, 0), {SumTanh(kX, kW)}, "value");
  EXPECT_NEAR(At(r, 0).tensor().ElementAsDouble(0), 1.728995940771933, kTol);  // by hand
  ExpectValues(At(r, 1), TanhGrad(kX, kW, kW), "dx");  // a tensor, not a tuple of one
  EXPECT_TRUE(GraphGradientOk(m, f, {Vec(kX), Vec(kW)}, Order(2, 7), /*nonvacuous=*/true));
}

TEST(ValueAndGradTest, SeveralAndNegativeArgnumsInTheOrderGiven) {
  Module m(DefaultRegistry());
  FuncGraph* f = SumTanhGraph(&m);
  const std::vector<double> dx = TanhGrad(kX, kW, kW), dw = TanhGrad(kX, kW, kX);
  struct Case {
    std::vector<int> argnums;
    std::vector<std::vector<double>> grads;
  };
  for (const Case& c : std::vector<Case>{{{0, 1}, {dx, dw}}, {{1, 0}, {dw, dx}}, {{-2, -1}, {dx, dw}},
                                         {{-1, 0}, {dw, dx}}}) {
    ValueAndGradOptions o;
    o.argnums = c.argnums;
    Value r = RunOn(ValueAndGrad(m, f, o), {Vec(kX), Vec(kW)});
    std::string name = ::testing::PrintToString(c.argnums);
    ExpectValues(At(r, 0), {SumTanh(kX, kW)}, name + " value");
    ASSERT_TRUE(At(r, 1).is_tuple()) << name;
    ASSERT_EQ(At(r, 1).tuple().size(), 2u) << name;
    ExpectValues(At(At(r, 1), 0), c.grads[0], name + " grad 0");
    ExpectValues(At(At(r, 1), 1), c.grads[1], name + " grad 1");
  }
  ValueAndGradOptions last;
  last.argnums = {-1};
  ExpectValues(At(RunOn(ValueAndGrad(m, f, last), {Vec(kX), Vec(kW)}), 1), dw, "argnums {-1}");
}

// g(x) = sum(tanh(x * v)) + sum(u * x), v and u weights:
//   dg/dx = (1 - tanh^2(x v)) v + u,  dg/dv = (1 - tanh^2(x v)) x,  dg/du = x.
FuncGraph* WeightedGraph(Module* m) {
  GraphBuilder b(m, "g");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  AnfNode* v = b.Weight("v", MakeTensor(DType::kFloat64, {3}, kW));
  AnfNode* u = b.Weight("u", MakeTensor(DType::kFloat64, {3}, {2.0, -3.0, 0.25}));
  AnfNode* t = b.Op(PrimId::kReduceSum, {b.Op(PrimId::kTanh, {b.Op(PrimId::kMul, {x, v})})});
  return b.Return(b.Op(PrimId::kAdd, {t, b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {u, x})})})).value();
}
const std::vector<double> kU = {2.0, -3.0, 0.25};

std::vector<double> Plus(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size(); ++i) r.push_back(a[i] + b[i]);
  return r;
}

TEST(ValueAndGradTest, WithWeights) {
  Module m(DefaultRegistry());
  FuncGraph* g = WeightedGraph(&m);
  const double value = SumTanh(kX, kW) + (2.0 * 0.5 + 3.0 + 0.25 * 2.0);  // sum(u x) = 4.5
  const std::vector<double> dx = Plus(TanhGrad(kX, kW, kW), kU), dv = TanhGrad(kX, kW, kX);
  ValueAndGradOptions o;
  o.weights = {m.FindWeight("u"), m.FindWeight("v")};  // in the order asked for
  // (value, (dx, (du, dv)))
  Value r = RunOn(ValueAndGrad(m, g, o), {Vec(kX)});
  ExpectValues(At(r, 0), {value}, "value");
  ExpectValues(At(At(r, 1), 0), dx, "dx");
  ExpectValues(At(At(At(r, 1), 1), 0), kX, "du");
  ExpectValues(At(At(At(r, 1), 1), 1), dv, "dv");
  // No argnums: (value, (du, dv)), as Grad gives (du, dv).
  o.argnums = {};
  r = RunOn(ValueAndGrad(m, g, o), {Vec(kX)});
  ExpectValues(At(r, 0), {value}, "value, weights only");
  ExpectValues(At(At(r, 1), 0), kX, "du, weights only");
  ExpectValues(At(At(r, 1), 1), dv, "dv, weights only");
  // Inputs and weights against central differences too.
  EXPECT_TRUE(GraphGradientOk(m, g, {Vec(kX)}, Order(1, 3), /*nonvacuous=*/true));
}

// h(x) = (sum(3 x), (x * x, sin(x))): the aux is returned as it is and does not
// contribute: dh/dx = 3, not 3 + 2x + cos(x).
FuncGraph* AuxGraph(Module* m) {
  GraphBuilder b(m, "h");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  AnfNode* three = b.Const(Value(Tensor::FromScalar<double>(3.0)));
  AnfNode* loss = b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {three, x})});
  AnfNode* aux = b.Tuple({b.Op(PrimId::kMul, {x, x}), b.Op(PrimId::kSin, {x})});
  return b.Return(b.Tuple({loss, aux})).value();
}

TEST(ValueAndGradTest, HasAuxReturnsTheAuxAndDifferentiatesOnlyTheLoss) {
  Module m(DefaultRegistry());
  FuncGraph* h = AuxGraph(&m);
  const std::vector<double> sin_x = {std::sin(0.5), std::sin(-1.0), std::sin(2.0)};
  ValueAndGradOptions o;
  o.has_aux = true;
  Value r = RunOn(ValueAndGrad(m, h, o), {Vec(kX)});  // ((loss, aux), dx)
  ExpectValues(At(At(r, 0), 0), {3 * (0.5 - 1.0 + 2.0)}, "loss");
  ExpectValues(At(At(At(r, 0), 1), 0), Times(kX, kX), "aux x*x");
  ExpectValues(At(At(At(r, 0), 1), 1), sin_x, "aux sin x");
  ExpectValues(At(r, 1), {3.0, 3.0, 3.0}, "dx");
  // Grad with has_aux: (dx, aux), as JAX's grad(f, has_aux=True).
  GradOptions g;
  g.has_aux = true;
  r = RunOn(Grad(m, h, g), {Vec(kX)});
  ExpectValues(At(r, 0), {3.0, 3.0, 3.0}, "grad dx");
  ExpectValues(At(At(r, 1), 0), Times(kX, kX), "grad aux x*x");
  // And with a sensitivity s for the loss: dx = 3 s.
  g.sens_param = true;
  r = RunOn(Grad(m, h, g), {Vec(kX), Value(Tensor::FromScalar<double>(-0.5))});
  ExpectValues(At(r, 0), {-1.5, -1.5, -1.5}, "grad dx, sens -0.5");
  ExpectValues(At(At(r, 1), 1), sin_x, "grad aux sin x, sens");
}

TEST(GradOperationTest, GetByListAndGetAll) {
  Module m(DefaultRegistry());
  FuncGraph* g = WeightedGraph(&m);
  const std::vector<double> dx = Plus(TanhGrad(kX, kW, kW), kU), dv = TanhGrad(kX, kW, kX);
  // get_by_list: the module's weights in their order (v, u).
  Value r = RunOn(GradOperation(false, true)(m, g), {Vec(kX)});
  ExpectValues(At(r, 0), dv, "dv");
  ExpectValues(At(r, 1), kX, "du");
  // Some of them.
  r = RunOn(GradOperation(false, true)(m, g, {m.FindWeight("u")}), {Vec(kX)});
  ExpectValues(At(r, 0), kX, "du alone");
  // get_all and get_by_list: ((dx), (dv, du)).
  r = RunOn(GradOperation(true, true)(m, g), {Vec(kX)});
  ExpectValues(At(At(r, 0), 0), dx, "dx");
  ExpectValues(At(At(r, 1), 0), dv, "dv with get_all");
  ExpectValues(At(At(r, 1), 1), kX, "du with get_all");
  // get_all alone: every input, as a tuple; neither: the first input alone.
  FuncGraph* f = SumTanhGraph(&m);
  r = RunOn(GradOperation(true)(m, f), {Vec(kX), Vec(kW)});
  ExpectValues(At(r, 0), TanhGrad(kX, kW, kW), "get_all dx");
  ExpectValues(At(r, 1), TanhGrad(kX, kW, kX), "get_all dw");
  ExpectValues(RunOn(GradOperation()(m, f), {Vec(kX), Vec(kW)}), TanhGrad(kX, kW, kW), "first input");
}

// p(x, w) = tanh(x * w), f64[3] out: with sens s, dp/dx = s (1 - tanh^2(x w)) w.
TEST(GradOperationTest, SensParamScalesTheGradient) {
  Module m(DefaultRegistry());
  FuncGraph* p = TanhOfProduct(&m, "p");
  const std::vector<double> s = {2.0, -0.5, 10.0};
  Value r = RunOn(GradOperation(true, false, true)(m, p), {Vec(kX), Vec(kW), Vec(s)});
  ExpectValues(At(r, 0), Times(s, TanhGrad(kX, kW, kW)), "s dx");
  ExpectValues(At(r, 1), Times(s, TanhGrad(kX, kW, kX)), "s dw");
  // Grad with sens_param and argnums {-1}: only dw.
  GradOptions o;
  o.argnums = {-1};
  o.sens_param = true;
  ExpectValues(RunOn(Grad(m, p, o), {Vec(kX), Vec(kW), Vec(s)}), Times(s, TanhGrad(kX, kW, kX)), "Grad s dw");
  EXPECT_TRUE(GraphGradientOk(m, p, {Vec(kX), Vec(kW)}, Order(1, 5), /*nonvacuous=*/true));
}

// The gradient of `f` at x = kX (first input only).
Value GradAtX(Module& m, absl::StatusOr<FuncGraph*> f) {
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return Value(Scalar::Int(-1));
  return RunOn(GradOperation()(m, *f), {Vec(kX)});
}

// d/dx sum(x * stop_gradient(x)) = x, not 2x.
TEST(StopGradientTest, BlocksItsOperand) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "sg");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  AnfNode* y = b.Op(PrimId::kMul, {x, b.Op(PrimId::kStopGradient, {x})});
  ExpectValues(GradAtX(m, b.Return(b.Op(PrimId::kReduceSum, {y}))), kX, "dx");
}

// scale(v) = v * stop_gradient(x), x free in the closure: d/dx sum(scale(x)) = x.
TEST(StopGradientTest, InsideAClosure) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "sg_closure");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  ValueNode* scale = b.Closure("scale", 1, [&](GraphBuilder& c, absl::Span<AnfNode* const> p) {
    return c.Op(PrimId::kMul, {p[0], c.Op(PrimId::kStopGradient, {x})});
  });
  ExpectValues(GradAtX(m, b.Return(b.Op(PrimId::kReduceSum, {b.Call(scale, {x})}))), kX, "dx");
}

// h = x, then three times h = h * stop_gradient(x): h = x * x0^3 with x0 held
// constant, so d/dx sum(h) = x^3 (not 4 x^3).
TEST(StopGradientTest, InsideALoop) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "sg_loop");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  AnfNode* h = Repeat(b, 3, x, [&](GraphBuilder& c, AnfNode*, AnfNode* h) {
    return c.Op(PrimId::kMul, {h, c.Op(PrimId::kStopGradient, {x})});
  });
  ExpectValues(GradAtX(m, b.Return(b.Op(PrimId::kReduceSum, {h}))), Times(Times(kX, kX), kX), "dx");
}

// sum(x) > c ? x * stop_gradient(x) : exp(stop_gradient(x)) + 2x: the then branch
// gives x, the else branch 2. kX sums to 1.5.
TEST(StopGradientTest, InsideASwitch) {
  for (double c : {0.0, 5.0}) {
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "sg_switch");
    AnfNode* x = b.Param("x", DType::kFloat64, {3});
    AnfNode* cond = b.Op(PrimId::kGreater, {b.Op(PrimId::kReduceSum, {x}), b.Const(Value(Tensor::FromScalar(c)))});
    AnfNode* r = b.If(
        cond, [&](GraphBuilder& t) { return t.Op(PrimId::kMul, {x, t.Op(PrimId::kStopGradient, {x})}); },
        [&](GraphBuilder& e) {
          AnfNode* two_x = e.Op(PrimId::kAdd, {x, x});
          return e.Op(PrimId::kAdd, {e.Op(PrimId::kExp, {e.Op(PrimId::kStopGradient, {x})}), two_x});
        });
    Value dx = GradAtX(m, b.Return(b.Op(PrimId::kReduceSum, {r})));
    ExpectValues(dx, c == 0.0 ? kX : std::vector<double>{2.0, 2.0, 2.0}, c == 0.0 ? "then" : "else");
  }
}

// Every error is an InvalidArgument naming the graph.
TEST(ValueAndGradErrorsTest, ArgnumsOutOfRange) {
  Module m(DefaultRegistry());
  FuncGraph* f = SumTanhGraph(&m);
  for (int bad : {2, -3}) {
    ValueAndGradOptions o;
    o.argnums = {0, bad};
    ExpectFailure(ValueAndGrad(m, f, o),
                  {absl::StrCat("graph 'f' has no input ", bad), "valid positions -2 to 1"},
                  absl::StatusCode::kInvalidArgument);
    GradOptions g;
    g.argnums = {bad};
    ExpectFailure(Grad(m, f, g), {absl::StrCat("graph 'f' has no input ", bad)},
                  absl::StatusCode::kInvalidArgument);
  }
}

TEST(ValueAndGradErrorsTest, WeightsNotOfTheModule) {
  Module m(DefaultRegistry());
  FuncGraph* g = WeightedGraph(&m);
  Module other(DefaultRegistry());
  FuncGraph* elsewhere = WeightedGraph(&other);
  ASSERT_NE(elsewhere, nullptr);
  ValueAndGradOptions o;
  o.weights = {other.FindWeight("v")};  // same name, another module's
  ExpectFailure(ValueAndGrad(m, g, o), {"cannot differentiate graph 'g' with respect to 'v'",
                                        "must be weights of the graph's module"},
                absl::StatusCode::kInvalidArgument);
  o.weights = {g->parameters()[0]};  // an input, not a weight
  ExpectFailure(ValueAndGrad(m, g, o), {"graph 'g' with respect to 'x'"}, absl::StatusCode::kInvalidArgument);
  ExpectFailure(GradOperation(false, true)(m, g, {other.FindWeight("u")}),
                {"cannot differentiate graph 'g' with respect to 'u'"}, absl::StatusCode::kInvalidArgument);
}

// q(x, n) = sum(x) * n with n an int64 tensor of rank 0.
TEST(ValueAndGradErrorsTest, IntegerInput) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "q");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  AnfNode* n = b.Param("n", DType::kInt64, {});
  AnfNode* nf = b.Op(PrimId::kCast, {n}, {{"dtype", DType::kFloat64}});
  FuncGraph* q = b.Return(b.Op(PrimId::kMul, {b.Op(PrimId::kReduceSum, {x}), nf})).value();
  ValueAndGradOptions o;
  o.argnums = {-1};
  ExpectFailure(ValueAndGrad(m, q, o),
                {"cannot differentiate graph 'q' with respect to input 1 ('n')", "not a floating-point value"},
                absl::StatusCode::kInvalidArgument);
  ExpectFailure(GradOperation(true)(m, q), {"graph 'q'", "('n')"}, absl::StatusCode::kInvalidArgument);
  // The float input alone is fine: d/dx = n.
  ExpectValues(RunOn(GradOperation()(m, q), {Vec(kX), Value(Tensor::FromScalar<int64_t>(4))}), {4.0, 4.0, 4.0}, "dx");
}

TEST(ValueAndGradErrorsTest, HasAuxWantsAPair) {
  Module m(DefaultRegistry());
  FuncGraph* f = SumTanhGraph(&m);
  ValueAndGradOptions o;
  o.has_aux = true;
  ExpectFailure(ValueAndGrad(m, f, o), {"has_aux: graph 'f' must return a pair (value, aux), but returns f64[]"},
                absl::StatusCode::kInvalidArgument);
  GraphBuilder b(&m, "three");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  FuncGraph* three = b.Return(b.Tuple({b.Op(PrimId::kReduceSum, {x}), x, x})).value();
  GradOptions g;
  g.has_aux = true;
  ExpectFailure(Grad(m, three, g), {"graph 'three' must return a pair", "a tuple of 3"},
                absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
