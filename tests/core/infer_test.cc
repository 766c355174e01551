#include "core/infer.h"

#include "absl/strings/str_cat.h"
#include "core/builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/graph_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

TEST(InferTest, ShapesFlowThroughClosuresAndCalls) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat32, {2, 3});
  ValueNode* c = b.Closure("c", 1, [&](GraphBuilder& cb, absl::Span<AnfNode* const> p) {
    return cb.Op(PrimId::kMul, {p[0], x});
  });
  CNode* y = b.Call(c, {b.Op(PrimId::kExp, {x})});
  FuncGraph* f = b.Return(b.Tuple({y, b.Op(PrimId::kReduceSum, {y}, {{"axes", std::vector<int64_t>{1}}})})).value();
  absl::StatusOr<AbstractPtr> out = InferGraph(f);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)->ToString(), "(f32[2,3], f32[2])");
  EXPECT_EQ(y->abstract()->ToString(), "f32[2,3]");
}

TEST(InferTest, SwitchJoinsBranchShapes) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* c = b.Param("c", MakeAbstractScalar(DType::kBool));
  AnfNode* x = b.Param("x", DType::kFloat32, {2, 3});
  AnfNode* y = b.Param("y", DType::kFloat32, {2, 5});
  FuncGraph* f = b.Return(b.If(c, [&](GraphBuilder&) { return x; }, [&](GraphBuilder&) { return y; })).value();
  EXPECT_EQ((*InferGraph(f))->ToString(), "f32[2,?]");
}

TEST(InferTest, MismatchedShapesNameTheNode) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat32, {2, 3});
  AnfNode* y = b.Param("y", DType::kFloat32, {4});
  CNode* bad = b.Op(PrimId::kAdd, {x, y});
  bad->set_name("sum");
  FuncGraph* f = b.Return(bad).value();
  absl::StatusOr<AbstractPtr> out = InferGraph(f);
  ExpectFailure(out, {"graph 'f', node 'sum': add:", "[2,3] and [4] do not broadcast"});
}

TEST(InferTest, RecursionWithGrowingShapesTerminates) {
  // g(x, n) = n == 0 ? x : g(concat(x, x), n - 1): every call doubles the dim, so
  // contexts are widened to an unknown dim instead of growing forever.
  Module m(DefaultRegistry());
  FuncGraph* g = CountDown(
      &m, "g", MakeAbstractTensor(DType::kFloat32, {1}),
      [](GraphBuilder&, AnfNode* x) { return x; },
      [](GraphBuilder& e, AnfNode* x, AnfNode* n1, FuncGraph* g) {
        return e.Call(g, {e.Op(PrimId::kConcat, {x, x}), n1});
      });
  absl::StatusOr<AbstractPtr> out = InferGraph(g);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)->ToString(), "f32[?]");
}

// Without recursion the first round is the fixpoint (InferOptions::max_rounds 1
// suffices), through closures and calls alike. A loop reads results still being
// computed, and a closure analysed once for two contexts of its parent reads a
// free variable that grows after the read: both take another round.
TEST(InferTest, OneRoundUnlessAValueWasReadBeforeItWasFinal) {
  InferOptions one;
  one.max_rounds = 1;
  {
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "f");
    AnfNode* x = b.Param("x", DType::kFloat32, {2, 3});
    ValueNode* c = b.Closure("c", 1, [&](GraphBuilder& cb, absl::Span<AnfNode* const> p) {
      return cb.Op(PrimId::kMul, {p[0], x});
    });
    FuncGraph* f = b.Return(b.Call(c, {b.Call(c, {b.Op(PrimId::kExp, {x})})})).value();
    absl::StatusOr<AbstractPtr> out = InferGraph(f, one);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)->ToString(), "f32[2,3]");
  }
  {
    Module m(DefaultRegistry());
    FuncGraph* g = CountDown(
        &m, "g", MakeAbstractTensor(DType::kFloat32, {2}), [](GraphBuilder&, AnfNode* x) { return x; },
        [](GraphBuilder& e, AnfNode* x, AnfNode* n1, FuncGraph* g) { return e.Call(g, {e.Op(PrimId::kExp, {x}), n1}); });
    ExpectFailure(InferGraph(g, one).status(), {"did not converge in 1 rounds"},
                  absl::StatusCode::kResourceExhausted);
    EXPECT_TRUE(InferGraph(g).ok());
  }
  {
    // p(x) = c() with c() = exp(x), p called on f32[2] and on f32[3]: c has one
    // context (no arguments), first analysed with x : f32[2].
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "f");
    AnfNode* x2 = b.Param("x2", DType::kFloat32, {2});
    AnfNode* x3 = b.Param("x3", DType::kFloat32, {3});
    CNode* e = nullptr;
    ValueNode* p = b.Closure("p", 1, [&](GraphBuilder& pb, absl::Span<AnfNode* const> px) {
      AnfNode* xp = px[0];
      ValueNode* c = pb.Closure("c", 0, [&](GraphBuilder& cb, auto) { return e = cb.Op(PrimId::kExp, {xp}); });
      return pb.Call(c, {});
    });
    FuncGraph* f = b.Return(b.Tuple({b.Call(p, {x2}), b.Call(p, {x3})})).value();
    ExpectFailure(InferGraph(f, one).status(), {"did not converge in 1 rounds"},
                  absl::StatusCode::kResourceExhausted);
    absl::StatusOr<AbstractPtr> out = InferGraph(f);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(e->abstract()->ToString(), "f32[?]");
    EXPECT_EQ((*out)->ToString(), "(f32[?], f32[?])");
  }
}

