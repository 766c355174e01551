#include "core/manager.h"

#include <algorithm>

#include "core/builder.h"
#include "gtest/gtest.h"
#include "ops/registry.h"

namespace kgrad {
namespace {

bool Contains(const std::vector<AnfNode*>& v, const AnfNode* n) {
  return std::find(v.begin(), v.end(), n) != v.end();
}

TEST(ManagerTest, FreeVariablesAreTransitiveThroughNestedGraphs) {
  Module m(DefaultRegistry());
  GraphBuilder outer(&m, "outer");
  AnfNode* x = outer.Param("x");
  AnfNode* y = outer.Param("y");
  // middle uses nothing directly; inner (nested in middle) uses x and y.
  FuncGraph* inner_g = nullptr;
  ValueNode* middle = outer.Closure("middle", 0, [&](GraphBuilder& b, auto) {
    ValueNode* inner = b.Closure("inner", 0, [&](GraphBuilder& ib, auto) {
      return ib.Op(PrimId::kMakeTuple, {x, y});
    });
    inner_g = GraphOf(inner);
    return b.Call(inner, {});
  });
  FuncGraph* middle_g = GraphOf(middle);
  ASSERT_TRUE(outer.Return(outer.Call(middle, {})).ok());

  Manager& mgr = m.manager();
  EXPECT_TRUE(mgr.Info(middle_g).direct_fvs.empty());
  ASSERT_EQ(mgr.Info(middle_g).fvs.size(), 2u);
  EXPECT_TRUE(Contains(mgr.Info(middle_g).fvs, x));
  EXPECT_TRUE(Contains(mgr.Info(middle_g).fvs, y));
  EXPECT_EQ(mgr.Info(inner_g).direct_fvs.size(), 2u);
  EXPECT_TRUE(mgr.Info(outer.graph()).fvs.empty());
  EXPECT_EQ(mgr.FvIndex(middle_g, y), 1);
}

TEST(ManagerTest, NodesUsedOnlyByANestedGraphAreScheduledBeforeTheClosure) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x");
  CNode* t = b.Tuple({x, x});  // used only inside the closure
  ValueNode* c = b.Closure("c", 0, [&](GraphBuilder& cb, auto) { return cb.GetItem(t, 0); });
  CNode* call = b.Call(c, {});
  ASSERT_TRUE(b.Return(call).ok());
  const auto& order = m.manager().Info(b.graph()).order;
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], t);
  EXPECT_EQ(order[1], call);
}

TEST(ManagerTest, UsesStayCurrentThroughTransactions) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x");
  AnfNode* y = b.Param("y");
  CNode* t = b.Tuple({x, x});
  ASSERT_TRUE(b.Return(t).ok());
  EXPECT_EQ(x->uses().size(), 2u);
  Transaction tr(&m);
  tr.Replace(x, y);
  EXPECT_TRUE(tr.Commit());
  EXPECT_TRUE(x->uses().empty());
  EXPECT_EQ(y->uses().size(), 2u);
  EXPECT_EQ(t->input(1), y);
  Transaction tr2(&m);
  tr2.SetOutput(b.graph(), y);
  EXPECT_TRUE(tr2.Commit());
  EXPECT_EQ(t->uses().size(), 0u);
  Transaction tr3(&m);
  tr3.SetOutput(b.graph(), y);
  EXPECT_FALSE(tr3.Commit());
}

TEST(ManagerTest, GarbageCollectionDropsUnreachableGraphsAndNodes) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x");
  b.Tuple({x});  // dead
  ValueNode* unused = b.Closure("unused", 0, [&](GraphBuilder& cb, auto) { return x; });
  (void)unused;
  ASSERT_TRUE(b.Return(x).ok());
  GraphBuilder other(&m, "other");
  other.graph()->set_public(false);
  ASSERT_TRUE(other.Return(other.Param("z")).ok());
  EXPECT_EQ(m.graphs().size(), 3u);
  m.CollectGarbage();
  ASSERT_EQ(m.graphs().size(), 1u);
  EXPECT_EQ(m.graphs()[0].get(), b.graph());
  EXPECT_EQ(b.graph()->owned_nodes().size(), 1u);  // just the parameter
  EXPECT_EQ(x->uses().size(), 1u);                 // the output
}

// f { t = exp(x); c1() { c2() { neg(x) }; c2() }; c1() }, then c2 reads t instead
// of x. c1 itself is unchanged, yet its free variables and f's order follow.
TEST(ManagerTest, AnalysesFollowAnEditInANestedGraph) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x");
  CNode* t = b.Op(PrimId::kExp, {x});
  CNode* neg = nullptr;
  FuncGraph* c2_g = nullptr;
  ValueNode* c1 = b.Closure("c1", 0, [&](GraphBuilder& b1, auto) {
    ValueNode* c2 = b1.Closure("c2", 0, [&](GraphBuilder& b2, auto) { return neg = b2.Op(PrimId::kNeg, {x}); });
    c2_g = GraphOf(c2);
    return b1.Call(c2, {});
  });
  CNode* call = b.Call(c1, {});
  ASSERT_TRUE(b.Return(call).ok());
  Manager& mgr = m.manager();
  EXPECT_EQ(mgr.Info(b.graph()).order, std::vector<CNode*>{call});
  EXPECT_EQ(mgr.Info(GraphOf(c1)).fvs, std::vector<AnfNode*>{x});
  const uint64_t c1_version = GraphOf(c1)->version();
  Transaction tr(&m);
  tr.SetEdge(neg, 1, t);
  ASSERT_TRUE(tr.Commit());
  EXPECT_EQ(GraphOf(c1)->version(), c1_version);
  EXPECT_EQ(mgr.Info(c2_g).fvs, std::vector<AnfNode*>{t});
  EXPECT_EQ(mgr.Info(GraphOf(c1)).fvs, std::vector<AnfNode*>{t});
  EXPECT_EQ(mgr.Info(b.graph()).order, (std::vector<CNode*>{t, call}));
}

// The constants that name a graph are its referrers until they are collected;
// constant tuples holding it are counted apart.
TEST(ManagerTest, ReferrersFollowTheConstantsNamingAGraph) {
  Module m(DefaultRegistry());
  GraphBuilder gb(&m, "g");
  FuncGraph* g = gb.Return(gb.Param("y")).value();
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x");
  ValueNode* r1 = b.GraphRef(g);
  b.GraphRef(g);
  b.Const(Value::Tuple({Value::Graph(g)}));
  EXPECT_EQ(g->referrers().size(), 2u);
  EXPECT_EQ(g->tuple_referrers(), 1);
  ASSERT_TRUE(b.Return(b.Call(r1, {x})).ok());
  m.CollectGarbage();
  EXPECT_EQ(g->referrers(), std::vector<ValueNode*>{r1});
  EXPECT_EQ(g->tuple_referrers(), 0);
}

}  // namespace
}  // namespace kgrad
