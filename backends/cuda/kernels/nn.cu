// Device code of the nn family: softmax (where cuDNN cannot take the shape), the
// two cross-entropies, layer_norm, and the pooling kernels cuDNN does not cover:
// the argmax routing of max_pool2d_grad / max_pool2d_grad_grad (first max in
// row-major window order, NaN wins: the CPU rule), and average pooling with
// asymmetric padding and its adjoint.
//
// Reductions along an axis see the tensor as [outer, len, inner]: a block per
// row when rows are contiguous and long, else a thread per (outer, inner) column
// (neighbouring threads then read neighbouring addresses).
#include <cstdint>
#include <type_traits>

#include "backends/cuda/kernels/device_util.cu.h"
#include "backends/cuda/kernels/launch.h"

namespace kgrad {
namespace cuda {
namespace {

constexpr int64_t kBlockRowMin = 256;  // rows at least this long get a block each

// The block's values `v` (one per thread) folded by `combine` in a tree over
// shared memory; every thread gets the result.
template <typename A, typename Combine>
__device__ A BlockReduce(A v, Combine combine) {
  __shared__ A shared[kThreads];
  shared[threadIdx.x] = v;
  __syncthreads();
  for (unsigned width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) {
      shared[threadIdx.x] = combine(shared[threadIdx.x], shared[threadIdx.x + width]);
    }
    __syncthreads();
  }
  const A r = shared[0];
  __syncthreads();
  return r;
}

template <typename A>
__device__ A BlockSum(A v) {
  return BlockReduce(v, [](A a, A b) { return a + b; });
}

// b replaces a only when larger, as in the column kernels' `>` (so a NaN b is dropped).
template <typename T>
__device__ T BlockMax(T v) {
  return BlockReduce(v, [](T a, T b) { return b > a ? b : a; });
}

// A row's max and the sum of exp(x - max) over it: the softmax's and the
// cross-entropies' normaliser.
template <typename T>
struct MaxExpSum {
  T max;
  T sum;
};

// Over the `len` elements p[0], p[step], ... that one thread reads.
template <typename T>
__device__ MaxExpSum<T> ThreadMaxExpSum(const T* p, int64_t len, int64_t step) {
  T mx = -Infinity<T>();
  for (int64_t j = 0; j < len; ++j) mx = p[j * step] > mx ? p[j * step] : mx;
  T sum = 0;
  for (int64_t j = 0; j < len; ++j) sum += Exp(p[j * step] - mx);
  return {mx, sum};
}

// Over the contiguous row p[0, len) that the block's threads share (every thread
// gets the result).
template <typename T>
__device__ MaxExpSum<T> BlockMaxExpSum(const T* p, int64_t len) {
  T mx = -Infinity<T>();
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) mx = p[j] > mx ? p[j] : mx;
  mx = BlockMax(mx);
  T sum = 0;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) sum += Exp(p[j] - mx);
  return {mx, BlockSum(sum)};
}

// ----- softmax / log_softmax ----------------------------------------------------------------
template <typename T, bool kLog>
__global__ void SoftmaxColumns(const T* x, T* y, int64_t outer, int64_t len, int64_t inner) {
  const int64_t total = outer * inner;
  for (int64_t t = GlobalIndex(); t < total; t += GlobalStride()) {
    const int64_t at = (t / inner) * len * inner + t % inner;
    const T* p = x + at;
    T* q = y + at;
    const MaxExpSum<T> m = ThreadMaxExpSum(p, len, inner);
    const T log_sum = Log(m.sum), inv = T(1) / m.sum;
    for (int64_t j = 0; j < len; ++j) {
      const T d = p[j * inner] - m.max;
      q[j * inner] = kLog ? d - log_sum : Exp(d) * inv;
    }
  }
}

template <typename T, bool kLog>
__global__ void SoftmaxRows(const T* x, T* y, int64_t rows, int64_t len) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* p = x + row * len;
    T* q = y + row * len;
    const MaxExpSum<T> m = BlockMaxExpSum(p, len);
    const T log_sum = Log(m.sum), inv = T(1) / m.sum;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      q[j] = kLog ? (p[j] - m.max) - log_sum : Exp(p[j] - m.max) * inv;
    }
  }
}

