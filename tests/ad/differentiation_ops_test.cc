// Differentiation operators in the IR (J, grad, value_and_grad, jvp, vjp):
// inference of the functions they return, expansion (innermost first, through
// closures, partial applications, switch and loops), the perturbation-confusion
// cases with numbers, file round trips, and the errors for operands that cannot
// be resolved.
#include <cmath>

#include "ad/expand_differentiation.h"
#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/infer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "proto/model_io.h"
#include "tests/testing/graph_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

#define KG_CONCAT_INNER(a, b) a##b
#define KG_CONCAT(a, b) KG_CONCAT_INNER(a, b)
#define ASSERT_OK(expr)                                 \
  do {                                                  \
    absl::Status s_ = (expr);                           \
    ASSERT_TRUE(s_.ok()) << s_;                         \
  } while (0)
#define ASSERT_OK_AND_ASSIGN(lhs, expr) ASSERT_OK_AND_ASSIGN_IMPL(KG_CONCAT(r_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  ASSERT_TRUE(tmp.ok()) << tmp.status();          \
  lhs = std::move(*tmp)

AbstractPtr F64Scalar() { return MakeAbstractTensor(DType::kFloat64, {}); }
Value S(double v) { return Value(Tensor::FromScalar<double>(v)); }

double Num(const Value& v) {
  EXPECT_TRUE(v.is_tensor()) << v.TypeString();
  return v.is_tensor() ? v.tensor().ElementAsDouble(0) : NAN;
}

// The derived function `op{attrs}(fn)` applied to args, in builder b.
AnfNode* Apply(GraphBuilder& b, PrimId op, AnfNode* fn, std::vector<AnfNode*> args, AttrMap attrs = {}) {
  return b.Call(b.Op(op, {fn}, std::move(attrs)), std::move(args));
}

// @main(x) = x * grad(@inner)(x) with @inner(y) = x * y, a closure over x:
// d/dx [x * d/dy (x y)] = d/dx x^2 = 2x (a confused perturbation gives x or 3x).
FuncGraph* NestedProduct(Module& m) {
  GraphBuilder b(&m, "main");
  AnfNode* x = b.Param("x", F64Scalar());
  ValueNode* inner = b.Closure("inner", 1, [&](GraphBuilder& c, absl::Span<AnfNode* const> p) {
    return c.Op(PrimId::kMul, {x, p[0]});
  });
  return b.Return(b.Op(PrimId::kMul, {x, Apply(b, PrimId::kGrad, inner, {x})})).value();
}

TEST(DifferentiationOpsTest, PerturbationsOfNestedDerivativesStayApart) {
  Module m(DefaultRegistry());
  FuncGraph* main = NestedProduct(m);
  GraphBuilder b(&m, "top");
  AnfNode* x = b.Param("x", F64Scalar());
  FuncGraph* top = b.Return(Apply(b, PrimId::kGrad, b.GraphRef(main), {x})).value();
  ASSERT_OK_AND_ASSIGN(AbstractPtr t, InferGraph(top));
  EXPECT_EQ(t->ToString(), "f64[]");
  ASSERT_OK_AND_ASSIGN(int n, ExpandDifferentiation(m, top));
  EXPECT_EQ(n, 2);
  EXPECT_FALSE(HasDifferentiationOperators(m, top));
  for (double v : {1.7, -0.3}) {
    ASSERT_OK_AND_ASSIGN(Value main_out, RunGraph(main, {S(v)}));
    EXPECT_NEAR(Num(main_out), v * v, 1e-12);
    ASSERT_OK_AND_ASSIGN(Value d, RunGraph(top, {S(v)}));
    EXPECT_NEAR(Num(d), 2 * v, 1e-12);
  }
}

