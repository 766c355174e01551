// Device code of the elementwise family: unary maps, broadcasting binary maps
// and select, fill, cast, dropout, and the device-side checks (bad indices, zero
// divisors). The maps are the rows of ops/elementwise_table.inc, each computed by
// its functor (ops/elementwise_functors.h), the CPU kernels' formula.
#include <cstdint>
#include <type_traits>

#include "backends/cpu/dropout_hash.h"
#include "backends/cuda/kernels/device_util.cu.h"
#include "backends/cuda/kernels/launch.h"
#include "ops/elementwise_table.h"

namespace kgrad {
namespace cuda {
namespace {

// ----- Unary ------------------------------------------------------------------------------
template <class F, typename T>
__global__ void UnaryKernel(ew::Attrs at, const T* x, T* y, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    y[i] = static_cast<T>(F::Apply(at, x[i]));
  }
}

// The row `kId` with functor F, for the dtypes its row lists (the others, and
// ids that are not unary maps, give cudaErrorInvalidValue).
template <PrimId kId, class F>
cudaError_t UnaryFor(DT dt, const ew::Attrs& at, const void* x, void* y, int64_t n,
                     cudaStream_t s) {
  if constexpr (ops::ElementwiseArity(kId) == 1) {
    return DispatchAll(dt, [&](auto zero) -> cudaError_t {
      using T = decltype(zero);
      if constexpr (Allows(ops::ElementwiseDTypes(kId), DTypeOf<T>::value)) {
        return LaunchFlat(UnaryKernel<F, T>, n, s, at, x, y, n);
      }
      return cudaErrorInvalidValue;
    });
  }
  return cudaErrorInvalidValue;
}

// ----- Binary -----------------------------------------------------------------------------
// Offsets of output element i in each of the first N operands.
template <int N>
__device__ inline void BroadcastOffsets(const BroadcastGeom& g, int64_t i, int64_t* off) {
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t n = g.dims[d];
    const int64_t q = i % n;
    i /= n;
    for (int k = 0; k < N; ++k) off[k] += q * g.strides[k][d];
  }
}

// Same-shape operands (rank <= 1 with unit or zero strides) skip the index math.
template <class F, typename T, typename R>
__global__ void BinaryFlatKernel(ew::Attrs at, const T* a, int64_t sa, const T* b, int64_t sb,
                                 R* out, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    out[i] = static_cast<R>(F::Apply(at, a[i * sa], b[i * sb]));
  }
}

template <class F, typename T, typename R>
__global__ void BinaryKernel(ew::Attrs at, const T* a, const T* b, R* out, BroadcastGeom g) {
  for (int64_t i = GlobalIndex(); i < g.count; i += GlobalStride()) {
    int64_t off[2];
    BroadcastOffsets<2>(g, i, off);
    out[i] = static_cast<R>(F::Apply(at, a[off[0]], b[off[1]]));
  }
}

template <class F, typename T, typename R>
cudaError_t RunBinary(const ew::Attrs& at, const void* a, const void* b, void* out,
                      const BroadcastGeom& g, cudaStream_t s) {
  if (g.count == 0) return cudaSuccess;
  const T* pa = static_cast<const T*>(a);
  const T* pb = static_cast<const T*>(b);
  R* po = static_cast<R*>(out);
  if (g.rank <= 1) {
    const int64_t sa = g.rank == 1 ? g.strides[0][0] : 0;
    const int64_t sb = g.rank == 1 ? g.strides[1][0] : 0;
    Launch(BinaryFlatKernel<F, T, R>, BlocksFor(g.count), kThreads, s, at, pa, sa, pb, sb, po,
           g.count);
  } else {
    Launch(BinaryKernel<F, T, R>, BlocksFor(g.count), kThreads, s, at, pa, pb, po, g);
  }
  return LastLaunchError();
}

// The row `kId` with functor F, for the dtypes its row lists.
template <PrimId kId, class F>
cudaError_t BinaryFor(DT dt, const ew::Attrs& at, const void* a, const void* b, void* out,
                      const BroadcastGeom& g, cudaStream_t s) {
  if constexpr (ops::ElementwiseArity(kId) == 2) {
    return DispatchAll(dt, [&](auto zero) -> cudaError_t {
      using T = decltype(zero);
      using R = std::conditional_t<ops::ElementwiseBoolOutput(kId), bool, T>;
      if constexpr (Allows(ops::ElementwiseDTypes(kId), DTypeOf<T>::value)) {
        return RunBinary<F, T, R>(at, a, b, out, g, s);
      }
      return cudaErrorInvalidValue;
    });
  }
  return cudaErrorInvalidValue;
}

