// Before/Expected tests of the local rewriting passes: tuple, env, algebra,
// constant folding, CSE and DCE.
#include "backends/cpu/constant_evaluator.h"
#include "core/builder.h"
#include "core/infer.h"
#include "core/passes/algebra.h"
#include "core/passes/constant_fold.h"
#include "core/passes/dce.h"
#include "core/passes/env_simplify.h"
#include "core/passes/simplify.h"
#include "core/passes/tuple_simplify.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/graph_test_util.h"

namespace kgrad {
namespace {

using testing::SameGraph;

AbstractPtr F32(Shape s) { return MakeAbstractTensor(DType::kFloat32, std::move(s)); }

// set(newenv, key, v) in `b`.
AnfNode* NewEnvWith(GraphBuilder& b, AnfNode* key, AnfNode* v) {
  return b.Op(PrimId::kEnvSetItem, {b.Const(Value::EmptyEnv()), key, v});
}

// Builds "before" and "expected" graphs with the same parameters.
struct Case : testing::BeforeExpected {
  using BeforeExpected::BeforeExpected;
  ::testing::AssertionResult Check(Pass& pass, AnfNode* b_out, AnfNode* e_out) {
    FuncGraph* b = before.Return(b_out).value();
    FuncGraph* e = expected.Return(e_out).value();
    bool declared = true;
    for (Parameter* p : b->parameters()) declared &= p->declared() != nullptr;
    if (declared) (void)InferGraph(b);
    absl::StatusOr<bool> changed = pass.Run(m, b);
    if (!changed.ok()) return ::testing::AssertionFailure() << changed.status();
    if (!*changed) return ::testing::AssertionFailure() << "the pass changed nothing";
    DcePass().Run(m, b).IgnoreError();
    return SameGraph(b, e);
  }
  // As Check, with `pass` run in sweeps to a fixpoint (until a sweep changes
  // nothing, at most kMaxSweeps), after inference of the before graph (kTry:
  // whatever its outcome; kMust: it succeeds).
  enum class Infer { kNone, kTry, kMust };
  static constexpr int kMaxSweeps = 32;
  ::testing::AssertionResult CheckFixpoint(Pass& pass, AnfNode* b_out, AnfNode* e_out,
                                           Infer infer) {
    FuncGraph* b = before.Return(b_out).value();
    FuncGraph* e = expected.Return(e_out).value();
    if (infer != Infer::kNone) {
      absl::StatusOr<AbstractPtr> t = InferGraph(b);
      if (infer == Infer::kMust && !t.ok()) return ::testing::AssertionFailure() << t.status();
    }
    bool any = false;
    for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
      absl::StatusOr<bool> changed = pass.Run(m, b);
      if (!changed.ok()) return ::testing::AssertionFailure() << changed.status();
      if (!*changed) break;
      any = true;
    }
    if (!any) return ::testing::AssertionFailure() << "the sweeps changed nothing";
    DcePass().Run(m, b).IgnoreError();
    return SameGraph(b, e);
  }
};

TEST(TupleSimplifyTest, GetItemOfMakeTuple) {
  // (a, b)[1] => b
  Case c({F32({2}), F32({2})});
  TupleSimplifyPass pass;
  EXPECT_TRUE(c.Check(pass, c.before.GetItem(c.before.Tuple({c.bx[0], c.bx[1]}), 1), c.ex[1]));
}

TEST(TupleSimplifyTest, GetItemOfSetItem) {
  // set(t, 0, v)[0] => v;  set(t, 0, v)[1] => t[1]
  Case c({MakeAbstractTuple({F32({2}), F32({2})}), F32({2})});
  AnfNode* set = c.before.Op(PrimId::kTupleSetItem, {c.bx[0], c.before.Int(0), c.bx[1]});
  AnfNode* out = c.before.Tuple({c.before.GetItem(set, 0), c.before.GetItem(set, 1)});
  AnfNode* expected = c.expected.Tuple({c.ex[1], c.expected.GetItem(c.ex[0], 1)});
  TupleSimplifyPass pass;
  EXPECT_TRUE(c.Check(pass, out, expected));
}

TEST(TupleSimplifyTest, RebuiltTupleIsTheTuple) {
  // (t[0], t[1]) => t   for a pair t
  Case c({MakeAbstractTuple({F32({2}), F32({3})})});
  AnfNode* out = c.before.Tuple({c.before.GetItem(c.bx[0], 0), c.before.GetItem(c.bx[0], 1)});
  TupleSimplifyPass pass;
  EXPECT_TRUE(c.Check(pass, out, c.ex[0]));
}

// Negative cases: (t[0], t[1]) is not t when t has three elements, nor when
// nothing says how many it has.
TEST(TupleSimplifyTest, PrefixOfALongerTupleIsNotTheTuple) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "prefix");
  AnfNode* t = b.Param("t", MakeAbstractTuple({F32({2}), F32({3}), F32({4})}));
  AnfNode* pair = b.Tuple({b.GetItem(t, 0), b.GetItem(t, 1)});
  FuncGraph* g = b.Return(pair).value();
  ASSERT_TRUE(InferGraph(g).ok());
  absl::StatusOr<bool> changed = TupleSimplifyPass().Run(m, g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(g->output(), pair);
  EXPECT_EQ(AsTuple(g->output()->abstract())->size(), 2u);
}

