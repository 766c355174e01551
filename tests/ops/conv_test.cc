// Inference of the convolution and pooling primitives: output dtype and shape,
// unknown dims, attribute validation and shape errors.
#include <cstdint>
#include <vector>

#include "core/abstract.h"
#include "core/primitive.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

AttrMap ConvAttrs(Ints stride, Ints padding, Ints dilation = {1, 1}, int64_t groups = 1) {
  return {{"stride", AttrValue(stride)},
          {"padding", AttrValue(padding)},
          {"dilation", AttrValue(dilation)},
          {"groups", AttrValue(groups)}};
}

AttrMap PoolAttrs(Ints kernel, Ints stride = {}, Ints padding = {0, 0}) {
  return {{"kernel", AttrValue(kernel)},
          {"stride", AttrValue(stride)},
          {"padding", AttrValue(padding)}};
}

// Inference of a two-input pooling primitive (x, then dy or ddx), by default with
// a 2x2 kernel.
// Inference of `id` on tensors of `dtype` and `shapes`.
absl::StatusOr<AbstractPtr> InferOn(PrimId id, DType dtype, const std::vector<Shape>& shapes,
                                    AttrMap attrs = {}) {
  std::vector<AbstractPtr> args;
  for (const Shape& s : shapes) args.push_back(T(dtype, s));
  return InferOp(id, args, std::move(attrs));
}

absl::StatusOr<AbstractPtr> InferPool2(PrimId id, AbstractPtr a, AbstractPtr b,
                                       AttrMap attrs = PoolAttrs({2, 2})) {
  return InferOp(id, {std::move(a), std::move(b)}, std::move(attrs));
}

// ----- conv2d ---------------------------------------------------------------------------
TEST(Conv2dInferTest, StrideAndSymmetricPadding) {
  // OH = (7 + 2 - 3) / 2 + 1 = 4, OW = (9 + 0 - 2) / 1 + 1 = 8.
  ExpectTensor(InferOp(PrimId::kConv2d, {T(kF32, {2, 3, 7, 9}), T(kF32, {4, 3, 3, 2})},
                       ConvAttrs({2, 1}, {1, 0})),
               kF32, {2, 4, 4, 8});
}

TEST(Conv2dInferTest, DefaultsAreUnitStrideNoPadding) {
  ExpectTensor(InferOp(PrimId::kConv2d, {T(kF64, {1, 2, 5, 6}), T(kF64, {3, 2, 3, 3})}), kF64,
               {1, 3, 3, 4});
}

TEST(Conv2dInferTest, AsymmetricPaddingDilationAndStride) {
  // padding [top 1, bottom 2, left 0, right 3]; dilated kernel height 2*2+1 = 5.
  // OH = (10 + 3 - 5) / 1 + 1 = 9; OW = (10 + 3 - 3) / 3 + 1 = 4.
  ExpectTensor(InferOp(PrimId::kConv2d, {T(kF64, {1, 2, 10, 10}), T(kF64, {6, 2, 3, 3})},
                       ConvAttrs({1, 3}, {1, 2, 0, 3}, {2, 1})),
               kF64, {1, 6, 9, 4});
}

TEST(Conv2dInferTest, GroupsAndDepthwise) {
  ExpectTensor(InferOp(PrimId::kConv2d, {T(kF32, {2, 6, 5, 5}), T(kF32, {4, 3, 3, 3})},
                       ConvAttrs({1, 1}, {0, 0}, {1, 1}, 2)),
               kF32, {2, 4, 3, 3});
  ExpectTensor(InferOp(PrimId::kConv2d, {T(kF32, {1, 4, 5, 5}), T(kF32, {8, 1, 3, 3})},
                       ConvAttrs({1, 1}, {1, 1}, {1, 1}, 4)),
               kF32, {1, 8, 5, 5});
}

