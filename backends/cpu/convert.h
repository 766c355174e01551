// Element conversion between dtypes, the one rule for the CPU kernels and the CUDA
// device code (cast, fill, one_hot): float->int truncates toward zero and
// saturates (NaN gives 0), so that no input is undefined behaviour; anything->bool
// is v != 0; bool->number is 0/1; float16 and bfloat16 convert through float (to
// them: rounded to nearest even, from double directly). Header-only and
// __host__ __device__ under nvcc, like dropout_hash.h (the 16-bit float types are
// host-only: the CUDA kernels take no storage dtypes).
#ifndef KGRAD_BACKENDS_CPU_CONVERT_H_
#define KGRAD_BACKENDS_CPU_CONVERT_H_

#include <limits>
#include <type_traits>

#if !defined(__CUDACC__)
#include "core/half.h"
#endif

#if defined(__CUDACC__)
#define KGRAD_CONVERT_HOST_DEVICE __host__ __device__
#else
#define KGRAD_CONVERT_HOST_DEVICE
#endif

namespace kgrad {

#if defined(__CUDACC__)
template <typename T>
inline constexpr bool kIsHalfType = false;
#else
template <typename T>
inline constexpr bool kIsHalfType = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;
#endif

template <typename To, typename From>
KGRAD_CONVERT_HOST_DEVICE inline To Convert(From v) {
  if constexpr (kIsHalfType<From>) {
    return Convert<To>(static_cast<float>(v));
  } else if constexpr (kIsHalfType<To>) {
    return To(static_cast<double>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    constexpr From lo = static_cast<From>(std::numeric_limits<To>::min());
    constexpr From hi = static_cast<From>(std::numeric_limits<To>::max());
    if (!(v == v)) return To(0);
    if (v <= lo) return std::numeric_limits<To>::min();
    if (v >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace kgrad

#undef KGRAD_CONVERT_HOST_DEVICE

#endif  // KGRAD_BACKENDS_CPU_CONVERT_H_
