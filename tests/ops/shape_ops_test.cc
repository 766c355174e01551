// Inference tests for the shape family: result dtype and shape, unknown dims,
// and the error cases (code and a message naming what was wrong).
#include "ops/shape_ops.h"

#include <string>
#include <vector>

#include "core/abstract.h"
#include "core/dim_symbol.h"
#include "core/primitive.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {



// ----- Flags ---------------------------------------------------------------------------
TEST(ShapeOpsTest, FlagsAndArity) {
  const PrimitiveRegistry& reg = DefaultRegistry();
  for (PrimId id :
       {PrimId::kReshape, PrimId::kReshapeLike, PrimId::kTranspose, PrimId::kBroadcastTo,
        PrimId::kBroadcastToLike, PrimId::kSumTo, PrimId::kSumToLike, PrimId::kExpandDims,
        PrimId::kSqueeze, PrimId::kConcat, PrimId::kSplit, PrimId::kSlice, PrimId::kSliceGrad,
        PrimId::kGather, PrimId::kScatterAdd, PrimId::kPad}) {
    const PrimitiveDef* d = reg.Find(id);
    ASSERT_NE(d, nullptr) << PrimIdName(id);
    EXPECT_TRUE(d->linear) << d->name;
    EXPECT_FALSE(d->zero_gradient) << d->name;
    EXPECT_TRUE(d->zero_gradient || d->bprop != nullptr) << d->name;  // rules: tests/ad/
    EXPECT_NE(d->infer, nullptr) << d->name;
  }
  for (PrimId id : {PrimId::kOneHot, PrimId::kFill}) {
    EXPECT_TRUE(reg.Find(id)->zero_gradient) << PrimIdName(id);
    EXPECT_FALSE(reg.Find(id)->linear) << PrimIdName(id);
  }
  EXPECT_FALSE(reg.Find(PrimId::kCast)->linear);
  EXPECT_FALSE(reg.Find(PrimId::kCast)->zero_gradient);
  EXPECT_EQ(reg.Find(PrimId::kConcat)->min_inputs, 1);
  EXPECT_EQ(reg.Find(PrimId::kConcat)->max_inputs, -1);
  EXPECT_EQ(reg.Find(PrimId::kScatterAdd)->min_inputs, 3);
  EXPECT_EQ(reg.Find(PrimId::kFill)->max_inputs, 0);
}

// ----- reshape / reshape_like -----------------------------------------------------------------
TEST(ShapeOpsTest, ReshapeKnownShapes) {
  ExpectTensor(InferOp(PrimId::kReshape, {T(kF32, {2, 3})}, {{"shape", Ints{3, 2}}}), kF32, {3, 2});
  ExpectTensor(InferOp(PrimId::kReshape, {T(kI64, {2, 3})}, {{"shape", Ints{-1, 2}}}), kI64,
               {3, 2});
  ExpectTensor(InferOp(PrimId::kReshape, {T(kBool, {2, 3, 4})}, {{"shape", Ints{4, -1}}}), kBool,
               {4, 6});
  ExpectTensor(InferOp(PrimId::kReshape, {T(kF64, {1})}, {{"shape", Ints{}}}), kF64, {});
  ExpectTensor(InferOp(PrimId::kReshape, {T(kF64, {})}, {{"shape", Ints{-1}}}), kF64, {1});
  ExpectTensor(InferOp(PrimId::kReshape, {T(kF32, {0, 3})}, {{"shape", Ints{3, 0}}}), kF32, {3, 0});
}

TEST(ShapeOpsTest, ReshapeUnknownDims) {
  ExpectTensor(InferOp(PrimId::kReshape, {T(kF32, {kU, 3})}, {{"shape", Ints{-1, 3}}}), kF32,
               {kU, 3});
  ExpectTensor(InferOp(PrimId::kReshape, {T(kF32, {kU, 3})}, {{"shape", Ints{2, 3}}}), kF32,
               {2, 3});
  // 3 * ? can never be 8 elements.
  ExpectError(InferOp(PrimId::kReshape, {T(kF32, {kU, 3})}, {{"shape", Ints{4, 2}}}), "elements");
  // A known 0 dim means 0 elements.
  ExpectError(InferOp(PrimId::kReshape, {T(kF32, {kU, 0})}, {{"shape", Ints{2}}}), "elements");
}

