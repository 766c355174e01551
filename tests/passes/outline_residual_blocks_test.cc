// Outlining residual blocks (core/passes/outline_residual_blocks.h): Before /
// Expected on a flat graph with an identity-shortcut block, a projection block,
// an add without a layer (not a block) and a block whose inside escapes (not
// outlined); the outlined graph computes the same values and gradients.
#include "core/passes/outline_residual_blocks.h"

#include <random>

#include "ad/grad_operation.h"
#include "ad/remat.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/manager.h"
#include "core/passes/optimize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/graph_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

Value Rand(Shape shape, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return Value(Tensor::FromVector<double>(shape, v));
}

// x0 = tanh(x W0)
// b1 = add(x0, tanh(tanh(x0 W1) W2))          identity block
// b2 = add(b1 Wp, tanh(b1 W3))                 projection block
// c  = add(b2, mul(b2, 0.5))                   no layer: not a block
// e  = add(c, m) with m = c W4 also returned   escapes: not a block
// out = (sum(e), sum(m))
FuncGraph* Flat(Module& m) {
  GraphBuilder b(&m, "flat");
  AnfNode* x = b.Param("x", DType::kFloat64, {2, 3});
  std::vector<AnfNode*> w;
  for (const char* n : {"w0", "w1", "w2", "wp", "w3", "w4"}) w.push_back(b.Param(n, DType::kFloat64, {3, 3}));
  auto dense = [&](AnfNode* in, AnfNode* wi) { return b.Op(PrimId::kMatMul, {in, wi}); };
  AnfNode* x0 = b.Op(PrimId::kTanh, {dense(x, w[0])});
  AnfNode* f1 = b.Op(PrimId::kTanh, {dense(b.Op(PrimId::kTanh, {dense(x0, w[1])}), w[2])});
  AnfNode* b1 = b.Op(PrimId::kAdd, {x0, f1});
  AnfNode* b2 = b.Op(PrimId::kAdd, {dense(b1, w[3]), b.Op(PrimId::kTanh, {dense(b1, w[4])})});
  AnfNode* c = b.Op(PrimId::kAdd, {b2, b.Op(PrimId::kMul, {b2, b.Const(Value(Tensor::FromScalar<double>(0.5)))})});
  AnfNode* mm = dense(c, w[5]);
  AnfNode* e = b.Op(PrimId::kAdd, {c, mm});
  return b.Return(b.Tuple({b.Op(PrimId::kReduceSum, {e}), b.Op(PrimId::kReduceSum, {mm})})).value();
}

std::vector<Value> Args(FuncGraph* f) {
  std::mt19937_64 rng(3);
  std::vector<Value> args = {Rand({2, 3}, rng)};
  for (size_t i = 1; i < f->parameters().size(); ++i) args.push_back(Rand({3, 3}, rng));
  return args;
}

double Leaf(const Value& v, size_t i) { return v.tuple()[i].tensor().ElementAsDouble(0); }

TEST(OutlineResidualBlocksTest, OutlinesTheTwoBlocksAndNothingElse) {
  Module m(DefaultRegistry());
  FuncGraph* f = Flat(m);
  absl::StatusOr<Value> before = RunGraph(f, Args(f));
  ASSERT_TRUE(before.ok()) << before.status();
  absl::StatusOr<std::vector<FuncGraph*>> blocks = OutlineResidualBlocks(m, f, RematPolicy::kNothingSaveable);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  ASSERT_EQ(blocks->size(), 2u);
  // Expected: block 0 takes x0 and the two weights it reads; block 1 takes b1
  // and two weights; the flat graph calls them and keeps the other adds.
  EXPECT_EQ((*blocks)[0]->parameters().size(), 3u);
  EXPECT_EQ(CountPrim((*blocks)[0], PrimId::kMatMul), 2);
  EXPECT_EQ(CountPrim((*blocks)[0], PrimId::kTanh), 2);
  EXPECT_EQ((*blocks)[1]->parameters().size(), 3u);
  EXPECT_EQ(CountPrim((*blocks)[1], PrimId::kMatMul), 2);
  for (FuncGraph* g : *blocks) EXPECT_EQ(g->remat(), RematPolicy::kNothingSaveable);
  int flat_adds = 0;
  for (CNode* c : m.manager().Info(f).order) flat_adds += c->IsPrim(PrimId::kAdd) ? 1 : 0;
  EXPECT_EQ(flat_adds, 2);  // the layer-less add and the escaping one stay
  EXPECT_EQ(CountPrim(f, PrimId::kMatMul), 6);  // over f and the blocks it calls
  absl::StatusOr<Value> after = RunGraph(f, Args(f));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(Leaf(*after, 0), Leaf(*before, 0));
  EXPECT_EQ(Leaf(*after, 1), Leaf(*before, 1));
}

TEST(OutlineResidualBlocksTest, GradientsAreThoseOfTheFlatGraph) {
  std::vector<double> want;
  for (bool outline : {false, true}) {
    Module m(DefaultRegistry());
    FuncGraph* f = Flat(m);
    if (outline) {
      ASSERT_TRUE(OutlineResidualBlocks(m, f, RematPolicy::kNothingSaveable).ok());
    }
    GradOptions o;
    o.argnums = {0, 1, 2, 3, 4, 5, 6};
    o.sens_param = true;
    absl::StatusOr<FuncGraph*> g = Grad(m, f, o);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(Optimize(m, *g).ok());
    if (outline) {
      EXPECT_GT(CountPrim(*g, PrimId::kRematBarrier), 0);
    }
    std::vector<Value> args = Args(f);
    args.push_back(Value::Tuple({Value(Tensor::FromScalar<double>(1.0)), Value(Tensor::FromScalar<double>(-2.0))}));
    absl::StatusOr<Value> r = RunGraph(*g, args);
    ASSERT_TRUE(r.ok()) << r.status();
    std::vector<double> got;
    for (const Value& d : r->tuple()) {
      for (int64_t i = 0; i < d.tensor().NumElements(); ++i) got.push_back(d.tensor().ElementAsDouble(i));
    }
    if (!outline) {
      want = got;
    } else {
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
    }
  }
}

TEST(OutlineResidualBlocksTest, RefusesGraphsWithClosures) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "g");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  ValueNode* c = b.Closure("c", 1, [&](GraphBuilder& t, absl::Span<AnfNode* const> p) {
    return t.Op(PrimId::kMul, {p[0], x});
  });
  FuncGraph* g = b.Return(b.Call(c, {x})).value();
  absl::StatusOr<std::vector<FuncGraph*>> r = OutlineResidualBlocks(m, g, RematPolicy::kNothingSaveable);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("graph 'g' creates closures"));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
