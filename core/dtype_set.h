// The element types (DType) and sets of them (DTypeSet), without dependencies:
// the CUDA device code and the elementwise table (ops/elementwise_table.h) use
// them as they are. core/dtype.h adds names, sizes and dispatch.
#ifndef KGRAD_CORE_DTYPE_SET_H_
#define KGRAD_CORE_DTYPE_SET_H_

#include <cstdint>

namespace kgrad {

// Every element type, once: X(Name, number, C++ type, short name). The numbers are
// what graph files store. Storage types (from kUInt8 on) hold ONNX's and PyTorch's
// narrow types as they are: only the ops that list them in their dtype sets take
// them (cast, the integer arithmetic, comparisons, data movement); IsFloating and
// IsInteger stay the compute types, so AD and the float-only ops never see them.
#define KGRAD_DTYPES(X)            \
  X(kFloat32, 0, float, "f32")     \
  X(kFloat64, 1, double, "f64")    \
  X(kInt32, 2, int32_t, "i32")     \
  X(kInt64, 3, int64_t, "i64")     \
  X(kBool, 4, bool, "bool")        \
  X(kUInt8, 5, uint8_t, "u8")      \
  X(kInt8, 6, int8_t, "i8")        \
  X(kInt16, 7, int16_t, "i16")     \
  X(kUInt16, 8, uint16_t, "u16")   \
  X(kUInt32, 9, uint32_t, "u32")   \
  X(kUInt64, 10, uint64_t, "u64")  \
  X(kFloat16, 11, Float16, "f16")  \
  X(kBFloat16, 12, BFloat16, "bf16")

struct Float16;   // core/half.h
struct BFloat16;  // core/half.h

enum class DType : uint8_t {
#define KGRAD_DTYPE_ENUM(Name, number, T, name) Name = number,
  KGRAD_DTYPES(KGRAD_DTYPE_ENUM)
#undef KGRAD_DTYPE_ENUM
};

#define KGRAD_DTYPE_ONE(Name, number, T, name) +1
inline constexpr int kNumDTypes = 0 KGRAD_DTYPES(KGRAD_DTYPE_ONE);
#undef KGRAD_DTYPE_ONE

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
template <typename T>
struct DTypeOf;
#define KGRAD_DTYPE_OF(Name, number, T, name) \
  template <>                                 \
  struct DTypeOf<T> {                         \
    static constexpr DType value = DType::Name; \
  };
KGRAD_DTYPES(KGRAD_DTYPE_OF)
#undef KGRAD_DTYPE_OF

}  // namespace kgrad

#endif  // KGRAD_CORE_DTYPE_SET_H_