TEST(Conv2dInferTest, ExactFitAndEmptyBatch) {
  ExpectTensor(InferOp(PrimId::kConv2d, {T(kF32, {0, 3, 3, 3}), T(kF32, {2, 3, 3, 3})}), kF32,
               {0, 2, 1, 1});
  // Zero-height input: the output comes from the padding alone.
  ExpectTensor(InferOp(PrimId::kConv2d, {T(kF32, {1, 3, 0, 4}), T(kF32, {2, 3, 1, 1})},
                       ConvAttrs({1, 1}, {1, 0})),
               kF32, {1, 2, 2, 4});
}

TEST(Conv2dInferTest, UnknownDimsPropagate) {
  ExpectTensor(InferOp(PrimId::kConv2d, {T(kF32, {kU, 3, kU, 8}), T(kF32, {4, 3, 3, 3})}), kF32,
               {kU, 4, kU, 6});
  ExpectTensor(InferOp(PrimId::kConv2d, {T(kF32, {2, 3, 5, 5}), T(kF32, {kU, kU, kU, 3})}), kF32,
               {2, kU, kU, 3});
  // Unknown channels cannot be checked against the filter; no error.
  ExpectTensor(InferOp(PrimId::kConv2d, {T(kF32, {2, kU, 5, 5}), T(kF32, {4, 7, 3, 3})}), kF32,
               {2, 4, 3, 3});
  // An unknown height cannot be checked against a big kernel.
  ExpectTensor(InferOp(PrimId::kConv2d, {T(kF32, {2, 3, kU, 5}), T(kF32, {4, 3, 99, 3})}), kF32,
               {2, 4, kU, 3});
}

TEST(Conv2dInferTest, ChannelMismatchIsDecidedWithUnknownSpatialDims) {
  ExpectError(InferOp(PrimId::kConv2d, {T(kF32, {kU, 3, kU, kU}), T(kF32, {4, 2, 3, 3})}),
              "C/groups = 3");
}

// The same ops over 3-D (N, C, D, H, W) and 1-D (N, C, L) windows: one entry per
// spatial axis in stride and dilation, (begin, end) pairs or one value per axis
// in padding; unknown dims stay unknown.
TEST(Conv2dInferTest, OneAndThreeDimensionalWindows) {
  // D: (5 + 1 + 0 - 3) / 1 + 1 = 4; H: (kU); W: (9 + 1 + 1 - 3) / 2 + 1 = 5.
  ExpectTensor(InferOp(PrimId::kConv2d, {T(kF32, {2, 3, 5, kU, 9}), T(kF32, {4, 3, 3, 3, 3})},
                       ConvAttrs({1, 1, 2}, {1, 0, 1, 1, 1, 1}, {1, 1, 1})),
               kF32, {2, 4, 4, kU, 5});
  ExpectTensor(InferOp(PrimId::kConv2d, {T(kF64, {2, 4, 9}), T(kF64, {6, 2, 3})},
                       ConvAttrs({2}, {1}, {2}, 2)),
               kF64, {2, 6, 4});
  ExpectTensor(InferOp(PrimId::kConv2dBackpropFilter,
                       {T(kF32, {2, 3, 5, 6, 9}), T(kF32, {2, 4, 4, 6, 5}), T(kF32, {kU, 3, 3, 3, 3})},
                       ConvAttrs({1, 1, 2}, {1, 0, 1, 1, 1, 1}, {1, 1, 1})),
               kF32, {4, 3, 3, 3, 3});
  ExpectTensor(InferOp(PrimId::kMaxPool2d, {T(kF32, {1, 2, 4, 9, 8})}, PoolAttrs({1, 3, 3}, {1, 2, 2}, {0, 1, 1})),
               kF32, {1, 2, 4, 5, 4});
  ExpectTensor(InferOp(PrimId::kAvgPool2dGrad, {T(kF32, {1, 2, 2, 2, 2}), T(kF32, {1, 2, 4, 4, 5})},
                       PoolAttrs({2, 2, 2}, {}, {})),
               kF32, {1, 2, 4, 4, 5});
  ExpectError(InferOp(PrimId::kConv2d, {T(kF32, {2, 3, 5, 6, 9}), T(kF32, {4, 3, 3, 3, 3})},
                      ConvAttrs({1, 1}, {0, 0})),
              "attribute 'stride' must be 3 values (one per spatial axis)");
  ExpectError(InferOp(PrimId::kAvgPool2dGrad, {T(kF32, {1, 2, 2, 2, 2}), T(kF32, {1, 2, 4, 4, 6})},
                      PoolAttrs({2, 2, 2}, {}, {})),
              "input 0 must be shaped [1,2,2,2,3]");
}