TEST(TupleSimplifyTest, TupleOfUnknownLengthIsNotRebuilt) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "unknown");
  AnfNode* t = b.Param("t");  // no declared type, no inference: arity unknown
  AnfNode* pair = b.Tuple({b.GetItem(t, 0), b.GetItem(t, 1)});
  FuncGraph* g = b.Return(pair).value();
  absl::StatusOr<bool> changed = TupleSimplifyPass().Run(m, g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(g->output(), pair);
}

TEST(TupleSimplifyTest, ZerosLikeOfATupleIsATupleOfZeros) {
  Case c({F32({2}), F32({3})});
  AnfNode* out = c.before.Op(PrimId::kZerosLike, {c.before.Tuple({c.bx[0], c.bx[1]})});
  AnfNode* expected = c.expected.Tuple({c.expected.Op(PrimId::kZerosLike, {c.ex[0]}),
                                        c.expected.Op(PrimId::kZerosLike, {c.ex[1]})});
  TupleSimplifyPass pass;
  EXPECT_TRUE(c.Check(pass, out, expected));
}

TEST(EnvSimplifyTest, ReadBackWhatWasWritten) {
  // set(set(newenv, "a", x0), "b", x1)["a"] => x0;  newenv["c"] => default
  Case c({F32({2}), F32({2})});
  GraphBuilder& b = c.before;
  AnfNode* env = NewEnvWith(b, b.Const(Value::String("a")), c.bx[0]);
  env = b.Op(PrimId::kEnvSetItem, {env, b.Const(Value::String("b")), c.bx[1]});
  AnfNode* a = b.Op(PrimId::kEnvGetItem, {env, b.Const(Value::String("a")), b.Op(PrimId::kZerosLike, {c.bx[0]})});
  AnfNode* none = b.Op(PrimId::kEnvGetItem, {b.Const(Value::EmptyEnv()), b.Const(Value::String("c")), c.bx[1]});
  AnfNode* expected = c.expected.Tuple({c.ex[0], c.ex[1]});
  EnvSimplifyPass pass;
  EXPECT_TRUE(c.Check(pass, b.Tuple({a, none}), expected));
}

TEST(EnvSimplifyTest, AddOfEnvsSplitsIntoItems) {
  // (e1 + newenv) => e1;  (e1 + e2)[k] => e1[k] + e2[k] (zero default)
  Case c({F32({2}), F32({2})});
  GraphBuilder& b = c.before;
  AnfNode* key = b.Const(Value::String("k"));
  AnfNode* e1 = NewEnvWith(b, key, c.bx[0]);
  AnfNode* e2 = NewEnvWith(b, key, c.bx[1]);
  AnfNode* sum = b.Op(PrimId::kEnvAdd, {b.Op(PrimId::kEnvAdd, {e1, b.Const(Value::EmptyEnv())}), e2});
  AnfNode* out = b.Op(PrimId::kEnvGetItem, {sum, key, b.Op(PrimId::kZerosLike, {c.bx[0]})});
  AnfNode* expected = c.expected.Op(PrimId::kHyperAdd, {c.ex[0], c.ex[1]});
  // The second rewrite applies to applications the first made: the same sweep
  // rewrites them (the second sweep changes nothing).
  EnvSimplifyPass pass;
  EXPECT_TRUE(c.CheckFixpoint(pass, out, expected, Case::Infer::kMust));
}