// ----- Cross-entropies ------------------------------------------------------------------------
template <typename T>
__global__ void CrossEntropyColumns(const T* x, const T* labels, T* loss, int64_t outer,
                                    int64_t len, int64_t inner) {
  const int64_t total = outer * inner;
  for (int64_t t = GlobalIndex(); t < total; t += GlobalStride()) {
    const int64_t at = (t / inner) * len * inner + t % inner;
    const T* p = x + at;
    const T* l = labels + at;
    const MaxExpSum<T> m = ThreadMaxExpSum(p, len, inner);
    const T log_sum = Log(m.sum);
    T acc = 0;
    for (int64_t j = 0; j < len; ++j) acc += ((m.max - p[j * inner]) + log_sum) * l[j * inner];
    loss[t] = acc;
  }
}

template <typename T>
__global__ void CrossEntropyRows(const T* x, const T* labels, T* loss, int64_t rows,
                                 int64_t len) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* p = x + row * len;
    const T* l = labels + row * len;
    const MaxExpSum<T> m = BlockMaxExpSum(p, len);
    const T log_sum = Log(m.sum);
    T acc = 0;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      acc += ((m.max - p[j]) + log_sum) * l[j];
    }
    acc = BlockSum(acc);
    if (threadIdx.x == 0) loss[row] = acc;
  }
}

template <typename T, typename L>
__global__ void SparseCrossEntropyRowsPerThread(const T* x, const L* labels, T* loss, int64_t n,
                                                int64_t c) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const T* p = x + i * c;
    const MaxExpSum<T> m = ThreadMaxExpSum(p, c, 1);
    loss[i] = (m.max - p[static_cast<int64_t>(labels[i])]) + Log(m.sum);
  }
}

template <typename T, typename L>
__global__ void SparseCrossEntropyRowsPerBlock(const T* x, const L* labels, T* loss, int64_t n,
                                               int64_t c) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const T* p = x + i * c;
    const MaxExpSum<T> m = BlockMaxExpSum(p, c);
    if (threadIdx.x == 0) loss[i] = (m.max - p[static_cast<int64_t>(labels[i])]) + Log(m.sum);
  }
}

// ----- layer_norm ------------------------------------------------------------------------------
template <typename T>
__global__ void LayerNormRows(const T* x, const T* scale, const T* bias, T* y, int64_t rows,
                              int64_t n, double eps) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* p = x + row * n;
    T* q = y + row * n;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += static_cast<double>(p[j]);
    const double mean = BlockSum(sum) / static_cast<double>(n);
    double sq = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const double d = static_cast<double>(p[j]) - mean;
      sq += d * d;
    }
    const double rstd = 1 / sqrt(BlockSum(sq) / static_cast<double>(n) + eps);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const double d = static_cast<double>(p[j]) - mean;
      q[j] = static_cast<T>(d * rstd * static_cast<double>(scale[j]) +
                            static_cast<double>(bias[j]));
    }
  }
}

// ----- Pooling --------------------------------------------------------------------------------
struct WindowBounds {
  int64_t r0, r1, c0, c1;  // the window's real cells: rows [r0, r1), columns [c0, c1)
};

__device__ inline WindowBounds Bounds(const PoolGeom& g, int64_t i, int64_t j) {
  const int64_t top = i * g.sh - g.pad_top, left = j * g.sw - g.pad_left;
  WindowBounds b;
  b.r0 = top > 0 ? top : 0;
  b.r1 = top + g.kh < g.h ? top + g.kh : g.h;
  b.c0 = left > 0 ? left : 0;
  b.c1 = left + g.kw < g.w ? left + g.kw : g.w;
  return b;
}

// The windows [lo, hi] along one axis that contain input position p.
__device__ inline void Covering(int64_t p, int64_t pad, int64_t k, int64_t s, int64_t count,
                                int64_t* lo, int64_t* hi) {
  const int64_t first = p + pad - k + 1;  // windows with start >= first - pad contain p
  *lo = first <= 0 ? 0 : (first + s - 1) / s;
  const int64_t last = (p + pad) / s;
  *hi = last < count - 1 ? last : count - 1;
}

// Input cell t (of the planes' h x w cells) at (plane, r, c), and the windows
// [i0, i1] x [j0, j1] that contain it: what the adjoints sum over.
struct CellWindows {
  int64_t plane, r, c;
  int64_t i0, i1, j0, j1;
};

__device__ inline CellWindows WindowsContaining(const PoolGeom& g, int64_t t) {
  CellWindows w;
  w.c = t % g.w;
  w.r = (t / g.w) % g.h;
  w.plane = t / (g.w * g.h);
  Covering(w.r, g.pad_top, g.kh, g.sh, g.oh, &w.i0, &w.i1);
  Covering(w.c, g.pad_left, g.kw, g.sw, g.ow, &w.j0, &w.j1);
  return w;
}

