// The run-time counts and axes (ops/dynamic_index_ops.cc): inference with static,
// symbolic and unknown operands, the CPU kernels against naive references (and
// against the static ops they generalise), the run-time errors, and the gradient
// rules (float64 central differences, reverse mode and Jvp, to the second order).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/abstract.h"
#include "core/dim_symbol.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/grad_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

const int64_t kBatch = DimSymbol("batch");
constexpr auto kExact = [](size_t) { return 0.0; };

// An i64[n] abstract with shape value `v` (kUnknownValue entries allowed).
AbstractPtr Val(Shape v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return MakeAbstractShapeValue(kI64, {n}, std::move(v));
}
// An i64[] abstract with value v.
AbstractPtr Scalar(int64_t v) { return MakeAbstractShapeValue(kI64, {}, {v}); }
Value ScalarI64(int64_t v) { return Value(MakeTensor(kI64, {}, {static_cast<double>(v)})); }

Tensor Iota(DType dtype, Shape shape) {
  std::vector<double> v;
  for (int64_t i = 0; i < NumElementsOf(shape); ++i) v.push_back(static_cast<double>(i));
  return MakeTensor(dtype, shape, v);
}

// ----- Inference ---------------------------------------------------------------------------
TEST(DynamicIndexInferTest, RulesAndZeroGradient) {
  const PrimitiveRegistry& reg = DefaultRegistry();
  EXPECT_TRUE(reg.Find(PrimId::kDynamicOneHot)->zero_gradient);
  for (PrimId id : {PrimId::kDynamicCumSum, PrimId::kDynamicSplit, PrimId::kDynamicTile,
                    PrimId::kDynamicTileGrad}) {
    EXPECT_NE(reg.Find(id)->bprop, nullptr) << PrimIdName(id);
  }
}

TEST(DynamicIndexInferTest, CumSumAxisKnownOrNot) {
  const PrimId p = PrimId::kDynamicCumSum;
  EXPECT_EQ(Inferred(p, {T(kF32, {kBatch, 3}), Scalar(-1)}), "f32[batch,3]");
  EXPECT_EQ(Inferred(p, {T(kI32, {kU, 3}), T(kI64, {1})}), "i32[?,3]");  // [1]: ONNX's scalar
  EXPECT_EQ(Inferred(p, {T(kF64, {2}), T(kI32, {})}), "f64[2]");
  ExpectError(InferOp(p, {T(kF32, {2, 3}), Scalar(2)}),
              "dynamic_cumsum: input 1 (axis) 2 is out of range for input 0, f32[2,3]");
  ExpectError(InferOp(p, {T(kF32, {2, 3}), T(kI64, {2})}),
              "input 1 (axis) must be an i32 or i64 scalar (rank 0 or shape [1]), got i64[2]");
  ExpectError(InferOp(p, {T(kF32, {2, 3}), T(kF32, {})}), "got f32[]");
  ExpectError(InferOp(p, {T(kBool, {2}), Scalar(0)}), "input 0 must be");
}

TEST(DynamicIndexInferTest, OneHotDepthKnownSymbolicOrUnknown) {
  const PrimId p = PrimId::kDynamicOneHot;
  EXPECT_EQ(Inferred(p, {T(kI64, {kBatch, 2}), Scalar(5)}), "f32[batch,2,5]");
  EXPECT_EQ(Inferred(p, {T(kI32, {3}), Scalar(4)}, {{"axis", int64_t{0}}, {"dtype", kI64}}),
            "i64[4,3]");
  EXPECT_EQ(Inferred(p, {T(kI64, {3}), Scalar(DimSymbol("classes"))}), "f32[3,classes]");
  EXPECT_EQ(Inferred(p, {T(kI64, {3}), T(kI64, {1})}), "f32[3,?]");
  ExpectError(InferOp(p, {T(kI64, {3}), Scalar(0)}),
              "dynamic_one_hot: input 1 (depth) must be in [1, ");
  ExpectError(InferOp(p, {T(kF32, {3}), Scalar(2)}), "an i32 or i64 index tensor");
  ExpectError(InferOp(p, {T(kI64, {3}), Scalar(2)}, {{"axis", int64_t{3}}}), "out of range");
}