// A -1 next to dim symbols: the symbols cancel where the known products allow.
TEST(ShapeOpsTest, ReshapeSolvesMinusOneBySymbols) {
  const int64_t b = DimSymbol("batch"), s = DimSymbol("seq");
  auto reshape = [](Shape in, Ints shape) {
    return InferOp(PrimId::kReshape, {T(kF32, in)}, {{"shape", shape}});
  };
  ExpectTensor(reshape({b, 512, 1, 1}, {-1, 512}), kF32, {b, 512});  // Flatten
  ExpectTensor(reshape({b, 4, 3}, {-1, 12}), kF32, {b, 12});
  ExpectTensor(reshape({2, b, 6}, {4, -1, 3}), kF32, {4, b, 3});
  ExpectTensor(reshape({s, b, 16}, {-1, 16}), kF32, {kU, 16});  // seq * batch: not one symbol
  ExpectTensor(reshape({b, 6}, {-1, 3}), kF32, {kU, 3});        // 2 batch
  ExpectTensor(reshape({b, kU, 2}, {-1, 2}), kF32, {kU, 2});    // an unknown dim in x
  ExpectTensor(reshape({b, b}, {-1}), kF32, {kU});
  ExpectTensor(reshape({b, 6}, {4, -1}), kF32, {4, kU});        // batch * 6 / 4
  ExpectError(reshape({b, 6}, {-1, 0}), "ambiguous");
}

// Symbols flow through concat (summed only along the axis, unified elsewhere),
// transpose, matmul and broadcasting.
TEST(ShapeOpsTest, SymbolsPropagate) {
  const int64_t b = DimSymbol("batch"), s = DimSymbol("seq");
  ExpectTensor(InferOp(PrimId::kConcat, {T(kF32, {b, 3}), T(kF32, {b, 4})}, {{"axis", int64_t{1}}}),
               kF32, {b, 7});
  ExpectTensor(InferOp(PrimId::kConcat, {T(kF32, {kU, 3}), T(kF32, {b, 4})}, {{"axis", int64_t{1}}}),
               kF32, {b, 7});
  ExpectTensor(InferOp(PrimId::kConcat, {T(kF32, {b, 3}), T(kF32, {2, 3})}, {{"axis", int64_t{0}}}),
               kF32, {kU, 3});
  ExpectTensor(InferOp(PrimId::kTranspose, {T(kF32, {b, s, 8})}, {{"perm", Ints{1, 0, 2}}}), kF32,
               {s, b, 8});
  ExpectTensor(InferOp(PrimId::kMatMul, {T(kF32, {b, s, 8}), T(kF32, {8, 16})}), kF32, {b, s, 16});
  ExpectTensor(InferOp(PrimId::kMatMul, {T(kF32, {b, s, kU}), T(kF32, {b, 8, s})}), kF32,
               {b, s, s});
  ExpectTensor(InferOp(PrimId::kAdd, {T(kF32, {b, 1, 8}), T(kF32, {s, 1})}), kF32, {b, s, 8});
}

TEST(ShapeOpsTest, ReshapeErrors) {
  auto r = [](const Shape& in, Ints shape) {
    return InferOp(PrimId::kReshape, {T(kF32, in)}, {{"shape", shape}});
  };
  ExpectError(r({2, 3}, {4}), "'shape'");
  ExpectError(r({2, 3}, {4}), "elements");
  ExpectError(r({2, 3}, {-1, -1}), "more than one -1");
  ExpectError(r({2, 3}, {-2, 3}), "negative");
  ExpectError(r({2, 3}, {4, -1}), "cannot hold");
  ExpectError(r({0, 3}, {0, -1}), "ambiguous");
  ExpectError(InferOp(PrimId::kReshape, {T(kF32, {2})}), "needs attribute 'shape'");
  ExpectError(InferOp(PrimId::kReshape, {MakeAbstractScalar(kF32)}, {{"shape", Ints{1}}}),
              "must be a tensor");
}

TEST(ShapeOpsTest, ReshapeLike) {
  ExpectTensor(InferOp(PrimId::kReshapeLike, {T(kF32, {2, 3}), T(kI32, {6})}), kF32, {6});
  ExpectTensor(InferOp(PrimId::kReshapeLike, {T(kF64, {2, 3}), T(kF64, {kU, 2})}), kF64, {kU, 2});
  ExpectTensor(InferOp(PrimId::kReshapeLike, {T(kF64, {kU, 3}), T(kF64, {3, 1})}), kF64, {3, 1});
  ExpectError(InferOp(PrimId::kReshapeLike, {T(kF32, {2, 3}), T(kF32, {4})}), "elements");
  ExpectError(InferOp(PrimId::kReshapeLike, {T(kF32, {2, 3}), T(kF32, {kU, 4})}), "elements");
  ExpectError(InferOp(PrimId::kReshapeLike, {T(kF32, {2}), MakeAbstractNone()}),
              "input 1 must be a tensor");
}

