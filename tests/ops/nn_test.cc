// Inference of the nn family: softmax, log_softmax, the cross-entropies,
// batch_norm, layer_norm, dropout.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/primitive.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {


// ----- softmax / log_softmax -----------------------------------------------------------
TEST(SoftmaxInferTest, KeepsTypeAndShape) {
  for (PrimId id : {PrimId::kSoftmax, PrimId::kLogSoftmax}) {
    EXPECT_EQ(Inferred(id, {T(kF32, {4, 5})}), TypeOf(kF32, {4, 5}));
    EXPECT_EQ(Inferred(id, {T(kF64, {2, 3, 4})}, {{"axis", int64_t{1}}}), TypeOf(kF64, {2, 3, 4}));
    EXPECT_EQ(Inferred(id, {T(kF32, {kU, 7})}, {{"axis", int64_t{-2}}}), TypeOf(kF32, {kU, 7}));
    EXPECT_EQ(Inferred(id, {T(kF32, {0, 3})}), TypeOf(kF32, {0, 3}));
  }
}

TEST(SoftmaxInferTest, RejectsBadAxisAndDType) {
  for (PrimId id : {PrimId::kSoftmax, PrimId::kLogSoftmax}) {
    ExpectError(InferError(id, {T(kF32, {4, 5})}, {{"axis", int64_t{2}}}),
                "axis 2 is out of range for rank 2");
    ExpectError(InferError(id, {T(kF32, {4, 5})}, {{"axis", int64_t{-3}}}), "attribute 'axis'");
    ExpectError(InferError(id, {T(kF32, {})}), "out of range for rank 0");
    ExpectError(InferError(id, {T(kI32, {4})}), "input 0 must be a floating-point tensor");
  }
}

// ----- softmax_cross_entropy ---------------------------------------------------------------
TEST(SoftmaxCrossEntropyInferTest, RemovesTheAxis) {
  PrimId id = PrimId::kSoftmaxCrossEntropy;
  EXPECT_EQ(Inferred(id, {T(kF32, {4, 5}), T(kF32, {4, 5})}), TypeOf(kF32, {4}));
  EXPECT_EQ(Inferred(id, {T(kF64, {4, 5}), T(kF64, {4, 5})}, {{"axis", int64_t{0}}}),
            TypeOf(kF64, {5}));
  EXPECT_EQ(Inferred(id, {T(kF32, {2, 3, 4}), T(kF32, {2, 3, 4})}, {{"axis", int64_t{1}}}),
            TypeOf(kF32, {2, 4}));
  EXPECT_EQ(Inferred(id, {T(kF32, {7}), T(kF32, {7})}), TypeOf(kF32, {}));
}

TEST(SoftmaxCrossEntropyInferTest, UnknownDimsMerge) {
  PrimId id = PrimId::kSoftmaxCrossEntropy;
  EXPECT_EQ(Inferred(id, {T(kF32, {kU, 5}), T(kF32, {4, kU})}), TypeOf(kF32, {4}));
  EXPECT_EQ(Inferred(id, {T(kF32, {kU, 5}), T(kF32, {kU, 5})}), TypeOf(kF32, {kU}));
}

TEST(SoftmaxCrossEntropyInferTest, RejectsMismatches) {
  PrimId id = PrimId::kSoftmaxCrossEntropy;
  ExpectError(InferError(id, {T(kF32, {4, 5}), T(kF32, {4, 6})}),
              "logits and labels must have the same shape, got f32[4,5] and f32[4,6]");
  ExpectError(InferError(id, {T(kF32, {4, 5}), T(kF32, {20})}), "same shape");
  ExpectError(InferError(id, {T(kF32, {4, 5}), T(kF64, {4, 5})}), "same dtype");
  ExpectError(InferError(id, {T(kF32, {4, 5}), T(kI32, {4, 5})}), "input 1 must be a floating");
  ExpectError(InferError(id, {T(kF32, {4, 5}), T(kF32, {4, 5})}, {{"axis", int64_t{2}}}),
              "axis 2 is out of range");
}

