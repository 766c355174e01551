// Forward mode by transposition: Jvp through switch, loops and closures (both
// constructions, structural and whole-graph, agreeing); jvp of
// grad against a finite-difference Hessian-vector product; the inner-product
// identity; a Jvp with no reverse computation left; Linearize, LinearTranspose,
// Jacfwd, Jacrev.
#include "ad/jvp.h"

#include <random>

#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "examples/programs.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/graph_test_util.h"
#include "tests/testing/grad_test_util.h"

namespace kgrad {
namespace testing {
namespace {

double Dot(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.NumElements(); ++i) s += a.ElementAsDouble(i) * b.ElementAsDouble(i);
  return s;
}

// f(x, y) = switch(sum(x) > 0, sin(x) * y, exp(x)) summed with a loop of 3 steps
// of h <- h * x through a closure.
FuncGraph* ControlFlowProgram(Module* m) {
  GraphBuilder b(m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  AnfNode* y = b.Param("y", DType::kFloat64, {3});
  AnfNode* zero = b.Const(Value(Tensor::FromScalar<double>(0.0)));
  AnfNode* r = b.If(b.Op(PrimId::kGreater, {b.Op(PrimId::kReduceSum, {x}), zero}),
                    [&](GraphBuilder& t) { return t.Op(PrimId::kMul, {t.Op(PrimId::kSin, {x}), y}); },
                    [&](GraphBuilder& e) { return e.Op(PrimId::kExp, {x}); });
  ValueNode* scale = b.Closure("scale", 1, [&](GraphBuilder& c, absl::Span<AnfNode* const> p) {
    return c.Op(PrimId::kMul, {p[0], x});
  });
  AnfNode* loop =
      Repeat(b, 3, y, [&](GraphBuilder& c, AnfNode*, AnfNode* h) { return c.Call(scale, {h}); });
  return b.Return(b.Op(PrimId::kAdd, {r, loop})).value();
}

// ControlFlowProgram and its (structural) Jvp, at points x that take the
// switch's first branch (the parameter true: x > 0) or its second.
class ControlFlowJvpTest : public ::testing::TestWithParam<bool> {
 protected:
  // x drawn from `rng` on the branch's side of 0.
  Value BranchX(std::mt19937_64& rng) const {
    return GetParam() ? RandomF64({3}, rng, 0.1, 1.0) : RandomF64({3}, rng, -1.0, -0.1);
  }

  Module m{DefaultRegistry()};
  FuncGraph* f = ControlFlowProgram(&m);
  absl::StatusOr<FuncGraph*> jvp = Jvp(m, f);
};

INSTANTIATE_TEST_SUITE_P(Branches, ControlFlowJvpTest, ::testing::Bool());

TEST_P(ControlFlowJvpTest, ThroughSwitchLoopAndClosureMatchesDifferencesAndTheVjp) {
  ASSERT_TRUE(jvp.ok()) << jvp.status();
  absl::StatusOr<FuncGraph*> vjp = Vjp(m, f);
  ASSERT_TRUE(vjp.ok()) << vjp.status();
  std::mt19937_64 rng(GetParam() ? 1 : 2);
  Value x = BranchX(rng);
  Value y = RandomF64({3}, rng), vx = RandomF64({3}, rng), vy = RandomF64({3}, rng), u = RandomF64({3}, rng);
  absl::StatusOr<Value> jv = RunGraph(*jvp, {x, y, vx, vy});
  ASSERT_TRUE(jv.ok()) << jv.status();
  // Central difference of f along (vx, vy).
  const double eps = 1e-6;
  Tensor xp = x.tensor().Clone(), xm = x.tensor().Clone(), yp = y.tensor().Clone(), ym = y.tensor().Clone();
  for (int i = 0; i < 3; ++i) {
    xp.mutable_data<double>()[i] += eps * vx.tensor().data<double>()[i];
    xm.mutable_data<double>()[i] -= eps * vx.tensor().data<double>()[i];
    yp.mutable_data<double>()[i] += eps * vy.tensor().data<double>()[i];
    ym.mutable_data<double>()[i] -= eps * vy.tensor().data<double>()[i];
  }
  Tensor fp = RunGraph(f, {Value(xp), Value(yp)})->tensor();
  Tensor fm = RunGraph(f, {Value(xm), Value(ym)})->tensor();
  const Tensor& jvt = jv->tuple()[1].tensor();
  for (int i = 0; i < 3; ++i) {
    double fd = (fp.data<double>()[i] - fm.data<double>()[i]) / (2 * eps);
    EXPECT_NEAR(jvt.data<double>()[i], fd, 1e-7 * std::max(1.0, std::abs(fd)));
  }
  // <J v, u> == <v, J^T u>
  absl::StatusOr<Value> vt = RunGraph(*vjp, {x, y, u});
  ASSERT_TRUE(vt.ok()) << vt.status();
  double lhs = Dot(jvt, u.tensor());
  double rhs = Dot(vx.tensor(), vt->tuple()[1].tuple()[0].tensor()) +
               Dot(vy.tensor(), vt->tuple()[1].tuple()[1].tensor());
  EXPECT_NEAR(lhs, rhs, 1e-10 * std::max(1.0, std::abs(lhs)));
}

TEST_P(ControlFlowJvpTest, StructuralAndWholeGraphConstructionsAgreeThroughSwitchLoopAndClosure) {
  ASSERT_TRUE(jvp.ok()) << jvp.status();
  JvpOptions o;
  o.construction = JvpConstruction::kTransposedWholeGraph;
  absl::StatusOr<FuncGraph*> whole = Jvp(m, f, o);
  ASSERT_TRUE(whole.ok()) << whole.status();
  std::mt19937_64 rng(GetParam() ? 31 : 32);
  Value x = BranchX(rng);
  std::vector<Value> args = {x, RandomF64({3}, rng), RandomF64({3}, rng), RandomF64({3}, rng)};
  Tensor a = RunGraph(*jvp, args)->tuple()[1].tensor();
  Tensor b = RunGraph(*whole, args)->tuple()[1].tensor();
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(a.data<double>()[i], b.data<double>()[i], 1e-12 * std::max(1.0, std::abs(b.data<double>()[i])));
  }
  // The structural one keeps the loop's shape: no more applications.
  EXPECT_LE(CountApplications(*jvp), CountApplications(*whole));
}

TEST(JvpTest, JvpOfGradIsTheHessianVectorProduct) {
  Module m(DefaultRegistry());
  FuncGraph* loss = programs::Mlp(&m, 2, {3, 4, 2}, DType::kFloat64);
  std::vector<Value> args = programs::RandomInputs(loss, 3);
  GradOptions o;
  o.argnums = {0};
  FuncGraph* grad = Grad(m, loss, o).value();
  absl::StatusOr<FuncGraph*> hvp = Jvp(m, grad);
  ASSERT_TRUE(hvp.ok()) << hvp.status();
  std::mt19937_64 rng(4);
  Value v = RandomF64({2, 3}, rng);
  Value zero_labels = Value(Tensor::Zeros(DType::kFloat64, {2, 2}).value());
  absl::StatusOr<Value> r = RunGraph(*hvp, {args[0], args[1], v, zero_labels});
  ASSERT_TRUE(r.ok()) << r.status();
  const double eps = 1e-5;
  Tensor xp = args[0].tensor().Clone(), xm = args[0].tensor().Clone();
  for (int i = 0; i < 6; ++i) {
    xp.mutable_data<double>()[i] += eps * v.tensor().data<double>()[i];
    xm.mutable_data<double>()[i] -= eps * v.tensor().data<double>()[i];
  }
  Tensor gp = RunGraph(grad, {Value(xp), args[1]})->tensor();
  Tensor gm = RunGraph(grad, {Value(xm), args[1]})->tensor();
  for (int i = 0; i < 6; ++i) {
    double fd = (gp.data<double>()[i] - gm.data<double>()[i]) / (2 * eps);
    EXPECT_NEAR(r->tuple()[1].tensor().data<double>()[i], fd, 1e-7);
  }
}

TEST(JvpTest, NoReverseComputationIsLeftAfterOptimisation) {
  // f(x) = sum(tanh(x @ w)): a forward pass has one matmul; the Jvp needs one more
  // (the tangent x_dot @ w). A reverse pass would add transposed matmuls and a
  // sum_to; none may remain.
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat32, {8, 16});
  std::mt19937_64 rng(5);
  Tensor wt = Tensor::Create(DType::kFloat32, {16, 4}).value();
  for (int64_t i = 0; i < wt.NumElements(); ++i) wt.mutable_data<float>()[i] = 0.1f * (i % 7);
  AnfNode* w = b.Weight("w", wt);
  FuncGraph* f = b.Return(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kTanh, {b.Op(PrimId::kMatMul, {x, w})})})).value();
  absl::StatusOr<FuncGraph*> jvp = Jvp(m, f);
  ASSERT_TRUE(jvp.ok()) << jvp.status();
  EXPECT_EQ(CountPrim(*jvp, PrimId::kMatMul), 2) << testing::Canonical(*jvp);
  EXPECT_EQ(CountPrim(*jvp, PrimId::kTanh), 1);
  EXPECT_EQ(CountPrim(*jvp, PrimId::kSumTo), 0);
  EXPECT_EQ(CountPrim(*jvp, PrimId::kTranspose), 0);
  EXPECT_EQ(CountPrim(*jvp, PrimId::kEnvGetItem), 0);
  EXPECT_EQ(CountPrim(*jvp, PrimId::kTupleGetItem), 0);
}