// ----- transpose --------------------------------------------------------------------------------
TEST(ShapeOpsTest, Transpose) {
  ExpectTensor(InferOp(PrimId::kTranspose, {T(kF32, {2, 3, 4})}), kF32, {4, 3, 2});
  ExpectTensor(InferOp(PrimId::kTranspose, {T(kI32, {2, 3, 4})}, {{"perm", Ints{0, 2, 1}}}), kI32,
               {2, 4, 3});
  ExpectTensor(InferOp(PrimId::kTranspose, {T(kF32, {kU, 3})}, {{"perm", Ints{1, 0}}}), kF32,
               {3, kU});
  ExpectTensor(InferOp(PrimId::kTranspose, {T(kBool, {})}), kBool, {});
}

TEST(ShapeOpsTest, TransposeErrors) {
  auto r = [](Ints perm) {
    return InferOp(PrimId::kTranspose, {T(kF32, {2, 3})}, {{"perm", perm}});
  };
  ExpectError(r({0, 0}), "not a permutation");
  ExpectError(r({0, 2}), "not a permutation");
  ExpectError(r({-1, 0}), "not a permutation");
  ExpectError(r({0}), "must have 2 entries");
  ExpectError(r({0, 1, 2}), "'perm'");
}

// ----- broadcast_to / broadcast_to_like
// ------------------------------------------------------------
TEST(ShapeOpsTest, BroadcastTo) {
  auto r = [](DType dt, const Shape& in, Ints shape) {
    return InferOp(PrimId::kBroadcastTo, {T(dt, in)}, {{"shape", shape}});
  };
  ExpectTensor(r(kF32, {3}, {2, 3}), kF32, {2, 3});
  ExpectTensor(r(kI64, {2, 1}, {5, 2, 4}), kI64, {5, 2, 4});
  ExpectTensor(r(kBool, {}, {2, 2}), kBool, {2, 2});
  ExpectTensor(r(kF32, {kU, 1}, {5, 4}), kF32, {5, 4});
  ExpectTensor(r(kF32, {1}, {0}), kF32, {0});
  ExpectError(r(kF32, {3}, {4}), "broadcast");
  ExpectError(r(kF32, {3}, {4}), "'shape'");
  ExpectError(r(kF32, {2, 3}, {3}), "lower rank");
  ExpectError(r(kF32, {3}, {-1, 3}), "negative");
}

TEST(ShapeOpsTest, BroadcastToLike) {
  ExpectTensor(InferOp(PrimId::kBroadcastToLike, {T(kF32, {3, 1}), T(kF64, {2, 3, 4})}), kF32,
               {2, 3, 4});
  // The unknown dim of ref must equal x's 3.
  ExpectTensor(InferOp(PrimId::kBroadcastToLike, {T(kF32, {3, 1}), T(kF64, {2, kU, kU})}), kF32,
               {2, 3, kU});
  ExpectTensor(InferOp(PrimId::kBroadcastToLike, {T(kF32, {kU}), T(kF64, {4})}), kF32, {4});
  ExpectError(InferOp(PrimId::kBroadcastToLike, {T(kF32, {3}), T(kF32, {2})}), "broadcast");
  ExpectError(InferOp(PrimId::kBroadcastToLike, {T(kF32, {3}), MakeAbstractScalar(kF32)}),
              "input 1 must be a tensor");
}

// ----- sum_to / sum_to_like
// --------------------------------------------------------------------------
TEST(ShapeOpsTest, SumTo) {
  auto r = [](DType dt, const Shape& in, Ints shape) {
    return InferOp(PrimId::kSumTo, {T(dt, in)}, {{"shape", shape}});
  };
  ExpectTensor(r(kF32, {2, 3}, {3}), kF32, {3});
  ExpectTensor(r(kF64, {2, 3}, {1, 3}), kF64, {1, 3});
  ExpectTensor(r(kI32, {2, 3}, {2, 1}), kI32, {2, 1});
  ExpectTensor(r(kI64, {2, 3}, {}), kI64, {});
  ExpectTensor(r(kF32, {3}, {1, 3}), kF32, {1, 3});  // leading target 1s are allowed
  ExpectTensor(r(kF32, {kU, 3}, {4, 3}), kF32, {4, 3});
  ExpectTensor(r(kF32, {kU, 3}, {1, 3}), kF32, {1, 3});
}