template <typename T>
__global__ void MaxPoolArgmaxKernel(const T* x, T* y, int64_t* idx, PoolGeom g) {
  const int64_t total = g.planes * g.oh * g.ow;
  for (int64_t t = GlobalIndex(); t < total; t += GlobalStride()) {
    const int64_t j = t % g.ow, i = (t / g.ow) % g.oh, plane = t / (g.ow * g.oh);
    const T* xp = x + plane * g.h * g.w;
    const WindowBounds b = Bounds(g, i, j);
    T m = -Infinity<T>();
    int64_t at = b.r0 * g.w + b.c0;  // the answer when every cell is -inf
    for (int64_t r = b.r0; r < b.r1; ++r) {
      for (int64_t c = b.c0; c < b.c1; ++c) {
        const T v = xp[r * g.w + c];
        if (v > m || (v != v && m == m)) {
          m = v;
          at = r * g.w + c;
        }
      }
    }
    idx[t] = at;
    if (y != nullptr) y[t] = m;
  }
}

template <typename T>
__global__ void MaxPoolGradKernel(const int64_t* idx, const T* dy, T* dx, PoolGeom g) {
  const int64_t total = g.planes * g.h * g.w;
  for (int64_t t = GlobalIndex(); t < total; t += GlobalStride()) {
    const CellWindows w = WindowsContaining(g, t);
    const int64_t cell = w.r * g.w + w.c;
    const int64_t base = w.plane * g.oh * g.ow;
    T acc = 0;
    for (int64_t i = w.i0; i <= w.i1; ++i) {
      for (int64_t j = w.j0; j <= w.j1; ++j) {
        if (idx[base + i * g.ow + j] == cell) acc += dy[base + i * g.ow + j];
      }
    }
    dx[t] = acc;
  }
}

template <typename T>
__global__ void GatherArgmaxKernel(const int64_t* idx, const T* src, T* y, PoolGeom g) {
  const int64_t total = g.planes * g.oh * g.ow;
  for (int64_t t = GlobalIndex(); t < total; t += GlobalStride()) {
    const int64_t plane = t / (g.oh * g.ow);
    y[t] = src[plane * g.h * g.w + idx[t]];
  }
}

template <typename T>
__device__ inline T Divisor(const PoolGeom& g, const WindowBounds& b) {
  if (g.count_include_pad) return static_cast<T>(static_cast<double>(g.kh) * g.kw);
  return static_cast<T>((b.r1 - b.r0) * (b.c1 - b.c0));
}

template <typename T>
__global__ void AvgPoolKernel(const T* x, T* y, PoolGeom g) {
  const int64_t total = g.planes * g.oh * g.ow;
  for (int64_t t = GlobalIndex(); t < total; t += GlobalStride()) {
    const int64_t j = t % g.ow, i = (t / g.ow) % g.oh, plane = t / (g.ow * g.oh);
    const T* xp = x + plane * g.h * g.w;
    const WindowBounds b = Bounds(g, i, j);
    T acc = 0;
    for (int64_t r = b.r0; r < b.r1; ++r) {
      for (int64_t c = b.c0; c < b.c1; ++c) acc += xp[r * g.w + c];
    }
    y[t] = acc / Divisor<T>(g, b);
  }
}

template <typename T>
__global__ void AvgPoolGradKernel(const T* dy, T* dx, PoolGeom g) {
  const int64_t total = g.planes * g.h * g.w;
  for (int64_t t = GlobalIndex(); t < total; t += GlobalStride()) {
    const CellWindows w = WindowsContaining(g, t);
    const int64_t base = w.plane * g.oh * g.ow;
    T acc = 0;
    for (int64_t i = w.i0; i <= w.i1; ++i) {
      for (int64_t j = w.j0; j <= w.j1; ++j) {
        acc += dy[base + i * g.ow + j] / Divisor<T>(g, Bounds(g, i, j));
      }
    }
    dx[t] = acc;
  }
}

}  // namespace

cudaError_t LaunchSoftmax(bool log, DT dt, const void* x, void* y, int64_t outer, int64_t len,
                          int64_t inner, cudaStream_t s) {
  if (outer * len * inner == 0) return cudaSuccess;
  return DispatchFloat(dt, [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    const T* px = static_cast<const T*>(x);
    T* py = static_cast<T*>(y);
    const bool rows = inner == 1 && len >= kBlockRowMin;
    if (rows && log) Launch(SoftmaxRows<T, true>, RowGrid(outer), kThreads, s, px, py, outer, len);
    if (rows && !log) Launch(SoftmaxRows<T, false>, RowGrid(outer), kThreads, s, px, py, outer, len);
    const unsigned blocks = BlocksFor(outer * inner);
    if (!rows && log) Launch(SoftmaxColumns<T, true>, blocks, kThreads, s, px, py, outer, len, inner);
    if (!rows && !log) Launch(SoftmaxColumns<T, false>, blocks, kThreads, s, px, py, outer, len, inner);
    return LastLaunchError();
  });
}

