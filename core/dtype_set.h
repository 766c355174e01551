// The element types (DType) and sets of them (DTypeSet), without dependencies:
// the CUDA device code and the elementwise table (ops/elementwise_table.h) use
// them as they are. core/dtype.h adds names, sizes and dispatch.
#ifndef KGRAD_CORE_DTYPE_SET_H_
#define KGRAD_CORE_DTYPE_SET_H_

#include <cstdint>

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

// The dtype of C++ element type T (DTypeOf<T>::value).
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

}  // namespace kgrad

#endif  // KGRAD_CORE_DTYPE_SET_H_