TEST(AlgebraTest, ZerosVanish) {
  // x0 + zeros_like(x0) => x0;  x0 * zeros_like(x1) => fill(0)
  Case c({F32({2, 3}), F32({2, 3})});
  GraphBuilder& b = c.before;
  AnfNode* plus = b.Op(PrimId::kAdd, {c.bx[0], b.Op(PrimId::kZerosLike, {c.bx[0]})});
  AnfNode* times = b.Op(PrimId::kMul, {c.bx[0], b.Op(PrimId::kZerosLike, {c.bx[1]})});
  AnfNode* expected = c.expected.Tuple(
      {c.ex[0], c.expected.Op(PrimId::kFill, {}, {{"shape", std::vector<int64_t>{2, 3}}, {"value", 0.0}, {"dtype", DType::kFloat32}})});
  AlgebraPass pass;
  EXPECT_TRUE(c.Check(pass, b.Tuple({plus, times}), expected));
}

TEST(AlgebraTest, DynamicFormsBecomeStatic) {
  // sum_to_like(x0, x1) => sum_to(x0){[3]};  ones_like(x1) => fill(1)
  Case c({F32({2, 3}), F32({3})});
  GraphBuilder& b = c.before;
  AnfNode* out = b.Tuple({b.Op(PrimId::kSumToLike, {c.bx[0], c.bx[1]}), b.Op(PrimId::kOnesLike, {c.bx[1]})});
  AnfNode* expected = c.expected.Tuple(
      {c.expected.Op(PrimId::kSumTo, {c.ex[0]}, {{"shape", std::vector<int64_t>{3}}}),
       c.expected.Op(PrimId::kFill, {}, {{"shape", std::vector<int64_t>{3}}, {"value", 1.0}, {"dtype", DType::kFloat32}})});
  AlgebraPass pass;
  EXPECT_TRUE(c.Check(pass, out, expected));
}

TEST(AlgebraTest, IdentitiesAndInverses) {
  // -(-x) => x;  transpose(transpose(x, [1,0]), [1,0]) => x;  reshape(x){own shape} => x
  Case c({F32({2, 3})});
  GraphBuilder& b = c.before;
  AnfNode* nn = b.Op(PrimId::kNeg, {b.Op(PrimId::kNeg, {c.bx[0]})});
  std::vector<int64_t> perm{1, 0};
  AnfNode* tt = b.Op(PrimId::kTranspose, {b.Op(PrimId::kTranspose, {c.bx[0]}, {{"perm", perm}})}, {{"perm", perm}});
  AnfNode* r = b.Op(PrimId::kReshape, {c.bx[0]}, {{"shape", std::vector<int64_t>{2, 3}}});
  AnfNode* expected = c.expected.Tuple({c.ex[0], c.ex[0], c.ex[0]});
  AlgebraPass pass;
  EXPECT_TRUE(c.Check(pass, b.Tuple({nn, tt, r}), expected));
}

TEST(ConstantFoldTest, ScalarsAndSwitches) {
  // 2 + 3 => 5;  switch(2 < 3, x0, x1) => x0
  Case c({F32({2}), F32({2})});
  GraphBuilder& b = c.before;
  AnfNode* five = b.Op(PrimId::kScalarAdd, {b.Int(2), b.Int(3)});
  AnfNode* pick = b.Switch(b.Op(PrimId::kScalarLt, {b.Int(2), b.Int(3)}), c.bx[0], c.bx[1]);
  ConstantFoldPass pass;
  EXPECT_TRUE(c.CheckFixpoint(pass, b.Tuple({five, pick}),
                              c.expected.Tuple({c.expected.Int(5), c.ex[0]}), Case::Infer::kNone));
}

TEST(ConstantFoldTest, TensorsThroughTheCpuEvaluator) {
  // exp(0) + 1 on constants => the constant 2
  Case c({F32({2})});
  GraphBuilder& b = c.before;
  AnfNode* zero = b.Const(Value(Tensor::FromVector<float>({2}, {0.f, 0.f})));
  AnfNode* one = b.Const(Value(Tensor::FromVector<float>({2}, {1.f, 1.f})));
  AnfNode* out = b.Op(PrimId::kAdd, {b.Op(PrimId::kAdd, {b.Op(PrimId::kExp, {zero}), one}), c.bx[0]});
  AnfNode* two = c.expected.Const(Value(Tensor::FromVector<float>({2}, {2.f, 2.f})));
  ConstantFoldPass pass(&CpuConstantEvaluator::Get());
  EXPECT_TRUE(c.CheckFixpoint(pass, out, c.expected.Op(PrimId::kAdd, {two, c.ex[0]}),
                              Case::Infer::kTry));
}

