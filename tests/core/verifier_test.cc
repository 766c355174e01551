#include "core/verifier.h"

#include "core/builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

TEST(VerifierTest, WellFormedProgramsPass) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x");
  CNode* r = b.If(b.Op(PrimId::kScalarLt, {x, b.Int(0)}), [&](GraphBuilder& t) { return t.Op(PrimId::kScalarSub, {t.Int(0), x}); },
                  [&](GraphBuilder& e) { return x; });
  ASSERT_TRUE(b.Return(r).ok());
  EXPECT_TRUE(VerifyModule(m).ok());
}

TEST(VerifierTest, FreeVariableFromANonEnclosingGraphIsRejected) {
  Module m(DefaultRegistry());
  GraphBuilder a(&m, "a");
  AnfNode* x = a.Param("x");
  ASSERT_TRUE(a.Return(x).ok());
  GraphBuilder b(&m, "b");  // top level: cannot read a's parameter
  CNode* bad = b.Op(PrimId::kScalarAdd, {x, x});
  bad->set_name("bad");
  ASSERT_TRUE(b.Return(bad).ok());
  absl::Status s = VerifyModule(m);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("graph 'b', node 'bad'"));
  EXPECT_THAT(s.message(), HasSubstr("free variable 'x' belongs to graph 'a', which does not enclose graph 'b'"));
}

TEST(VerifierTest, ArityCyclesAndMissingOutputs) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x");
  CNode* add = b.Op(PrimId::kScalarAdd, {x});
  add->set_name("add");
  ASSERT_TRUE(b.Return(add).ok());
  absl::Status s = VerifyModule(m);
  EXPECT_THAT(s.message(), HasSubstr("node 'add': scalar_add takes 2 inputs, got 1"));

  Module m2(DefaultRegistry());
  GraphBuilder c(&m2, "cyc");
  AnfNode* y = c.Param("y");
  CNode* p = c.Op(PrimId::kScalarAdd, {y, y});
  CNode* q = c.Op(PrimId::kScalarAdd, {p, y});
  p->set_input(2, q);  // p <- q <- p
  ASSERT_TRUE(c.Return(q).ok());
  s = VerifyModule(m2);
  EXPECT_THAT(s.message(), HasSubstr("cycle"));

  Module m3(DefaultRegistry());
  m3.NewGraph("empty");
  EXPECT_THAT(VerifyModule(m3).message(), HasSubstr("graph 'empty' has no output"));
}

TEST(VerifierTest, NestedGraphOutOfScopeIsRejected) {
  Module m(DefaultRegistry());
  GraphBuilder a(&m, "a");
  AnfNode* x = a.Param("x");
  ValueNode* inner = a.Closure("inner", 0, [&](GraphBuilder& c, auto) { return x; });
  ASSERT_TRUE(a.Return(a.Call(inner, {})).ok());
  GraphBuilder b(&m, "b");
  ASSERT_TRUE(b.Return(b.Call(b.GraphRef(GraphOf(inner)), {})).ok());
  absl::Status s = VerifyModule(m);
  EXPECT_THAT(s.message(), HasSubstr("uses graph 'inner', nested in 'a', outside its scope"));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
