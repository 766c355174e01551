// Dim symbols (core/dim_symbol.h) and shape values (AbstractTensor::value).
#include "core/dim_symbol.h"

#include <string>

#include "core/abstract.h"
#include "core/shape.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kgrad {
namespace {

using ::testing::HasSubstr;

TEST(DimSymbolTest, ShortNamesAreExactAndRoundTrip) {
  for (const char* name : {"batch", "N", "seq_len", "batch_size", "T0", "_"}) {
    const int64_t d = DimSymbol(name);
    EXPECT_TRUE(IsSymbolDim(d)) << name;
    EXPECT_FALSE(IsKnownDim(d)) << name;
    EXPECT_EQ(DimToString(d), name);
    absl::StatusOr<int64_t> back = ParseDim(name);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, d);
  }
  EXPECT_NE(DimSymbol("batch"), DimSymbol("batcH"));
  EXPECT_NE(DimSymbol("a"), DimSymbol("a_"));
  EXPECT_EQ(DimSymbol("batch"), DimSymbol("batch"));
}

TEST(DimSymbolTest, LongAndOddNamesAreHashedAndParseBack) {
  const std::string names[] = {"sequence_length", "batch size", "1st", "?", "Transposex_dim_0"};
  for (const std::string& name : names) {
    const int64_t d = DimSymbol(name);
    EXPECT_TRUE(IsSymbolDim(d)) << name;
    const std::string printed = DimToString(d);
    EXPECT_THAT(printed, HasSubstr("~")) << name;
    absl::StatusOr<int64_t> back = ParseDim(printed);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, d) << printed;
  }
  EXPECT_EQ(DimToString(DimSymbol("sequence_length")).substr(0, 5), "sequ~");
  EXPECT_NE(DimSymbol("sequence_length"), DimSymbol("sequence_lengths"));
}

TEST(DimSymbolTest, NumbersAndUnknownParseAndPrint) {
  EXPECT_EQ(*ParseDim("0"), 0);
  EXPECT_EQ(*ParseDim("17"), 17);
  EXPECT_EQ(*ParseDim("?"), kUnknownDim);
  EXPECT_EQ(DimToString(kUnknownDim), "?");
  EXPECT_EQ(DimToString(kUnknownValue), "?");
  EXPECT_EQ(DimToString(-1 + 0), "?");
  EXPECT_FALSE(IsSymbolDim(kUnknownDim));
  EXPECT_FALSE(IsSymbolDim(kUnknownValue));
  EXPECT_FALSE(IsSymbolDim(-9223372036854775807LL));  // a slice end, not a symbol
  for (const char* bad : {"", "-3", "3x", "a b", "toolongname1", "~12", "abcde~000000001"}) {
    EXPECT_FALSE(ParseDim(bad).ok()) << bad;
  }
}

TEST(DimSymbolTest, ShapesPrintSymbolNames) {
  EXPECT_EQ(ShapeToString({DimSymbol("batch"), 3, kUnknownDim}), "[batch,3,?]");
  EXPECT_EQ(MakeAbstractTensor(DType::kFloat32, {DimSymbol("n"), 4})->ToString(), "f32[n,4]");
}

TEST(DimSymbolTest, BroadcastingKeepsSymbols) {
  const int64_t b = DimSymbol("batch"), s = DimSymbol("seq");
  EXPECT_EQ(*BroadcastShapes({b, 3}, {b, 1}), (Shape{b, 3}));
  EXPECT_EQ(*BroadcastShapes({b, 3}, {3}), (Shape{b, 3}));
  EXPECT_EQ(*BroadcastShapes({1, 3}, {b, 3}), (Shape{b, 3}));
  EXPECT_EQ(*BroadcastShapes({b}, {5}), (Shape{5}));           // b must be 1 or 5
  EXPECT_EQ(*BroadcastShapes({b}, {kUnknownDim}), (Shape{b}));  // ? is 1 or b
  EXPECT_EQ(*BroadcastShapes({b}, {s}), (Shape{kUnknownDim}));  // either may be 1
  EXPECT_FALSE(BroadcastShapes({2}, {3}).ok());
}

TEST(DimSymbolTest, UnifyPrefersNumbersThenSymbols) {
  const int64_t b = DimSymbol("batch");
  EXPECT_EQ(UnifyDims(b, 4), 4);
  EXPECT_EQ(UnifyDims(kUnknownDim, b), b);
  EXPECT_EQ(UnifyDims(b, kUnknownDim), b);
  EXPECT_EQ(UnifyDims(b, b), b);
  EXPECT_EQ(UnifyDims(3, 3), 3);
  EXPECT_FALSE(UnifyDims(3, 4).has_value());
}

TEST(ShapeValueTest, CarriedComparedJoinedAndBroadened) {
  const int64_t b = DimSymbol("batch");
  AbstractPtr v1 = MakeAbstractShapeValue(DType::kInt64, {3}, {b, 4, -1});
  AbstractPtr v2 = MakeAbstractShapeValue(DType::kInt64, {3}, {b, 5, -1});
  ASSERT_TRUE(AsTensor(v1)->value().has_value());
  EXPECT_EQ(v1->ToString(), "i64[3]=[batch,4,-1]");
  EXPECT_FALSE(AbstractEquals(v1, v2));
  EXPECT_NE(AbstractHash(v1), AbstractHash(v2));
  EXPECT_TRUE(AbstractEquals(v1, MakeAbstractShapeValue(DType::kInt64, {3}, {b, 4, -1})));
  absl::StatusOr<AbstractPtr> j = Join(v1, v2);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)->ToString(), "i64[3]=[batch,?,-1]");
  EXPECT_EQ(Broaden(v1)->ToString(), "i64[3]");
  // Not a small integer vector, or nothing known: no value.
  EXPECT_FALSE(AsTensor(MakeAbstractShapeValue(DType::kFloat32, {1}, {2}))->value().has_value());
  EXPECT_FALSE(AsTensor(MakeAbstractShapeValue(DType::kInt64, {2}, {kUnknownValue, kUnknownValue}))
                   ->value()
                   .has_value());
  EXPECT_FALSE(AsTensor(MakeAbstractShapeValue(DType::kInt64, {2, 1}, {1, 2}))->value().has_value());
  EXPECT_EQ(MakeAbstractShapeValue(DType::kInt32, {}, {7})->ToString(), "i32[]=7");
}

}  // namespace
}  // namespace kgrad