// ----- sparse_softmax_cross_entropy -------------------------------------------------------
TEST(SparseSoftmaxCrossEntropyInferTest, OneLossPerRow) {
  PrimId id = PrimId::kSparseSoftmaxCrossEntropy;
  EXPECT_EQ(Inferred(id, {T(kF32, {4, 5}), T(kI32, {4})}), TypeOf(kF32, {4}));
  EXPECT_EQ(Inferred(id, {T(kF64, {4, 5}), T(kI64, {4})}), TypeOf(kF64, {4}));
  EXPECT_EQ(Inferred(id, {T(kF32, {kU, 5}), T(kI64, {7})}), TypeOf(kF32, {7}));
  EXPECT_EQ(Inferred(id, {T(kF32, {kU, 5}), T(kI64, {kU})}), TypeOf(kF32, {kU}));
}

TEST(SparseSoftmaxCrossEntropyInferTest, RejectsBadInputs) {
  PrimId id = PrimId::kSparseSoftmaxCrossEntropy;
  ExpectError(InferError(id, {T(kF32, {2, 4, 5}), T(kI32, {2})}), "logits of rank 2");
  ExpectError(InferError(id, {T(kF32, {4, 5}), T(kF32, {4})}), "input 1 must be i32 or i64");
  ExpectError(InferError(id, {T(kF32, {4, 5}), T(kI32, {4, 1})}), "labels of rank 1");
  ExpectError(InferError(id, {T(kF32, {4, 5}), T(kI32, {3})}),
              "one entry per row of logits: logits f32[4,5], labels i32[3]");
  ExpectError(InferError(id, {T(kI32, {4, 5}), T(kI32, {4})}), "floating-point");
}

// ----- batch_norm ---------------------------------------------------------------------------
TEST(BatchNormInferTest, KeepsTypeAndShape) {
  PrimId id = PrimId::kBatchNorm;
  EXPECT_EQ(Inferred(id, {T(kF32, {2, 3, 4, 4}), T(kF32, {3}), T(kF32, {3})}),
            TypeOf(kF32, {2, 3, 4, 4}));
  EXPECT_EQ(Inferred(id, {T(kF64, {2, 3, 4}), T(kF64, {4}), T(kF64, {4})},
                     {{"axis", int64_t{-1}}, {"epsilon", 1e-3}}),
            TypeOf(kF64, {2, 3, 4}));
  // Unknown channel counts on either side cannot be checked.
  EXPECT_EQ(Inferred(id, {T(kF32, {2, kU}), T(kF32, {3}), T(kF32, {kU})}), TypeOf(kF32, {2, kU}));
}

TEST(BatchNormInferTest, RejectsBadInputsAndAttributes) {
  PrimId id = PrimId::kBatchNorm;
  auto c3 = T(kF32, {3});
  ExpectError(InferError(id, {T(kF32, {3}), c3, c3}), "input 0 must be a tensor of rank >= 2");
  ExpectError(InferError(id, {T(kF32, {2, 3}), T(kF32, {4}), c3}),
              "input 1 must be of shape [3], got f32[4]");
  ExpectError(InferError(id, {T(kF32, {2, 3}), c3, T(kF32, {1, 3})}),
              "input 2 must be of shape [3]");
  ExpectError(InferError(id, {T(kF32, {2, 3}), T(kF64, {3}), c3}), "same dtype");
  ExpectError(InferError(id, {T(kF32, {2, 3}), c3, c3}, {{"epsilon", -1e-5}}),
              "'epsilon' of batch_norm must be finite and >= 0");
  ExpectError(InferError(id, {T(kF32, {2, 3}), c3, c3},
                         {{"epsilon", std::numeric_limits<double>::quiet_NaN()}}),
              "'epsilon'");
  ExpectError(InferError(id, {T(kF32, {2, 3}), c3, c3}, {{"axis", int64_t{2}}}),
              "attribute 'axis' of batch_norm on f32[2,3]");
}

// ----- layer_norm ---------------------------------------------------------------------------
TEST(LayerNormInferTest, ScaleAndBiasCoverTheNormalisedDims) {
  PrimId id = PrimId::kLayerNorm;
  EXPECT_EQ(Inferred(id, {T(kF32, {2, 3, 4}), T(kF32, {4}), T(kF32, {4})}),
            TypeOf(kF32, {2, 3, 4}));
  EXPECT_EQ(Inferred(id, {T(kF64, {2, 3, 4}), T(kF64, {3, 4}), T(kF64, {3, 4})},
                     {{"begin_norm_axis", int64_t{1}}}),
            TypeOf(kF64, {2, 3, 4}));
  EXPECT_EQ(Inferred(id, {T(kF32, {2, 3}), T(kF32, {2, 3}), T(kF32, {2, 3})},
                     {{"begin_norm_axis", int64_t{0}}}),
            TypeOf(kF32, {2, 3}));
  EXPECT_EQ(Inferred(id, {T(kF32, {kU, kU}), T(kF32, {5}), T(kF32, {kU})}), TypeOf(kF32, {kU, kU}));
}