TEST(JvpTest, LinearizeDoesNotRunThePrimalAgainAndTransposes) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  FuncGraph* f = b.Return(b.Op(PrimId::kMul, {b.Op(PrimId::kSin, {x}), b.Op(PrimId::kExp, {x})})).value();
  absl::StatusOr<FuncGraph*> lin = Linearize(m, f);
  ASSERT_TRUE(lin.ok()) << lin.status();
  std::mt19937_64 rng(6);
  Value x0 = RandomF64({3}, rng), v = RandomF64({3}, rng), ct = RandomF64({3}, rng);
  absl::StatusOr<Value> r = RunGraph(*lin, {x0});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->tuple()[1].is_closure());
  FuncGraph* tangent = r->tuple()[1].closure().graph;
  // The tangent map holds no sin/exp: those were computed once, in lin.
  EXPECT_EQ(CountPrim(tangent, PrimId::kSin), 0) << testing::Canonical(*lin);
  EXPECT_EQ(CountPrim(tangent, PrimId::kExp), 0);
  // Calling it gives J v = (cos x e^x + sin x e^x) v.
  GraphBuilder call(&m, "apply_tangent");
  AnfNode* xx = call.Param("x", DType::kFloat64, {3});
  AnfNode* vv = call.Param("v", DType::kFloat64, {3});
  FuncGraph* apply = call.Return(call.Call(call.GetItem(call.Call(*lin, {xx}), 1), {vv})).value();
  Tensor jv = RunGraph(apply, {x0, v})->tensor();
  for (int i = 0; i < 3; ++i) {
    double xi = x0.tensor().data<double>()[i];
    double d = (std::cos(xi) + std::sin(xi)) * std::exp(xi) * v.tensor().data<double>()[i];
    EXPECT_NEAR(jv.data<double>()[i], d, 1e-12);
  }
}

