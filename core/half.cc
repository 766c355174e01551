#include "core/half.h"

#include <cstring>

namespace kgrad {

float HalfBitsToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      man <<= 1;
      ++e;
    } while ((man & 0x400) == 0);
    bits = sign | ((112 - e) << 23) | ((man & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

namespace {

// `full` >> `shift`, rounded to nearest with ties to even.
uint64_t ShiftRoundEven(uint64_t full, int shift) {
  const uint64_t q = full >> shift, rem = full & ((uint64_t{1} << shift) - 1);
  const uint64_t halfway = uint64_t{1} << (shift - 1);
  return (rem > halfway || (rem == halfway && (q & 1))) ? q + 1 : q;
}

}  // namespace

uint16_t DoubleToHalfBits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof(b));
  const uint16_t sign = static_cast<uint16_t>((b >> 48) & 0x8000);
  const uint64_t abs = b & 0x7fffffffffffffffULL;
  constexpr uint64_t kInfBits = 0x7ff0000000000000ULL;
  if (abs > kInfBits) return sign | 0x7e00 | static_cast<uint16_t>((abs >> 42) & 0x1ff);  // quiet NaN
  const int exp = static_cast<int>(abs >> 52) - 1023;
  if (exp > 15) return sign | 0x7c00;  // infinity, or too large: overflows to infinity
  const uint64_t full = (uint64_t{1} << 52) | (abs & ((uint64_t{1} << 52) - 1));
  if (exp >= -14) {
    // Normal: 10 mantissa bits; a carry out of the mantissa bumps the exponent,
    // up to 0x7c00 (infinity) past the largest half, as it should.
    const uint64_t m = ShiftRoundEven(full, 42);  // includes the implicit bit (1 << 10)
    return sign | static_cast<uint16_t>(((exp + 14) << 10) + m);
  }
  if (exp < -25) return sign;  // below half the smallest subnormal: zero
  // Subnormal, in units of 2^-24; rounding up to 0x400 gives the smallest normal.
  return sign | static_cast<uint16_t>(ShiftRoundEven(full, 28 - exp));
}

float BFloat16BitsToFloat(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

uint16_t FloatToBFloat16Bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof(u));
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

}  // namespace kgrad