TEST(DifferentiationOpsTest, PerturbationsWithAWeight) {
  // @main(y) = w * grad(@inner)(y), @inner(z) = w * z: main = w^2, d/dw = 2w.
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "main");
  AnfNode* y = b.Param("y", F64Scalar());
  AnfNode* w = b.Weight("w", Tensor::FromScalar<double>(0.8));
  ValueNode* inner = b.Closure("inner", 1, [&](GraphBuilder& c, absl::Span<AnfNode* const> p) {
    return c.Op(PrimId::kMul, {w, p[0]});
  });
  FuncGraph* main = b.Return(b.Op(PrimId::kMul, {w, Apply(b, PrimId::kGrad, inner, {y})})).value();
  GraphBuilder t(&m, "top");
  AnfNode* ty = t.Param("y", F64Scalar());
  FuncGraph* top = t.Return(Apply(t, PrimId::kGrad, t.GraphRef(main), {ty},
                                  {{"wrt", std::vector<int64_t>{}}, {"weights", std::string("w")}}))
                       .value();
  ASSERT_OK_AND_ASSIGN(AbstractPtr type, InferGraph(top));
  EXPECT_EQ(type->ToString(), "(f64[],)");
  ASSERT_OK(ExpandDifferentiation(m, top).status());
  ASSERT_OK_AND_ASSIGN(Value d, RunGraph(top, {S(0.5)}));
  ASSERT_TRUE(d.is_tuple());
  EXPECT_NEAR(Num(d.tuple()[0]), 1.6, 1e-12);
}

// x^4 by a 4-iteration loop (y <- y * x); grad(grad(grad(.))) written as three
// nested operators gives 24x.
TEST(DifferentiationOpsTest, ThirdOrderThroughALoop) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "pow4");
  AnfNode* x = b.Param("x", F64Scalar());
  AnfNode* one = b.Const(S(1.0));
  AnfNode* p = Repeat(b, 4, one, [&](GraphBuilder& c, AnfNode*, AnfNode* h) {
    return c.Op(PrimId::kMul, {h, x});
  });
  FuncGraph* f = b.Return(p).value();
  for (int order = 1; order <= 3; ++order) {
    GraphBuilder g(&m, absl::StrCat("d", order));
    AnfNode* gx = g.Param("x", F64Scalar());
    f = g.Return(Apply(g, PrimId::kGrad, g.GraphRef(f), {gx})).value();
  }
  ASSERT_OK_AND_ASSIGN(int n, ExpandDifferentiation(m, f));
  EXPECT_EQ(n, 3);
  ASSERT_OK_AND_ASSIGN(Value d3, RunGraph(f, {S(1.5)}));
  EXPECT_NEAR(Num(d3), 36.0, 1e-9);
  ASSERT_OK_AND_ASSIGN(Value d3b, RunGraph(f, {S(-0.7)}));
  EXPECT_NEAR(Num(d3b), 24 * -0.7, 1e-9);
}

// @sin(x) = sin(x) for J, jvp and vjp.
// Options of Grad, Jvp or ValueAndGrad that leave the differentiation operator in
// the graph (to be expanded later).
template <typename Options>
Options AsOperator() {
  Options o;
  o.as_operator = true;
  return o;
}

FuncGraph* Sin(Module& m) {
  GraphBuilder b(&m, "sine");
  AnfNode* x = b.Param("x", F64Scalar());
  return b.Return(b.Op(PrimId::kSin, {x})).value();
}

TEST(DifferentiationOpsTest, JReturnsTheValueAndTheBprop) {
  Module m(DefaultRegistry());
  FuncGraph* f = Sin(m);
  GraphBuilder b(&m, "main");
  AnfNode* x = b.Param("x", F64Scalar());
  AnfNode* r = Apply(b, PrimId::kJ, b.GraphRef(f), {x});
  AnfNode* din = b.Call(b.GetItem(r, 1), {b.Const(S(2.0))});
  FuncGraph* main = b.Return(b.Tuple({b.GetItem(r, 0), din})).value();
  ASSERT_OK_AND_ASSIGN(AbstractPtr t, InferGraph(main));
  EXPECT_EQ(t->ToString(), "(f64[], (env, f64[]))");
  ASSERT_OK(ExpandDifferentiation(m, main).status());
  ASSERT_OK_AND_ASSIGN(Value out, RunGraph(main, {S(0.4)}));
  EXPECT_NEAR(Num(out.tuple()[0]), std::sin(0.4), 1e-15);
  EXPECT_NEAR(Num(out.tuple()[1].tuple()[1]), 2 * std::cos(0.4), 1e-15);
}

