// Gradient checks of whole programs (float64, central differences, both modes):
// an MLP with softmax cross-entropy (inputs and weights), a closure capturing a
// weight, if/else on data, a 1,000-iteration while loop, non-tail recursion, nested
// tuples in and out, a conv + pool + batch_norm network; second and third
// derivatives through a loop and a closure; the Hessian of an MLP loss.
#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "examples/programs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/elementwise.h"
#include "ops/registry.h"
#include "ops/structural.h"
#include "tests/testing/grad_test_util.h"
#include "tests/testing/graph_test_util.h"
#include "tools/grad_check.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

::testing::AssertionResult Check(Module& m, FuncGraph* f, const std::vector<Value>& args, int order = 1,
                                 uint64_t seed = 1) {
  return GraphGradientOk(m, f, args, Order(order, seed));
}

TEST(ProgramsGradTest, MlpWithSoftmaxCrossEntropyInputsAndWeights) {
  Module m(DefaultRegistry());
  FuncGraph* f = programs::Mlp(&m, 4, {5, 6, 3}, DType::kFloat64);
  EXPECT_TRUE(Check(m, f, programs::RandomInputs(f, 3)));
}

TEST(ProgramsGradTest, ClosureCapturingAWeight) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  std::mt19937_64 rng(4);
  AnfNode* w = b.Weight("w", RandomF64({3}, rng).tensor());
  AnfNode* s = b.Op(PrimId::kExp, {w});
  ValueNode* scale = b.Closure("scale", 1, [&](GraphBuilder& c, absl::Span<AnfNode* const> p) {
    return c.Op(PrimId::kAdd, {c.Op(PrimId::kMul, {p[0], s}), w});
  });
  FuncGraph* f = b.Return(b.Op(PrimId::kReduceSum, {b.Call(scale, {b.Call(scale, {x})})})).value();
  EXPECT_TRUE(Check(m, f, {RandomF64({3}, rng)}));
}

TEST(ProgramsGradTest, IfElseOnData) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {4});
  AnfNode* zero = b.Const(Value(Tensor::FromScalar<double>(0.0)));
  AnfNode* cond = b.Op(PrimId::kGreater, {b.Op(PrimId::kReduceSum, {x}), zero});
  AnfNode* r = b.If(cond, [&](GraphBuilder& t) { return t.Op(PrimId::kMul, {x, t.Op(PrimId::kSin, {x})}); },
                    [&](GraphBuilder& e) { return e.Op(PrimId::kExp, {x}); });
  FuncGraph* f = b.Return(r).value();
  std::mt19937_64 rng(5);
  EXPECT_TRUE(Check(m, f, {RandomF64({4}, rng, 0.2, 1.0)}));    // then branch
  EXPECT_TRUE(Check(m, f, {RandomF64({4}, rng, -1.0, -0.2)}));  // else branch
}

// h <- tanh(h * w + x) a thousand times (a while loop, tail recursion).
TEST(ProgramsGradTest, ThousandIterationWhileLoop) {
  Module m(DefaultRegistry());
  FuncGraph* f = TanhLoop(&m, 1000, /*add_x=*/true, /*sum=*/false);
  std::mt19937_64 rng(6);
  EXPECT_TRUE(Check(m, f, {RandomF64({3}, rng), RandomF64({3}, rng, -0.9, 0.9)}));
}

// p(x, n) = n == 0 ? 1 : x * sin(p(x, n - 1))   (the multiply waits for the call)
TEST(ProgramsGradTest, NonTailRecursion) {
  Module m(DefaultRegistry());
  FuncGraph* f = CountDown(
      &m, "p", MakeAbstractTensor(DType::kFloat64, {2}),
      [](GraphBuilder& t, AnfNode* x) { return t.Op(PrimId::kOnesLike, {x}); },
      [](GraphBuilder& e, AnfNode* x, AnfNode* n1, FuncGraph* p) {
        return e.Op(PrimId::kMul, {x, e.Op(PrimId::kSin, {e.Call(p, {x, n1})})});
      });
  std::mt19937_64 rng(7);
  EXPECT_TRUE(Check(m, f, {RandomF64({2}, rng), Value(Scalar::Int(6))}));
}

