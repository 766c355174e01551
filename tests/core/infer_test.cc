#include "core/infer.h"

#include "core/builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"

namespace kgrad {
namespace {

using ::testing::HasSubstr;

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
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("graph 'f', node 'sum': add:"));
  EXPECT_THAT(out.status().message(), HasSubstr("[2,3] and [4] do not broadcast"));
}

TEST(InferTest, RecursionWithGrowingShapesTerminates) {
  // g(x, n) = n == 0 ? x : g(concat(x, x), n - 1): every call doubles the dim, so
  // contexts are widened to an unknown dim instead of growing forever.
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "g");
  AnfNode* x = b.Param("x", DType::kFloat32, {1});
  AnfNode* n = b.Param("n", MakeAbstractScalar(DType::kInt64));
  CNode* r = b.If(
      b.Op(PrimId::kScalarEq, {n, b.Int(0)}), [&](GraphBuilder&) { return x; },
      [&](GraphBuilder& e) {
        return e.Call(b.graph(), {e.Op(PrimId::kConcat, {x, x}), e.Op(PrimId::kScalarSub, {n, e.Int(1)})});
      });
  FuncGraph* g = b.Return(r).value();
  absl::StatusOr<AbstractPtr> out = InferGraph(g);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)->ToString(), "f32[?]");
}

TEST(InferTest, UndeclaredParametersAreReported) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x");
  FuncGraph* f = b.Return(x).value();
  EXPECT_THAT(InferGraph(f).status().message(), HasSubstr("parameter 'x' of graph 'f' has no declared type"));
}

TEST(InferTest, BuilderErrorsAreSticky) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x");
  AnfNode* bad = b.Op(PrimId::kReduceSum, {x}, {{"axes", std::string("zero")}});
  absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kNeg, {bad}));
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr("building graph 'f': attribute 'axes' of primitive 'reduce_sum' must be ints"));
}

}  // namespace
}  // namespace kgrad
