// Element types of tensors and scalars.
#ifndef KGRAD_CORE_DTYPE_H_
#define KGRAD_CORE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/dtype_set.h"
#include "core/half.h"

namespace kgrad {

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

// "f32, f64, i32 or i64" (for "must be a ... tensor" messages).
std::string DTypeSetNames(DTypeSet set);

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
#define KGRAD_DISPATCH_CASE(Name, number, T, name) \
  case DType::Name:                              \
    return fn(T{});
    KGRAD_DTYPES(KGRAD_DISPATCH_CASE)
#undef KGRAD_DISPATCH_CASE
  }
  return fn(bool{});
}

}  // namespace kgrad

#endif  // KGRAD_CORE_DTYPE_H_