TEST(DynamicIndexInferTest, SplitSizesKnownOrNot) {
  const PrimId p = PrimId::kDynamicSplit;
  EXPECT_EQ(Inferred(p, {T(kF32, {kBatch, 6}), Val({1, 5})}, {{"axis", int64_t{1}}}),
            "(f32[batch,1], f32[batch,5])");
  EXPECT_EQ(Inferred(p, {T(kF32, {6, 2}), T(kI64, {3})}), "(f32[?,2], f32[?,2], f32[?,2])");
  EXPECT_EQ(Inferred(p, {T(kF32, {6}), Val({2, kUnknownValue})}), "(f32[2], f32[?])");
  // One piece is the whole dim, its symbol included.
  EXPECT_EQ(Inferred(p, {T(kF32, {kBatch}), T(kI32, {1})}), "(f32[batch],)");
  ExpectError(InferOp(p, {T(kF32, {6}), Val({2, 3})}),
              "dynamic_split: input 1 (sizes) [2,3] sums to 5, but must sum to dim 0 of input 0, "
              "f32[6], 6");
  ExpectError(InferOp(p, {T(kF32, {6}), Val({7, -1})}), "has an entry outside [0, ");
  ExpectError(InferOp(p, {T(kF32, {6}), T(kI64, {kU})}), "must be known statically");
  ExpectError(InferOp(p, {T(kF32, {6}), T(kI64, {0})}), "must not be empty");
}

TEST(DynamicIndexInferTest, TileRepeatsKnownSymbolicOrUnknown) {
  const PrimId p = PrimId::kDynamicTile;
  EXPECT_EQ(Inferred(p, {T(kF32, {2, 3}), Val({3, 1})}), "f32[6,3]");
  EXPECT_EQ(Inferred(p, {T(kF32, {kBatch, 3}), Val({1, 2})}), "f32[batch,6]");
  EXPECT_EQ(Inferred(p, {T(kF32, {kBatch, 3}), Val({0, kUnknownValue})}), "f32[0,?]");
  EXPECT_EQ(Inferred(p, {T(kF32, {kBatch, 0}), T(kI64, {2})}), "f32[?,0]");
  EXPECT_EQ(Inferred(p, {T(kF32, {kBatch, 3}), T(kI64, {kU})}), "f32[?,?]");
  ExpectError(InferOp(p, {T(kF32, {2, 3}), Val({2})}),
              "dynamic_tile: input 1 (repeats) must have one entry per dim of input 0, f32[2,3], "
              "got [2]");
  ExpectError(InferOp(p, {T(kF32, {2, 3}), Val({2, -1})}), "has an entry outside [0, ");
  ExpectError(InferOp(p, {T(kF32, {1 << 20, 3}), Val({1 << 30, 1})}), "more than");
  const PrimId g = PrimId::kDynamicTileGrad;
  EXPECT_EQ(Inferred(g, {T(kF64, {kBatch, 6}), T(kF64, {kBatch, 3}), Val({1, 2})}),
            "f64[batch,3]");
  EXPECT_EQ(Inferred(g, {T(kF64, {kU, kU}), T(kF64, {2, 3}), T(kI64, {2})}), "f64[2,3]");
  ExpectError(InferOp(g, {T(kF64, {4, 3}), T(kF64, {2, 3}), Val({3, 1})}),
              "input 0 (dy) must have the dtype of input 1 and the tile's shape [6,3], got "
              "f64[4,3]");
}