// ----- Select, fill, cast, dropout -----------------------------------------------------------
template <typename T>
__global__ void SelectKernel(const bool* c, const T* a, const T* b, T* out, BroadcastGeom g) {
  for (int64_t i = GlobalIndex(); i < g.count; i += GlobalStride()) {
    int64_t off[3];
    BroadcastOffsets<3>(g, i, off);
    out[i] = ew::SelectOp::Apply(ew::Attrs{}, c[off[0]], a[off[1]], b[off[2]]);
  }
}

template <typename T>
__global__ void FillKernel(T* out, int64_t n, T v) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = v;
}

template <typename To, typename From>
__global__ void CastKernel(const From* x, To* y, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) y[i] = Convert<To>(x[i]);
}

template <typename T>
__global__ void DropoutKernel(const T* x, T* y, int64_t n, uint64_t seed, double rate, T scale) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    y[i] = x[i] * (DropoutKeep(seed, static_cast<uint64_t>(i), rate) ? scale : T(0));
  }
}

// ----- Checks --------------------------------------------------------------------------------
template <typename I>
__global__ void FirstBadIndexKernel(const I* idx, int64_t n, int64_t lo, int64_t bound,
                                    unsigned long long* first) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const int64_t v = static_cast<int64_t>(idx[i]);
    if (v < lo || v >= bound) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

template <typename T>
__global__ void FirstZeroKernel(const T* x, int64_t n, unsigned long long* first) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    if (x[i] == T(0)) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

}  // namespace

cudaError_t LaunchUnary(PrimId id, DT dt, const ew::Attrs& at, const void* x, void* y, int64_t n,
                        cudaStream_t s) {
  switch (id) {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  case PrimId::k##Name:                                                  \
    return UnaryFor<PrimId::k##Name, ew::Name##Op>(dt, at, x, y, n, s);
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchBinary(PrimId id, DT dt, const ew::Attrs& at, const void* a, const void* b,
                         void* out, const BroadcastGeom& g, cudaStream_t s) {
  switch (id) {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  case PrimId::k##Name:                                                  \
    return BinaryFor<PrimId::k##Name, ew::Name##Op>(dt, at, a, b, out, g, s);
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchSelect(DT dt, const void* c, const void* a, const void* b, void* out,
                         const BroadcastGeom& g, cudaStream_t s) {
  return DispatchAll(dt, [&](auto zero) {
    return LaunchFlat(SelectKernel<decltype(zero)>, g.count, s, c, a, b, out, g);
  });
}

cudaError_t LaunchFill(DT dt, void* out, int64_t n, double value, cudaStream_t s) {
  return DispatchAll(dt, [&](auto zero) {
    using T = decltype(zero);
    return LaunchFlat(FillKernel<T>, n, s, out, n, Convert<T>(value));
  });
}

cudaError_t LaunchCast(DT from, DT to, const void* x, void* y, int64_t n, cudaStream_t s) {
  return DispatchAll(from, [&](auto from_zero) {
    return DispatchAll(to, [&](auto to_zero) {
      return LaunchFlat(CastKernel<decltype(to_zero), decltype(from_zero)>, n, s, x, y, n);
    });
  });
}

cudaError_t LaunchDropout(DT dt, const void* x, void* y, int64_t n, uint64_t seed, double rate,
                          cudaStream_t s) {
  return DispatchFloat(dt, [&](auto zero) {
    using T = decltype(zero);
    const T scale = static_cast<T>(1.0 / (1.0 - rate));
    return LaunchFlat(DropoutKernel<T>, n, s, x, y, n, seed, rate, scale);
  });
}

cudaError_t LaunchFirstBadIndex(DT idx_dt, const void* idx, int64_t n, int64_t lo, int64_t bound,
                                unsigned long long* first, cudaStream_t s) {
  cudaError_t e = MemsetAsync(first, 0xFF, sizeof(unsigned long long), s);
  if (e != cudaSuccess) return e;
  return DispatchIndex(idx_dt, [&](auto zero) {
    return LaunchFlat(FirstBadIndexKernel<decltype(zero)>, n, s, idx, n, lo, bound, first);
  });
}

cudaError_t LaunchFirstZero(DT dt, const void* x, int64_t n, unsigned long long* first,
                            cudaStream_t s) {
  cudaError_t e = MemsetAsync(first, 0xFF, sizeof(unsigned long long), s);
  if (e != cudaSuccess) return e;
  return DispatchIndex(dt, [&](auto zero) {
    return LaunchFlat(FirstZeroKernel<decltype(zero)>, n, s, x, n, first);
  });
}

}  // namespace cuda
}  // namespace kgrad
