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

#include "backends/cpu/convert.h"
#include "backends/cuda/kernels/launch.h"
#include "ops/elementwise_functors.h"

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

// Launches a grid-stride kernel over `n` items (nothing when n is 0) on
// BlocksFor(n) blocks and returns the launch's error. Void pointers among `args`
// become the kernel's typed ones.
template <typename... Params, typename... Args>
cudaError_t LaunchFlat(void (*kernel)(Params...), int64_t n, cudaStream_t s, Args... args) {
  if (n == 0) return cudaSuccess;
  Launch(kernel, BlocksFor(n), kThreads, s, args...);
  return LastLaunchError();
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

// DispatchAll restricted to the types for which Pred<T>::value holds: fn is not
// instantiated for the others, which give cudaErrorInvalidValue.
template <template <typename> class Pred, typename Fn>
cudaError_t DispatchIf(DT dt, Fn&& fn) {
  return DispatchAll(dt, [&](auto zero) -> cudaError_t {
    if constexpr (Pred<decltype(zero)>::value) {
      return fn(zero);
    } else {
      return cudaErrorInvalidValue;
    }
  });
}

template <typename T>
struct IsIndexType : std::bool_constant<std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>> {
};

// f32 or f64.
template <typename Fn>
cudaError_t DispatchFloat(DT dt, Fn&& fn) {
  return DispatchIf<std::is_floating_point>(dt, fn);
}

// Indices are i32 or i64.
template <typename Fn>
cudaError_t DispatchIndex(DT dt, Fn&& fn) {
  return DispatchIf<IsIndexType>(dt, fn);
}

// Calls fn(E{}) with E an unsigned type of `bytes` bytes (1, 4 or 8): data
// movement copies elements as raw bits, whatever their dtype.
template <typename Fn>
cudaError_t DispatchRaw(int bytes, Fn&& fn) {
  switch (bytes) {
    case 1: return fn(uint8_t{});
    case 4: return fn(uint32_t{});
    case 8: return fn(uint64_t{});
  }
  return cudaErrorInvalidValue;
}

// ----- kgrad's arithmetic and maths: the elementwise functors' (one definition) -----
using ew::Exp;
using ew::Log;
using ew::WrapAdd;
using ew::WrapMul;
using ew::WrapNeg;
using ew::WrapSub;

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