// ----- Kernels ---------------------------------------------------------------------------
TEST(DynamicIndexKernelTest, CumSumMatchesTheStaticOp) {
  const Value x(Iota(kF64, {3, 4}));
  for (int64_t axis : {0, 1, -1, -2}) {
    for (bool exclusive : {false, true}) {
      for (bool reverse : {false, true}) {
        SCOPED_TRACE(absl::StrCat("axis ", axis, " exclusive ", exclusive, " reverse ", reverse));
        const Tensor want = RunOk(PrimId::kCumSum, {x}, {{"axis", axis},
                                                         {"exclusive", exclusive},
                                                         {"reverse", reverse}});
        const Value a = axis == 0 ? Value(MakeTensor(kI32, {1}, {0})) : ScalarI64(axis);
        ExpectTensorNear(RunCpuKernel(PrimId::kDynamicCumSum, {x, a},
                                      {{"exclusive", exclusive}, {"reverse", reverse}}),
                         kF64, {3, 4}, ToDoubles(want), kExact);
      }
    }
  }
  // A naive reference: [1, 2, 3, 4] exclusive reversed is [9, 7, 4, 0].
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicCumSum,
                                {Value(MakeTensor(kI32, {4}, {1, 2, 3, 4})), ScalarI64(0)},
                                {{"exclusive", true}, {"reverse", true}}),
                   kI32, {4}, {9, 7, 4, 0}, kExact);
}

TEST(DynamicIndexKernelTest, OneHotRunTimeDepth) {
  // Out-of-range indices (negative ones included: the importer wraps them) give
  // all-off rows, as one_hot.
  const Value idx(MakeTensor(kI64, {4}, {0, 2, 3, -1}));
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicOneHot, {idx, ScalarI64(3)},
                                {{"on_value", 5.0}, {"off_value", -1.0}}),
                   kF32, {4, 3}, {5, -1, -1, -1, -1, 5, -1, -1, -1, -1, -1, -1}, kExact);
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicOneHot,
                                {Value(MakeTensor(kI32, {2}, {1, 0})),
                                 Value(MakeTensor(kI32, {1}, {2}))},
                                {{"axis", int64_t{0}}, {"dtype", kI64}}),
                   kI64, {2, 2}, {0, 1, 1, 0}, kExact);
}

TEST(DynamicIndexKernelTest, SplitPiecesInOrder) {
  const Value x(Iota(kF64, {2, 5}));
  absl::StatusOr<Value> r =
      RunCpuKernel(PrimId::kDynamicSplit, {x, I64({3}, {2, 0, 3})}, {{"axis", int64_t{-1}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->tuple().size(), 3u);
  ExpectTensorNear(r->tuple()[0], kF64, {2, 2}, {0, 1, 5, 6}, kExact);
  ExpectTensorNear(r->tuple()[1], kF64, {2, 0}, {}, kExact);
  ExpectTensorNear(r->tuple()[2], kF64, {2, 3}, {2, 3, 4, 7, 8, 9}, kExact);
}

// Tile against the definition out[i] = x[i mod x.shape], and tile_grad against
// the sum of the tiles.
TEST(DynamicIndexKernelTest, TileAndItsAdjointMatchTheDefinition) {
  const Shape xs = {2, 3, 2};
  const Ints repeats = {2, 1, 3};
  const Value x(Iota(kF64, xs));
  const Shape out = {4, 3, 6};
  std::vector<double> want, sums(NumElementsOf(xs), 0.0);
  for (int64_t k = 0; k < NumElementsOf(out); ++k) {
    Shape c = Unravel(out, k);
    for (size_t d = 0; d < c.size(); ++d) c[d] %= xs[d];
    want.push_back(static_cast<double>(Ravel(xs, c)));
    sums[Ravel(xs, c)] += static_cast<double>(k);
  }
  const Value r = I64({3}, {2, 1, 3});
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicTile, {x, r}), kF64, out, want, kExact);
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicTileGrad, {Value(Iota(kF64, out)), x, r}), kF64,
                   xs, sums, kExact);
  // Zero repeats, rank 0, integers.
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicTile, {x, I64({3}, {1, 0, 1})}), kF64, {2, 0, 2},
                   {}, kExact);
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicTile, {Value(MakeTensor(kI32, {}, {7})),
                                                       Value(MakeTensor(kI64, {0}, {}))}),
                   kI32, {}, {7}, kExact);
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicTileGrad,
                                {Value(MakeTensor(kI32, {4}, {1, 2, 3, 4})),
                                 Value(MakeTensor(kI32, {2}, {0, 0})), I64({1}, {2})}),
                   kI32, {2}, {4, 6}, kExact);
}