// f(((a, b), c)) = (a * c, (sin(b), (c,)))
TEST(ProgramsGradTest, NestedTuplesInAndOut) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AbstractPtr v = MakeAbstractTensor(DType::kFloat64, {3});
  AnfNode* t = b.Param("t", MakeAbstractTuple({MakeAbstractTuple({v, v}), v}));
  AnfNode* ab = b.GetItem(t, 0);
  AnfNode* c = b.GetItem(t, 1);
  AnfNode* out = b.Tuple({b.Op(PrimId::kMul, {b.GetItem(ab, 0), c}),
                          b.Tuple({b.Op(PrimId::kSin, {b.GetItem(ab, 1)}), b.Tuple({c})})});
  FuncGraph* f = b.Return(out).value();
  std::mt19937_64 rng(8);
  Value arg = Value::Tuple({Value::Tuple({RandomF64({3}, rng), RandomF64({3}, rng)}), RandomF64({3}, rng)});
  // The checker handles tensor leaves; check the flattened function through a wrapper.
  GraphBuilder w(&m, "flat");
  AnfNode* a0 = w.Param("a", v);
  AnfNode* b0 = w.Param("b", v);
  AnfNode* c0 = w.Param("c", v);
  AnfNode* r = w.Call(f, {w.Tuple({w.Tuple({a0, b0}), c0})});
  FuncGraph* flat = w.Return(r).value();
  EXPECT_TRUE(Check(m, flat, {arg.tuple()[0].tuple()[0], arg.tuple()[0].tuple()[1], arg.tuple()[1]}));
  // And the tuple-in, tuple-out graph itself through Vjp: d/dt of <u, f(t)>.
  absl::StatusOr<FuncGraph*> vjp = Vjp(m, f);
  ASSERT_TRUE(vjp.ok()) << vjp.status();
  Value ones = Value(Tensor::Full(DType::kFloat64, {3}, 1.0).value());
  absl::StatusOr<Value> res = RunGraph(*vjp, {arg, Value::Tuple({ones, Value::Tuple({ones, Value::Tuple({ones})})})});
  ASSERT_TRUE(res.ok()) << res.status();
  const Value& dt = res->tuple()[1].tuple()[0];  // ((da, db), dc)
  const Tensor& a = arg.tuple()[0].tuple()[0].tensor();
  const Tensor& bb = arg.tuple()[0].tuple()[1].tensor();
  const Tensor& cc = arg.tuple()[1].tensor();
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(dt.tuple()[0].tuple()[0].tensor().data<double>()[i], cc.data<double>()[i], 1e-12);
    EXPECT_NEAR(dt.tuple()[0].tuple()[1].tensor().data<double>()[i], std::cos(bb.data<double>()[i]), 1e-12);
    EXPECT_NEAR(dt.tuple()[1].tensor().data<double>()[i], a.data<double>()[i] + 1.0, 1e-12);
  }
}

TEST(ProgramsGradTest, ConvPoolBatchNormNetwork) {
  Module m(DefaultRegistry());
  FuncGraph* f = programs::ConvNet(&m, 2, 8, 3, 4, 3, DType::kFloat64, /*batch_norm=*/true);
  EXPECT_TRUE(Check(m, f, programs::RandomInputs(f, 9)));
}

