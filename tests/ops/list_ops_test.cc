// The list primitives (ops/list_ops.h): inference (element types join; errors
// name the input) and the kernels on Values against what Python's list methods
// and NumPy's concatenate/split give, with the run-time errors (indices out of
// range, an empty concatenation, a split that does not add up).
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/list_ops.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

AbstractPtr Index() { return MakeAbstractScalar(DType::kInt64); }
AbstractPtr List(AbstractPtr e) { return MakeAbstractList(std::move(e)); }

// The tensors of a list value as doubles, with their shapes.
std::vector<std::vector<double>> Elements(const Value& l, std::vector<Shape>* shapes) {
  std::vector<std::vector<double>> out;
  for (const Value& e : l.list()) {
    out.push_back(ToDoubles(e.tensor()));
    shapes->push_back(e.tensor().shape());
  }
  return out;
}

TEST(ListInferTest, MakeListJoinsTheElementTypes) {
  EXPECT_EQ(Inferred(PrimId::kMakeList, {T(DType::kFloat32, {2, 3}), T(DType::kFloat32, {4, 3})}),
            "list<f32[?,3]>");
  EXPECT_EQ(Inferred(PrimId::kMakeList, {}), "list<?>");
  // Constants are dropped: the elements are read at run-time positions.
  EXPECT_EQ(Inferred(PrimId::kMakeList, {MakeAbstractScalarValue(Scalar::Int(3))}), "list<i64>");
  ExpectError(InferOp(PrimId::kMakeList, {T(DType::kFloat32, {2}), T(DType::kFloat64, {2})}),
              "input 1 is f64[2], the ones before f32[2]");
  ExpectError(InferOp(PrimId::kMakeList, {T(DType::kFloat32, {2}), T(DType::kFloat32, {2, 1})}),
              "share one type");
}

TEST(ListInferTest, ReadsAndStores) {
  AbstractPtr l = List(T(DType::kFloat32, {2, 3}));
  EXPECT_EQ(Inferred(PrimId::kListLen, {l}), "i64");
  EXPECT_EQ(Inferred(PrimId::kListGetItem, {l, Index()}), "f32[2,3]");
  EXPECT_EQ(Inferred(PrimId::kListSetItem, {l, Index(), T(DType::kFloat32, {5, 3})}), "list<f32[?,3]>");
  EXPECT_EQ(Inferred(PrimId::kListInsert, {List(nullptr), Index(), T(DType::kFloat32, {4})}), "list<f32[4]>");
  EXPECT_EQ(Inferred(PrimId::kListErase, {l, Index()}), "list<f32[2,3]>");
  ExpectError(InferOp(PrimId::kListGetItem, {List(nullptr), Index()}), "element type is unknown");
  ExpectError(InferOp(PrimId::kListGetItem, {T(DType::kFloat32, {2}), Index()}), "input 0 must be a list");
  ExpectError(InferOp(PrimId::kListGetItem, {l, MakeAbstractScalar(DType::kFloat64)}),
              "input 1 must be an integer scalar");
  ExpectError(InferOp(PrimId::kListInsert, {l, Index(), T(DType::kFloat64, {2, 3})}),
              "cannot store f64[2,3] in a list<f32[2,3]>");
}

