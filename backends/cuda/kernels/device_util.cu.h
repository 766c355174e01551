// Device-side helpers shared by the .cu files: launch shapes, dtype dispatch,
// kgrad's arithmetic rules (wrapping integers, saturating conversions) and
// precision-generic math.
#ifndef KGRAD_BACKENDS_CUDA_KERNELS_DEVICE_UTIL_CU_H_
#define KGRAD_BACKENDS_CUDA_KERNELS_DEVICE_UTIL_CU_H_

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#if defined(KGRAD_CUDA_EMULATION)
#include "backends/cuda/kernels/emulation.h"
#else
#include <cuda_runtime.h>
#endif

#include "backends/cuda/kernels/launch.h"

namespace kgrad {
namespace cuda {

inline constexpr int kThreads = 256;
// Grid-stride loops need no more blocks than this to fill any current GPU.
inline constexpr int64_t kMaxBlocks = int64_t{1} << 16;
// Block-per-row kernels loop over rows beyond this many blocks.
inline constexpr int64_t kMaxRowBlocks = int64_t{1} << 20;

inline unsigned RowGrid(int64_t rows) {
  return static_cast<unsigned>(rows < 1 ? 1 : (rows < kMaxRowBlocks ? rows : kMaxRowBlocks));
}

inline unsigned BlocksFor(int64_t n, int threads = kThreads) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > kMaxBlocks) b = kMaxBlocks;
  return static_cast<unsigned>(b);
}

// The flat index of this thread and the grid's stride, for grid-stride loops.
__device__ inline int64_t GlobalIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t GlobalStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// The first launch error since the last LastLaunchError() on this host thread.
inline cudaError_t& PendingLaunchError() {
  thread_local cudaError_t e = cudaSuccess;
  return e;
}

// kernel<<<grid, threads, 0, s>>>(args...), remembering a launch error (a bad
// configuration, no device) for LastLaunchError(). Under KGRAD_CUDA_EMULATION
// the grid runs on host threads before Launch returns.
template <typename... Params, typename... Args>
void Launch(void (*kernel)(Params...), dim3 grid, unsigned threads, cudaStream_t s,
            Args... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel arity");
#if defined(KGRAD_CUDA_EMULATION)
  (void)s;
  emu::Run(grid, threads, [&] { kernel(static_cast<Params>(args)...); });
#else
  kernel<<<grid, threads, 0, s>>>(static_cast<Params>(args)...);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess && PendingLaunchError() == cudaSuccess) PendingLaunchError() = e;
#endif
}

// The error of the launches made since the last call (cudaSuccess if none failed).
inline cudaError_t LastLaunchError() {
  const cudaError_t e = PendingLaunchError();
  PendingLaunchError() = cudaSuccess;
  return e;
}

// cudaMemsetAsync / cudaMemcpyAsync (device to device) on `s`.
inline cudaError_t MemsetAsync(void* p, int value, size_t bytes, cudaStream_t s) {
#if defined(KGRAD_CUDA_EMULATION)
  (void)s;
  std::memset(p, value, bytes);
  return cudaSuccess;
#else
  return cudaMemsetAsync(p, value, bytes, s);
#endif
}

inline cudaError_t MemcpyDeviceToDeviceAsync(void* dst, const void* src, size_t bytes,
                                             cudaStream_t s) {
#if defined(KGRAD_CUDA_EMULATION)
  (void)s;
  std::memmove(dst, src, bytes);
  return cudaSuccess;
#else
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
#endif
}

// Calls fn(T{}) with T the C++ type of `dt` (bool for kBool).
template <typename Fn>
cudaError_t DispatchAll(DT dt, Fn&& fn) {
  switch (dt) {
    case DT::kF32: return fn(float{});
    case DT::kF64: return fn(double{});
    case DT::kI32: return fn(int32_t{});
    case DT::kI64: return fn(int64_t{});
    case DT::kBool: return fn(bool{});
  }
  return cudaErrorInvalidValue;
}

template <typename Fn>
cudaError_t DispatchFloat(DT dt, Fn&& fn) {
  switch (dt) {
    case DT::kF32: return fn(float{});
    case DT::kF64: return fn(double{});
    default: return cudaErrorInvalidValue;
  }
}