TEST(ShapeOpsTest, SumToErrors) {
  auto r = [](DType dt, const Shape& in, Ints shape) {
    return InferOp(PrimId::kSumTo, {T(dt, in)}, {{"shape", shape}});
  };
  ExpectError(r(kF32, {2, 3}, {2}), "does not broadcast back");
  ExpectError(r(kF32, {1, 3}, {5, 3}), "'shape'");
  ExpectError(r(kF32, {3}, {2, 3}), "cannot sum");
  ExpectError(r(kBool, {2, 3}, {3}), "numeric");
  ExpectError(r(kF32, {2, 3}, {-3}), "negative");
}

TEST(ShapeOpsTest, SumToLike) {
  ExpectTensor(InferOp(PrimId::kSumToLike, {T(kF32, {2, 3}), T(kF64, {1, 3})}), kF32, {1, 3});
  // Unknown ref dims: 1 where x has 1 or does not reach, else unknown (1 or x's).
  ExpectTensor(InferOp(PrimId::kSumToLike, {T(kF32, {1, 3}), T(kF32, {kU, kU, kU})}), kF32,
               {1, 1, kU});
  ExpectTensor(InferOp(PrimId::kSumToLike, {T(kI32, {4, 3}), T(kF32, {3})}), kI32, {3});
  ExpectError(InferOp(PrimId::kSumToLike, {T(kF32, {2, 3}), T(kF32, {2})}), "sum_to_like");
  ExpectError(InferOp(PrimId::kSumToLike, {T(kBool, {2}), T(kF32, {1})}), "numeric");
}

// ----- expand_dims / squeeze
// ------------------------------------------------------------------------
TEST(ShapeOpsTest, ExpandDims) {
  auto r = [](const Shape& in, int64_t axis) {
    return InferOp(PrimId::kExpandDims, {T(kI32, in)}, {{"axis", axis}});
  };
  ExpectTensor(r({2, 3}, 0), kI32, {1, 2, 3});
  ExpectTensor(r({2, 3}, 1), kI32, {2, 1, 3});
  ExpectTensor(r({2, 3}, 2), kI32, {2, 3, 1});
  ExpectTensor(r({2, 3}, -1), kI32, {2, 3, 1});
  ExpectTensor(r({2, 3}, -3), kI32, {1, 2, 3});
  ExpectTensor(r({}, 0), kI32, {1});
  ExpectTensor(r({kU}, 0), kI32, {1, kU});
  ExpectError(r({2, 3}, 3), "'axis'");
  ExpectError(r({2, 3}, -4), "out of range");
  ExpectError(InferOp(PrimId::kExpandDims, {T(kF32, {2})}), "needs attribute 'axis'");
}

TEST(ShapeOpsTest, Squeeze) {
  auto r = [](const Shape& in, Ints axes) {
    return InferOp(PrimId::kSqueeze, {T(kF64, in)}, {{"axes", axes}});
  };
  ExpectTensor(r({1, 2, 1}, {}), kF64, {2});
  ExpectTensor(r({1, 2, 1}, {0}), kF64, {2, 1});
  ExpectTensor(r({1, 2, 1}, {-1}), kF64, {1, 2});
  ExpectTensor(r({1, 1}, {}), kF64, {});
  ExpectTensor(r({kU, 1}, {1}), kF64, {kU});
  ExpectTensor(r({kU, 1}, {0}), kF64, {1});  // the unknown dim must be 1
  ExpectError(r({kU, 1}, {}), "known shape");
  ExpectError(r({1, 2, 1}, {1}), "not 1");
  ExpectError(r({1, 2, 1}, {0, 0}), "repeated");
  ExpectError(r({1, 2, 1}, {3}), "'axes'");
}