TEST(Conv2dInferTest, RankDTypeAndKindErrors) {
  ExpectError(InferOp(PrimId::kConv2d, {T(kF32, {3, 5, 5}), T(kF32, {4, 3, 3, 3})}),
              "input 1 must be a rank-3 (O, C/groups, kernel...) filter tensor like input 0");
  ExpectError(InferOp(PrimId::kConv2d, {T(kF32, {}), T(kF32, {4, 3, 3, 3})}),
              "input 0 must be a rank-3, 4 or 5 (N, C, spatial...) input tensor");
  ExpectError(InferOp(PrimId::kConv2d, {T(kF32, {1, 3, 5, 5, 5, 5}), T(kF32, {4, 3, 3, 3})}),
              "rank-3, 4 or 5");
  ExpectError(InferOp(PrimId::kConv2d, {T(kF32, {1, 3, 5, 5}), T(kF32, {4, 3, 3})}),
              "input 1 must be a rank-4 (O, C/groups, kernel...) filter");
  ExpectError(InferOp(PrimId::kConv2d, {T(kF32, {1, 3, 5, 5}), T(kF64, {4, 3, 3, 3})}),
              "dtype f32 like input 0");
  ExpectError(
      InferOp(PrimId::kConv2d, {T(DType::kInt32, {1, 3, 5, 5}), T(DType::kInt32, {4, 3, 3, 3})}),
      "floating-point");
  ExpectError(InferOp(PrimId::kConv2d, {MakeAbstractScalar(kF32), T(kF32, {4, 3, 3, 3})}),
              "tensor");
}

TEST(Conv2dInferTest, ChannelAndGroupErrors) {
  ExpectError(InferOp(PrimId::kConv2d, {T(kF32, {1, 3, 5, 5}), T(kF32, {4, 2, 3, 3})}),
              "C/groups = 3");
  ExpectError(InferOp(PrimId::kConv2d, {T(kF32, {1, 6, 5, 5}), T(kF32, {4, 3, 3, 3})},
                      ConvAttrs({1, 1}, {0, 0}, {1, 1}, 4)),
              "channel count (dim 1) is divisible by groups=4");
  ExpectError(InferOp(PrimId::kConv2d, {T(kF32, {1, 6, 5, 5}), T(kF32, {5, 3, 3, 3})},
                      ConvAttrs({1, 1}, {0, 0}, {1, 1}, 2)),
              "output channel count (dim 0) is divisible by groups=2");
  ExpectError(InferOp(PrimId::kConv2d, {T(kF32, {1, 3, 5, 5}), T(kF32, {4, 3, 0, 3})}),
              "kernel is at least 1 along every spatial axis");
}

TEST(Conv2dInferTest, KernelLargerThanPaddedInput) {
  ExpectError(InferOp(PrimId::kConv2d, {T(kF32, {1, 3, 4, 9}), T(kF32, {2, 3, 7, 3})},
                      ConvAttrs({1, 1}, {1, 1})),
              "padded input height 6 (4 + 1 + 1) is smaller than the kernel height 7");
  // Dilation 3 makes a 3-wide kernel span 7 columns.
  ExpectError(InferOp(PrimId::kConv2d, {T(kF32, {1, 3, 9, 6}), T(kF32, {2, 3, 3, 3})},
                      ConvAttrs({1, 1}, {0, 0}, {1, 3})),
              "smaller than the dilated kernel width 7");
}