// Indices are i32 or i64.
template <typename Fn>
cudaError_t DispatchIndex(DT dt, Fn&& fn) {
  switch (dt) {
    case DT::kI32: return fn(int32_t{});
    case DT::kI64: return fn(int64_t{});
    default: return cudaErrorInvalidValue;
  }
}

// An unsigned type of `bytes` bytes for raw copies.
template <int kBytes> struct RawType;
template <> struct RawType<1> { using type = uint8_t; };
template <> struct RawType<4> { using type = uint32_t; };
template <> struct RawType<8> { using type = uint64_t; };

// ----- kgrad's arithmetic rules (match backends/cpu) ---------------------------------
template <typename T>
__host__ __device__ inline T WrapNeg(T x) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(U{0} - static_cast<U>(x));
  } else {
    return -x;
  }
}
template <typename T>
__host__ __device__ inline T WrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
__host__ __device__ inline T WrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}
template <typename T>
__host__ __device__ inline T WrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

// v as To: float->int truncates toward zero and saturates (NaN gives 0);
// anything->bool is v != 0; bool->number is 0/1.
template <typename To, typename From>
__host__ __device__ inline To Convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
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

// ----- Precision-generic math ----------------------------------------------------------
template <typename T> __device__ inline T Exp(T x);
template <> __device__ inline float Exp(float x) { return expf(x); }
template <> __device__ inline double Exp(double x) { return exp(x); }
template <typename T> __device__ inline T Log(T x);
template <> __device__ inline float Log(float x) { return logf(x); }
template <> __device__ inline double Log(double x) { return log(x); }
template <typename T> __device__ inline T Log1p(T x);
template <> __device__ inline float Log1p(float x) { return log1pf(x); }
template <> __device__ inline double Log1p(double x) { return log1p(x); }
template <typename T> __device__ inline T Expm1(T x);
template <> __device__ inline float Expm1(float x) { return expm1f(x); }
template <> __device__ inline double Expm1(double x) { return expm1(x); }
template <typename T> __device__ inline T Sin(T x);
template <> __device__ inline float Sin(float x) { return sinf(x); }
template <> __device__ inline double Sin(double x) { return sin(x); }
template <typename T> __device__ inline T Cos(T x);
template <> __device__ inline float Cos(float x) { return cosf(x); }
template <> __device__ inline double Cos(double x) { return cos(x); }
template <typename T> __device__ inline T Tanh(T x);
template <> __device__ inline float Tanh(float x) { return tanhf(x); }
template <> __device__ inline double Tanh(double x) { return tanh(x); }
template <typename T> __device__ inline T Sqrt(T x);
template <> __device__ inline float Sqrt(float x) { return sqrtf(x); }
template <> __device__ inline double Sqrt(double x) { return sqrt(x); }
template <typename T> __device__ inline T Erf(T x);
template <> __device__ inline float Erf(float x) { return erff(x); }
template <> __device__ inline double Erf(double x) { return erf(x); }
template <typename T> __device__ inline T Erfc(T x);
template <> __device__ inline float Erfc(float x) { return erfcf(x); }
template <> __device__ inline double Erfc(double x) { return erfc(x); }
template <typename T> __device__ inline T Pow(T a, T b);
template <> __device__ inline float Pow(float a, float b) { return powf(a, b); }
template <> __device__ inline double Pow(double a, double b) { return pow(a, b); }
template <typename T>
__device__ inline bool IsFinite(T x) {
#if defined(KGRAD_CUDA_EMULATION)
  return std::isfinite(x);
#else
  return isfinite(x);
#endif
}

template <typename T>
__device__ inline T Infinity() {
  return std::numeric_limits<T>::infinity();
}

// Offset of flat index `i` over row-major `dims` with `strides` (rank dims).
__device__ inline int64_t StridedOffset(int64_t i, int rank, const int64_t* dims,
                                        const int64_t* strides) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t n = dims[d];
    off += (i % n) * strides[d];
    i /= n;
  }
  return off;
}

}  // namespace cuda
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CUDA_KERNELS_DEVICE_UTIL_CU_H_
