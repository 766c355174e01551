// Values nest as deep as a program makes them: a million-deep tuple, partial,
// closure or env chain is built, shared, compared, printed, typed and released
// without recursion on the C++ stack (each of these crashed at ~130,000 levels
// when release went through nested shared_ptr destructors). And the tuple walks
// of core/value_walk.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/builder.h"
#include "core/value.h"
#include "core/value_walk.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

constexpr int kDeep = 1'000'000;

Value NestedTuple(int depth, Value leaf) {
  Value v = std::move(leaf);
  for (int i = 0; i < depth; ++i) v = Value::Tuple({std::move(v)});
  return v;
}

// The leaf of a chain of 1-tuples, and its depth, walked iteratively.
int TupleChainDepth(const Value& v, Value* leaf) {
  const Value* at = &v;
  int d = 0;
  while (at->is_tuple()) {
    at = &at->tuple()[0];
    ++d;
  }
  *leaf = *at;
  return d;
}

TEST(DeepValueTest, TuplesAreBuiltAndReleased) {
  Value v = NestedTuple(kDeep, I(7));
  Value leaf;
  EXPECT_EQ(TupleChainDepth(v, &leaf), kDeep);
  EXPECT_EQ(leaf.scalar().AsInt(), 7);
  v = Value();  // the release that crashed
  EXPECT_TRUE(v.is_none());
}

TEST(DeepValueTest, PartialChainsAreReleased) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  FuncGraph* f = b.Return(b.Param("x")).value();
  Value p = Value::Graph(f);
  for (int i = 0; i < kDeep; ++i) p = Value::Partial(std::move(p), {I(i)});
  EXPECT_EQ(p.TypeString().substr(0, 16), "partial partial ");
  EXPECT_EQ(ValueDepth(p), kDeep);
  p = Value();
}

TEST(DeepValueTest, ClosureAndEnvChainsAreReleased) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  FuncGraph* f = b.Return(b.Param("x")).value();
  Value c = Value::Closure(f, {});
  for (int i = 0; i < kDeep; ++i) c = Value::Closure(f, {std::move(c)});
  Value e = Value::EmptyEnv();
  for (int i = 0; i < kDeep; ++i) e = Value::EnvWith(Value::EmptyEnv(), "k", std::move(e));
  c = Value();
  e = Value();
}

// Mixed kinds in one chain: tuple -> partial -> closure -> env -> tuple ...
TEST(DeepValueTest, MixedChainsAreReleased) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  FuncGraph* f = b.Return(b.Param("x")).value();
  Value v = I(0);
  for (int i = 0; i < kDeep; ++i) {
    switch (i % 4) {
      case 0: v = Value::Tuple({std::move(v), I(i)}); break;
      case 1: v = Value::Partial(Value::Graph(f), {std::move(v)}); break;
      case 2: v = Value::Closure(f, {std::move(v)}); break;
      default: v = Value::EnvWith(Value::EmptyEnv(), "k", std::move(v)); break;
    }
  }
  v = Value();
}

// A shared subtree outlives one owner and is released with the last.
TEST(DeepValueTest, SharedPartsStayAliveUntilTheirLastOwner) {
  Value inner = NestedTuple(1000, Value(Tensor::FromVector<float>({2}, {1, 2})));
  Value a = Value::Tuple({inner, I(1)});
  Value b = Value::Tuple({inner, I(2)});
  inner = Value();
  a = Value();
  Value leaf;
  EXPECT_EQ(TupleChainDepth(b.tuple()[0], &leaf), 1000);
  EXPECT_EQ(leaf.tensor().ElementAsDouble(1), 2.0);
}

// Threads drop their copies of one deep value at once: exactly one of them frees
// it (run under TSAN in CI through the stress test, which does the same).
TEST(DeepValueTest, ConcurrentReleaseOfSharedDeepValues) {
  Value shared = NestedTuple(200'000, I(3));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([copy = shared]() mutable {
      Value leaf;
      EXPECT_EQ(TupleChainDepth(copy, &leaf), 200'000);
      copy = Value();
    });
  }
  shared = Value();
  for (std::thread& t : threads) t.join();
}

TEST(DeepValueTest, EqualityIsIterative) {
  Value a = NestedTuple(kDeep, I(1));
  Value b = NestedTuple(kDeep, I(1));
  Value c = NestedTuple(kDeep, I(2));
  Value d = NestedTuple(kDeep - 1, I(1));
  EXPECT_TRUE(ValuesEqual(a, b));
  EXPECT_FALSE(ValuesEqual(a, c));
  EXPECT_FALSE(ValuesEqual(a, d));
}

TEST(DeepValueTest, PrintingIsIterativeAndExact) {
  EXPECT_EQ(NestedTuple(2, I(5)).ToString(), "((5,),)");
  EXPECT_EQ(Value::Tuple({I(1), Value::Tuple({}), Value::Tuple({I(2), I(3)})}).ToString(),
            "(1, (), (2, 3))");
  std::string s = NestedTuple(kDeep, I(5)).ToString();
  EXPECT_EQ(s.size(), static_cast<size_t>(kDeep + 1 + 2 * kDeep));  // "(" * n, "5", ",)" * n
  EXPECT_EQ(s.substr(kDeep - 2, 6), "((5,),");
}