TEST(LayerNormInferTest, RejectsBadInputsAndAttributes) {
  PrimId id = PrimId::kLayerNorm;
  ExpectError(InferError(id, {T(kF32, {2, 3, 4}), T(kF32, {3, 4}), T(kF32, {3, 4})}),
              "input 1 must be of shape [4], got f32[3,4]");
  ExpectError(InferError(id, {T(kF32, {2, 3, 4}), T(kF32, {3, 4}), T(kF32, {4})},
                         {{"begin_norm_axis", int64_t{-2}}}),
              "input 2 must be of shape [3,4]");
  ExpectError(InferError(id, {T(kF32, {2, 3}), T(kF32, {3}), T(kI32, {3})}),
              "input 2 must be a floating-point tensor");
  ExpectError(InferError(id, {T(kF32, {2, 3}), T(kF32, {3}), T(kF32, {3})},
                         {{"begin_norm_axis", int64_t{2}}}),
              "attribute 'begin_norm_axis'");
  ExpectError(InferError(id, {T(kF32, {2, 3}), T(kF32, {3}), T(kF32, {3})},
                         {{"epsilon", std::numeric_limits<double>::infinity()}}),
              "'epsilon' of layer_norm must be finite");
  ExpectError(InferError(id, {T(kF32, {}), T(kF32, {}), T(kF32, {})}), "out of range for rank 0");
}

// ----- dropout -------------------------------------------------------------------------------
TEST(DropoutInferTest, KeepsTypeAndShape) {
  EXPECT_EQ(Inferred(PrimId::kDropout, {T(kF32, {2, kU})}), TypeOf(kF32, {2, kU}));
  EXPECT_EQ(Inferred(PrimId::kDropout, {T(kF64, {})}, {{"rate", 0.0}, {"seed", int64_t{-7}}}),
            TypeOf(kF64, {}));
}

TEST(DropoutInferTest, RateMustBeInZeroOne) {
  ExpectError(InferError(PrimId::kDropout, {T(kF32, {3})}, {{"rate", 1.0}}),
              "attribute 'rate' of dropout must be in [0, 1), got 1");
  ExpectError(InferError(PrimId::kDropout, {T(kF32, {3})}, {{"rate", -0.25}}), "got -0.25");
  ExpectError(InferError(PrimId::kDropout, {T(kF32, {3})},
                         {{"rate", std::numeric_limits<double>::quiet_NaN()}}),
              "'rate'");
  ExpectError(InferError(PrimId::kDropout, {T(kI64, {3})}), "floating-point");
}

// dynamic_dropout(x, rate): the rate one value of x's dtype, read by the kernel.
TEST(DynamicDropoutInferTest, KeepsTypeAndChecksTheRate) {
  EXPECT_EQ(Inferred(PrimId::kDynamicDropout, {T(kF32, {2, kU}), T(kF32, {})}), TypeOf(kF32, {2, kU}));
  EXPECT_EQ(Inferred(PrimId::kDynamicDropout, {T(kF64, {3}), T(kF64, {1})}, {{"seed", int64_t{5}}}),
            TypeOf(kF64, {3}));
  EXPECT_EQ(Inferred(PrimId::kDynamicDropout, {T(kF64, {3}), T(kF64, {kU})}), TypeOf(kF64, {3}));
  ExpectError(InferError(PrimId::kDynamicDropout, {T(kF32, {3}), T(kF32, {2})}),
              "input 1 (rate) of dynamic_dropout must be one value (rank 0 or shape [1]), got f32[2]");
  ExpectError(InferError(PrimId::kDynamicDropout, {T(kF32, {3}), T(kF64, {})}), "must be f32 like input 0");
  ExpectError(InferError(PrimId::kDynamicDropout, {T(kF32, {3}), T(kI64, {})}), "floating-point");
  ExpectError(InferError(PrimId::kDynamicDropout, {T(kI64, {3}), T(kF32, {})}), "floating-point");
  const PrimitiveDef* d = DefaultRegistry().Find(PrimId::kDynamicDropout);
  ASSERT_NE(d, nullptr);
  EXPECT_FALSE(d->linear);  // not in the rate
  EXPECT_EQ(d->zero_if_any, 1u);
  EXPECT_NE(d->bprop, nullptr);  // checked in tests/ad/nn_grad_test
}

