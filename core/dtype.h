// Element types of tensors and scalars.
#ifndef KGRAD_CORE_DTYPE_H_
#define KGRAD_CORE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/half.h"

namespace kgrad {

enum class DType : uint8_t {
  kFloat32 = 0,
  kFloat64 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kBool = 4,
  // Storage types: tensors of these hold ONNX's and PyTorch's narrow types as they
  // are. Only the ops that list them in their dtype sets take them (cast, the
  // integer arithmetic, comparisons, data movement); IsFloating and IsInteger
  // stay the compute types, so AD and the float-only ops never see them.
  kUInt8 = 5,
  kInt8 = 6,
  kInt16 = 7,
  kUInt16 = 8,
  kUInt32 = 9,
  kUInt64 = 10,
  kFloat16 = 11,
  kBFloat16 = 12,
};

inline constexpr int kNumDTypes = 13;

size_t DTypeSize(DType t);
// Short name used by the printer and the CLI: f32, f64, i32, i64, bool, u8, i8,
// i16, u16, u32, u64, f16, bf16.
const char* DTypeName(DType t);
// The inverse of DTypeName.
absl::StatusOr<DType> DTypeFromName(absl::string_view name);

inline bool IsFloating(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }
inline bool IsInteger(DType t) { return t == DType::kInt32 || t == DType::kInt64; }
inline bool IsHalf(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }
inline bool IsNarrowInteger(DType t) {
  return t >= DType::kUInt8 && t <= DType::kUInt64;
}
// What AD differentiates: the compute floats and the 16-bit float storage types
// (whose gradients reach them through cast, as in mixed-precision training).
inline bool IsDifferentiable(DType t) { return IsFloating(t) || IsHalf(t); }
// Any integer element type (compute or storage).
inline bool IsAnyInteger(DType t) { return IsInteger(t) || IsNarrowInteger(t); }
inline bool IsUnsigned(DType t) {
  return t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64;
}

// A set of dtypes: what an op accepts for an input. The one definition used by
// inference (ops/), the CPU kernels and the CUDA kernels.
using DTypeSet = uint32_t;
constexpr DTypeSet DTypeBit(DType t) { return DTypeSet{1} << static_cast<int>(t); }
inline constexpr DTypeSet kFloatTypes = DTypeBit(DType::kFloat32) | DTypeBit(DType::kFloat64);
inline constexpr DTypeSet kIntegerTypes = DTypeBit(DType::kInt32) | DTypeBit(DType::kInt64);
inline constexpr DTypeSet kNumericTypes = kFloatTypes | kIntegerTypes;
inline constexpr DTypeSet kBoolType = DTypeBit(DType::kBool);
inline constexpr DTypeSet kAllTypes = kNumericTypes | kBoolType;
inline constexpr DTypeSet kUnsignedTypes = DTypeBit(DType::kUInt8) | DTypeBit(DType::kUInt16) |
                                           DTypeBit(DType::kUInt32) | DTypeBit(DType::kUInt64);
inline constexpr DTypeSet kNarrowIntegerTypes =
    kUnsignedTypes | DTypeBit(DType::kInt8) | DTypeBit(DType::kInt16);
inline constexpr DTypeSet kHalfTypes = DTypeBit(DType::kFloat16) | DTypeBit(DType::kBFloat16);
// Every element type, storage types included (cast, data movement).
inline constexpr DTypeSet kEveryType = kAllTypes | kNarrowIntegerTypes | kHalfTypes;
// The integer and float types ONNX's arithmetic takes (Add, Max, Mod, ...).
inline constexpr DTypeSet kWideNumericTypes = kNumericTypes | kNarrowIntegerTypes | kHalfTypes;
constexpr bool Allows(DTypeSet set, DType t) { return (set & DTypeBit(t)) != 0; }
// "f32, f64, i32 or i64" (for "must be a ... tensor" messages).
std::string DTypeSetNames(DTypeSet set);

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kUInt8; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::kInt8; };
template <> struct DTypeOf<int16_t> { static constexpr DType value = DType::kInt16; };
template <> struct DTypeOf<uint16_t> { static constexpr DType value = DType::kUInt16; };
template <> struct DTypeOf<uint32_t> { static constexpr DType value = DType::kUInt32; };
template <> struct DTypeOf<uint64_t> { static constexpr DType value = DType::kUInt64; };
template <> struct DTypeOf<Float16> { static constexpr DType value = DType::kFloat16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::kBFloat16; };

// Whether T is one of the compute types f32, f64, i32, i64 (what arithmetic
// kernels instantiate for; the storage types have no arithmetic of their own).
template <typename T>
inline constexpr bool kIsNumericComputeType = Allows(kNumericTypes, DTypeOf<T>::value);

// Calls fn(T{}) with T the C++ type of `t`. Used by kernels to dispatch on dtype;
// kernels that take only some types guard their bodies with
// `if constexpr (Allows(set, DTypeOf<T>::value))`.
template <typename Fn>
decltype(auto) DispatchDType(DType t, Fn&& fn) {
  switch (t) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    case DType::kUInt8: return fn(uint8_t{});
    case DType::kInt8: return fn(int8_t{});
    case DType::kInt16: return fn(int16_t{});
    case DType::kUInt16: return fn(uint16_t{});
    case DType::kUInt32: return fn(uint32_t{});
    case DType::kUInt64: return fn(uint64_t{});
    case DType::kFloat16: return fn(Float16{});
    case DType::kBFloat16: return fn(BFloat16{});
    case DType::kBool: break;
  }
  return fn(bool{});
}

}  // namespace kgrad

#endif  // KGRAD_CORE_DTYPE_H_
