// Device code of the shape family: one strided copy (transpose, broadcast_to,
// slice, slice_grad, pad, concat, split all lower to it on the host side),
// gather, scatter_add, one_hot, gather_elements, scatter_elements and cumsum.
#include <cstdint>
#include <type_traits>

#include "backends/cuda/kernels/device_util.cu.h"
#include "backends/cuda/kernels/launch.h"

namespace kgrad {
namespace cuda {
namespace {

// ----- Strided copy -------------------------------------------------------------------------
template <typename E>
__global__ void CopyFlatKernel(const E* src, int64_t ss, E* dst, int64_t ds, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) dst[i * ds] = src[i * ss];
}

template <typename E>
__global__ void CopyKernel(const E* src, E* dst, CopyGeom g) {
  for (int64_t i = GlobalIndex(); i < g.count; i += GlobalStride()) {
    int64_t rest = i, so = 0, dof = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
      const int64_t n = g.dims[d];
      const int64_t q = rest % n;
      rest /= n;
      so += q * g.src_strides[d];
      dof += q * g.dst_strides[d];
    }
    dst[dof] = src[so];
  }
}

template <typename E>
cudaError_t RunCopy(const void* src, void* dst, const CopyGeom& g, cudaStream_t s) {
  if (g.count == 0) return cudaSuccess;
  const E* ps = static_cast<const E*>(src) + g.src_offset;
  E* pd = static_cast<E*>(dst) + g.dst_offset;
  if (g.rank <= 1) {
    const int64_t ss = g.rank == 1 ? g.src_strides[0] : 0;
    const int64_t ds = g.rank == 1 ? g.dst_strides[0] : 0;
    if (ss == 1 && ds == 1) {
      return MemcpyDeviceToDeviceAsync(pd, ps, static_cast<size_t>(g.count) * sizeof(E), s);
    }
    Launch(CopyFlatKernel<E>, BlocksFor(g.count), kThreads, s, ps, ss, pd, ds, g.count);
  } else {
    Launch(CopyKernel<E>, BlocksFor(g.count), kThreads, s, ps, pd, g);
  }
  return LastLaunchError();
}

// ----- gather, scatter_add, one_hot ---------------------------------------------------------
// Element t of a gathered tensor [outer, n, inner] is (o, j, k); it comes from
// (o, idx[j], k) of the indexed tensor [outer, dim, inner], at this offset.
template <typename I>
__device__ inline int64_t IndexedOffset(int64_t t, const I* idx, int64_t dim, int64_t inner,
                                        int64_t n) {
  const int64_t o = t / (n * inner), rem = t % (n * inner);
  return (o * dim + static_cast<int64_t>(idx[rem / inner])) * inner + rem % inner;
}

template <typename E, typename I>
__global__ void GatherKernel(const E* params, const I* idx, E* out, int64_t dim, int64_t inner,
                             int64_t n, int64_t total) {
  for (int64_t t = GlobalIndex(); t < total; t += GlobalStride()) {
    out[t] = params[IndexedOffset(t, idx, dim, inner, n)];
  }
}

// Each thread owns one (o, k) column and adds the updates in index order: the
// CPU kernel's order, so results match it bit for bit and repeat from run to run.
template <typename T, typename I>
__global__ void ScatterAddColumns(T* out, const T* upd, const I* idx, int64_t outer, int64_t dim,
                                  int64_t inner, int64_t n) {
  const int64_t total = outer * inner;
  for (int64_t t = GlobalIndex(); t < total; t += GlobalStride()) {
    const int64_t o = t / inner, k = t % inner;
    for (int64_t j = 0; j < n; ++j) {
      T* d = out + (o * dim + static_cast<int64_t>(idx[j])) * inner + k;
      *d = WrapAdd(*d, upd[(o * n + j) * inner + k]);
    }
  }
}

template <typename T>
__device__ inline void AtomicAddTo(T* p, T v) {
  if constexpr (std::is_same_v<T, int64_t>) {
    // Two's complement: the unsigned add wraps exactly like WrapAdd.
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  } else {
    atomicAdd(p, v);
  }
}

// Few long columns: one thread per update element, added atomically.
template <typename T, typename I>
__global__ void ScatterAddAtomic(T* out, const T* upd, const I* idx, int64_t dim, int64_t inner,
                                 int64_t n, int64_t total) {
  for (int64_t t = GlobalIndex(); t < total; t += GlobalStride()) {
    AtomicAddTo(out + IndexedOffset(t, idx, dim, inner, n), upd[t]);
  }
}

// ----- gather_elements, scatter_elements, cumsum ---------------------------------------------
// The offset in data of the element that index `i` names, given the offset of
// i's coordinates other than the axis one (`base`).
template <typename I>
__device__ inline int64_t NamedOffset(const ElementsGeom& g, int64_t base, I index) {
  int64_t k = static_cast<int64_t>(index);
  if (k < 0) k += g.axis_dim;
  return base + k * g.data_strides[g.axis];
}

// Index element i (row-major over g.dims): data's offset for its coordinates
// with the axis one taken as 0.
__device__ inline int64_t BaseOffset(const ElementsGeom& g, int64_t i) {
  int64_t off = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t n = g.dims[d];
    if (d != g.axis) off += (i % n) * g.data_strides[d];
    i /= n;
  }
  return off;
}