TEST(CseTest, SameApplicationOnce) {
  // exp(x0) * exp(x0) => e = exp(x0); e * e  (the CSE of SimplifyPass's sweep)
  Case c({F32({2})});
  GraphBuilder& b = c.before;
  AnfNode* e1 = b.Op(PrimId::kExp, {c.bx[0]});
  AnfNode* e2 = b.Op(PrimId::kExp, {c.bx[0]});
  AnfNode* out = b.Op(PrimId::kMul, {e1, e2});
  AnfNode* e = c.expected.Op(PrimId::kExp, {c.ex[0]});
  SimplifyPass pass;
  EXPECT_TRUE(c.Check(pass, out, c.expected.Op(PrimId::kMul, {e, e})));
}

TEST(SimplifyTest, OneSweepReachesTheRulesFixpoint) {
  // (set(newenv, k, x0) + set(newenv, k, x1))[k]  =>  hyper_add(x0, x1) (env rule,
  // then the rule on each new env_getitem)  =>  add(x0, x1) (algebra, on the new
  // hyper_add): one sweep, and a second finds nothing.
  Case c({F32({2}), F32({2})});
  GraphBuilder& b = c.before;
  AnfNode* key = b.Const(Value::String("k"));
  AnfNode* sum = b.Op(PrimId::kEnvAdd, {NewEnvWith(b, key, c.bx[0]), NewEnvWith(b, key, c.bx[1])});
  AnfNode* out = b.Op(PrimId::kEnvGetItem, {sum, key, b.Op(PrimId::kZerosLike, {c.bx[0]})});
  SimplifyPass pass;
  EXPECT_TRUE(c.Check(pass, out, c.expected.Op(PrimId::kAdd, {c.ex[0], c.ex[1]})));
  EXPECT_FALSE(*pass.Run(c.m, c.before.graph()));
  EXPECT_FALSE(pass.incomplete());
}

TEST(SimplifyTest, MergesEqualNodesInTheSameSweep) {
  // (p[0], q[1]) with q an equal copy of p: q merges into p as the sweep reaches
  // it, so (p[0], p[1]) => p in the same sweep.
  Case c({F32({2}), F32({2})});
  GraphBuilder& b = c.before;
  AnfNode* p = b.Tuple({b.Op(PrimId::kExp, {c.bx[0]}), c.bx[1]});
  AnfNode* q = b.Tuple({b.Op(PrimId::kExp, {c.bx[0]}), c.bx[1]});
  AnfNode* out = b.Tuple({b.GetItem(p, 0), b.GetItem(q, 1)});
  AnfNode* expected = c.expected.Tuple({c.expected.Op(PrimId::kExp, {c.ex[0]}), c.ex[1]});
  SimplifyPass pass;
  EXPECT_TRUE(c.Check(pass, out, expected));
  EXPECT_FALSE(*pass.Run(c.m, c.before.graph()));
}

TEST(SimplifyTest, SaysWhenItExposesACall) {
  // partial(g, x0)(x1) => g(x0, x1): a direct call the inliner has not seen.
  Case c({F32({2}), F32({2})});
  GraphBuilder g(&c.m, "g");
  AnfNode* a = g.Param("a");
  AnfNode* d = g.Param("d");
  FuncGraph* gg = g.Return(g.Op(PrimId::kMul, {a, d})).value();
  GraphBuilder& b = c.before;
  AnfNode* out = b.Call(b.Partial(b.GraphRef(gg), {c.bx[0]}), {c.bx[1]});
  SimplifyPass pass;
  EXPECT_TRUE(c.Check(pass, out, c.expected.Call(gg, {c.ex[0], c.ex[1]})));
  EXPECT_TRUE(pass.exposed_calls());
  // Nothing of the kind in a graph of primitives.
  Case plain({F32({2})});
  AnfNode* y = plain.before.Op(PrimId::kMul, {plain.bx[0], plain.before.Op(PrimId::kOnesLike, {plain.bx[0]})});
  SimplifyPass again;
  EXPECT_TRUE(plain.Check(again, y, plain.ex[0]));
  EXPECT_FALSE(again.exposed_calls());
}

TEST(DceTest, UnusedNodesAndGraphsAreDeleted) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x");
  b.Op(PrimId::kScalarAdd, {x, x});  // dead
  b.Closure("dead", 0, [&](GraphBuilder& cb, auto) { return x; });
  FuncGraph* f = b.Return(x).value();
  size_t graphs = m.graphs().size();
  ASSERT_TRUE(*DcePass().Run(m, f));
  EXPECT_EQ(m.graphs().size(), graphs - 1);
  EXPECT_EQ(f->owned_nodes().size(), 1u);
  EXPECT_FALSE(*DcePass().Run(m, f));
}

}  // namespace
}  // namespace kgrad