TEST(ProgramsGradTest, ThirdOrderThroughALoopAndAClosure) {
  // f(x) = sum(c(x)) where c(v) = v * k applied in a 3-step loop; k = sin(x) is
  // captured by the closure.
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {2});
  AnfNode* k = b.Op(PrimId::kSin, {x});
  ValueNode* c = b.Closure("c", 1, [&](GraphBuilder& cb, absl::Span<AnfNode* const> p) {
    return cb.Op(PrimId::kMul, {p[0], k});
  });
  AnfNode* out =
      Repeat(b, 3, x, [&](GraphBuilder& cg, AnfNode*, AnfNode* h) { return cg.Call(c, {h}); });
  FuncGraph* f = b.Return(b.Op(PrimId::kReduceSum, {out})).value();
  std::mt19937_64 rng(10);
  EXPECT_TRUE(Check(m, f, {RandomF64({2}, rng)}, /*order=*/3));
}

TEST(ProgramsGradTest, HessianOfAnMlpLossMatchesDifferencesOfTheGradient) {
  Module m(DefaultRegistry());
  // loss(x) for a fixed small MLP; the Hessian w.r.t. x by forward over reverse.
  FuncGraph* loss = programs::Mlp(&m, 1, {3, 4, 2}, DType::kFloat64);
  std::vector<Value> args = programs::RandomInputs(loss, 12);
  absl::StatusOr<FuncGraph*> hess = Hessian(m, loss, 0);
  ASSERT_TRUE(hess.ok()) << hess.status();
  GradOptions o;
  o.argnums = {0};
  absl::StatusOr<FuncGraph*> grad = Grad(m, loss, o);
  ASSERT_TRUE(grad.ok()) << grad.status();
  absl::StatusOr<Value> h = RunGraph(*hess, args);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->tensor().TypeString(), "f64[1,3,1,3]");
  const double eps = 1e-5;
  for (int j = 0; j < 3; ++j) {
    std::vector<Value> plus = args, minus = args;
    Tensor xp = args[0].tensor().Clone(), xm = args[0].tensor().Clone();
    xp.mutable_data<double>()[j] += eps;
    xm.mutable_data<double>()[j] -= eps;
    plus[0] = Value(xp);
    minus[0] = Value(xm);
    Tensor gp = RunGraph(*grad, plus)->tensor(), gm = RunGraph(*grad, minus)->tensor();
    for (int i = 0; i < 3; ++i) {
      double fd = (gp.data<double>()[i] - gm.data<double>()[i]) / (2 * eps);
      EXPECT_NEAR(h->tensor().data<double>()[i * 3 + j], fd, 1e-6) << i << "," << j;
    }
  }
}

TEST(ProgramsGradTest, MissingBpropIsATransformTimeErrorNamingThePrimitive) {
  // A registry in which sin has no gradient rule.
  std::vector<PrimitiveDef> defs;
  ops::RegisterStructuralOps(&defs);
  ops::RegisterElementwiseOps(&defs);
  for (PrimitiveDef& d : defs) {
    if (d.id == PrimId::kSin) d.bprop = nullptr;
  }
  std::unique_ptr<const PrimitiveRegistry> reg = PrimitiveRegistry::Create(std::move(defs)).value();
  Module m(*reg);
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {2});
  CNode* s = b.Op(PrimId::kSin, {x});
  s->set_name("wave");
  FuncGraph* f = b.Return(s).value();
  absl::StatusOr<FuncGraph*> g = GradOperation()(m, f);
  ExpectError(g, "graph 'f', node 'wave': primitive 'sin' has no gradient rule",
              absl::StatusCode::kUnimplemented);
}

TEST(ProgramsGradTest, IntegerInputIsRejected) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* i = b.Param("idx", DType::kInt32, {2});
  AnfNode* x = b.Param("x", DType::kFloat64, {5});
  FuncGraph* f = b.Return(b.Op(PrimId::kGather, {x, i})).value();
  absl::StatusOr<FuncGraph*> g = GradOperation()(m, f);  // w.r.t. input 0, the indices
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("with respect to input 0 ('idx'): it is i32[2]"));
  GradOptions o;
  o.argnums = {1};
  EXPECT_TRUE(Grad(m, f, o).ok());
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