TEST(DeepValueTest, AbstractOfADeepValueIsRefusedNotRecursed) {
  AbstractPtr shallow = AbstractOfValue(NestedTuple(10, I(5)));
  ASSERT_NE(shallow, nullptr);
  EXPECT_EQ(shallow->depth(), 10);
  EXPECT_EQ(shallow->ToString(), "((((((((((i64=5,),),),),),),),),),)");
  EXPECT_EQ(AbstractOfValue(NestedTuple(kDeep, I(5))), nullptr);
  EXPECT_NE(AbstractOfValue(NestedTuple(kDefaultMaxAbstractDepth, I(5))), nullptr);
  EXPECT_EQ(AbstractOfValue(NestedTuple(kDefaultMaxAbstractDepth + 1, I(5))), nullptr);
}

TEST(ValueWalkTest, LeavesInOrderWithTheirPaths) {
  Value v = Value::Tuple({I(1), Value::Tuple({I(2), Value::Tuple({})}), Value::Tuple({Value::Tuple({I(3)})})});
  std::vector<std::string> seen;
  ASSERT_TRUE(ForEachLeaf(v, [&](const Value& leaf, absl::Span<const size_t> path) {
                seen.push_back(absl::StrCat(leaf.scalar().AsInt(), "@", absl::StrJoin(path, ".")));
                return absl::OkStatus();
              }).ok());
  EXPECT_THAT(seen, ::testing::ElementsAre("1@0", "2@1.0", "3@2.0.0"));
  // A non-tuple is its own only leaf, with an empty path.
  int n = 0;
  ASSERT_TRUE(ForEachLeaf(I(4), [&](const Value& leaf, absl::Span<const size_t> path) {
                EXPECT_TRUE(path.empty());
                ++n;
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(n, 1);
  // The first error stops the walk.
  absl::Status s = ForEachLeaf(v, [](const Value& leaf, absl::Span<const size_t>) {
    return leaf.scalar().AsInt() == 2 ? absl::InvalidArgumentError("two") : absl::OkStatus();
  });
  EXPECT_EQ(s.message(), "two");
}

TEST(ValueWalkTest, MapKeepsTheStructureAtAnyDepth) {
  Value v = Value::Tuple({I(1), Value::Tuple({I(2), Value::Tuple({})}), I(3)});
  absl::StatusOr<Value> m = MapLeaves(v, [](const Value& leaf) -> absl::StatusOr<Value> {
    return I(leaf.scalar().AsInt() * 10);
  });
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->ToString(), "(10, (20, ()), 30)");
  absl::StatusOr<Value> deep = MapLeaves(NestedTuple(kDeep, I(4)), [](const Value& leaf) -> absl::StatusOr<Value> {
    return I(leaf.scalar().AsInt() + 1);
  });
  ASSERT_TRUE(deep.ok());
  Value leaf;
  EXPECT_EQ(TupleChainDepth(*deep, &leaf), kDeep);
  EXPECT_EQ(leaf.scalar().AsInt(), 5);
}

TEST(ValueWalkTest, DepthCountsTuplesAndPartialsAndStopsAtTheLimit) {
  EXPECT_EQ(ValueDepth(I(1)), 0);
  EXPECT_EQ(ValueDepth(Value::Tuple({})), 1);
  EXPECT_EQ(ValueDepth(Value::Tuple({I(1), NestedTuple(3, I(1))})), 4);
  EXPECT_EQ(ValueDepth(NestedTuple(kDeep, I(1)), 64), 65);
}

// Lists are values like tuples: a million-deep chain of one-element lists is
// released, compared and printed iteratively; walks rebuild lists as lists; their
// type joins the elements' types.
TEST(ListValueTest, DeepListsAndTheirWalks) {
  Value v = I(1);
  for (int i = 0; i < kDeep; ++i) v = Value::List({std::move(v)});
  EXPECT_EQ(ValueDepth(v), kDeep);
  EXPECT_TRUE(ValuesEqual(v, v));
  EXPECT_EQ(v.ToString().size(), static_cast<size_t>(kDeep) * 6 + 1);  // "list(" ... ")"
  v = Value();
  Value l = Value::List({I(1), Value::Tuple({I(2)}), Value::List({})});
  EXPECT_EQ(l.ToString(), "list(1, (2,), list())");
  EXPECT_EQ(l.TypeString(), "list(3)");
  EXPECT_FALSE(ValuesEqual(Value::List({I(1)}), Value::Tuple({I(1)})));
  absl::StatusOr<Value> m = MapLeaves(l, [](const Value& leaf) -> absl::StatusOr<Value> {
    return I(leaf.scalar().AsInt() * 10);
  });
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->ToString(), "list(10, (20,), list())");
}

TEST(ListValueTest, TheTypeOfAListJoinsItsElements) {
  Value l = Value::List({Value(Tensor::Zeros(DType::kFloat32, {2, 3}).value()),
                         Value(Tensor::Zeros(DType::kFloat32, {4, 3}).value())});
  EXPECT_EQ(AbstractToString(AbstractOfValue(l)), "list<f32[?,3]>");
  EXPECT_EQ(AbstractToString(AbstractOfValue(Value::List({}))), "list<?>");
  // Elements whose types do not join: no type.
  EXPECT_EQ(AbstractOfValue(Value::List({I(1), Value(Tensor::Zeros(DType::kFloat32, {2}).value())})), nullptr);
  absl::StatusOr<AbstractPtr> j = Join(MakeAbstractList(nullptr), AbstractOfValue(l));
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)->ToString(), "list<f32[?,3]>");
  EXPECT_FALSE(Join(AbstractOfValue(l), MakeAbstractList(MakeAbstractTensor(DType::kFloat64, {2, 3}))).ok());
  EXPECT_FALSE(Join(AbstractOfValue(l), MakeAbstractTuple({})).ok());
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
