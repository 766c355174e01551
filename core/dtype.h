// Element types of tensors and scalars.
#ifndef KGRAD_CORE_DTYPE_H_
#define KGRAD_CORE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kgrad {

enum class DType : uint8_t {
  kFloat32 = 0,
  kFloat64 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kBool = 4,
};

inline constexpr int kNumDTypes = 5;

size_t DTypeSize(DType t);
// Short name used by the printer and the CLI: f32, f64, i32, i64, bool.
const char* DTypeName(DType t);

inline bool IsFloating(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }
inline bool IsInteger(DType t) { return t == DType::kInt32 || t == DType::kInt64; }

// A set of dtypes: what an op accepts for an input. The one definition used by
// inference (ops/), the CPU kernels and the CUDA kernels.
using DTypeSet = uint32_t;
constexpr DTypeSet DTypeBit(DType t) { return DTypeSet{1} << static_cast<int>(t); }
inline constexpr DTypeSet kFloatTypes = DTypeBit(DType::kFloat32) | DTypeBit(DType::kFloat64);
inline constexpr DTypeSet kIntegerTypes = DTypeBit(DType::kInt32) | DTypeBit(DType::kInt64);
inline constexpr DTypeSet kNumericTypes = kFloatTypes | kIntegerTypes;
inline constexpr DTypeSet kBoolType = DTypeBit(DType::kBool);
inline constexpr DTypeSet kAllTypes = kNumericTypes | kBoolType;
constexpr bool Allows(DTypeSet set, DType t) { return (set & DTypeBit(t)) != 0; }
// "f32, f64, i32 or i64" (for "must be a ... tensor" messages).
std::string DTypeSetNames(DTypeSet set);

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };

// Calls fn(T{}) with T the C++ type of `t`. Used by kernels to dispatch on dtype.
template <typename Fn>
decltype(auto) DispatchDType(DType t, Fn&& fn) {
  switch (t) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    case DType::kBool: break;
  }
  return fn(bool{});
}

}  // namespace kgrad

#endif  // KGRAD_CORE_DTYPE_H_
