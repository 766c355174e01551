// The storage dtypes (u8, i8, i16, u16, u32, u64, f16, bf16) in the CPU kernels
// that take them: cast between every pair of the 13 dtypes against the conversion
// rules written out here, the integer arithmetic's wrapping (including the cases
// where C++'s promotion to int or a naive `b == -1` test would go wrong), the
// 16-bit floats computed in float and rounded once, and the refusals of the ops
// that take only the compute types.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/primitive.h"
#include "core/tensor.h"
#include "core/value.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

// A rank-1 tensor of `t` holding `v` (each value representable in t).
Tensor Of(DType t, const std::vector<double>& v) {
  Tensor x = Tensor::Create(t, {static_cast<int64_t>(v.size())}).value();
  DispatchDType(t, [&](auto zero) {
    using V = decltype(zero);
    for (size_t i = 0; i < v.size(); ++i) x.mutable_data<V>()[i] = static_cast<V>(v[i]);
  });
  return x;
}

template <typename V>
Tensor Exact(std::vector<V> v) {
  return Tensor::FromVector<V>({static_cast<int64_t>(v.size())}, v);
}

std::vector<double> Values(const Tensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.NumElements(); ++i) out.push_back(t.ElementAsDouble(i));
  return out;
}

Tensor CastTo(const Tensor& x, DType to) { return RunOk(PrimId::kCast, {Value(x)}, {{"dtype", to}}); }

TEST(NarrowDTypeKernelTest, CastBetweenEveryPairKeepsSmallValues) {
  for (int a = 0; a < kNumDTypes; ++a) {
    for (int b = 0; b < kNumDTypes; ++b) {
      const DType from = static_cast<DType>(a), to = static_cast<DType>(b);
      const std::vector<double> in = from == DType::kBool ? std::vector<double>{0, 1, 1}
                                                          : std::vector<double>{0, 1, 2, 5, 100};
      Tensor y = CastTo(Of(from, in), to);
      ASSERT_EQ(y.dtype(), to) << DTypeName(from) << "->" << DTypeName(to);
      std::vector<double> want = in;
      if (to == DType::kBool) {
        for (double& w : want) w = w != 0;
      }
      EXPECT_EQ(Values(y), want) << DTypeName(from) << "->" << DTypeName(to);
    }
  }
}

TEST(NarrowDTypeKernelTest, CastIntegersWrapAndFloatsSaturate) {
  // Integer to integer: modulo 2^bits, two's complement (NumPy's astype).
  EXPECT_EQ(Values(CastTo(Exact<int32_t>({300, -1, 128}), DType::kUInt8)),
            (std::vector<double>{44, 255, 128}));
  EXPECT_EQ(Values(CastTo(Exact<int32_t>({128, -129, 65535}), DType::kInt8)),
            (std::vector<double>{-128, 127, -1}));
  EXPECT_EQ(Values(CastTo(Exact<int64_t>({-1}), DType::kUInt16)), (std::vector<double>{65535}));
  Tensor big = CastTo(Exact<uint64_t>({uint64_t{1} << 63}), DType::kInt64);
  EXPECT_EQ(big.data<int64_t>()[0], std::numeric_limits<int64_t>::min());
  // Float to integer: toward zero, saturating, NaN to 0 (backends/cpu/convert.h).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(Values(CastTo(Of(DType::kFloat32, {300.7, -5, 2.9, nan}), DType::kUInt8)),
            (std::vector<double>{255, 0, 2, 0}));
  EXPECT_EQ(Values(CastTo(Of(DType::kFloat64, {-200.5, 1e10}), DType::kInt8)),
            (std::vector<double>{-128, 127}));
  // 16-bit floats from f16 go through float exactly.
  EXPECT_EQ(Values(CastTo(Of(DType::kFloat16, {-2.5, 65504}), DType::kInt32)),
            (std::vector<double>{-2, 65504}));
}

TEST(NarrowDTypeKernelTest, CastToHalvesRoundsToNearestEven) {
  const double tie = 1 + std::ldexp(1.0, -11);  // halfway between two halves
  Tensor h = CastTo(Of(DType::kFloat64, {tie, 1 + 3 * std::ldexp(1.0, -11), 70000, 1e-9}), DType::kFloat16);
  EXPECT_EQ(h.data<Float16>()[0].bits, 0x3c00);  // to even: 1
  EXPECT_EQ(h.data<Float16>()[1].bits, 0x3c02);  // to even: 1 + 2^-9
  EXPECT_EQ(h.data<Float16>()[2].bits, 0x7c00);  // overflow: infinity
  EXPECT_EQ(h.data<Float16>()[3].bits, 0x0000);  // below half the least subnormal
  Tensor b = CastTo(Of(DType::kFloat32, {0.48033667, 1 + std::ldexp(1.0, -8)}), DType::kBFloat16);
  EXPECT_EQ(b.data<BFloat16>()[0].bits, 0x3ef6);
  EXPECT_EQ(b.data<BFloat16>()[1].bits, 0x3f80);  // a tie: to even
  // Half to half goes through float, exactly where the target can hold the value.
  EXPECT_EQ(Values(CastTo(Of(DType::kBFloat16, {-3, 0.5}), DType::kFloat16)),
            (std::vector<double>{-3, 0.5}));
}

