// Inference tests of the elementwise primitives: result dtypes and shapes,
// broadcasting with unknown dims, flags, and the error cases.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
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

constexpr DType kU8 = DType::kUInt8, kI8 = DType::kInt8, kI16 = DType::kInt16,
                kU16 = DType::kUInt16, kU32 = DType::kUInt32, kU64 = DType::kUInt64,
                kF16 = DType::kFloat16, kBF16 = DType::kBFloat16;
const std::vector<DType> kAllDTypes = {kF32, kF64, kI32, kI64, kBool, kU8,  kI8,
                                       kI16, kU16, kU32, kU64, kF16,  kBF16};

struct OpCase {
  PrimId id;
  std::vector<DType> accepted;
};

const std::vector<DType> kNumeric = {kF32, kF64, kI32, kI64};
const std::vector<DType> kFloat = {kF32, kF64};
// The integer maps also take the narrow integers (they wrap like i32); the
// arithmetic and comparisons take every type but bool (halves compute in f32).
const std::vector<DType> kIntegerMaps = {kF32, kF64, kI32, kI64, kU8, kI8, kI16, kU16, kU32, kU64};
const std::vector<DType> kWide = {kF32, kF64, kI32, kI64, kU8, kI8, kI16, kU16, kU32, kU64, kF16, kBF16};
const std::vector<DType> kUnsigned = {kU8, kU16, kU32, kU64};

const std::vector<OpCase>& UnaryCases() {
  static const auto* cases = new std::vector<OpCase>{
      {PrimId::kNeg, kIntegerMaps},   {PrimId::kAbs, kIntegerMaps},
      {PrimId::kSign, kIntegerMaps},  {PrimId::kSquare, kIntegerMaps},
      {PrimId::kExp, kFloat},         {PrimId::kLog, kFloat},
      {PrimId::kLog1p, kFloat},       {PrimId::kExpm1, kFloat},
      {PrimId::kSin, kFloat},         {PrimId::kCos, kFloat},
      {PrimId::kTanh, kFloat},        {PrimId::kSigmoid, kFloat},
      {PrimId::kRelu, kFloat},        {PrimId::kGelu, kFloat},
      {PrimId::kSoftplus, kFloat},    {PrimId::kSqrt, kFloat},
      {PrimId::kRsqrt, kFloat},       {PrimId::kReciprocal, kFloat},
      {PrimId::kErf, kFloat},         {PrimId::kLogicalNot, {kBool}},
      {PrimId::kFloor, kFloat},       {PrimId::kCeil, kFloat},
      {PrimId::kRound, kFloat},       {PrimId::kAsin, kFloat},
      {PrimId::kAcos, kFloat},        {PrimId::kAtan, kFloat},
      {PrimId::kSinh, kFloat},        {PrimId::kCosh, kFloat},
      {PrimId::kAsinh, kFloat},       {PrimId::kAcosh, kFloat},
      {PrimId::kAtanh, kFloat},       {PrimId::kThresholdedRelu, {kF32, kF64, kF16, kBF16}},
  };
  return *cases;
}

// Binary ops with their accepted dtypes and whether the output is bool.
struct BinaryCase {
  PrimId id;
  std::vector<DType> accepted;
  bool bool_out;
};

const std::vector<BinaryCase>& BinaryCases() {
  static const auto* cases = new std::vector<BinaryCase>{
      {PrimId::kAdd, kWide, false},         {PrimId::kSub, kWide, false},
      {PrimId::kMul, kWide, false},         {PrimId::kDiv, kWide, false},
      {PrimId::kPow, kFloat, false},        {PrimId::kMaximum, kWide, false},
      {PrimId::kMinimum, kWide, false},     {PrimId::kEqual, kAllDTypes, true},
      {PrimId::kNotEqual, kAllDTypes, true}, {PrimId::kLess, kWide, true},
      {PrimId::kLessEqual, kWide, true},    {PrimId::kGreater, kWide, true},
      {PrimId::kGreaterEqual, kWide, true}, {PrimId::kLogicalAnd, {kBool}, true},
      {PrimId::kLogicalOr, {kBool}, true},  {PrimId::kMod, kWide, false},
      {PrimId::kTanhGrad, kFloat, false},   {PrimId::kSigmoidGrad, kFloat, false},
      {PrimId::kSinGrad, kFloat, false},    {PrimId::kCosGrad, kFloat, false},
      {PrimId::kReluGrad, kFloat, false},
  };
  return *cases;
}

bool Contains(const std::vector<DType>& v, DType t) {
  return std::find(v.begin(), v.end(), t) != v.end();
}