// ----- concat / split
// ---------------------------------------------------------------------------------
TEST(ShapeOpsTest, Concat) {
  ExpectTensor(InferOp(PrimId::kConcat, {T(kF32, {2, 3}), T(kF32, {4, 3})}), kF32, {6, 3});
  ExpectTensor(InferOp(PrimId::kConcat, {T(kI64, {2, 3}), T(kI64, {2, 1}), T(kI64, {2, 0})},
                       {{"axis", int64_t{-1}}}),
               kI64, {2, 4});
  ExpectTensor(InferOp(PrimId::kConcat, {T(kF32, {kU, 3}), T(kF32, {2, 3})}), kF32, {kU, 3});
  ExpectTensor(InferOp(PrimId::kConcat, {T(kF32, {2, kU}), T(kF32, {2, 3})}), kF32, {4, 3});
  ExpectTensor(InferOp(PrimId::kConcat, {T(kBool, {5})}), kBool, {5});
}

TEST(ShapeOpsTest, ConcatErrors) {
  ExpectError(InferOp(PrimId::kConcat, {T(kF32, {2, 3}), T(kF64, {2, 3})}), "f32");
  ExpectError(InferOp(PrimId::kConcat, {T(kF32, {2, 3}), T(kF32, {2, 3, 1})}), "rank 2");
  ExpectError(InferOp(PrimId::kConcat, {T(kF32, {2, 3}), T(kF32, {2, 4})}), "dim 1");
  ExpectError(InferOp(PrimId::kConcat, {T(kF32, {}), T(kF32, {})}), "'axis'");
  ExpectError(InferOp(PrimId::kConcat, {T(kF32, {2}), T(kF32, {2})}, {{"axis", int64_t{1}}}),
              "out of range");
}