TEST(NarrowDTypeKernelTest, IntegerArithmeticWraps) {
  auto run = [](PrimId id, const Tensor& a, const Tensor& b, AttrMap attrs = {}) {
    return Values(RunOk(id, {Value(a), Value(b)}, std::move(attrs)));
  };
  const Tensor a8 = Exact<uint8_t>({250, 7, 0}), b8 = Exact<uint8_t>({10, 255, 1});
  EXPECT_EQ(run(PrimId::kAdd, a8, b8), (std::vector<double>{4, 6, 1}));
  EXPECT_EQ(run(PrimId::kSub, a8, b8), (std::vector<double>{240, 8, 255}));
  EXPECT_EQ(run(PrimId::kMul, a8, b8), (std::vector<double>{196, 249, 0}));
  // uint16 * uint16 promotes to int in C++, where 65535 * 65535 overflows.
  EXPECT_EQ(run(PrimId::kMul, Exact<uint16_t>({65535, 300}), Exact<uint16_t>({65535, 300})),
            (std::vector<double>{1, 24464}));
  // int8: -128 / -1 and -128 * -1 wrap to -128; division truncates toward zero.
  EXPECT_EQ(run(PrimId::kDiv, Exact<int8_t>({-128, -7, 7}), Exact<int8_t>({-1, 2, -2})),
            (std::vector<double>{-128, -3, -3}));
  EXPECT_EQ(run(PrimId::kMul, Exact<int8_t>({-128}), Exact<int8_t>({-1})), (std::vector<double>{-128}));
  // uint32: dividing by 0xffffffff is not dividing by -1.
  EXPECT_EQ(run(PrimId::kDiv, Exact<uint32_t>({0xfffffffeu, 0xffffffffu}), Exact<uint32_t>({0xffffffffu, 0xffffffffu})),
            (std::vector<double>{0, 1}));
  EXPECT_EQ(run(PrimId::kMod, Exact<uint32_t>({5, 0xffffffffu}), Exact<uint32_t>({0xffffffffu, 10}),
                {{"fmod", false}}),
            (std::vector<double>{5, 5}));
  // Mod: the divisor's sign (Python) or the dividend's (C's fmod).
  EXPECT_EQ(run(PrimId::kMod, Exact<int16_t>({-7, 7}), Exact<int16_t>({3, -3}), {{"fmod", false}}),
            (std::vector<double>{2, -2}));
  EXPECT_EQ(run(PrimId::kMod, Exact<int16_t>({-7, 7}), Exact<int16_t>({3, -3}), {{"fmod", true}}),
            (std::vector<double>{-1, 1}));
  // Unsigned comparisons and max over the full range.
  const Tensor u64a = Exact<uint64_t>({(uint64_t{1} << 63) + 1, 3}), u64b = Exact<uint64_t>({1, 4});
  Tensor mx = RunOk(PrimId::kMaximum, {Value(u64a), Value(u64b)});
  EXPECT_EQ(mx.data<uint64_t>()[0], (uint64_t{1} << 63) + 1);
  EXPECT_EQ(mx.data<uint64_t>()[1], 4u);
  EXPECT_EQ(run(PrimId::kLess, u64a, u64b), (std::vector<double>{0, 1}));
  ExpectRunError(PrimId::kDiv, {Value(a8), Value(Exact<uint8_t>({1, 0, 2}))}, {}, "division by zero");
}

