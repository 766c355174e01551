// Float16 and BFloat16 conversions against exact references: every half value
// widens exactly and narrows back to itself; doubles round to nearest, ties to
// even, through subnormals and up to overflow; NaN stays NaN.
#include "core/half.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "gtest/gtest.h"

namespace kgrad {
namespace {

// The reference: half's value from its fields, by the IEEE formula.
double HalfValue(uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return man ? std::nan("") : sign * std::numeric_limits<double>::infinity();
  if (exp == 0) return sign * std::ldexp(man, -24);
  return sign * std::ldexp(1024 + man, exp - 25);
}

TEST(HalfTest, EveryFloat16WidensExactlyAndRoundTrips) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const double want = HalfValue(h);
    const float got = HalfBitsToFloat(h);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << b;
      EXPECT_EQ(DoubleToHalfBits(got) & 0x7e00, 0x7e00) << b;  // still a (quiet) NaN
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), want) << b;
    EXPECT_EQ(DoubleToHalfBits(want), h) << b;
  }
}

TEST(HalfTest, DoublesRoundToNearestEven) {
  const double ulp1 = std::ldexp(1.0, -10);  // the spacing of halves in [1, 2)
  EXPECT_EQ(DoubleToHalfBits(1 + ulp1 / 2), 0x3c00);              // tie: to even (1)
  EXPECT_EQ(DoubleToHalfBits(1 + 1.5 * ulp1), 0x3c02);            // tie: to even (1 + 2 ulp)
  EXPECT_EQ(DoubleToHalfBits(1 + ulp1 / 2 + 1e-12), 0x3c01);      // past the tie: up
  EXPECT_EQ(DoubleToHalfBits(-(1 + ulp1 / 2 + 1e-12)), 0xbc01);   // the sign is kept
  // A double rounds once: via float, 1 + 2^-11 + 2^-30 would become a tie.
  EXPECT_EQ(DoubleToHalfBits(1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30)), 0x3c01);
  // Overflow: 65504 is the largest half; from 65520 (the midpoint to 2^16) up, infinity.
  EXPECT_EQ(DoubleToHalfBits(65504), 0x7bff);
  EXPECT_EQ(DoubleToHalfBits(65519.99), 0x7bff);
  EXPECT_EQ(DoubleToHalfBits(65520), 0x7c00);
  EXPECT_EQ(DoubleToHalfBits(1e300), 0x7c00);
  EXPECT_EQ(DoubleToHalfBits(-std::numeric_limits<double>::infinity()), 0xfc00);
  // Subnormals: 2^-24 is the smallest; half of it is a tie to 0, a bit more is 2^-24.
  EXPECT_EQ(DoubleToHalfBits(std::ldexp(1.0, -24)), 0x0001);
  EXPECT_EQ(DoubleToHalfBits(std::ldexp(1.0, -25)), 0x0000);
  EXPECT_EQ(DoubleToHalfBits(std::ldexp(1.0, -25) * 1.0001), 0x0001);
  EXPECT_EQ(DoubleToHalfBits(std::ldexp(3.0, -25)), 0x0002);  // 1.5 units: tie to even (2)
  EXPECT_EQ(DoubleToHalfBits(-std::ldexp(1.0, -30)), 0x8000);   // -0
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(DoubleToHalfBits(std::ldexp(1.0, -14) - std::ldexp(1.0, -26)), 0x0400);
}

TEST(HalfTest, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16Bits(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16BitsToFloat(0xc040), -3.0f);
  const float ulp1 = std::ldexp(1.0f, -7);
  EXPECT_EQ(FloatToBFloat16Bits(1 + ulp1 / 2), 0x3f80);          // tie: to even
  EXPECT_EQ(FloatToBFloat16Bits(1 + 1.5f * ulp1), 0x3f82);       // tie: to even
  EXPECT_EQ(FloatToBFloat16Bits(1 + ulp1 / 2 + ulp1 / 8), 0x3f81);
  // ONNX's test value 0.48033667: truncation would give 0x3ef5, rounding 0x3ef6.
  EXPECT_EQ(FloatToBFloat16Bits(0.48033667f), 0x3ef6);
  EXPECT_EQ(FloatToBFloat16Bits(std::numeric_limits<float>::max()), 0x7f80);  // overflows
  EXPECT_EQ(FloatToBFloat16Bits(-std::numeric_limits<float>::infinity()), 0xff80);
  const uint16_t nan = FloatToBFloat16Bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(BFloat16BitsToFloat(nan)));
  // A signalling NaN whose payload sits in the dropped bits stays a NaN.
  uint32_t snan_bits = 0x7f800001;
  float snan;
  std::memcpy(&snan, &snan_bits, sizeof(snan));
  EXPECT_TRUE(std::isnan(BFloat16BitsToFloat(FloatToBFloat16Bits(snan))));
}

TEST(HalfTest, DTypeFacts) {
  EXPECT_EQ(DTypeSize(DType::kFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kUInt64), 8u);
  EXPECT_STREQ(DTypeName(DType::kBFloat16), "bf16");
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType t = static_cast<DType>(i);
    absl::StatusOr<DType> back = DTypeFromName(DTypeName(t));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, t);
  }
  EXPECT_FALSE(DTypeFromName("f8").ok());
  EXPECT_TRUE(IsDifferentiable(DType::kFloat16));
  EXPECT_FALSE(IsFloating(DType::kFloat16));
  EXPECT_FALSE(IsDifferentiable(DType::kUInt8));
  EXPECT_TRUE(IsAnyInteger(DType::kInt16) && IsUnsigned(DType::kUInt32) && !IsUnsigned(DType::kInt8));
}

}  // namespace
}  // namespace kgrad