template <typename E, typename I>
__global__ void GatherElementsKernel(const E* data, const I* idx, E* out, ElementsGeom g) {
  for (int64_t i = GlobalIndex(); i < g.count; i += GlobalStride()) {
    out[i] = data[NamedOffset(g, BaseOffset(g, i), idx[i])];
  }
}

template <typename T>
__device__ inline T ScatterCombine(ScatterOp op, T out, T update) {
  if constexpr (std::is_same_v<T, bool>) {
    return update;  // reduction none only (the host's check)
  } else {
    switch (op) {
      case ScatterOp::kNone: return update;
      case ScatterOp::kAdd: return WrapAdd(out, update);
      case ScatterOp::kMul: return WrapMul(out, update);
      case ScatterOp::kMax: return (update > out || update != update) ? update : out;
      case ScatterOp::kMin: return (update < out || update != update) ? update : out;
    }
    return update;
  }
}

// Only index elements that agree on every coordinate but the axis one can name
// the same element, so each thread takes one such column (the index tensor with
// its axis dim removed) and applies its updates along the axis in order: the
// row-major order of the CPU kernel, bit for bit.
template <typename T, typename I>
__global__ void ScatterElementsColumns(T* out, const T* upd, const I* idx, ElementsGeom g,
                                       ScatterOp op) {
  const int64_t len = g.dims[g.axis];
  int64_t step = 1;  // the index tensor's stride along the axis
  for (int d = g.rank - 1; d > g.axis; --d) step *= g.dims[d];
  const int64_t columns = g.count / len;
  for (int64_t c = GlobalIndex(); c < columns; c += GlobalStride()) {
    // Column c's first index element: c split into the coordinates before the
    // axis (c / step) and after it (c % step).
    const int64_t first = (c / step) * len * step + c % step;
    const int64_t base = BaseOffset(g, first);
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i = first + j * step;
      T* d = out + NamedOffset(g, base, idx[i]);
      *d = ScatterCombine(op, *d, upd[i]);
    }
  }
}

// One thread per (o, k) column, walking len in order (the CPU kernel's order).
template <typename T>
__global__ void CumSumColumns(const T* x, T* y, int64_t outer, int64_t len, int64_t inner,
                              bool exclusive, bool reverse) {
  const int64_t columns = outer * inner;
  for (int64_t c = GlobalIndex(); c < columns; c += GlobalStride()) {
    const int64_t o = c / inner, k = c % inner;
    const T* xc = x + o * len * inner + k;
    T* yc = y + o * len * inner + k;
    T acc = T(0);
    for (int64_t step = 0; step < len; ++step) {
      const int64_t j = reverse ? len - 1 - step : step;
      const T sum = WrapAdd(acc, xc[j * inner]);
      yc[j * inner] = exclusive ? acc : sum;
      acc = sum;
    }
  }
}

template <typename T, typename I>
__global__ void OneHotKernel(const I* idx, T* out, int64_t depth, int64_t inner, int64_t total,
                             T on, T off) {
  for (int64_t t = GlobalIndex(); t < total; t += GlobalStride()) {
    const int64_t o = t / (depth * inner);
    const int64_t d = (t / inner) % depth;
    const int64_t k = t % inner;
    out[t] = static_cast<int64_t>(idx[o * inner + k]) == d ? on : off;
  }
}

}  // namespace

cudaError_t LaunchStridedCopy(int elem_size, const void* src, void* dst, const CopyGeom& g,
                              cudaStream_t s) {
  return DispatchRaw(elem_size, [&](auto zero) { return RunCopy<decltype(zero)>(src, dst, g, s); });
}

