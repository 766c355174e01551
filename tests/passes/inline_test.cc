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

TEST(InlinePassTest, CallOfAKnownGraphBecomesItsBody) {
  Module m(DefaultRegistry());
  GraphBuilder sq(&m, "sq");
  AnfNode* y = sq.Param("y");
  FuncGraph* sq_g = sq.Return(sq.Op(PrimId::kScalarMul, {y, y})).value();
  // Before: f(x) = sq(x) + 1
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", I64());
  FuncGraph* f = b.Return(b.Op(PrimId::kScalarAdd, {b.Call(sq_g, {x}), b.Int(1)})).value();
  // Expected: x * x + 1
  GraphBuilder e(&m, "expected");
  AnfNode* ex = e.Param("x", I64());
  FuncGraph* expected = e.Return(e.Op(PrimId::kScalarAdd, {e.Op(PrimId::kScalarMul, {ex, ex}), e.Int(1)})).value();
  InlinePass pass;
  absl::StatusOr<bool> changed = pass.Run(m, f);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_TRUE(SameGraph(f, expected));
  EXPECT_FALSE(*pass.Run(m, f));  // a fixpoint
}

TEST(InlinePassTest, ClosureBodyReadsTheCallersNodesDirectly) {
  Module m(DefaultRegistry());
  // Before: f(x) = c() where c() = x * x captures x
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", I64());
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