TEST(ShapeOpsTest, Split) {
  absl::StatusOr<AbstractPtr> r =
      InferOp(PrimId::kSplit, {T(kF32, {5, 2})}, {{"sizes", Ints{2, 0, 3}}});
  ASSERT_TRUE(r.ok()) << r.status();
  const AbstractTuple* t = AsTuple(*r);
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->size(), 3u);
  ExpectTensor(t->elements()[0], kF32, {2, 2});
  ExpectTensor(t->elements()[1], kF32, {0, 2});
  ExpectTensor(t->elements()[2], kF32, {3, 2});
  r = InferOp(PrimId::kSplit, {T(kI32, {kU, 5})}, {{"axis", int64_t{-1}}, {"sizes", Ints{1, 4}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(AsTuple(*r)->size(), 2u);
  ExpectTensor(AsTuple(*r)->elements()[1], kI32, {kU, 4});
  // An unknown split dim cannot be checked.
  r = InferOp(PrimId::kSplit, {T(kF32, {kU})}, {{"sizes", Ints{1, 1}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectTensor(AsTuple(*r)->elements()[0], kF32, {1});
}

TEST(ShapeOpsTest, SplitErrors) {
  auto r = [](Ints sizes, int64_t axis = 0) {
    return InferOp(PrimId::kSplit, {T(kF32, {5, 2})}, {{"sizes", sizes}, {"axis", axis}});
  };
  ExpectError(r({2, 2}), "sums to 4");
  ExpectError(r({6, -1}), "'sizes'");
  ExpectError(r({}), "must not be empty");
  ExpectError(r({5}, 2), "'axis'");
  ExpectError(InferOp(PrimId::kSplit, {T(kF32, {5})}), "needs attribute 'sizes'");
}

// ----- slice / slice_grad
// ---------------------------------------------------------------------------------
absl::StatusOr<AbstractPtr> SliceOf(const Shape& in, Ints begin, Ints end, Ints strides = {}) {
  return InferOp(PrimId::kSlice, {T(kF32, in)},
                 {{"begin", begin}, {"end", end}, {"strides", strides}});
}

TEST(ShapeOpsTest, Slice) {
  ExpectTensor(SliceOf({5, 6}, {1, 0}, {4, 6}), kF32, {3, 6});
  ExpectTensor(SliceOf({5, 6}, {0, 1}, {5, 6}, {2, 2}), kF32, {3, 3});
  ExpectTensor(SliceOf({5, 6}, {-2, -5}, {100, -1}), kF32, {2, 4});
  ExpectTensor(SliceOf({5, 6}, {4, -100}, {2, 3}), kF32, {0, 3});
  ExpectTensor(SliceOf({5}, {0}, {5}, {10}), kF32, {1});
  ExpectTensor(SliceOf({kU, 6}, {1, 0}, {2, 6}), kF32, {kU, 6});
  ExpectTensor(SliceOf({}, {}, {}), kF32, {});
  ExpectTensor(SliceOf({0, 3}, {0, 0}, {1, 3}), kF32, {0, 3});
}

TEST(ShapeOpsTest, SliceErrors) {
  ExpectError(SliceOf({5, 6}, {1}, {4, 6}), "'begin' has 1 entries");
  ExpectError(SliceOf({5, 6}, {1, 0}, {4}), "'end'");
  ExpectError(SliceOf({5, 6}, {1, 0}, {4, 6}, {1}), "'strides'");
  ExpectError(SliceOf({5, 6}, {1, 0}, {4, 6}, {1, 0}), "must be >= 1");
  ExpectError(SliceOf({5, 6}, {1, 0}, {4, 6}, {-1, 1}), "'strides'");
  ExpectError(InferOp(PrimId::kSlice, {T(kF32, {2})}, {{"begin", Ints{0}}}),
              "needs attribute 'end'");
}

TEST(ShapeOpsTest, SliceGrad) {
  AttrMap a = {{"begin", Ints{1, 0}}, {"end", Ints{4, 6}}, {"strides", Ints{1, 2}}};
  ExpectTensor(InferOp(PrimId::kSliceGrad, {T(kF64, {3, 3}), T(kF64, {5, 6})}, a), kF64, {5, 6});
  ExpectTensor(InferOp(PrimId::kSliceGrad, {T(kF32, {kU, 3}), T(kF32, {5, 6})}, a), kF32, {5, 6});
  ExpectTensor(InferOp(PrimId::kSliceGrad, {T(kF32, {7, 3}), T(kF32, {kU, 6})}, a), kF32, {kU, 6});
  ExpectError(InferOp(PrimId::kSliceGrad, {T(kF64, {3, 6}), T(kF64, {5, 6})}, a),
              "shaped like the slice of input 1, [3,3]");
  ExpectError(InferOp(PrimId::kSliceGrad, {T(kF64, {3}), T(kF64, {5, 6})}, a), "slice");
  ExpectError(InferOp(PrimId::kSliceGrad, {T(kF64, {3, 3}), T(kF64, {5})}, a), "'begin'");
}

// ----- gather / scatter_add
// -------------------------------------------------------------------------------
TEST(ShapeOpsTest, Gather) {
  auto r = [](DType dt, const Shape& p, DType it, const Shape& i, int64_t axis) {
    return InferOp(PrimId::kGather, {T(dt, p), T(it, i)}, {{"axis", axis}});
  };
  ExpectTensor(r(kF32, {5, 3}, kI32, {2, 4}, 0), kF32, {2, 4, 3});
  ExpectTensor(r(kBool, {5, 3}, kI64, {2, 4}, 1), kBool, {5, 2, 4});
  ExpectTensor(r(kI64, {5, 3, 2}, kI64, {7}, -2), kI64, {5, 7, 2});
  ExpectTensor(r(kF64, {5, 3}, kI32, {}, 0), kF64, {3});
  ExpectTensor(r(kF64, {kU, 3}, kI32, {kU}, 0), kF64, {kU, 3});
  ExpectError(r(kF32, {5, 3}, kF32, {2}, 0), "input 1 must be an i32 or i64 index tensor");
  ExpectError(r(kF32, {5, 3}, kI32, {2}, 2), "'axis'");
  ExpectError(r(kF32, {}, kI32, {2}, 0), "out of range");
}

TEST(ShapeOpsTest, ScatterAdd) {
  auto r = [](const Shape& in, DType it, const Shape& i, DType ut, const Shape& u,
              int64_t axis = 0) {
    return InferOp(PrimId::kScatterAdd, {T(kF32, in), T(it, i), T(ut, u)}, {{"axis", axis}});
  };
  ExpectTensor(r({5, 3}, kI64, {4}, kF32, {4, 3}), kF32, {5, 3});
  ExpectTensor(r({5, 3}, kI32, {2, 2}, kF32, {5, 2, 2}, 1), kF32, {5, 3});
  ExpectTensor(r({5, kU}, kI32, {4}, kF32, {4, 3}), kF32, {5, 3});
  ExpectTensor(r({kU, 3}, kI32, {kU}, kF32, {4, 3}), kF32, {kU, 3});
  ExpectError(r({5, 3}, kI32, {4}, kF64, {4, 3}), "same dtype");
  ExpectError(r({5, 3}, kI32, {4}, kF32, {4, 2}), "updates shaped [4,3]");
  ExpectError(r({5, 3}, kI32, {4}, kF32, {3}), "input 2");
  ExpectError(r({5, 3}, kF32, {4}, kF32, {4, 3}), "index tensor");
  ExpectError(r({5, 3}, kI32, {4}, kF32, {4, 3}, -3), "'axis'");
  ExpectError(InferOp(PrimId::kScatterAdd, {T(kBool, {2}), T(kI32, {1}), T(kBool, {1})}),
              "numeric");
}

// ----- gather_elements / scatter_elements / cumsum ------------------------------------------
TEST(ShapeOpsTest, GatherElements) {
  auto r = [](DType dt, const Shape& d, DType it, const Shape& i, int64_t axis) {
    return InferOp(PrimId::kGatherElements, {T(dt, d), T(it, i)}, {{"axis", axis}});
  };
  ExpectTensor(r(kF32, {5, 3}, kI32, {7, 2}, 0), kF32, {7, 2});
  ExpectTensor(r(kBool, {5, 3}, kI64, {5, 9}, -1), kBool, {5, 9});
  ExpectTensor(r(kI64, {kU, 3}, kI64, {4, 3}, 0), kI64, {4, 3});
  ExpectTensor(r(kF64, {5, 3}, kI64, {kU, kU}, 1), kF64, {kU, kU});
  ExpectError(r(kF32, {5, 3}, kF32, {2, 3}, 0), "input 1 must be an i32 or i64 index tensor");
  ExpectError(r(kF32, {5, 3}, kI32, {2}, 0), "rank of input 0");
  ExpectError(r(kF32, {5, 3}, kI32, {2, 4}, 0), "no dim larger");
  ExpectError(r(kF32, {5, 3}, kI32, {2, 3}, 2), "'axis'");
  ExpectError(r(kF32, {}, kI32, {}, 0), "out of range");
  const PrimitiveDef* def = DefaultRegistry().Find(PrimId::kGatherElements);
  EXPECT_TRUE(def->linear);
  EXPECT_NE(def->bprop, nullptr);
}

TEST(ShapeOpsTest, ScatterElements) {
  auto r = [](DType dt, const Shape& d, const Shape& i, DType ut, const Shape& u,
              AttrMap attrs = {}) {
    return InferOp(PrimId::kScatterElements, {T(dt, d), T(kI64, i), T(ut, u)}, attrs);
  };
  ExpectTensor(r(kF32, {5, 3}, {2, 3}, kF32, {2, 3}), kF32, {5, 3});
  ExpectTensor(r(kBool, {5, 3}, {5, 1}, kBool, {5, 1}, {{"axis", int64_t{1}}}), kBool, {5, 3});
  ExpectTensor(r(kI32, {kU, 3}, {2, kU}, kI32, {kU, 3}, {{"reduction", std::string("max")}}),
               kI32, {kU, 3});
  for (const char* red : {"none", "add", "mul", "max", "min"}) {
    ExpectTensor(r(kF64, {4}, {6}, kF64, {6}, {{"reduction", std::string(red)}}), kF64, {4});
  }
  ExpectError(r(kF32, {5, 3}, {2, 3}, kF32, {2, 3}, {{"reduction", std::string("sum")}}),
              "attribute 'reduction' must be none, add, mul, max or min, got 'sum'");
  ExpectError(r(kBool, {5}, {2}, kBool, {2}, {{"reduction", std::string("add")}}), "input 0");
  ExpectError(r(kF32, {5, 3}, {2, 3}, kF64, {2, 3}), "input 2 (updates)");
  ExpectError(r(kF32, {5, 3}, {2, 3}, kF32, {3, 2}), "input 2 (updates)");
  ExpectError(r(kF32, {5, 3}, {2, 4}, kF32, {2, 4}), "no dim larger");
  ExpectError(r(kF32, {5, 3}, {2, 3}, kF32, {2, 3}, {{"axis", int64_t{-3}}}), "'axis'");
  EXPECT_FALSE(DefaultRegistry().Find(PrimId::kScatterElements)->linear);
}

TEST(ShapeOpsTest, CumSum) {
  ExpectTensor(InferOp(PrimId::kCumSum, {T(kF32, {2, kU})}, {{"axis", int64_t{1}}}), kF32,
               {2, kU});
  ExpectTensor(InferOp(PrimId::kCumSum, {T(kI32, {4})},
                       {{"axis", int64_t{-1}}, {"exclusive", true}, {"reverse", true}}),
               kI32, {4});
  ExpectError(InferOp(PrimId::kCumSum, {T(kBool, {4})}), "input 0");
  ExpectError(InferOp(PrimId::kCumSum, {T(kF32, {4})}, {{"axis", int64_t{1}}}), "'axis'");
  ExpectError(InferOp(PrimId::kCumSum, {T(kF32, {})}), "'axis'");
  EXPECT_TRUE(DefaultRegistry().Find(PrimId::kCumSum)->linear);
}

// ----- pad / one_hot / cast / fill
// -----------------------------------------------------------------------------
TEST(ShapeOpsTest, Pad) {
  auto r = [](DType dt, const Shape& in, Ints pads) {
    return InferOp(PrimId::kPad, {T(dt, in)}, {{"pads", pads}, {"value", 1.5}});
  };
  ExpectTensor(r(kF32, {2, 3}, {1, 2, 0, 3}), kF32, {5, 6});
  ExpectTensor(r(kI32, {kU, 3}, {1, 1, 1, 1}), kI32, {kU, 5});
  ExpectTensor(r(kBool, {}, {}), kBool, {});
  ExpectTensor(r(kF64, {0}, {0, 0}), kF64, {0});
  ExpectError(r(kF32, {2, 3}, {1, 2}), "'pads' has 2 entries, expected 2 * rank = 4");
  ExpectError(r(kF32, {2}, {-1, 0}), "must be >= 0");
  ExpectError(InferOp(PrimId::kPad, {T(kF32, {2})}), "needs attribute 'pads'");
}

TEST(ShapeOpsTest, OneHot) {
  auto r = [](DType it, const Shape& in, AttrMap attrs) {
    return InferOp(PrimId::kOneHot, {T(it, in)}, std::move(attrs));
  };
  ExpectTensor(r(kI32, {3}, {{"depth", int64_t{4}}}), kF32, {3, 4});
  ExpectTensor(r(kI64, {3}, {{"depth", int64_t{4}}, {"axis", int64_t{0}}}), kF32, {4, 3});
  ExpectTensor(r(kI64, {2, 3}, {{"depth", int64_t{4}}, {"axis", int64_t{1}}, {"dtype", kF64}}),
               kF64, {2, 4, 3});
  ExpectTensor(r(kI32, {}, {{"depth", int64_t{0}}, {"dtype", kBool}}), kBool, {0});
  ExpectTensor(r(kI32, {kU}, {{"depth", int64_t{2}}, {"axis", int64_t{-2}}}), kF32, {2, kU});
  ExpectError(r(kF32, {3}, {{"depth", int64_t{4}}}), "index tensor");
  ExpectError(r(kI32, {3}, {{"depth", int64_t{-1}}}), "'depth'");
  ExpectError(r(kI32, {3}, {{"depth", int64_t{4}}, {"axis", int64_t{2}}}), "'axis'");
  ExpectError(r(kI32, {3}, {}), "needs attribute 'depth'");
}

TEST(ShapeOpsTest, Cast) {
  ExpectTensor(InferOp(PrimId::kCast, {T(kF32, {2, 3})}, {{"dtype", kI32}}), kI32, {2, 3});
  ExpectTensor(InferOp(PrimId::kCast, {T(kBool, {kU})}, {{"dtype", kF64}}), kF64, {kU});
  ExpectTensor(InferOp(PrimId::kCast, {T(kI64, {})}, {{"dtype", kBool}}), kBool, {});
  ExpectError(InferOp(PrimId::kCast, {T(kF32, {2})}), "needs attribute 'dtype'");
  ExpectError(InferOp(PrimId::kCast, {MakeAbstractScalar(kF32)}, {{"dtype", kI32}}),
              "must be a tensor");
}

TEST(ShapeOpsTest, Fill) {
  ExpectTensor(InferOp(PrimId::kFill, {}, {{"shape", Ints{2, 3}}}), kF32, {2, 3});
  ExpectTensor(InferOp(PrimId::kFill, {}, {{"shape", Ints{}}, {"dtype", kI64}}), kI64, {});
  ExpectTensor(InferOp(PrimId::kFill, {}, {{"shape", Ints{0, 4}}, {"value", 2.0}}), kF32, {0, 4});
  ExpectError(InferOp(PrimId::kFill, {}, {{"shape", Ints{2, -3}}}), "'shape' has a negative");
  ExpectError(InferOp(PrimId::kFill, {}, {{"shape", Ints{int64_t{1} << 30, int64_t{1} << 30}}}),
              "elements");
  ExpectError(InferOp(PrimId::kFill, {}), "needs attribute 'shape'");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