TEST(DifferentiationOpsTest, JvpAndVjpOperators) {
  Module m(DefaultRegistry());
  FuncGraph* f = Sin(m);
  GraphBuilder b(&m, "main");
  AnfNode* x = b.Param("x", F64Scalar());
  AnfNode* v = b.Param("v", F64Scalar());
  AnfNode* jv = Apply(b, PrimId::kJvp, b.GraphRef(f), {x, v});
  AnfNode* vj = Apply(b, PrimId::kVjp, b.GraphRef(f), {x, v});
  FuncGraph* main = b.Return(b.Tuple({jv, vj})).value();
  ASSERT_OK_AND_ASSIGN(AbstractPtr t, InferGraph(main));
  EXPECT_EQ(t->ToString(), "((f64[], f64[]), (f64[], (f64[],)))");
  ASSERT_OK(ExpandDifferentiation(m, main).status());
  ASSERT_OK_AND_ASSIGN(Value out, RunGraph(main, {S(0.9), S(3.0)}));
  EXPECT_NEAR(Num(out.tuple()[0].tuple()[0]), std::sin(0.9), 1e-15);
  EXPECT_NEAR(Num(out.tuple()[0].tuple()[1]), 3 * std::cos(0.9), 1e-15);
  EXPECT_NEAR(Num(out.tuple()[1].tuple()[1].tuple()[0]), 3 * std::cos(0.9), 1e-15);
}

TEST(DifferentiationOpsTest, OperandsSwitchPartialAndPrimitive) {
  Module m(DefaultRegistry());
  FuncGraph* f = Sin(m);
  GraphBuilder c(&m, "cube");
  AnfNode* cx = c.Param("x", F64Scalar());
  FuncGraph* cube = c.Return(c.Op(PrimId::kMul, {cx, c.Op(PrimId::kMul, {cx, cx})})).value();
  GraphBuilder s(&m, "scaled");
  AnfNode* a = s.Param("a", F64Scalar());
  AnfNode* sx = s.Param("x", F64Scalar());
  FuncGraph* scaled = s.Return(s.Op(PrimId::kMul, {a, s.Op(PrimId::kMul, {sx, sx})})).value();

  GraphBuilder b(&m, "main");
  AnfNode* k = b.Param("k", MakeAbstractTensor(DType::kBool, {}));
  AnfNode* x = b.Param("x", F64Scalar());
  AnfNode* picked = Apply(b, PrimId::kGrad, b.Switch(k, b.GraphRef(f), b.GraphRef(cube)), {x});
  AnfNode* bound = Apply(b, PrimId::kGrad, b.Partial(b.GraphRef(scaled), {b.Const(S(5.0))}), {x});
  AnfNode* prim = Apply(b, PrimId::kGrad, b.PrimRef(PrimId::kExp), {x});
  FuncGraph* main = b.Return(b.Tuple({picked, bound, prim})).value();
  ASSERT_OK(ExpandDifferentiation(m, main).status());
  for (bool kv : {true, false}) {
    ASSERT_OK_AND_ASSIGN(Value out, RunGraph(main, {Value(Tensor::FromScalar<bool>(kv)), S(0.6)}));
    EXPECT_NEAR(Num(out.tuple()[0]), kv ? std::cos(0.6) : 3 * 0.36, 1e-14);
    EXPECT_NEAR(Num(out.tuple()[1]), 5 * 2 * 0.6, 1e-14);
    EXPECT_NEAR(Num(out.tuple()[2]), std::exp(0.6), 1e-14);
  }
}