TEST(NnDefinitionsTest, Flags) {
  for (PrimId id : {PrimId::kSoftmax, PrimId::kLogSoftmax, PrimId::kSoftmaxCrossEntropy,
                    PrimId::kSparseSoftmaxCrossEntropy, PrimId::kBatchNorm, PrimId::kLayerNorm,
                    PrimId::kBatchNormGrad, PrimId::kLayerNormGrad, PrimId::kDropout}) {
    const PrimitiveDef* d = DefaultRegistry().Find(id);
    ASSERT_NE(d, nullptr) << PrimIdName(id);
    EXPECT_EQ(d->linear, id == PrimId::kDropout) << d->name;
    EXPECT_FALSE(d->zero_gradient) << d->name;
    EXPECT_NE(d->bprop, nullptr) << d->name;  // checked in tests/ad/nn_grad_test
    EXPECT_FALSE(d->structural) << d->name;
  }
  PrimitivePtr dropout = DefaultRegistry().Make(PrimId::kDropout).value();
  EXPECT_EQ(dropout->GetFloat("rate"), 0.5);
  EXPECT_EQ(dropout->GetInt("seed"), 0);
  PrimitivePtr bn = DefaultRegistry().Make(PrimId::kBatchNorm).value();
  EXPECT_EQ(bn->GetFloat("epsilon"), 1e-5);
  EXPECT_EQ(bn->GetInt("axis"), 1);
  PrimitivePtr ln = DefaultRegistry().Make(PrimId::kLayerNorm).value();
  EXPECT_EQ(ln->GetInt("begin_norm_axis"), -1);
}

// ----- the norms' gradients -------------------------------------------------------------
// (dx, dscale, dbias), shaped like (x, scale, scale); dy like x.
TEST(NormGradInferTest, TuplesOfTheGradients) {
  EXPECT_EQ(Inferred(PrimId::kBatchNormGrad, {T(kF32, {2, 3, 4}), T(kF32, {3}), T(kF32, {2, 3, 4})}),
            "(f32[2,3,4], f32[3], f32[3])");
  EXPECT_EQ(Inferred(PrimId::kBatchNormGrad, {T(kF64, {kU, 3}), T(kF64, {3}), T(kF64, {5, kU})}),
            "(f64[?,3], f64[3], f64[3])");
  EXPECT_EQ(Inferred(PrimId::kLayerNormGrad, {T(kF32, {2, 3, 4}), T(kF32, {3, 4}), T(kF32, {2, 3, 4})},
                     {{"begin_norm_axis", int64_t{1}}}),
            "(f32[2,3,4], f32[3,4], f32[3,4])");
}

TEST(NormGradInferTest, RejectsBadInputs) {
  auto x = T(kF32, {2, 3}), c3 = T(kF32, {3});
  ExpectError(InferError(PrimId::kBatchNormGrad, {x, T(kF32, {2}), x}), "input 1 must be of shape [3]");
  ExpectError(InferError(PrimId::kBatchNormGrad, {x, c3, T(kF32, {2, 4})}),
              "input 2 (dy) must be shaped like input 0 f32[2,3], got f32[2,4]");
  ExpectError(InferError(PrimId::kBatchNormGrad, {x, c3, T(kF64, {2, 3})}), "same dtype");
  ExpectError(InferError(PrimId::kLayerNormGrad, {x, c3, x}, {{"epsilon", -1.0}}),
              "'epsilon' of layer_norm_grad must be finite and >= 0");
  ExpectError(InferError(PrimId::kLayerNormGrad, {x, T(kF32, {2, 3}), x}), "input 1 must be of shape [3]");
}

// random_*_like(x): x's shape in the dtype attribute (f32 or f64), any x dtype.
TEST(RandomLikeInferTest, ShapesAndErrors) {
  EXPECT_EQ(Inferred(PrimId::kRandomUniformLike, {T(DType::kInt64, {2, kU})}, {{"dtype", AttrValue(kF64)}}),
            TypeOf(kF64, {2, kU}));
  EXPECT_EQ(Inferred(PrimId::kRandomNormalLike, {T(kF64, {3})}), TypeOf(kF32, {3}));
  ExpectError(InferOp(PrimId::kRandomNormalLike, {T(kF32, {3})}, {{"dtype", AttrValue(DType::kInt32)}}),
              "attribute 'dtype' must be f32 or f64");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