// ----- Run-time errors --------------------------------------------------------------------
TEST(DynamicIndexKernelTest, BadOperandsAreStatuses) {
  const Value x(Iota(kF32, {2, 3}));
  ExpectRunError(PrimId::kDynamicCumSum, {x, ScalarI64(2)}, {},
                 "dynamic_cumsum: input 1 (axis) 2 is out of range for input 0, f32[2,3]");
  ExpectRunError(PrimId::kDynamicCumSum, {x, I64({2}, {0, 1})}, {}, "got i64[2]");
  ExpectRunError(PrimId::kDynamicOneHot, {I64({2}, {0, 1}), ScalarI64(0)}, {},
                 "dynamic_one_hot: input 1 (depth) must be in [1, ");
  ExpectRunError(PrimId::kDynamicOneHot, {I64({2}, {0, 1}), ScalarI64(-3)}, {}, "got -3");
  ExpectRunError(PrimId::kDynamicSplit, {x, I64({2}, {1, 1})}, {{"axis", int64_t{1}}},
                 "input 1 (sizes) [1,1] sums to 2, but must sum to dim 1 of input 0, f32[2,3], 3");
  ExpectRunError(PrimId::kDynamicSplit, {x, I64({2}, {4, -1})}, {{"axis", int64_t{1}}},
                 "has an entry outside");
  ExpectRunError(PrimId::kDynamicTile, {x, I64({2}, {1, -2})}, {},
                 "dynamic_tile: input 1 (repeats) has an entry outside [0, ");
  ExpectRunError(PrimId::kDynamicTile, {x, I64({3}, {1, 1, 1})}, {}, "one entry per dim");
  ExpectRunError(PrimId::kDynamicTile, {x, F64({2}, {1, 1})}, {},
                 "input 1 (repeats) must be an i32 or i64 tensor of rank 1, got f64[2]");
  ExpectRunError(PrimId::kDynamicTileGrad, {x, x, I64({2}, {2, 1})}, {}, "the tile's shape [4,3]");
}

// ----- Gradients ---------------------------------------------------------------------------
// P and P^2 checked in float64 against central differences to the second order,
// reverse mode and (at order 1) Jvp; the integer operands are constants
// (ExpectDynamicOpGradients).
TEST(DynamicIndexGradTest, CumSum) {
  ExpectDynamicOpGradients(PrimId::kDynamicCumSum, {{3, 4}}, {ScalarI64(1)});
  ExpectDynamicOpGradients(PrimId::kDynamicCumSum, {{3, 4}}, {I64({1}, {-2})},
                           {{"exclusive", true}, {"reverse", true}});
  ExpectDynamicOpGradients(PrimId::kDynamicCumSum, {{5}}, {ScalarI64(0)}, {{"exclusive", true}});
}

TEST(DynamicIndexGradTest, Split) {
  ExpectDynamicOpGradients(PrimId::kDynamicSplit, {{2, 6}}, {I64({3}, {1, 2, 3})}, {{"axis", int64_t{1}}}, 3);
  ExpectDynamicOpGradients(PrimId::kDynamicSplit, {{4, 2}}, {I64({1}, {4})}, {}, 1);
}

TEST(DynamicIndexGradTest, TileAndTileGrad) {
  ExpectDynamicOpGradients(PrimId::kDynamicTile, {{2, 3}}, {I64({2}, {2, 3})});
  ExpectDynamicOpGradients(PrimId::kDynamicTile, {{3, 1, 2}}, {I64({3}, {1, 4, 1})});
  ExpectDynamicOpGradients(PrimId::kDynamicTileGrad, {{4, 9}, {2, 3}}, {I64({2}, {2, 3})});
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