cudaError_t LaunchGather(int elem_size, const void* params, DT idx_dt, const void* idx,
                         void* out, int64_t outer, int64_t dim, int64_t inner, int64_t n,
                         cudaStream_t s) {
  const int64_t total = outer * n * inner;
  return DispatchRaw(elem_size, [&](auto elem_zero) {
    return DispatchIndex(idx_dt, [&](auto idx_zero) {
      return LaunchFlat(GatherKernel<decltype(elem_zero), decltype(idx_zero)>, total, s, params,
                        idx, out, dim, inner, n, total);
    });
  });
}

cudaError_t LaunchScatterAdd(DT dt, void* out, const void* upd, DT idx_dt, const void* idx,
                             int64_t outer, int64_t dim, int64_t inner, int64_t n,
                             cudaStream_t s) {
  const int64_t columns = outer * inner;
  if (columns == 0 || n == 0) return cudaSuccess;
  return DispatchAll(dt, [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool>) {
      return cudaErrorInvalidValue;
    } else {
      return DispatchIndex(idx_dt, [&](auto idx_zero) -> cudaError_t {
        using I = decltype(idx_zero);
        T* po = static_cast<T*>(out);
        const T* pu = static_cast<const T*>(upd);
        const I* pi = static_cast<const I*>(idx);
        if (columns >= 2048 || n <= 16) {
          Launch(ScatterAddColumns<T, I>, BlocksFor(columns), kThreads, s, po, pu, pi, outer, dim,
                 inner, n);
        } else {
          const int64_t total = columns * n;
          Launch(ScatterAddAtomic<T, I>, BlocksFor(total), kThreads, s, po, pu, pi, dim, inner, n,
                 total);
        }
        return LastLaunchError();
      });
    }
  });
}

cudaError_t LaunchGatherElements(int elem_size, const void* data, DT idx_dt, const void* idx,
                                 void* out, const ElementsGeom& g, cudaStream_t s) {
  return DispatchRaw(elem_size, [&](auto elem_zero) {
    return DispatchIndex(idx_dt, [&](auto idx_zero) {
      return LaunchFlat(GatherElementsKernel<decltype(elem_zero), decltype(idx_zero)>, g.count, s,
                        data, idx, out, g);
    });
  });
}

cudaError_t LaunchScatterElements(DT dt, ScatterOp op, void* out, const void* upd, DT idx_dt,
                                  const void* idx, const ElementsGeom& g, cudaStream_t s) {
  if (g.count == 0) return cudaSuccess;
  const int64_t columns = g.count / g.dims[g.axis];
  return DispatchAll(dt, [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    return DispatchIndex(idx_dt, [&](auto idx_zero) -> cudaError_t {
      using I = decltype(idx_zero);
      Launch(ScatterElementsColumns<T, I>, BlocksFor(columns), kThreads, s, static_cast<T*>(out),
             static_cast<const T*>(upd), static_cast<const I*>(idx), g, op);
      return LastLaunchError();
    });
  });
}

cudaError_t LaunchCumSum(DT dt, const void* x, void* y, int64_t outer, int64_t len, int64_t inner,
                         bool exclusive, bool reverse, cudaStream_t s) {
  const int64_t columns = outer * inner;
  if (columns == 0 || len == 0) return cudaSuccess;
  return DispatchAll(dt, [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool>) {
      return cudaErrorInvalidValue;  // numeric only (the host's check)
    } else {
      Launch(CumSumColumns<T>, BlocksFor(columns), kThreads, s, static_cast<const T*>(x),
             static_cast<T*>(y), outer, len, inner, exclusive, reverse);
      return LastLaunchError();
    }
  });
}

cudaError_t LaunchOneHot(DT out_dt, DT idx_dt, const void* idx, void* out, int64_t outer,
                         int64_t depth, int64_t inner, double on, double off, cudaStream_t s) {
  const int64_t total = outer * depth * inner;
  return DispatchAll(out_dt, [&](auto zero) {
    using T = decltype(zero);
    return DispatchIndex(idx_dt, [&](auto idx_zero) {
      return LaunchFlat(OneHotKernel<T, decltype(idx_zero)>, total, s, idx, out, depth, inner,
                        total, Convert<T>(on), Convert<T>(off));
    });
  });
}

}  // namespace cuda
}  // namespace kgrad
