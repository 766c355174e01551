// The executor's run order (backends/run_order.h): a gradient's weight
// gradients are computed as soon as their layer's gradient exists, even when
// the step returns them in a nested tuple; reductions run right after their
// input; remat barriers as early as their inputs allow.
#include "backends/run_order.h"

#include <string>
#include <vector>

#include "core/builder.h"
#include "core/infer.h"
#include "core/manager.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

std::string Names(const std::vector<CNode*>& order) {
  std::string s;
  for (const CNode* c : order) {
    if (c->IsPrim(PrimId::kMakeTuple)) continue;
    if (!s.empty()) s += " ";
    s += c->name();
  }
  return s;
}

CNode* Named(CNode* c, const char* name) {
  c->set_name(name);
  return c;
}

// A backward chain g3 -> g2 -> g1 -> dx with a "weight gradient" dw_k = g_k *
// a_k at each layer, a_k a forward value: returned as (dx, (dw1, dw2, dw3)), as
// value_and_grad returns (input gradients, weight gradients). By the longest
// path the inner tuple is deeper than dx; visited first, dx would run the whole
// chain with every a_k and g_k alive until the tuple.
TEST(RunOrderTest, WeightGradientsInANestedTupleRunWithTheirLayer) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "step");
  AnfNode* x = b.Param("x", kF32, {4});
  CNode* a1 = Named(b.Op(PrimId::kSin, {x}), "a1");
  CNode* a2 = Named(b.Op(PrimId::kCos, {x}), "a2");
  CNode* a3 = Named(b.Op(PrimId::kTanh, {x}), "a3");
  CNode* g3 = Named(b.Op(PrimId::kExp, {x}), "g3");
  CNode* g2 = Named(b.Op(PrimId::kExp, {g3}), "g2");
  CNode* g1 = Named(b.Op(PrimId::kExp, {g2}), "g1");
  CNode* dx = Named(b.Op(PrimId::kNeg, {g1}), "dx");
  CNode* dw1 = Named(b.Op(PrimId::kMul, {g1, a1}), "dw1");
  CNode* dw2 = Named(b.Op(PrimId::kMul, {g2, a2}), "dw2");
  CNode* dw3 = Named(b.Op(PrimId::kMul, {g3, a3}), "dw3");
  FuncGraph* f = b.Return(b.Tuple({dx, b.Tuple({dw1, dw2, dw3})})).value();
  EXPECT_EQ(Names(RunOrder(f, m.manager().Info(f))), "g3 a3 dw3 a2 g2 dw2 a1 g1 dw1 dx");
}

// r = reduce_sum(e1) is read only by acc, which the walk reaches after e3
// (the output (e3, acc) visits the shallower e3 first): depth first r would run
// there, holding e1 (4 KiB) while e2 and e3 run; as a reduction it runs right
// after e1.
TEST(RunOrderTest, ReductionsRunRightAfterTheirInput) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", kF32, {1024});
  CNode* e1 = Named(b.Op(PrimId::kExp, {x}), "e1");
  CNode* e2 = Named(b.Op(PrimId::kExp, {e1}), "e2");
  CNode* e3 = Named(b.Op(PrimId::kExp, {e2}), "e3");
  CNode* s3 = Named(b.Op(PrimId::kReduceSum, {e3}), "s3");
  CNode* r = Named(b.Op(PrimId::kReduceSum, {e1}), "r");
  CNode* acc = Named(b.Op(PrimId::kAdd, {r, s3}), "acc");
  FuncGraph* f = b.Return(b.Tuple({e3, acc})).value();
  ASSERT_TRUE(InferGraph(f).ok());  // sizes tell a reduction
  EXPECT_EQ(Names(RunOrder(f, m.manager().Info(f))), "e1 r e2 e3 s3 acc");
}

// A reshape that only feeds a reduction moves with it; remat_barrier(v, t)
// runs as soon as t exists, not when what it guards is first read.
TEST(RunOrderTest, ReshapesFeedingReductionsAndBarriersRunEarly) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", kF32, {32, 32});
  CNode* t = Named(b.Op(PrimId::kExp, {x}), "t");
  CNode* v = Named(b.Op(PrimId::kSin, {x}), "v");
  CNode* chain = Named(b.Op(PrimId::kExp, {t}), "c1");
  chain = Named(b.Op(PrimId::kExp, {chain}), "c2");
  CNode* flat = Named(b.Op(PrimId::kReshape, {t}, {{"shape", std::vector<int64_t>{-1}}}), "flat");
  CNode* sum = Named(b.Op(PrimId::kReduceSum, {flat}), "sum");
  CNode* guard = Named(b.Op(PrimId::kRematBarrier, {v, t}), "guard");
  CNode* late = Named(b.Op(PrimId::kMul, {chain, guard}), "late");
  CNode* total = Named(b.Op(PrimId::kAdd, {b.Op(PrimId::kReduceSum, {late}), sum}), "total");
  FuncGraph* f = b.Return(total).value();
  ASSERT_TRUE(InferGraph(f).ok());
  const std::string order = Names(RunOrder(f, m.manager().Info(f)));
  // t's readers other than the chain run before c1: t is not held for them.
  EXPECT_LT(order.find("flat"), order.find("c1")) << order;
  EXPECT_LT(order.find("sum"), order.find("c1")) << order;
  EXPECT_LT(order.find("guard"), order.find("c1")) << order;
  EXPECT_LT(order.find("c2"), order.find("late")) << order;
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
