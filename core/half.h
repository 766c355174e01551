// IEEE binary16 (Float16) and bfloat16 (BFloat16) storage types. kgrad stores
// tensors of these types as ONNX and PyTorch do, and computes with them in float:
// a value converts to float exactly (implicitly, so comparisons and arithmetic on
// two halves are float operations), and a float or double converts back rounding
// to nearest, ties to even (what PyTorch, JAX and ONNX >= 1.14 do).
#ifndef KGRAD_CORE_HALF_H_
#define KGRAD_CORE_HALF_H_

#include <cstdint>

namespace kgrad {

float HalfBitsToFloat(uint16_t bits);
uint16_t DoubleToHalfBits(double v);
float BFloat16BitsToFloat(uint16_t bits);
uint16_t FloatToBFloat16Bits(float v);

struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  // From double directly, so that a double is rounded once (not via float).
  explicit Float16(double v) : bits(DoubleToHalfBits(v)) {}
  static Float16 FromBits(uint16_t b) {
    Float16 h;
    h.bits = b;
    return h;
  }
  operator float() const { return HalfBitsToFloat(bits); }  // NOLINT: exact widening
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  // Via float: every bfloat16 is a float, and a double rounded to float first can
  // only round differently for ties created by that first rounding (documented;
  // PyTorch's double->bfloat16 conversion does the same).
  explicit BFloat16(double v) : bits(FloatToBFloat16Bits(static_cast<float>(v))) {}
  static BFloat16 FromBits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  operator float() const { return BFloat16BitsToFloat(bits); }  // NOLINT: exact widening
};

}  // namespace kgrad

#endif  // KGRAD_CORE_HALF_H_