TEST(InferTest, UndeclaredParametersAreReported) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x");
  FuncGraph* f = b.Return(x).value();
  ExpectFailure(InferGraph(f).status(), {"parameter 'x' of graph 'f' has no declared type"});
}

TEST(InferTest, BuilderErrorsAreSticky) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x");
  AnfNode* bad = b.Op(PrimId::kReduceSum, {x}, {{"axes", std::string("zero")}});
  absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kNeg, {bad}));
  ExpectFailure(f, {"building graph 'f': attribute 'axes' of primitive 'reduce_sum' must be ints"});
}

// c_0(x) = c_1(x) + 1, ..., c_{n-1}(x) = x: graph calls nest n deep.
FuncGraph* CallChain(Module* m, int n) {
  std::vector<FuncGraph*> gs;
  for (int i = 0; i < n; ++i) gs.push_back(m->NewGraph(absl::StrCat("c", i)));
  for (int i = n - 1; i >= 0; --i) {
    GraphBuilder b(gs[i]);
    AnfNode* x = b.Param("x", i == 0 ? MakeAbstractTensor(DType::kFloat64, {2}) : nullptr);
    AnfNode* out = i + 1 < n ? b.Op(PrimId::kAdd, {b.Call(gs[i + 1], {x}), x}) : x;
    EXPECT_TRUE(b.Return(out).ok());
  }
  return gs[0];
}

// The analysis keeps its stack on the heap: a 50,000-graph chain is analysed (a
// recursive analysis would overflow the C++ stack long before), and the limit is
// named and settable.
TEST(InferTest, LongCallChainsAndTheirLimit) {
  Module m(DefaultRegistry());
  FuncGraph* c0 = CallChain(&m, 50'000);
  absl::StatusOr<AbstractPtr> t = InferGraph(c0);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->ToString(), "f64[2]");
  InferOptions o;
  o.max_call_depth = 1000;
  t = InferGraph(c0, o);
  ExpectFailure(t.status(), {"graph calls nest deeper than 1000", "InferOptions::max_call_depth"},
                absl::StatusCode::kResourceExhausted);
}

// The module's options govern every inference that is not given its own.
TEST(InferTest, ModuleOptionsApplyToEveryInference) {
  Module m(DefaultRegistry());
  FuncGraph* c0 = CallChain(&m, 5'000);
  InferOptions o;
  o.max_call_depth = 1000;
  m.set_infer_options(o);
  EXPECT_EQ(InferGraph(c0).status().code(), absl::StatusCode::kResourceExhausted);
  o.max_call_depth = 10'000;
  m.set_infer_options(o);
  EXPECT_TRUE(InferGraph(c0).ok());
}

// A check does not touch the nodes.
TEST(InferTest, CheckOnlyRecordsNothing) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", MakeAbstractTensor(DType::kFloat32, {3}));
  CNode* y = b.Op(PrimId::kExp, {x});
  FuncGraph* f = b.Return(y).value();
  InferOptions o;
  o.record = false;
  ASSERT_TRUE(InferGraph(f, o).ok());
  EXPECT_EQ(y->abstract(), nullptr);
  ASSERT_TRUE(InferGraph(f).ok());
  ASSERT_NE(y->abstract(), nullptr);
  EXPECT_EQ(y->abstract()->ToString(), "f32[3]");
}

// f(x) = f(x) + x never returns: the message names f, which recurses, and not
// only the entry.
TEST(InferTest, RunawayRecursionNamesTheRecursingGraph) {
  Module m(DefaultRegistry());
  FuncGraph* f = m.NewGraph("f");
  {
    GraphBuilder b(f);
    AnfNode* v = b.Param("v");
    ASSERT_TRUE(b.Return(b.Op(PrimId::kAdd, {b.Call(f, {v}), v})).ok());
  }
  GraphBuilder b(&m, "main");
  AnfNode* x = b.Param("x", MakeAbstractTensor(DType::kFloat32, {3}));
  FuncGraph* main = b.Return(b.Call(f, {x})).value();
  absl::StatusOr<AbstractPtr> t = InferGraph(main);
  ExpectFailure(t, {"graph 'f' never returns", "graph 'main', which calls it"});
}

// (((x,),),...) nested deeper than the limit is refused at the node that nests.
TEST(InferTest, TypesNestedTooDeepAreRefusedAtTheNode) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "deep");
  AnfNode* t = b.Param("x", MakeAbstractTensor(DType::kFloat32, {1}));
  for (int i = 0; i < 20; ++i) {
    t = b.Tuple({t});
    t->set_name(absl::StrCat("t", i));
  }
  FuncGraph* g = b.Return(t).value();
  InferOptions o;
  o.max_abstract_depth = 10;
  absl::StatusOr<AbstractPtr> a = InferGraph(g, o);
  ExpectFailure(a.status(), {"node 't10'", "InferOptions::max_abstract_depth"},
                absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(InferGraph(g).ok());
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