TEST(Conv2dInferTest, BadAttributes) {
  auto x = T(kF32, {1, 3, 5, 5});
  auto w = T(kF32, {4, 3, 3, 3});
  ExpectError(InferOp(PrimId::kConv2d, {x, w}, ConvAttrs({0, 1}, {0, 0})),
              "attribute 'stride' must be 2 values, each >= 1, got [0, 1]");
  ExpectError(InferOp(PrimId::kConv2d, {x, w}, ConvAttrs({1, 1, 1}, {0, 0})), "attribute 'stride'");
  ExpectError(InferOp(PrimId::kConv2d, {x, w}, ConvAttrs({1, 1}, {0, 0, 0})),
              "attribute 'padding' must be 2 values (symmetric) or 4 (begin, end per spatial axis)");
  ExpectError(InferOp(PrimId::kConv2d, {x, w}, ConvAttrs({1, 1}, {0, -1})), "attribute 'padding'");
  ExpectError(InferOp(PrimId::kConv2d, {x, w}, ConvAttrs({1, 1}, {0, 0}, {1, 0})),
              "attribute 'dilation'");
  ExpectError(InferOp(PrimId::kConv2d, {x, w}, ConvAttrs({1, 1}, {0, 0}, {1, 1}, 0)),
              "attribute 'groups' must be >= 1, got 0");
  // Wrong attribute types are rejected when the primitive is made.
  absl::StatusOr<AbstractPtr> r =
      InferOp(PrimId::kConv2d, {x, w}, {{"stride", AttrValue(int64_t{2})}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("stride"));
}

TEST(Conv2dInferTest, HugeAttributesAreErrorsNotOverflow) {
  auto x = T(kF32, {1, 3, 5, 5});
  auto w = T(kF32, {4, 3, 3, 3});
  ExpectError(InferOp(PrimId::kConv2d, {x, w}, ConvAttrs({1, 1}, {0, 0}, {int64_t{1} << 62, 1})),
              "attribute 'dilation'");
  ExpectError(InferOp(PrimId::kConv2d, {x, T(kF32, {4, 3, int64_t{1} << 30, 3})},
                      ConvAttrs({1, 1}, {0, 0}, {int64_t{1} << 30, 1})),
              "too large");
}

// ----- conv2d_backprop_input --------------------------------------------------------------
TEST(Conv2dBackpropInputInferTest, ShapedLikeXRef) {
  ExpectTensor(InferOn(PrimId::kConv2dBackpropInput, kF64,
                       {{2, 4, 4, 8}, {4, 3, 3, 2}, {2, 3, 7, 9}}, ConvAttrs({2, 1}, {1, 0})),
               kF64, {2, 3, 7, 9});
  // x_ref heights 7 and 8 both give OH = 4 with stride 2; the shape comes from x_ref.
  ExpectTensor(InferOn(PrimId::kConv2dBackpropInput, kF32,
                       {{2, 4, 4, 8}, {4, 3, 3, 2}, {2, 3, 8, 9}}, ConvAttrs({2, 1}, {1, 0})),
               kF32, {2, 3, 8, 9});
}

TEST(Conv2dBackpropInputInferTest, UnknownDimsAreRefinedFromDyAndW) {
  ExpectTensor(
      InferOn(PrimId::kConv2dBackpropInput, kF32, {{2, 6, kU, 8}, {6, 2, 3, 2}, {kU, kU, kU, 9}},
              ConvAttrs({1, 1}, {0, 0}, {1, 1}, 3)),
      kF32, {2, 6, kU, 9});
}

TEST(Conv2dBackpropInputInferTest, Errors) {
  auto w = T(kF32, {4, 3, 3, 2});
  auto x = T(kF32, {2, 3, 7, 9});
  ExpectError(InferOp(PrimId::kConv2dBackpropInput, {T(kF32, {2, 4, 5, 8}), w, x},
                      ConvAttrs({2, 1}, {1, 0})),
              "input 0 must be shaped [2,4,4,8] (the conv2d output of inputs 2 and 1)");
  ExpectError(InferOp(PrimId::kConv2dBackpropInput,
                      {T(kF32, {2, 4, 4, 8}), w, T(kF64, {2, 3, 7, 9})}, ConvAttrs({2, 1}, {1, 0})),
              "input 2 must be a tensor of dtype f32");
  ExpectError(InferOp(PrimId::kConv2dBackpropInput, {T(kF32, {2, 4, 4, 8}), w, T(kF32, {7, 9})}),
              "input 2 must be a rank-4");
  ExpectError(
      InferOp(PrimId::kConv2dBackpropInput, {T(kF32, {2, 4, 4, 8}), T(kF32, {4, 2, 3, 2}), x}),
      "C/groups = 3");
}

// ----- conv2d_backprop_filter -------------------------------------------------------------
TEST(Conv2dBackpropFilterInferTest, ShapedLikeWRef) {
  ExpectTensor(InferOn(PrimId::kConv2dBackpropFilter, kF32,
                       {{2, 3, 7, 9}, {2, 4, 4, 8}, {4, 3, 3, 2}}, ConvAttrs({2, 1}, {1, 0})),
               kF32, {4, 3, 3, 2});
}

TEST(Conv2dBackpropFilterInferTest, UnknownDimsAreRefinedFromXAndDy) {
  ExpectTensor(
      InferOn(PrimId::kConv2dBackpropFilter, kF64, {{2, 6, 5, 5}, {2, 4, 3, 3}, {kU, kU, 3, kU}},
              ConvAttrs({1, 1}, {0, 0}, {1, 1}, 2)),
      kF64, {4, 3, 3, kU});
}

TEST(Conv2dBackpropFilterInferTest, Errors) {
  auto x = T(kF32, {2, 3, 7, 9});
  auto w = T(kF32, {4, 3, 3, 2});
  ExpectError(InferOp(PrimId::kConv2dBackpropFilter, {x, T(kF32, {2, 5, 4, 8}), w},
                      ConvAttrs({2, 1}, {1, 0})),
              "input 1 must be shaped [2,4,4,8] (the conv2d output of inputs 0 and 2)");
  ExpectError(InferOp(PrimId::kConv2dBackpropFilter, {x, T(kF64, {2, 4, 4, 8}), w}),
              "input 1 must be a tensor of dtype f32");
  ExpectError(InferOp(PrimId::kConv2dBackpropFilter, {x, T(kF32, {2, 4, 5, 8}), w},
                      ConvAttrs({1, 1}, {0, 0}, {1, 1}, 2)),
              "divisible by groups=2");
}

// ----- Pooling ------------------------------------------------------------------------------
TEST(MaxPool2dInferTest, StrideDefaultsToKernel) {
  ExpectTensor(InferOp(PrimId::kMaxPool2d, {T(kF32, {1, 3, 7, 8})}, PoolAttrs({2, 2})), kF32,
               {1, 3, 3, 4});
}

TEST(MaxPool2dInferTest, StrideAndAsymmetricPadding) {
  // OH = (6 + 1 + 0 - 3) / 2 + 1 = 3; OW = (5 + 2 + 2 - 3) / 1 + 1 = 7.
  ExpectTensor(
      InferOp(PrimId::kMaxPool2d, {T(kF64, {2, 1, 6, 5})}, PoolAttrs({3, 3}, {2, 1}, {1, 0, 2, 2})),
      kF64, {2, 1, 3, 7});
}

TEST(MaxPool2dInferTest, UnknownDimsPropagate) {
  ExpectTensor(InferOp(PrimId::kMaxPool2d, {T(kF32, {kU, 3, kU, 8})}, PoolAttrs({2, 2})), kF32,
               {kU, 3, kU, 4});
}

TEST(MaxPool2dInferTest, WindowsEntirelyInPaddingAreErrors) {
  ExpectError(
      InferOp(PrimId::kMaxPool2d, {T(kF32, {1, 1, 6, 6})}, PoolAttrs({2, 2}, {1, 1}, {2, 0})),
      "first pooling window along the height lies entirely in the padding");
  // Decidable even with an unknown height.
  ExpectError(
      InferOp(PrimId::kMaxPool2d, {T(kF32, {1, 1, kU, 6})}, PoolAttrs({2, 2}, {1, 1}, {2, 0})),
      "entirely in the padding");
  // Kernel 1, bottom padding 1: the last window reads only the padding row.
  ExpectError(
      InferOp(PrimId::kMaxPool2d, {T(kF32, {1, 1, 3, 6})}, PoolAttrs({1, 1}, {1, 1}, {0, 1, 0, 0})),
      "last pooling window along the height starts at 3, past the input height 3");
  // Bottom padding >= kernel is fine when the stride skips the padding.
  ExpectTensor(
      InferOp(PrimId::kMaxPool2d, {T(kF32, {1, 1, 5, 6})}, PoolAttrs({2, 2}, {3, 2}, {0, 2, 0, 0})),
      kF32, {1, 1, 2, 3});
}

TEST(MaxPool2dInferTest, Errors) {
  ExpectError(InferOp(PrimId::kMaxPool2d, {T(kF32, {1, 1, 2, 6})}, PoolAttrs({3, 3})),
              "padded input height 2 (2 + 0 + 0) is smaller than the kernel height 3");
  ExpectError(InferOp(PrimId::kMaxPool2d, {T(kF32, {1, 1, 6, 6})}, PoolAttrs({0, 3})),
              "attribute 'kernel' must be 2 values");
  ExpectError(InferOp(PrimId::kMaxPool2d, {T(kF32, {1, 1, 6, 6})}, PoolAttrs({2, 2, 2})),
              "attribute 'kernel'");
  ExpectError(InferOp(PrimId::kMaxPool2d, {T(kF32, {1, 1, 6, 6})}, PoolAttrs({2, 2}, {0, 1})),
              "attribute 'stride'");
  ExpectError(
      InferOp(PrimId::kMaxPool2d, {T(kF32, {1, 1, 6, 6})}, PoolAttrs({2, 2}, {}, {1, 1, 1})),
      "attribute 'padding'");
  ExpectError(InferOp(PrimId::kMaxPool2d, {T(kF32, {6, 6})}, PoolAttrs({2, 2})), "rank-3, 4 or 5");
  ExpectError(InferOp(PrimId::kMaxPool2d, {T(kF32, {1, 1, 6, 6, 6})}, PoolAttrs({2, 2})),
              "attribute 'kernel' must be 3 values (one per spatial axis)");
  ExpectError(InferOp(PrimId::kMaxPool2d, {T(DType::kInt64, {1, 1, 6, 6})}, PoolAttrs({2, 2})),
              "floating-point");
  ExpectFailure(InferOp(PrimId::kMaxPool2d, {T(kF32, {1, 1, 6, 6})}), {"needs attribute 'kernel'"});
}

TEST(MaxPool2dGradInferTest, ShapedLikeX) {
  ExpectTensor(InferPool2(PrimId::kMaxPool2dGrad, T(kF32, {1, 3, 7, 8}), T(kF32, {1, 3, 3, 4})),
               kF32, {1, 3, 7, 8});
  ExpectTensor(InferPool2(PrimId::kMaxPool2dGrad, T(kF64, {kU, kU, 7, kU}), T(kF64, {2, 3, 3, 4})),
               kF64, {2, 3, 7, kU});
}

// The errors of a two-input pooling primitive with a 2x2 kernel: operands, message.
struct PoolError {
  AbstractPtr a, b;
  std::string text;
};
void ExpectPoolErrors(PrimId id, const std::vector<PoolError>& errors) {
  for (const PoolError& e : errors) ExpectError(InferPool2(id, e.a, e.b), e.text);
}

TEST(MaxPool2dGradInferTest, Errors) {
  ExpectPoolErrors(PrimId::kMaxPool2dGrad,
                   {{T(kF32, {1, 3, 7, 8}), T(kF32, {1, 3, 3, 3}),
                     "input 1 must be shaped [1,3,3,4] (the pooled shape of input 0)"},
                    {T(kF32, {1, 3, 7, 8}), T(kF64, {1, 3, 3, 4}), "dtype f32"}});
}

TEST(MaxPool2dGradGradInferTest, ShapedLikeY) {
  ExpectTensor(InferPool2(PrimId::kMaxPool2dGradGrad, T(kF32, {1, 3, 7, 8}), T(kF32, {1, 3, 7, 8}),
                          PoolAttrs({3, 3}, {2, 2})),
               kF32, {1, 3, 3, 3});
  // Unknown dims of x are filled from ddx.
  ExpectTensor(InferPool2(PrimId::kMaxPool2dGradGrad, T(kF32, {kU, 3, kU, 8}),
                          T(kF32, {2, kU, 7, kU}), PoolAttrs({3, 3}, {2, 2})),
               kF32, {2, 3, 3, 3});
}

TEST(MaxPool2dGradGradInferTest, Errors) {
  ExpectPoolErrors(PrimId::kMaxPool2dGradGrad,
                   {{T(kF32, {1, 3, 7, 8}), T(kF32, {1, 3, 7, 9}),
                     "input 1 must be shaped [1,3,7,8] (like input 0)"},
                    {T(kF64, {1, 3, 7, 8}), T(kF32, {1, 3, 7, 8}), "dtype f64"}});
}

TEST(AvgPool2dInferTest, ShapeAndCountIncludePad) {
  AttrMap a = PoolAttrs({3, 2}, {1, 2}, {1, 1});
  ExpectTensor(InferOp(PrimId::kAvgPool2d, {T(kF64, {2, 3, 5, 6})}, a), kF64, {2, 3, 5, 4});
  a["count_include_pad"] = AttrValue(false);
  ExpectTensor(InferOp(PrimId::kAvgPool2d, {T(kF32, {2, 3, 5, 6})}, a), kF32, {2, 3, 5, 4});
  ExpectError(InferOp(PrimId::kAvgPool2d, {T(kF32, {2, 3, 5, 6})}, PoolAttrs({2, 2}, {}, {2, 2})),
              "entirely in the padding");
}

TEST(AvgPool2dGradInferTest, ShapedLikeXRef) {
  ExpectTensor(InferPool2(PrimId::kAvgPool2dGrad, T(kF32, {2, 3, 2, 3}), T(kF32, {2, 3, 5, 6})),
               kF32, {2, 3, 5, 6});
  ExpectTensor(InferPool2(PrimId::kAvgPool2dGrad, T(kF32, {2, 3, kU, 3}), T(kF32, {kU, kU, 5, 6})),
               kF32, {2, 3, 5, 6});
  ExpectError(InferPool2(PrimId::kAvgPool2dGrad, T(kF32, {2, 3, 3, 3}), T(kF32, {2, 3, 5, 6})),
              "input 0 must be shaped [2,3,2,3] (the pooled shape of input 1)");
}

// ----- Definitions ---------------------------------------------------------------------------
TEST(ConvDefsTest, ArityAndFlags) {
  struct Expect {
    PrimId id;
    int inputs;
    bool linear;
  };
  for (const Expect& e :
       {Expect{PrimId::kConv2d, 2, false}, Expect{PrimId::kConv2dBackpropInput, 3, false},
        Expect{PrimId::kConv2dBackpropFilter, 3, false}, Expect{PrimId::kMaxPool2d, 1, false},
        Expect{PrimId::kMaxPool2dGrad, 2, true}, Expect{PrimId::kMaxPool2dGradGrad, 2, true},
        Expect{PrimId::kAvgPool2d, 1, true}, Expect{PrimId::kAvgPool2dGrad, 2, true}}) {
    const PrimitiveDef* d = DefaultRegistry().Find(e.id);
    ASSERT_NE(d, nullptr) << PrimIdName(e.id);
    EXPECT_EQ(d->min_inputs, e.inputs) << d->name;
    EXPECT_EQ(d->max_inputs, e.inputs) << d->name;
    EXPECT_EQ(d->linear, e.linear) << d->name;
    EXPECT_FALSE(d->zero_gradient) << d->name;
    EXPECT_FALSE(d->structural) << d->name;
    EXPECT_TRUE(d->zero_gradient || d->bprop != nullptr) << d->name;  // rules: tests/ad/
  }
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