cudaError_t LaunchSoftmaxCrossEntropy(DT dt, const void* x, const void* labels, void* loss,
                                      int64_t outer, int64_t len, int64_t inner, cudaStream_t s) {
  if (outer * inner == 0) return cudaSuccess;
  return DispatchFloat(dt, [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    const T* px = static_cast<const T*>(x);
    const T* pl = static_cast<const T*>(labels);
    T* po = static_cast<T*>(loss);
    if (inner == 1 && len >= kBlockRowMin) {
      Launch(CrossEntropyRows<T>, RowGrid(outer), kThreads, s, px, pl, po, outer, len);
    } else {
      Launch(CrossEntropyColumns<T>, BlocksFor(outer * inner), kThreads, s, px, pl, po, outer, len,
                                                                          inner);
    }
    return LastLaunchError();
  });
}

cudaError_t LaunchSparseSoftmaxCrossEntropy(DT dt, const void* x, DT label_dt,
                                            const void* labels, void* loss, int64_t n,
                                            int64_t c, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  return DispatchFloat(dt, [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    return DispatchIndex(label_dt, [&](auto label_zero) -> cudaError_t {
      using L = decltype(label_zero);
      const T* px = static_cast<const T*>(x);
      const L* pl = static_cast<const L*>(labels);
      T* po = static_cast<T*>(loss);
      if (c >= kBlockRowMin) {
        Launch(SparseCrossEntropyRowsPerBlock<T, L>, RowGrid(n), kThreads, s, px, pl, po, n, c);
      } else {
        Launch(SparseCrossEntropyRowsPerThread<T, L>, BlocksFor(n), kThreads, s, px, pl, po, n, c);
      }
      return LastLaunchError();
    });
  });
}

cudaError_t LaunchLayerNorm(DT dt, const void* x, const void* scale, const void* bias, void* y,
                            int64_t rows, int64_t n, double eps, cudaStream_t s) {
  if (rows == 0 || n == 0) return cudaSuccess;
  return DispatchFloat(dt, [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    Launch(LayerNormRows<T>, RowGrid(rows), kThreads, s, static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<const T*>(bias),
        static_cast<T*>(y), rows, n, eps);
    return LastLaunchError();
  });
}

cudaError_t LaunchMaxPoolArgmax(DT dt, const void* x, void* y, int64_t* idx, const PoolGeom& g,
                                cudaStream_t s) {
  return DispatchFloat(dt, [&](auto zero) {
    return LaunchFlat(MaxPoolArgmaxKernel<decltype(zero)>, g.planes * g.oh * g.ow, s, x, y, idx,
                      g);
  });
}

cudaError_t LaunchMaxPoolGrad(DT dt, const int64_t* idx, const void* dy, void* dx,
                              const PoolGeom& g, cudaStream_t s) {
  return DispatchFloat(dt, [&](auto zero) {
    return LaunchFlat(MaxPoolGradKernel<decltype(zero)>, g.planes * g.h * g.w, s, idx, dy, dx, g);
  });
}

cudaError_t LaunchGatherArgmax(DT dt, const int64_t* idx, const void* src, void* y,
                               const PoolGeom& g, cudaStream_t s) {
  return DispatchFloat(dt, [&](auto zero) {
    return LaunchFlat(GatherArgmaxKernel<decltype(zero)>, g.planes * g.oh * g.ow, s, idx, src, y,
                      g);
  });
}

cudaError_t LaunchAvgPool(DT dt, const void* x, void* y, const PoolGeom& g, cudaStream_t s) {
  return DispatchFloat(dt, [&](auto zero) {
    return LaunchFlat(AvgPoolKernel<decltype(zero)>, g.planes * g.oh * g.ow, s, x, y, g);
  });
}

cudaError_t LaunchAvgPoolGrad(DT dt, const void* dy, void* dx, const PoolGeom& g,
                              cudaStream_t s) {
  return DispatchFloat(dt, [&](auto zero) {
    return LaunchFlat(AvgPoolGradKernel<decltype(zero)>, g.planes * g.h * g.w, s, dy, dx, g);
  });
}

}  // namespace cuda
}  // namespace kgrad
