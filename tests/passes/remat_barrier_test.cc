// remat_barrier(x, after) against the optimiser (Before/Expected): the barrier
// is what keeps a rematerialised copy (ad/remat.h) apart from the forward value
// it recomputes, so CSE must not merge across it and no pass may drop it while
// it is used.
#include "core/builder.h"
#include "core/infer.h"
#include "core/passes/dce.h"
#include "core/passes/optimize.h"
#include "core/passes/simplify.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/graph_test_util.h"

namespace kgrad {
namespace {

using testing::CountPrim;
using testing::SameGraph;

AbstractPtr F64(Shape s) { return MakeAbstractTensor(DType::kFloat64, std::move(s)); }

// "before" and "expected" graphs of (x0, x1), both f64[3].
struct Case : testing::BeforeExpected {
  Case() : BeforeExpected({F64({3}), F64({3})}) {}
  AnfNode* bx0 = bx[0];
  AnfNode* bx1 = bx[1];
  AnfNode* ex0 = ex[0];
  AnfNode* ex1 = ex[1];

  // Runs `pass` on before(b_out); `changes`: whether it must report a change.
  ::testing::AssertionResult Check(Pass& pass, AnfNode* b_out, AnfNode* e_out, bool changes) {
    FuncGraph* b = before.Return(b_out).value();
    FuncGraph* e = expected.Return(e_out).value();
    if (absl::StatusOr<AbstractPtr> t = InferGraph(b); !t.ok()) {
      return ::testing::AssertionFailure() << t.status();
    }
    absl::StatusOr<bool> changed = pass.Run(m, b);
    if (!changed.ok()) return ::testing::AssertionFailure() << changed.status();
    if (*changed != changes) return ::testing::AssertionFailure() << "changed: " << *changed;
    return SameGraph(b, e);
  }
};

CNode* Barrier(GraphBuilder& b, AnfNode* x, AnfNode* after) {
  return b.Op(PrimId::kRematBarrier, {x, after});
}

// CSE runs inside SimplifyPass's sweep (core/passes/cse.h).
TEST(RematBarrierCseTest, ForwardAndRecomputedCopyStayApart) {
  // (tanh(x0), tanh(x0), tanh(remat_barrier(x0, x1)))
  //   => t = tanh(x0); (t, t, tanh(remat_barrier(x0, x1)))
  Case c;
  GraphBuilder& b = c.before;
  AnfNode* copy = b.Op(PrimId::kTanh, {Barrier(b, c.bx0, c.bx1)});
  AnfNode* out = b.Tuple({b.Op(PrimId::kTanh, {c.bx0}), b.Op(PrimId::kTanh, {c.bx0}), copy});
  GraphBuilder& e = c.expected;
  AnfNode* t = e.Op(PrimId::kTanh, {c.ex0});
  AnfNode* expected = e.Tuple({t, t, e.Op(PrimId::kTanh, {Barrier(e, c.ex0, c.ex1)})});
  SimplifyPass pass;
  EXPECT_TRUE(c.Check(pass, out, expected, /*changes=*/true));
}

TEST(RematBarrierCseTest, NothingToMergeWhenOnlyTheBarrierDiffers) {
  // (tanh(x0), tanh(remat_barrier(x0, x1))): unchanged.
  Case c;
  GraphBuilder& b = c.before;
  AnfNode* out = b.Tuple({b.Op(PrimId::kTanh, {c.bx0}), b.Op(PrimId::kTanh, {Barrier(b, c.bx0, c.bx1)})});
  GraphBuilder& e = c.expected;
  AnfNode* expected = e.Tuple({e.Op(PrimId::kTanh, {c.ex0}), e.Op(PrimId::kTanh, {Barrier(e, c.ex0, c.ex1)})});
  SimplifyPass pass;
  EXPECT_TRUE(c.Check(pass, out, expected, /*changes=*/false));
}

TEST(RematBarrierCseTest, EqualBarriersMerge) {
  // Two copies behind the same barrier are one recomputation:
  // (exp(remat_barrier(x0, x1)), exp(remat_barrier(x0, x1))) => e = ...; (e, e)
  Case c;
  GraphBuilder& b = c.before;
  AnfNode* out = b.Tuple({b.Op(PrimId::kExp, {Barrier(b, c.bx0, c.bx1)}),
                          b.Op(PrimId::kExp, {Barrier(b, c.bx0, c.bx1)})});
  GraphBuilder& e = c.expected;
  AnfNode* ee = e.Op(PrimId::kExp, {Barrier(e, c.ex0, c.ex1)});
  SimplifyPass pass;
  EXPECT_TRUE(c.Check(pass, out, e.Tuple({ee, ee}), /*changes=*/true));
}

TEST(RematBarrierDceTest, UsedBarrierKeptUnusedOneDeleted) {
  // sin(remat_barrier(x0, x1)), with a dead remat_barrier(x1, x0) beside it.
  Case c;
  GraphBuilder& b = c.before;
  Barrier(b, c.bx1, c.bx0);  // dead
  AnfNode* out = b.Op(PrimId::kSin, {Barrier(b, c.bx0, c.bx1)});
  GraphBuilder& e = c.expected;
  DcePass pass;
  EXPECT_TRUE(c.Check(pass, out, e.Op(PrimId::kSin, {Barrier(e, c.ex0, c.ex1)}), /*changes=*/true));
}

// The whole pipeline (inline, tuple/env simplification, algebra, constant folding,
// CSE, DCE) keeps the barrier and both tanh applications.
TEST(RematBarrierPipelineTest, OptimizeKeepsTheBarrier) {
  Case c;
  GraphBuilder& b = c.before;
  AnfNode* ones = b.Op(PrimId::kOnesLike, {c.bx1});
  AnfNode* copy = b.Op(PrimId::kTanh, {b.Op(PrimId::kMul, {Barrier(b, c.bx0, c.bx1), ones})});
  AnfNode* out = b.Op(PrimId::kAdd, {b.Op(PrimId::kTanh, {c.bx0}), b.Op(PrimId::kMul, {c.bx1, copy})});
  FuncGraph* f = b.Return(out).value();
  ASSERT_TRUE(InferGraph(f).ok());
  absl::StatusOr<std::string> o = Optimize(c.m, f);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(CountPrim(f, PrimId::kRematBarrier), 1);
  EXPECT_EQ(CountPrim(f, PrimId::kTanh), 2);
  EXPECT_EQ(CountPrim(f, PrimId::kMul), 1);  // x * ones_like(...) => x, past the barrier
}

}  // namespace
}  // namespace kgrad