TEST(JvpTest, LinearTransposeOfAMatmulIsTheTransposedMatmul) {
  // l(v) = v @ w + 2 v[:, :1] (linear in v); l^T(ct) = ct @ w^T + (2 sum_j ct[:, j]) at column 0.
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "l");
  AnfNode* v = b.Param("v", DType::kFloat64, {2, 3});
  AnfNode* w = b.Weight("w", Tensor::FromVector<double>({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  AnfNode* two = b.Const(Value(Tensor::FromScalar<double>(2.0)));
  AnfNode* first = b.Op(PrimId::kSlice, {v}, {{"begin", std::vector<int64_t>{0, 0}}, {"end", std::vector<int64_t>{2, 1}}});
  FuncGraph* l = b.Return(b.Op(PrimId::kAdd, {b.Op(PrimId::kMatMul, {v, w}), b.Op(PrimId::kMul, {two, first})})).value();
  absl::StatusOr<FuncGraph*> lt = LinearTranspose(m, l);
  ASSERT_TRUE(lt.ok()) << lt.status();
  std::mt19937_64 rng(8);
  Value ct = RandomF64({2, 4}, rng);
  absl::StatusOr<Value> r = RunGraph(*lt, {ct});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->tensor().TypeString(), "f64[2,3]");
  const double* wd = m.FindWeight("w")->default_value()->data<double>();
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 3; ++k) {
      double e = 0;
      for (int j = 0; j < 4; ++j) e += ct.tensor().data<double>()[i * 4 + j] * wd[k * 4 + j];
      if (k == 0) {
        for (int j = 0; j < 4; ++j) e += 2 * ct.tensor().data<double>()[i * 4 + j];
      }
      EXPECT_NEAR(r->tensor().data<double>()[i * 3 + k], e, 1e-12);
    }
  }
  // No forward computation of l is left: one matmul (the transposed one).
  EXPECT_EQ(CountPrim(*lt, PrimId::kMatMul), 1) << testing::Canonical(*lt);
}

TEST(JvpTest, JacfwdAndJacrevAgree) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  AnfNode* w = b.Weight("w", Tensor::FromVector<double>({3, 2}, {0.5, -1, 2, 0.3, -0.7, 1.1}));
  FuncGraph* f = b.Return(b.Op(PrimId::kTanh, {b.Op(PrimId::kMatMul, {b.Op(PrimId::kReshape, {x}, {{"shape", std::vector<int64_t>{1, 3}}}), w})})).value();
  absl::StatusOr<FuncGraph*> jf = Jacfwd(m, f);
  ASSERT_TRUE(jf.ok()) << jf.status();
  absl::StatusOr<FuncGraph*> jr = Jacrev(m, f);
  ASSERT_TRUE(jr.ok()) << jr.status();
  std::mt19937_64 rng(7);
  Value x0 = RandomF64({3}, rng);
  Tensor a = RunGraph(*jf, {x0})->tensor();
  Tensor c = RunGraph(*jr, {x0})->tensor();
  ASSERT_EQ(a.TypeString(), "f64[1,2,3]");
  ASSERT_EQ(c.TypeString(), "f64[1,2,3]");
  const double* wd = m.FindWeight("w")->default_value()->data<double>();
  for (int j = 0; j < 2; ++j) {
    double z = 0;
    for (int k = 0; k < 3; ++k) z += x0.tensor().data<double>()[k] * wd[k * 2 + j];
    for (int i = 0; i < 3; ++i) {
      double expected = (1 - std::tanh(z) * std::tanh(z)) * wd[i * 2 + j];
      EXPECT_NEAR(a.data<double>()[j * 3 + i], expected, 1e-12);
      EXPECT_NEAR(c.data<double>()[j * 3 + i], expected, 1e-12);
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
