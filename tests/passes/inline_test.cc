#include "core/passes/inline.h"

#include "core/passes/dce.h"

#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/manager.h"
#include "core/passes/optimize.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/graph_test_util.h"

namespace kgrad {
namespace testing {
namespace {

AbstractPtr I64() { return MakeAbstractScalar(DType::kInt64); }

// The caller f(x), x an int64 scalar, in `b`, for the tests of what inlining
// does to the graphs and closures f calls.
class InlineCallTest : public ::testing::Test {
 protected:
  Module m{DefaultRegistry()};
  GraphBuilder b{&m, "f"};
  AnfNode* x = b.Param("x", I64());
};

// Expected: x * x + 1 (for f(x) = sq(x) + 1 once sq is inlined).
FuncGraph* SquarePlusOne(Module* m) {
  GraphBuilder e(m, "expected");
  AnfNode* ex = e.Param("x", I64());
  return e.Return(e.Op(PrimId::kScalarAdd, {e.Op(PrimId::kScalarMul, {ex, ex}), e.Int(1)})).value();
}

// The closure sq(y) = y * y inside `b`'s graph; `*sq` is its body's multiply.
ValueNode* SquareClosure(GraphBuilder& b, CNode** sq) {
  return b.Closure("sq", 1, [sq](GraphBuilder& cb, absl::Span<AnfNode* const> p) {
    return *sq = cb.Op(PrimId::kScalarMul, {p[0], p[0]});
  });
}

// The shape K-transformed graphs have: k(x) = (y, back) with y = x * x and the
// closure back(d) = d * y. `*inner` is back's multiply, `*back_g` its graph.
ValueNode* ValueAndBackClosure(GraphBuilder& b, CNode** inner, FuncGraph** back_g) {
  return b.Closure("k", 1, [inner, back_g](GraphBuilder& kb, absl::Span<AnfNode* const> p) {
    AnfNode* y = kb.Op(PrimId::kScalarMul, {p[0], p[0]});
    ValueNode* back = kb.Closure("back", 1, [inner, y](GraphBuilder& cb, absl::Span<AnfNode* const> q) {
      return *inner = cb.Op(PrimId::kScalarMul, {q[0], y});
    });
    *back_g = GraphOf(back);
    return kb.Tuple({y, back});
  });
}

TEST(InlinePassTest, CallOfAKnownGraphBecomesItsBody) {
  Module m(DefaultRegistry());
  GraphBuilder sq(&m, "sq");
  AnfNode* y = sq.Param("y");
  FuncGraph* sq_g = sq.Return(sq.Op(PrimId::kScalarMul, {y, y})).value();
  // Before: f(x) = sq(x) + 1
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", I64());
  FuncGraph* f = b.Return(b.Op(PrimId::kScalarAdd, {b.Call(sq_g, {x}), b.Int(1)})).value();
  FuncGraph* expected = SquarePlusOne(&m);
  InlinePass pass;
  absl::StatusOr<bool> changed = pass.Run(m, f);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_TRUE(SameGraph(f, expected));
  EXPECT_FALSE(*pass.Run(m, f));  // a fixpoint
}

TEST_F(InlineCallTest, ClosureBodyReadsTheCallersNodesDirectly) {
  // Before: f(x) = c() where c() = x * x captures x
  ValueNode* c = b.Closure("c", 0, [&](GraphBuilder& cb, auto) { return cb.Op(PrimId::kScalarMul, {x, x}); });
  FuncGraph* f = b.Return(b.Call(c, {})).value();
  GraphBuilder e(&m, "expected");
  AnfNode* ex = e.Param("x", I64());
  FuncGraph* expected = e.Return(e.Op(PrimId::kScalarMul, {ex, ex})).value();
  ASSERT_TRUE(*InlinePass().Run(m, f));
  ASSERT_TRUE(DcePass().Run(m, f).ok());  // the closure graph is now unused
  EXPECT_TRUE(SameGraph(f, expected));
}

TEST(InlinePassTest, RecursionIsKeptUnlessTheTripCountIsConstant) {
  Module m(DefaultRegistry());
  // A loop with an unknown bound stays a loop.
  GraphBuilder b(&m, "f");
  AnfNode* n = b.Param("n", I64());
  std::vector<AnfNode*> out = b.While(
      {b.Int(0)}, [&](GraphBuilder& c, auto s) { return c.Op(PrimId::kScalarLt, {s[0], n}); },
      [&](GraphBuilder& c, auto s) { return std::vector<AnfNode*>{c.Op(PrimId::kScalarAdd, {s[0], c.Int(1)})}; });
  FuncGraph* f = b.Return(out[0]).value();
  ASSERT_TRUE(Optimize(m, f).ok());
  EXPECT_GT(CountApplications(f), 2);
  EXPECT_EQ(RunGraph(f, {Value(Scalar::Int(7))})->scalar().AsInt(), 7);
  // With a constant bound the optimiser unrolls it completely: s = 0+1+1+1 = 3.
  GraphBuilder k(&m, "k");
  std::vector<AnfNode*> out2 = k.While(
      {k.Int(0)}, [&](GraphBuilder& c, auto s) { return c.Op(PrimId::kScalarLt, {s[0], c.Int(3)}); },
      [&](GraphBuilder& c, auto s) { return std::vector<AnfNode*>{c.Op(PrimId::kScalarAdd, {s[0], c.Int(1)})}; });
  FuncGraph* kg = k.Return(out2[0]).value();
  ASSERT_TRUE(Optimize(m, kg).ok());
  EXPECT_EQ(CountApplications(kg), 0);  // folded to the constant 3
  EXPECT_EQ(ConstantOf(kg->output())->scalar().AsInt(), 3);
}

// s = 0; while s < bound: s += 1, as a graph of its own.
FuncGraph* CountTo(Module& m, int64_t bound) {
  GraphBuilder b(&m, "count");
  std::vector<AnfNode*> out = b.While(
      {b.Int(0)}, [&](GraphBuilder& c, auto s) { return c.Op(PrimId::kScalarLt, {s[0], c.Int(bound)}); },
      [&](GraphBuilder& c, auto s) { return std::vector<AnfNode*>{c.Op(PrimId::kScalarAdd, {s[0], c.Int(1)})}; });
  return b.Return(out[0]).value();
}

TEST(InlinePassTest, ALoopBeyondTheBudgetStaysWholeNotPartlyUnrolled) {
  Module m(DefaultRegistry());
  FuncGraph* f = CountTo(m, 50);
  int before = CountApplications(f);
  // 50 iterations of a few nodes each do not fit in 40 copied nodes.
  InlinePass pass(/*max_unroll=*/40);
  ASSERT_TRUE(pass.Run(m, f).ok());
  ASSERT_TRUE(DcePass().Run(m, f).ok());
  EXPECT_EQ(CountApplications(f), before);
  EXPECT_EQ(RunGraph(f, {})->scalar().AsInt(), 50);
  // With room for all of them it unrolls to the constant.
  FuncGraph* g = CountTo(m, 50);
  ASSERT_TRUE(Optimize(m, g).ok());
  EXPECT_EQ(CountApplications(g), 0);
  EXPECT_EQ(ConstantOf(g->output())->scalar().AsInt(), 50);
}

TEST(InlinePassTest, GradientOfALongConstantLoopBecomesStraightLineCode) {
  // h = x; 500 times: h = tanh(h * w). The bprop closures of the unrolled
  // iterations call each other; they are inlined in the same sweep, so the
  // optimised gradient has no calls and no nested graphs left.
  Module m(DefaultRegistry());
  FuncGraph* f = TanhLoop(&m, 500, /*add_x=*/false, /*sum=*/true);
  GradOptions go;
  go.argnums = {0, 1};
  FuncGraph* g = Grad(m, f, go).value();
  ASSERT_TRUE(Optimize(m, g).ok());
  EXPECT_EQ(m.manager().Reachable({g}).size(), 1u);
  EXPECT_EQ(CountPrim(g, PrimId::kTanh), 500);
  EXPECT_EQ(CountPrim(g, PrimId::kSwitch), 0);
}

// A graph called from one place only is inlined by moving its body (the same
// nodes, now the caller's), not by copying it; the emptied graph is garbage.
TEST_F(InlineCallTest, GraphCalledOnlyOnceMovesIntoItsCaller) {
  CNode* sq = nullptr;
  ValueNode* c = SquareClosure(b, &sq);
  FuncGraph* sq_g = GraphOf(c);
  const std::string sq_name = sq_g->name();
  FuncGraph* f = b.Return(b.Op(PrimId::kScalarAdd, {b.Call(c, {x}), b.Int(1)})).value();
  ASSERT_TRUE(*InlinePass().Run(m, f));
  EXPECT_EQ(sq->graph(), f);
  EXPECT_EQ(sq->input(1), x);
  EXPECT_EQ(sq_g->output(), nullptr);
  FuncGraph* expected = SquarePlusOne(&m);
  ASSERT_TRUE(DcePass().Run(m, f).ok());
  EXPECT_TRUE(SameGraph(f, expected));
  EXPECT_EQ(m.FindGraph(sq_name), nullptr);
  EXPECT_TRUE(m.CheckUses().ok());
}

// Two call sites: each gets a copy and the original stays as it was.
TEST_F(InlineCallTest, GraphCalledTwiceIsCopied) {
  CNode* sq = nullptr;
  ValueNode* c = SquareClosure(b, &sq);
  FuncGraph* sq_g = GraphOf(c);
  FuncGraph* f = b.Return(b.Op(PrimId::kScalarAdd, {b.Call(c, {x}), b.Call(c, {b.Int(3)})})).value();
  ASSERT_TRUE(*InlinePass().Run(m, f));
  EXPECT_EQ(sq->graph(), sq_g);
  EXPECT_EQ(sq_g->output(), sq);
  EXPECT_EQ(RunGraph(f, {Value(Scalar::Int(5))})->scalar().AsInt(), 25 + 9);
}

// The shape K-transformed calls have: a call returns (value, closure) and the
// closure is taken from the tuple and called once. Both graphs move; nothing is
// copied.
TEST_F(InlineCallTest, ClosureReturnedInATupleAndCalledOnceMoves) {
  CNode* inner = nullptr;
  FuncGraph* back_g = nullptr;
  ValueNode* k = ValueAndBackClosure(b, &inner, &back_g);
  CNode* app = b.Call(k, {x});
  FuncGraph* f = b.Return(b.Call(b.GetItem(app, 1), {b.GetItem(app, 0)})).value();
  const size_t graphs = m.graphs().size();
  ASSERT_TRUE(*InlinePass().Run(m, f));
  EXPECT_EQ(m.graphs().size(), graphs);  // no copy of either graph
  EXPECT_EQ(inner->graph(), f);
  ASSERT_TRUE(DcePass().Run(m, f).ok());
  EXPECT_EQ(m.graphs().size(), graphs - 2);
  EXPECT_EQ(RunGraph(f, {Value(Scalar::Int(3))})->scalar().AsInt(), 81);
  EXPECT_TRUE(m.CheckUses().ok());
}

// When the closure is also returned, it may be called elsewhere: its call is
// inlined from a copy, and the closure itself stays.
TEST_F(InlineCallTest, ClosureThatEscapesIsCopied) {
  CNode* inner = nullptr;
  FuncGraph* back_g = nullptr;
  ValueNode* k = ValueAndBackClosure(b, &inner, &back_g);
  CNode* app = b.Call(k, {x});
  AnfNode* closure = b.GetItem(app, 1);
  FuncGraph* f = b.Return(b.Tuple({b.Call(closure, {b.GetItem(app, 0)}), closure})).value();
  ASSERT_TRUE(*InlinePass().Run(m, f));
  EXPECT_EQ(inner->graph(), back_g);
  EXPECT_EQ(back_g->parent(), f);  // k moved into f, and with it its nested graph
  ASSERT_TRUE(DcePass().Run(m, f).ok());
  absl::StatusOr<Value> out = RunGraph(f, {Value(Scalar::Int(3))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tuple()[0].scalar().AsInt(), 81);
  EXPECT_TRUE(m.CheckUses().ok());
}

TEST(PartialEliminatePassTest, CallOfAPartialIsADirectCall) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", I64());
  AnfNode* y = b.Param("y", I64());
  FuncGraph* f = b.Return(b.Call(b.Partial(b.PrimRef(PrimId::kScalarSub), {x}), {y})).value();
  GraphBuilder e(&m, "expected");
  AnfNode* ex = e.Param("x", I64());
  AnfNode* ey = e.Param("y", I64());
  FuncGraph* expected = e.Return(e.Op(PrimId::kScalarSub, {ex, ey})).value();
  ASSERT_TRUE(*PartialEliminatePass().Run(m, f));
  EXPECT_TRUE(SameGraph(f, expected));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