TEST(NarrowDTypeKernelTest, HalvesComputeInFloatAndRoundOnce) {
  const double u = std::ldexp(1.0, -11);
  Tensor s = RunOk(PrimId::kAdd, {Value(Of(DType::kFloat16, {1, 1 + 2 * u})), Value(Of(DType::kFloat16, {u, u}))});
  ASSERT_EQ(s.dtype(), DType::kFloat16);
  EXPECT_EQ(s.data<Float16>()[0].bits, 0x3c00);  // 1 + 2^-11: a tie, to even
  EXPECT_EQ(s.data<Float16>()[1].bits, 0x3c02);  // 1 + 3 * 2^-11: a tie, to even
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor m = RunOk(PrimId::kMaximum, {Value(Of(DType::kBFloat16, {nan, -2, 3})), Value(Of(DType::kBFloat16, {1, nan, 2}))});
  EXPECT_TRUE(std::isnan(m.ElementAsDouble(0)));
  EXPECT_TRUE(std::isnan(m.ElementAsDouble(1)));
  EXPECT_EQ(m.ElementAsDouble(2), 3);
  Tensor r = RunOk(PrimId::kMod, {Value(Of(DType::kFloat16, {-4.5, 7})), Value(Of(DType::kFloat16, {2, -3}))},
                   {{"fmod", false}});
  EXPECT_EQ(Values(r), (std::vector<double>{1.5, -2}));
  Tensor eq = RunOk(PrimId::kEqual, {Value(Of(DType::kBFloat16, {1, 2})), Value(Of(DType::kBFloat16, {1, 3}))});
  EXPECT_EQ(Values(eq), (std::vector<double>{1, 0}));
  Tensor sel = RunOk(PrimId::kSelect, {Value(Exact<bool>({true, false})), Value(Exact<uint16_t>({1, 2})),
                                       Value(Exact<uint16_t>({3, 4}))});
  EXPECT_EQ(Values(sel), (std::vector<double>{1, 4}));
}

TEST(NarrowDTypeKernelTest, BitShiftOnUnsignedIntegers) {
  auto shift = [](const Tensor& a, const Tensor& b, const char* d) {
    return Values(RunOk(PrimId::kBitShift, {Value(a), Value(b)}, {{"direction", std::string(d)}}));
  };
  // Naive reference: x * 2^y or floor(x / 2^y), modulo 2^8; 0 from a shift of 8 on.
  const Tensor x = Exact<uint8_t>({1, 3, 200, 255, 7}), y = Exact<uint8_t>({0, 2, 1, 7, 8});
  EXPECT_EQ(shift(x, y, "left"), (std::vector<double>{1, 12, 144, 128, 0}));
  EXPECT_EQ(shift(x, y, "right"), (std::vector<double>{1, 0, 100, 1, 0}));
  // Broadcast of the shift; u64 by 63 and by 64.
  Tensor big = RunOk(PrimId::kBitShift, {Value(Exact<uint64_t>({1, 3})), Value(Exact<uint64_t>({63}))},
                     {{"direction", std::string("left")}});
  EXPECT_EQ(big.data<uint64_t>()[0], uint64_t{1} << 63);
  EXPECT_EQ(big.data<uint64_t>()[1], uint64_t{1} << 63);
  EXPECT_EQ(shift(Exact<uint32_t>({0xffffffffu}), Exact<uint32_t>({64}), "right"), (std::vector<double>{0}));
  EXPECT_EQ(shift(Exact<uint16_t>({0x8001}), Exact<uint16_t>({15}), "right"), (std::vector<double>{1}));
  ExpectError(InferOp(PrimId::kBitShift, {T(DType::kInt32, {2}), T(DType::kInt32, {2})},
                      {{"direction", std::string("left")}}),
              "got i32[2]");
  ExpectError(InferOp(PrimId::kBitShift, {T(DType::kUInt8, {2}), T(DType::kUInt8, {2})},
                      {{"direction", std::string("up")}}),
              "must be \"left\" or \"right\"");
}

TEST(NarrowDTypeKernelTest, ComputeOnlyOpsRefuseStorageTypes) {
  ExpectError(InferOp(PrimId::kExp, {T(DType::kUInt8, {2})}), "got u8[2]");
  ExpectError(InferOp(PrimId::kSumTo, {T(DType::kFloat16, {2, 3})}, {{"shape", Ints{3}}}), "f32, f64, i32 or i64");
  ExpectError(InferOp(PrimId::kMatMul, {T(DType::kInt8, {2, 2}), T(DType::kInt8, {2, 2})}), "got i8[2,2]");
  ExpectError(InferOp(PrimId::kReduceSum, {T(DType::kBFloat16, {2})}, Axes({})), "got bf16[2]");
  EXPECT_EQ(Inferred(PrimId::kAdd, {T(DType::kUInt16, {2, 1}), T(DType::kUInt16, {3})}), "u16[2,3]");
  EXPECT_EQ(Inferred(PrimId::kLess, {T(DType::kFloat16, {2}), T(DType::kFloat16, {2})}), "bool[2]");
  EXPECT_EQ(Inferred(PrimId::kCast, {T(DType::kUInt64, {2})}, {{"dtype", DType::kBFloat16}}), "bf16[2]");
  ExpectError(InferOp(PrimId::kAdd, {T(DType::kUInt8, {2}), T(DType::kInt8, {2})}), "u8");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