TEST(ListInferTest, ConcatAndSplit) {
  AbstractPtr l = List(T(DType::kFloat32, {2, 3}));
  EXPECT_EQ(Inferred(PrimId::kListConcat, {l}, {{"axis", int64_t{1}}}), "f32[2,?]");
  EXPECT_EQ(Inferred(PrimId::kListConcat, {l}, {{"axis", int64_t{-1}}, {"new_axis", true}}), "f32[2,3,?]");
  EXPECT_EQ(Inferred(PrimId::kListConcatGrad, {l, T(DType::kFloat32, {2, 9})}, {{"axis", int64_t{1}}}),
            "list<f32[2,3]>");
  ExpectError(InferOp(PrimId::kListConcat, {l}, {{"axis", int64_t{2}}}), "axis 2");
  ExpectError(InferOp(PrimId::kListConcat, {List(nullptr)}), "element type is known");
  AbstractPtr x = T(DType::kFloat32, {5, 4});
  EXPECT_EQ(Inferred(PrimId::kSplitToList, {x}), "list<f32[1,4]>");
  EXPECT_EQ(Inferred(PrimId::kSplitToList, {x}, {{"axis", int64_t{1}}, {"keepdims", false}}), "list<f32[5]>");
  AbstractPtr sizes = MakeAbstractShapeValue(DType::kInt64, {2}, {2, 3});
  EXPECT_EQ(Inferred(PrimId::kSplitToList, {x, sizes}), "list<f32[?,4]>");
  AbstractPtr chunk = MakeAbstractShapeValue(DType::kInt64, {}, {2});
  EXPECT_EQ(Inferred(PrimId::kSplitToList, {x, chunk}, {{"axis", int64_t{1}}}), "list<f32[5,2]>");
  EXPECT_EQ(Inferred(PrimId::kSplitToList, {x, T(DType::kInt64, {})}), "list<f32[?,4]>");
  ExpectError(InferOp(PrimId::kSplitToList, {x, MakeAbstractShapeValue(DType::kInt64, {2}, {2, 2})}),
              "sums to 4, but must sum to dim 0");
  ExpectError(InferOp(PrimId::kSplitToList, {x, T(DType::kInt64, {2, 2})}), "rank 0 or 1");
}

TEST(ListKernelTest, MovesFollowPythonLists) {
  Value a = F64({2}, {1, 2});
  Value b = F64({1}, {3});
  Value c = F64({3}, {4, 5, 6});
  absl::StatusOr<Value> l = RunCpuKernel(PrimId::kMakeList, {a, b});
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->TypeString(), "list(2)");
  EXPECT_EQ(RunCpuKernel(PrimId::kListLen, {*l})->scalar().AsInt(), 2);
  EXPECT_EQ(ToDoubles(RunCpuKernel(PrimId::kListGetItem, {*l, I(-1)})->tensor()), std::vector<double>{3});
  // insert before position -1 of [a, b]: [a, c, b] (Python's list.insert).
  absl::StatusOr<Value> ins = RunCpuKernel(PrimId::kListInsert, {*l, I(-1), c});
  std::vector<Shape> shapes;
  EXPECT_EQ(Elements(*ins, &shapes), (std::vector<std::vector<double>>{{1, 2}, {4, 5, 6}, {3}}));
  ins = RunCpuKernel(PrimId::kListInsert, {*l, I(2), c});  // appended
  shapes.clear();
  EXPECT_EQ(Elements(*ins, &shapes), (std::vector<std::vector<double>>{{1, 2}, {3}, {4, 5, 6}}));
  absl::StatusOr<Value> set = RunCpuKernel(PrimId::kListSetItem, {*ins, I(0), b});
  absl::StatusOr<Value> erased = RunCpuKernel(PrimId::kListErase, {*set, I(-2)});
  shapes.clear();
  EXPECT_EQ(Elements(*erased, &shapes), (std::vector<std::vector<double>>{{3}, {4, 5, 6}}));
  // The input list is unchanged (lists are values).
  EXPECT_EQ(l->list().size(), 2u);
  ExpectError(RunCpuKernel(PrimId::kListGetItem, {*l, I(2)}), "list index 2 is out of range for a list of 2",
              absl::StatusCode::kOutOfRange);
  ExpectError(RunCpuKernel(PrimId::kListInsert, {*l, I(-3), c}), "out of range", absl::StatusCode::kOutOfRange);
  ExpectError(RunCpuKernel(PrimId::kListErase, {Value::List({}), I(0)}), "for a list of 0",
              absl::StatusCode::kOutOfRange);
}