// Every elementwise primitive (kNeg .. kSelect in primitive_ids.inc) is covered.
TEST(ElementwiseInferTest, CasesCoverTheWholeFamily) {
  std::vector<PrimId> covered;
  for (const OpCase& c : UnaryCases()) covered.push_back(c.id);
  for (const BinaryCase& c : BinaryCases()) covered.push_back(c.id);
  covered.push_back(PrimId::kSelect);
  covered.push_back(PrimId::kBitShift);  // BitShiftTakesUnsignedAndADirection
  for (int i = static_cast<int>(PrimId::kNeg); i <= static_cast<int>(PrimId::kSelect); ++i) {
    PrimId id = static_cast<PrimId>(i);
    EXPECT_EQ(std::count(covered.begin(), covered.end(), id), 1) << PrimIdName(id);
    const PrimitiveDef* def = DefaultRegistry().Find(id);
    ASSERT_NE(def, nullptr) << PrimIdName(id);
    EXPECT_TRUE(def->zero_gradient || def->bprop != nullptr) << PrimIdName(id);  // rules: tests/ad/
  }
}

TEST(ElementwiseInferTest, UnaryKeepsDTypeAndShape) {
  for (const OpCase& c : UnaryCases()) {
    SCOPED_TRACE(PrimIdName(c.id));
    for (DType t : c.accepted) {
      ExpectTensor(InferOp(c.id, {T(t, {2, kU, 3})}), t, {2, kU, 3});
      ExpectTensor(InferOp(c.id, {T(t, {})}), t, {});
      ExpectTensor(InferOp(c.id, {T(t, {0, 4})}), t, {0, 4});
    }
  }
}

TEST(ElementwiseInferTest, UnaryRejectsOtherDTypes) {
  for (const OpCase& c : UnaryCases()) {
    SCOPED_TRACE(PrimIdName(c.id));
    for (DType t : kAllDTypes) {
      if (Contains(c.accepted, t)) continue;
      absl::StatusOr<AbstractPtr> r = InferOp(c.id, {T(t, {2, 3})});
      ExpectError(r, std::string(DTypeName(t)) + "[2,3]");
      ExpectError(r, "input 0 must be a " + std::string(DTypeName(c.accepted[0])));
    }
  }
}

TEST(ElementwiseInferTest, UnaryRejectsScalarsAndTuples) {
  for (const OpCase& c : UnaryCases()) {
    SCOPED_TRACE(PrimIdName(c.id));
    ExpectError(InferOp(c.id, {MakeAbstractScalar(c.accepted[0])}), "must be a tensor");
    ExpectError(InferOp(c.id, {MakeAbstractTuple({T(c.accepted[0], {2})})}),
                "must be a tensor");
  }
}