TEST(DifferentiationOpsTest, ValueAndGradWithAuxAndSens) {
  // @f(x, y) = (x*y, x + y): value_and_grad{wrt=[0,1], has_aux} and
  // grad{wrt=[1], sens}.
  Module m(DefaultRegistry());
  GraphBuilder fb(&m, "f");
  AnfNode* fx = fb.Param("x", F64Scalar());
  AnfNode* fy = fb.Param("y", F64Scalar());
  FuncGraph* f = fb.Return(fb.Tuple({fb.Op(PrimId::kMul, {fx, fy}), fb.Op(PrimId::kAdd, {fx, fy})})).value();
  GraphBuilder gb(&m, "g");
  AnfNode* gx = gb.Param("x", F64Scalar());
  AnfNode* gy = gb.Param("y", F64Scalar());
  FuncGraph* g = gb.Return(gb.Op(PrimId::kMul, {gx, gb.Op(PrimId::kSin, {gy})})).value();

  GraphBuilder b(&m, "main");
  AnfNode* x = b.Param("x", F64Scalar());
  AnfNode* y = b.Param("y", F64Scalar());
  AnfNode* vg = Apply(b, PrimId::kValueAndGrad, b.GraphRef(f), {x, y},
                      {{"wrt", std::vector<int64_t>{0, 1}}, {"has_aux", true}});
  AnfNode* gs = Apply(b, PrimId::kGrad, b.GraphRef(g), {x, y, b.Const(S(-2.0))},
                      {{"wrt", std::vector<int64_t>{-1}}, {"sens", true}});
  FuncGraph* main = b.Return(b.Tuple({vg, gs})).value();
  ASSERT_OK_AND_ASSIGN(AbstractPtr t, InferGraph(main));
  EXPECT_EQ(t->ToString(), "(((f64[], f64[]), (f64[], f64[])), f64[])");
  ASSERT_OK(ExpandDifferentiation(m, main).status());
  ASSERT_OK_AND_ASSIGN(Value out, RunGraph(main, {S(2.0), S(3.0)}));
  const Value& value = out.tuple()[0].tuple()[0];
  const Value& grads = out.tuple()[0].tuple()[1];
  EXPECT_NEAR(Num(value.tuple()[0]), 6.0, 1e-15);
  EXPECT_NEAR(Num(value.tuple()[1]), 5.0, 1e-15);   // aux as is
  EXPECT_NEAR(Num(grads.tuple()[0]), 3.0, 1e-15);   // d(xy)/dx, aux not added
  EXPECT_NEAR(Num(grads.tuple()[1]), 2.0, 1e-15);
  EXPECT_NEAR(Num(out.tuple()[1]), -2.0 * 2.0 * std::cos(3.0), 1e-14);
}

TEST(DifferentiationOpsTest, FilesKeepTheOperatorsAndExpandAfterLoading) {
  Module m(DefaultRegistry());
  FuncGraph* main = NestedProduct(m);
  ASSERT_OK_AND_ASSIGN(FuncGraph* top, Grad(m, main, AsOperator<GradOptions>()));
  EXPECT_TRUE(HasDifferentiationOperators(m, top));
  m.set_entry(top);
  ASSERT_OK_AND_ASSIGN(std::string text, ModelToText(m));
  EXPECT_THAT(text, HasSubstr("name: \"grad\""));
  for (bool binary : {false, true}) {
    std::string bytes = text;
    if (binary) {
      ASSERT_OK_AND_ASSIGN(auto tm, ParseModel(text, /*text=*/true, DefaultRegistry()));
      ASSERT_OK_AND_ASSIGN(proto::ModelProto p, SaveModel(*tm));
      bytes = p.SerializeAsString();
    }
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Module> loaded, ParseModel(bytes, !binary, DefaultRegistry()));
    ASSERT_OK_AND_ASSIGN(std::string again, ModelToText(*loaded));
    EXPECT_EQ(again, text);
    ASSERT_OK(ExpandDifferentiation(*loaded).status());
    ASSERT_OK_AND_ASSIGN(Value d, RunGraph(loaded->entry(), {S(1.25)}));
    EXPECT_NEAR(Num(d), 2.5, 1e-12);
  }
}