TEST(ListKernelTest, ConcatStackAndTheirAdjoint) {
  Value a = F64({2, 2}, {1, 2, 3, 4});
  Value b = F64({1, 2}, {5, 6});
  Value l = Value::List({a, b});
  ExpectTensorNear(RunCpuKernel(PrimId::kListConcat, {l}), DType::kFloat64, {3, 2}, {1, 2, 3, 4, 5, 6},
                   [](size_t) { return 0.0; });
  Value c = F64({2, 1}, {7, 8});
  ExpectTensorNear(RunCpuKernel(PrimId::kListConcat, {Value::List({a, c})}, {{"axis", int64_t{-1}}}),
                   DType::kFloat64, {2, 3}, {1, 2, 7, 3, 4, 8}, [](size_t) { return 0.0; });
  // Elements that do not line up are the concat kernel's error.
  ExpectError(RunCpuKernel(PrimId::kListConcat, {l}, {{"axis", int64_t{-1}}}),
              "the elements, as concat's inputs: input 1 must match input 0");
  Value same = Value::List({a, a});
  // Stacked along a new last axis: out[i][j][k] = l[k][i][j].
  ExpectTensorNear(RunCpuKernel(PrimId::kListConcat, {same}, {{"axis", int64_t{-1}}, {"new_axis", true}}),
                   DType::kFloat64, {2, 2, 2}, {1, 1, 2, 2, 3, 3, 4, 4}, [](size_t) { return 0.0; });
  ExpectError(RunCpuKernel(PrimId::kListConcat, {Value::List({})}), "empty list");
  // The adjoint cuts dy like the elements.
  absl::StatusOr<Value> pieces =
      RunCpuKernel(PrimId::kListConcatGrad, {l, F64({3, 2}, {10, 20, 30, 40, 50, 60})});
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  std::vector<Shape> shapes;
  EXPECT_EQ(Elements(*pieces, &shapes), (std::vector<std::vector<double>>{{10, 20, 30, 40}, {50, 60}}));
  EXPECT_EQ(shapes, (std::vector<Shape>{{2, 2}, {1, 2}}));
  pieces = RunCpuKernel(PrimId::kListConcatGrad, {same, F64({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})},
                        {{"axis", int64_t{-1}}, {"new_axis", true}});
  shapes.clear();
  EXPECT_EQ(Elements(*pieces, &shapes), (std::vector<std::vector<double>>{{1, 3, 5, 7}, {2, 4, 6, 8}}));
}

TEST(ListKernelTest, SplitToListInEveryForm) {
  Value x = F64({5, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  std::vector<Shape> shapes;
  // Chunks of 2: the last one smaller.
  absl::StatusOr<Value> l = RunCpuKernel(PrimId::kSplitToList, {x, I64({}, {2})});
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(Elements(*l, &shapes), (std::vector<std::vector<double>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  EXPECT_EQ(shapes, (std::vector<Shape>{{2, 2}, {2, 2}, {1, 2}}));
  shapes.clear();
  l = RunCpuKernel(PrimId::kSplitToList, {x, I64({2}, {1, 4})});
  EXPECT_EQ(shapes.size(), 0u);
  Elements(*l, &shapes);
  EXPECT_EQ(shapes, (std::vector<Shape>{{1, 2}, {4, 2}}));
  shapes.clear();
  // No split: pieces of 1, squeezed unless keepdims.
  l = RunCpuKernel(PrimId::kSplitToList, {x}, {{"axis", int64_t{1}}, {"keepdims", false}});
  EXPECT_EQ(Elements(*l, &shapes), (std::vector<std::vector<double>>{{0, 2, 4, 6, 8}, {1, 3, 5, 7, 9}}));
  EXPECT_EQ(shapes, (std::vector<Shape>{{5}, {5}}));
  shapes.clear();
  l = RunCpuKernel(PrimId::kSplitToList, {x}, {{"axis", int64_t{1}}});
  Elements(*l, &shapes);
  EXPECT_EQ(shapes, (std::vector<Shape>{{5, 1}, {5, 1}}));
  ExpectError(RunCpuKernel(PrimId::kSplitToList, {x, I64({2}, {1, 1})}), "sums to 2, but must sum to dim 0");
  ExpectError(RunCpuKernel(PrimId::kSplitToList, {x, I64({}, {0})}), "positive chunk size");
  ExpectError(RunCpuKernel(PrimId::kSplitToList, {x, I64({2}, {-1, 6})}), "negative size");
}

TEST(ListPositionTest, NormalisesAgainstTheLength) {
  EXPECT_EQ(*ops::ListPosition(-1, 3, false), 2);
  EXPECT_EQ(*ops::ListPosition(3, 3, true), 3);
  EXPECT_EQ(*ops::ListPosition(-3, 3, true), 0);
  EXPECT_FALSE(ops::ListPosition(3, 3, false).ok());
  EXPECT_FALSE(ops::ListPosition(-4, 3, true).ok());
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