TEST(ElementwiseInferTest, GeluTakesTheApproximateAttribute) {
  ExpectTensor(InferOp(PrimId::kGelu, {T(kF32, {4})}, {{"approximate", true}}), kF32, {4});
  ExpectTensor(InferOp(PrimId::kGelu, {T(kF64, {4})}, {{"approximate", false}}), kF64, {4});
  absl::StatusOr<AbstractPtr> bad =
      InferOp(PrimId::kGelu, {T(kF32, {4})}, {{"approximate", std::string("yes")}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("approximate"));
  absl::StatusOr<AbstractPtr> unknown =
      InferOp(PrimId::kGelu, {T(kF32, {4})}, {{"mode", std::string("tanh")}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("mode"));
}

TEST(ElementwiseInferTest, ThresholdedReluTakesAFloatAlpha) {
  ExpectTensor(InferOp(PrimId::kThresholdedRelu, {T(kF32, {4})}), kF32, {4});
  ExpectTensor(InferOp(PrimId::kThresholdedRelu, {T(kF64, {2, kU})}, {{"alpha", -0.5}}), kF64,
               {2, kU});
  // An int alpha is read as a float (files say `1` for `1.0`); a string is refused.
  ExpectTensor(InferOp(PrimId::kThresholdedRelu, {T(kF32, {4})}, {{"alpha", int64_t{2}}}), kF32,
               {4});
  absl::StatusOr<AbstractPtr> bad =
      InferOp(PrimId::kThresholdedRelu, {T(kF32, {4})}, {{"alpha", std::string("1")}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("alpha"));
}

TEST(ElementwiseInferTest, BinaryOutputDTypes) {
  for (const BinaryCase& c : BinaryCases()) {
    SCOPED_TRACE(PrimIdName(c.id));
    for (DType t : c.accepted) {
      ExpectTensor(InferOp(c.id, {T(t, {2, 3}), T(t, {2, 3})}), c.bool_out ? kBool : t,
                   {2, 3});
    }
  }
}

TEST(ElementwiseInferTest, BinaryBroadcasts) {
  for (const BinaryCase& c : BinaryCases()) {
    SCOPED_TRACE(PrimIdName(c.id));
    DType t = c.accepted[0];
    DType out = c.bool_out ? kBool : t;
    ExpectTensor(InferOp(c.id, {T(t, {2, 1, 3}), T(t, {4, 1})}), out, {2, 4, 3});
    ExpectTensor(InferOp(c.id, {T(t, {}), T(t, {2, 3})}), out, {2, 3});
    ExpectTensor(InferOp(c.id, {T(t, {5}), T(t, {})}), out, {5});
    ExpectTensor(InferOp(c.id, {T(t, {0, 3}), T(t, {1, 3})}), out, {0, 3});
    ExpectTensor(InferOp(c.id, {T(t, {3, 1}), T(t, {1, 0})}), out, {3, 0});
  }
}

TEST(ElementwiseInferTest, BinaryPropagatesUnknownDims) {
  // ? with 1 stays ?, ? with n is n, ? with ? stays ?.
  ExpectTensor(InferOp(PrimId::kAdd, {T(kF32, {kU, 3}), T(kF32, {1, 3})}), kF32, {kU, 3});
  ExpectTensor(InferOp(PrimId::kAdd, {T(kF32, {kU, 3}), T(kF32, {5, 1})}), kF32, {5, 3});
  ExpectTensor(InferOp(PrimId::kMul, {T(kF32, {kU}), T(kF32, {kU})}), kF32, {kU});
  ExpectTensor(InferOp(PrimId::kLess, {T(kI64, {2, kU}), T(kI64, {kU, 1, 1})}), kBool,
               {kU, 2, kU});
  // A known mismatch beside an unknown dim is still an error.
  ExpectError(InferOp(PrimId::kAdd, {T(kF32, {kU, 3}), T(kF32, {kU, 4})}), "broadcast");
}

TEST(ElementwiseInferTest, BinaryRejectsMixedDTypesNamingBoth) {
  for (const BinaryCase& c : BinaryCases()) {
    SCOPED_TRACE(PrimIdName(c.id));
    DType a = c.accepted[0];
    DType b = a == kF64 ? kF32 : kF64;
    absl::StatusOr<AbstractPtr> r = InferOp(c.id, {T(a, {2}), T(b, {2})});
    ExpectError(r, "same dtype");
    ExpectError(r, std::string(DTypeName(a)) + " and " + DTypeName(b));
  }
}

TEST(ElementwiseInferTest, BinaryRejectsOtherDTypes) {
  for (const BinaryCase& c : BinaryCases()) {
    SCOPED_TRACE(PrimIdName(c.id));
    for (DType t : kAllDTypes) {
      if (Contains(c.accepted, t)) continue;
      ExpectError(InferOp(c.id, {T(t, {2}), T(t, {2})}),
                  "input 0 must be a " + std::string(DTypeName(c.accepted[0])));
    }
  }
}

TEST(ElementwiseInferTest, BinaryRejectsScalarsAndBadShapes) {
  for (const BinaryCase& c : BinaryCases()) {
    SCOPED_TRACE(PrimIdName(c.id));
    DType t = c.accepted[0];
    ExpectError(InferOp(c.id, {T(t, {2}), MakeAbstractScalar(t)}),
                "input 1 must be a tensor");
    ExpectError(InferOp(c.id, {MakeAbstractScalar(t), T(t, {2})}),
                "input 0 must be a tensor");
    absl::StatusOr<AbstractPtr> r = InferOp(c.id, {T(t, {2, 3}), T(t, {4, 3})});
    ExpectError(r, "broadcast");
    ExpectError(r, "[2,3]");
  }
}

TEST(ElementwiseInferTest, SelectBroadcastsAllThree) {
  ExpectTensor(InferOp(PrimId::kSelect, {T(kBool, {2, 1}), T(kF32, {1, 3}), T(kF32, {3})}),
               kF32, {2, 3});
  ExpectTensor(InferOp(PrimId::kSelect, {T(kBool, {}), T(kI64, {4}), T(kI64, {4})}), kI64,
               {4});
  ExpectTensor(InferOp(PrimId::kSelect, {T(kBool, {5, 1, 1}), T(kBool, {2, 1}), T(kBool, {3})}),
               kBool, {5, 2, 3});
  ExpectTensor(InferOp(PrimId::kSelect, {T(kBool, {kU, 3}), T(kF64, {1, 3}), T(kF64, {kU, 1})}),
               kF64, {kU, 3});
  ExpectTensor(InferOp(PrimId::kSelect, {T(kBool, {0, 3}), T(kF32, {3}), T(kF32, {1})}), kF32,
               {0, 3});
}

TEST(ElementwiseInferTest, SelectErrors) {
  ExpectError(InferOp(PrimId::kSelect, {T(kF32, {2}), T(kF32, {2}), T(kF32, {2})}),
              "input 0 must be a bool tensor, got f32[2]");
  absl::StatusOr<AbstractPtr> mixed =
      InferOp(PrimId::kSelect, {T(kBool, {2}), T(kF32, {2}), T(kI32, {2})});
  ExpectError(mixed, "inputs 1 and 2 must have the same dtype");
  ExpectError(mixed, "f32 and i32");
  ExpectError(InferOp(PrimId::kSelect, {T(kBool, {4}), T(kF32, {3}), T(kF32, {3})}),
              "broadcast");
  ExpectError(InferOp(PrimId::kSelect, {T(kBool, {3}), T(kF32, {2, 3}), T(kF32, {4, 3})}),
              "broadcast");
  ExpectError(InferOp(PrimId::kSelect, {MakeAbstractScalar(kBool), T(kF32, {3}), T(kF32, {3})}),
              "input 0 must be a tensor");
}

TEST(ElementwiseInferTest, ModTakesFmodAndBroadcasts) {
  ExpectTensor(InferOp(PrimId::kMod, {T(kI32, {2, 1}), T(kI32, {3})}, {{"fmod", true}}), kI32,
               {2, 3});
  ExpectTensor(InferOp(PrimId::kMod, {T(kF64, {kU}), T(kF64, {})}), kF64, {kU});
  ExpectError(InferOp(PrimId::kMod, {T(kF32, {2}), T(kF64, {2})}), "same dtype");
  ExpectError(InferOp(PrimId::kMod, {T(kI64, {2}), T(kI64, {3})}), "broadcast");
  ExpectError(InferOp(PrimId::kMod, {T(kF32, {2}), T(kF32, {2})}, {{"fmod", int64_t{1}}}),
              "fmod");
  const PrimitiveDef* def = DefaultRegistry().Find(PrimId::kMod);
  ASSERT_NE(def, nullptr);
  EXPECT_NE(def->bprop, nullptr);
}

TEST(ElementwiseInferTest, BitShiftTakesUnsignedAndADirection) {
  for (DType t : kAllDTypes) {
    SCOPED_TRACE(DTypeName(t));
    for (const char* d : {"left", "right"}) {
      absl::StatusOr<AbstractPtr> r =
          InferOp(PrimId::kBitShift, {T(t, {2, 1}), T(t, {3})}, {{"direction", std::string(d)}});
      if (Contains(kUnsigned, t)) {
        ExpectTensor(r, t, {2, 3});
      } else {
        ExpectError(r, "input 0 must be a u8");
      }
    }
  }
  ExpectError(InferOp(PrimId::kBitShift, {T(kU8, {2}), T(kU8, {2})}, {{"direction", std::string("up")}}),
              "'direction' must be \"left\" or \"right\", got \"up\"");
  ExpectError(InferOp(PrimId::kBitShift, {T(kU8, {2}), T(kU16, {2})}, {{"direction", std::string("left")}}),
              "same dtype");
  ExpectError(InferOp(PrimId::kBitShift, {T(kU32, {2}), T(kU32, {3})}, {{"direction", std::string("left")}}),
              "broadcast");
}

TEST(ElementwiseInferTest, GradientFlags) {
  const std::vector<PrimId> zero_grad = {
      PrimId::kSign,         PrimId::kLogicalNot, PrimId::kEqual,     PrimId::kNotEqual,
      PrimId::kLess,         PrimId::kLessEqual,  PrimId::kGreater,   PrimId::kGreaterEqual,
      PrimId::kLogicalAnd,   PrimId::kLogicalOr,  PrimId::kFloor,     PrimId::kCeil,
      PrimId::kRound,        PrimId::kBitShift};
  const std::vector<PrimId> linear = {PrimId::kNeg, PrimId::kAdd, PrimId::kSub,
                                      PrimId::kSelect};
  for (int i = static_cast<int>(PrimId::kNeg); i <= static_cast<int>(PrimId::kSelect); ++i) {
    PrimId id = static_cast<PrimId>(i);
    const PrimitiveDef* def = DefaultRegistry().Find(id);
    ASSERT_NE(def, nullptr);
    EXPECT_EQ(def->zero_gradient, std::count(zero_grad.begin(), zero_grad.end(), id) == 1)
        << PrimIdName(id);
    EXPECT_EQ(def->linear, std::count(linear.begin(), linear.end(), id) == 1)
        << PrimIdName(id);
    EXPECT_FALSE(def->structural) << PrimIdName(id);
  }
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