TEST(DifferentiationOpsTest, ApiOperatorGraphsMatchTheExpandedApi) {
  Module m(DefaultRegistry());
  FuncGraph* f = Sin(m);
  ASSERT_OK_AND_ASSIGN(FuncGraph* op_jvp, Jvp(m, f, AsOperator<JvpOptions>()));
  ASSERT_OK_AND_ASSIGN(FuncGraph* api_jvp, Jvp(m, f));
  ASSERT_OK_AND_ASSIGN(FuncGraph* op_vg, ValueAndGrad(m, f, AsOperator<ValueAndGradOptions>()));
  ASSERT_OK_AND_ASSIGN(FuncGraph* api_vg, ValueAndGrad(m, f));
  ASSERT_OK(ExpandDifferentiation(m, op_jvp).status());
  ASSERT_OK(ExpandDifferentiation(m, op_vg).status());
  ASSERT_OK_AND_ASSIGN(Value a, RunGraph(op_jvp, {S(0.3), S(2.0)}));
  ASSERT_OK_AND_ASSIGN(Value b, RunGraph(api_jvp, {S(0.3), S(2.0)}));
  EXPECT_NEAR(Num(a.tuple()[1]), Num(b.tuple()[1]), 1e-15);
  EXPECT_NEAR(Num(a.tuple()[1]), 2 * std::cos(0.3), 1e-15);
  ASSERT_OK_AND_ASSIGN(Value c, RunGraph(op_vg, {S(0.3)}));
  ASSERT_OK_AND_ASSIGN(Value d, RunGraph(api_vg, {S(0.3)}));
  EXPECT_NEAR(Num(c.tuple()[0]), Num(d.tuple()[0]), 1e-15);
  EXPECT_NEAR(Num(c.tuple()[1]), std::cos(0.3), 1e-15);
}

TEST(DifferentiationOpsTest, UnknownOperandIsAStatusNamingTheNode) {
  // @apply(x) = grad(f)(x) where f is an input: not known statically.
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "apply");
  AnfNode* fn = b.Param("fn");
  AnfNode* x = b.Param("x", F64Scalar());
  FuncGraph* g = b.Return(Apply(b, PrimId::kGrad, fn, {x})).value();
  absl::StatusOr<int> r = ExpandDifferentiation(m, g);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("apply"));
  EXPECT_THAT(r.status().message(), HasSubstr("grad"));
  EXPECT_THAT(r.status().message(), HasSubstr("cannot tell statically which function 'fn'"));
  // A constant that is not a function.
  GraphBuilder t(&m, "on_tensor");
  AnfNode* tx = t.Param("x", F64Scalar());
  FuncGraph* tg = t.Return(Apply(t, PrimId::kGrad, t.Const(S(1.0)), {tx})).value();
  absl::StatusOr<int> rt = ExpandDifferentiation(m, tg);
  ASSERT_FALSE(rt.ok());
  EXPECT_THAT(std::string(rt.status().message()), HasSubstr("is a constant f64[], not a function"));
  // Unexpanded, it does not run either.
  absl::StatusOr<std::unique_ptr<Executor>> e = Executor::Create(g);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("differentiation operator"));
}

TEST(DifferentiationOpsTest, SelfDifferentiationAndBadAttributesAreStatuses) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "selfish");
  AnfNode* x = b.Param("x", F64Scalar());
  FuncGraph* g = b.graph();
  FuncGraph* selfish = b.Return(b.Op(PrimId::kAdd, {x, Apply(b, PrimId::kGrad, b.GraphRef(g), {x})})).value();
  absl::StatusOr<int> r = ExpandDifferentiation(m, selfish);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("differentiates itself"));

  Module m2(DefaultRegistry());
  FuncGraph* f = Sin(m2);
  GraphBuilder c(&m2, "main");
  AnfNode* cx = c.Param("x", F64Scalar());
  FuncGraph* bad_wrt = c.Return(Apply(c, PrimId::kGrad, c.GraphRef(f), {cx}, {{"wrt", std::vector<int64_t>{3}}})).value();
  absl::StatusOr<AbstractPtr> t = InferGraph(bad_wrt);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("wrt names input 3"));
  GraphBuilder d(&m2, "main2");
  AnfNode* dx = d.Param("x", F64Scalar());
  FuncGraph* bad_w = d.Return(Apply(d, PrimId::kGrad, d.GraphRef(f), {dx}, {{"weights", std::string("nope")}})).value();
  t = InferGraph(bad_w);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("'nope', which is not a weight"));
  absl::StatusOr<int> e = ExpandDifferentiation(m2, bad_w);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("main2"));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
