// Device code of the reductions: one strided reduction over a ReduceGeom (sum,
// mean, prod, max, min, logsumexp; also einsum's rearrangements and sum_to) and
// argmax/argmin.
//
// Three shapes of work, chosen by the host-side plan below:
//   * thread per output: each thread folds its reduced elements in order (few
//     reduced elements, or a kept innermost dim, where neighbouring threads read
//     neighbouring addresses);
//   * block per output: the block's threads stride over the reduced elements and
//     combine in shared memory;
//   * split: when the outputs cannot fill the GPU, each output's elements are cut
//     into `splits` chunks (by threads or by blocks), folded into a scratch row of
//     partials, which a second pass folds.
// The combination order depends only on the shape and the device's SM count, so
// results are reproducible from run to run. Sums of floats (sum, mean, the
// exponentials of logsumexp) are accumulated in double, as on the CPU
// (backends/cpu/double_sums.h): both then round nearly exact sums, whatever
// order each adds in.
#include <cstdint>
#include <type_traits>

#include "backends/cpu/double_sums.h"  // SumAcc, shared with the CPU kernels
#include "backends/cuda/kernels/device_util.cu.h"
#include "backends/cuda/kernels/launch.h"

namespace kgrad {
namespace cuda {
namespace {

using cpu::SumAcc;

// ----- Reducers: Acc (the type partial results are kept in), Identity, Combine,
// Transform (of an input element for output o), Finalize (of the folded value for
// output o). -----------------------------------------------------------------------
template <typename T>
struct SumReducer {
  using Acc = SumAcc<T>;
  __device__ Acc Identity() const { return Acc(0); }
  __device__ Acc Combine(Acc a, Acc b) const { return WrapAdd(a, b); }
  __device__ Acc Transform(T x, int64_t) const { return static_cast<Acc>(x); }
  __device__ T Finalize(Acc a, int64_t) const { return static_cast<T>(a); }
};

template <typename T>
struct MeanReducer : SumReducer<T> {
  SumAcc<T> count;
  __device__ T Finalize(SumAcc<T> a, int64_t) const { return static_cast<T>(a / count); }
};

template <typename T>
struct ProdReducer {
  using Acc = T;
  __device__ T Identity() const { return T(1); }
  __device__ T Combine(T a, T b) const { return WrapMul(a, b); }
  __device__ T Transform(T x, int64_t) const { return x; }
  __device__ T Finalize(T a, int64_t) const { return a; }
};

// A NaN anywhere makes the result NaN: `b != b` replaces the accumulator and then
// nothing replaces it (Combine is commutative up to which NaN survives).
template <typename T, bool kMax>
struct ExtremumReducer {
  using Acc = T;
  __device__ T Identity() const {
    if constexpr (std::is_floating_point_v<T>) {
      return kMax ? -Infinity<T>() : Infinity<T>();
    } else {
      return kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    }
  }
  __device__ T Combine(T a, T b) const {
    if (a != a) return a;
    return ((kMax ? b > a : b < a) || b != b) ? b : a;
  }
  __device__ T Transform(T x, int64_t) const { return x; }
  __device__ T Finalize(T a, int64_t) const { return a; }
};

// The second pass of logsumexp: sum exp(x - shift[o]), then shift[o] + log(sum),
// with shift the max where it is finite (else 0: all -inf gives -inf, a +inf
// gives +inf, a NaN gives NaN).
template <typename T>
struct SumExpReducer {
  using Acc = SumAcc<T>;
  const T* max;
  __device__ T Shift(int64_t o) const {
    const T m = max[o];
    return IsFinite(m) ? m : T(0);
  }
  __device__ Acc Identity() const { return Acc(0); }
  __device__ Acc Combine(Acc a, Acc b) const { return a + b; }
  __device__ Acc Transform(T x, int64_t o) const { return static_cast<Acc>(Exp(x - Shift(o))); }
  __device__ T Finalize(Acc a, int64_t o) const { return Shift(o) + Log(static_cast<T>(a)); }
};

// An input element as the accumulator type: transformed (first pass), or a
// partial result read back (second pass).
template <bool kTransform, typename R, typename In>
__device__ inline typename R::Acc Load(const R& r, In v, int64_t o) {
  if constexpr (kTransform) {
    return r.Transform(v, o);
  } else {
    return static_cast<typename R::Acc>(v);
  }
}

// The folded value as stored: final, or a partial result for a second pass.
template <bool kFinalize, typename Out, typename R>
__device__ inline Out Store(const R& r, typename R::Acc a, int64_t o) {
  if constexpr (kFinalize) {
    return r.Finalize(a, o);
  } else {
    return static_cast<Out>(a);
  }
}

// ----- Kernels ------------------------------------------------------------------------------
__device__ inline int64_t OutOffset(const ReduceGeom& g, int64_t o) {
  return StridedOffset(o, g.out_rank, g.out_dims, g.out_strides);
}

// One thread per output (per output and split when gridDim.y > 1: then out is the
// [out_count, splits] partials row). Unsplit, the innermost reduced dim runs as a
// plain loop.
template <typename In, typename Out, typename R, bool kTransform, bool kFinalize>
__global__ void ReducePerThread(const In* x, Out* out, ReduceGeom g, R r) {
  using A = typename R::Acc;
  const int64_t splits = gridDim.y;
  if (splits > 1) {
    const int64_t chunk = (g.red_count + splits - 1) / splits;
    const int64_t begin = blockIdx.y * chunk;
    const int64_t end = begin + chunk < g.red_count ? begin + chunk : g.red_count;
    for (int64_t o = GlobalIndex(); o < g.out_count; o += GlobalStride()) {
      const int64_t base = OutOffset(g, o);
      A acc = r.Identity();
      for (int64_t i = begin; i < end; ++i) {
        const In v = x[base + StridedOffset(i, g.red_rank, g.red_dims, g.red_strides)];
        acc = r.Combine(acc, Load<kTransform>(r, v, o));
      }
      out[o * splits + blockIdx.y] = Store<false, Out>(r, acc, o);
    }
    return;
  }
  const int last = g.red_rank - 1;
  const int64_t inner = g.red_rank > 0 ? g.red_dims[last] : 1;
  const int64_t inner_stride = g.red_rank > 0 ? g.red_strides[last] : 0;
  const int64_t runs = g.red_count == 0 ? 0 : g.red_count / inner;
  for (int64_t o = GlobalIndex(); o < g.out_count; o += GlobalStride()) {
    const int64_t base = OutOffset(g, o);
    A acc = r.Identity();
    for (int64_t q = 0; q < runs; ++q) {
      const In* p = x + base + StridedOffset(q, last > 0 ? last : 0, g.red_dims, g.red_strides);
      for (int64_t j = 0; j < inner; ++j) {
        const In v = p[j * inner_stride];
        acc = r.Combine(acc, Load<kTransform>(r, v, o));
      }
    }
    out[o] = Store<kFinalize, Out>(r, acc, o);
  }
}

// Folds `v` across the block; thread 0 gets the result.
template <typename T, typename R>
__device__ T BlockCombine(T v, const R& r) {
  __shared__ T shared[kThreads];
  shared[threadIdx.x] = v;
  __syncthreads();
  for (unsigned width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) {
      shared[threadIdx.x] = r.Combine(shared[threadIdx.x], shared[threadIdx.x + width]);
    }
    __syncthreads();
  }
  const T result = shared[0];
  __syncthreads();  // the array is reused by the next output of this block
  return result;
}

// Blocks (o, split): the threads stride over the split's reduced elements. With
// one split the output is final; with several, out is the [out_count, splits]
// partials row.
template <typename In, typename Out, typename R, bool kTransform, bool kFinalize>
__global__ void ReducePerBlock(const In* x, Out* out, ReduceGeom g, R r) {
  using A = typename R::Acc;
  const int64_t splits = gridDim.y;
  const int64_t chunk = (g.red_count + splits - 1) / splits;
  const int64_t begin = blockIdx.y * chunk;
  const int64_t end = begin + chunk < g.red_count ? begin + chunk : g.red_count;
  for (int64_t o = blockIdx.x; o < g.out_count; o += gridDim.x) {
    const int64_t base = OutOffset(g, o);
    A acc = r.Identity();
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const In v = x[base + StridedOffset(i, g.red_rank, g.red_dims, g.red_strides)];
      acc = r.Combine(acc, Load<kTransform>(r, v, o));
    }
    acc = BlockCombine(acc, r);
    if (threadIdx.x == 0) {
      if (splits == 1) {
        out[o] = Store<kFinalize, Out>(r, acc, o);
      } else {
        out[o * splits + blockIdx.y] = Store<false, Out>(r, acc, o);
      }
    }
  }
}

// ----- Planning -------------------------------------------------------------------------------
enum class Mode { kThread, kBlock };

struct Plan {
  Mode mode = Mode::kThread;
  int64_t splits = 1;
};

Plan MakePlan(const ReduceGeom& g, int sms) {
  Plan p;
  if (g.out_count == 0 || g.red_count <= 32) return p;
  const int64_t resident_threads = 2048 * static_cast<int64_t>(sms > 0 ? sms : 1);
  const bool inner_kept = g.out_rank > 0 && g.out_strides[g.out_rank - 1] == 1;
  if (inner_kept && g.out_count >= 1024) {
    // Neighbouring threads read neighbouring columns. When the columns alone
    // cannot fill the GPU (a bias gradient: [batch, features] -> [features]),
    // each column's rows are split among several threads.
    if (g.out_count < resident_threads && g.red_count >= 1024) {
      int64_t splits = (resident_threads + g.out_count - 1) / g.out_count;
      const int64_t by_size = g.red_count / 256;  // >= 256 elements per thread
      if (splits > by_size) splits = by_size;
      if (splits > 1024) splits = 1024;
      if (splits > 1) p.splits = splits;
    }
    return p;
  }
  // Many short folds: a thread each beats a mostly idle block each.
  if (g.out_count >= 16384 && g.red_count <= 128) return p;
  p.mode = Mode::kBlock;
  const int64_t target_blocks = 4 * static_cast<int64_t>(sms > 0 ? sms : 1);
  if (g.out_count < target_blocks && g.red_count >= 8 * kThreads) {
    int64_t splits = (target_blocks + g.out_count - 1) / g.out_count;
    const int64_t by_size = g.red_count / (4 * kThreads);  // >= 4 elements per thread
    if (splits > by_size) splits = by_size;
    if (splits > 1024) splits = 1024;
    if (splits > 1) p.splits = splits;
  }
  return p;
}

// A geometry that folds the [out_count, splits] partials row by row.
ReduceGeom PartialsGeom(const ReduceGeom& g, int64_t splits) {
  ReduceGeom p;
  p.out_rank = 1;
  p.out_count = g.out_count;
  p.out_dims[0] = g.out_count;
  p.out_strides[0] = splits;
  p.red_rank = 1;
  p.red_count = splits;
  p.red_dims[0] = splits;
  p.red_strides[0] = 1;
  return p;
}

// Runs one reduction with reducer r into out; `scratch` holds out_count * splits
// partial results (R::Acc) when the plan splits.
template <typename T, typename R>
cudaError_t RunReduce(const T* x, T* out, const ReduceGeom& g, const R& r, void* scratch, int sms,
                      cudaStream_t s) {
  using A = typename R::Acc;
  if (g.out_count == 0) return cudaSuccess;
  const Plan p = MakePlan(g, sms);
  const bool thread = p.mode == Mode::kThread;
  if (p.splits == 1) {
    if (thread) {
      Launch(ReducePerThread<T, T, R, true, true>, BlocksFor(g.out_count), kThreads, s, x, out, g,
             r);
    } else {
      Launch(ReducePerBlock<T, T, R, true, true>, RowGrid(g.out_count), kThreads, s, x, out, g,
             r);
    }
    return LastLaunchError();
  }
  // Two passes: partial folds into [out_count, splits], then each row folded.
  A* partials = static_cast<A*>(scratch);
  const unsigned splits = static_cast<unsigned>(p.splits);
  if (thread) {
    Launch(ReducePerThread<T, A, R, true, false>, dim3(BlocksFor(g.out_count), splits), kThreads,
           s, x, partials, g, r);
  } else {
    Launch(ReducePerBlock<T, A, R, true, false>, dim3(RowGrid(g.out_count), splits), kThreads, s,
           x, partials, g, r);
  }
  cudaError_t e = LastLaunchError();
  if (e != cudaSuccess) return e;
  const ReduceGeom pg = PartialsGeom(g, p.splits);
  Launch(ReducePerBlock<A, T, R, false, true>, RowGrid(g.out_count), kThreads, s, partials, out,
         pg, r);
  return LastLaunchError();
}

size_t PartialsBytes(const ReduceGeom& g, size_t elem, int sms) {
  const Plan p = MakePlan(g, sms);
  return p.splits > 1 ? static_cast<size_t>(g.out_count * p.splits) * elem : 0;
}

size_t ElemSize(DT dt) {
  switch (dt) {
    case DT::kF32:
    case DT::kI32: return 4;
    case DT::kF64:
    case DT::kI64: return 8;
    case DT::kBool: return 1;
  }
  return 8;
}

// Partial results of f32 sums are doubles (SumAcc); one size serves every op.
size_t PartialElemSize(DT dt) { return dt == DT::kF32 ? sizeof(double) : ElemSize(dt); }

// Scratch layout: [partials][max row of logsumexp], each 256-byte aligned.
size_t AlignUp(size_t n) { return (n + 255) / 256 * 256; }

template <typename T>
cudaError_t ReduceTyped(ReduceOp op, const T* x, T* out, const ReduceGeom& g, void* scratch,
                        int sms, cudaStream_t s) {
  void* partials = scratch;
  switch (op) {
    case ReduceOp::kSum: return RunReduce(x, out, g, SumReducer<T>{}, partials, sms, s);
    case ReduceOp::kProd: return RunReduce(x, out, g, ProdReducer<T>{}, partials, sms, s);
    case ReduceOp::kMax:
      return RunReduce(x, out, g, ExtremumReducer<T, true>{}, partials, sms, s);
    case ReduceOp::kMin:
      return RunReduce(x, out, g, ExtremumReducer<T, false>{}, partials, sms, s);
    case ReduceOp::kMean:
    case ReduceOp::kLogsumexp:
      if constexpr (std::is_floating_point_v<T>) {
        if (op == ReduceOp::kMean) {
          MeanReducer<T> r;
          r.count = static_cast<SumAcc<T>>(g.red_count);
          return RunReduce(x, out, g, r, partials, sms, s);
        }
        T* max = reinterpret_cast<T*>(static_cast<char*>(scratch) +
                                      AlignUp(PartialsBytes(g, sizeof(SumAcc<T>), sms)));
        cudaError_t e = RunReduce(x, max, g, ExtremumReducer<T, true>{}, partials, sms, s);
        if (e != cudaSuccess) return e;
        return RunReduce(x, out, g, SumExpReducer<T>{max}, partials, sms, s);
      }
      return cudaErrorInvalidValue;
  }
  return cudaErrorInvalidValue;
}

// ----- argmax / argmin -------------------------------------------------------------------
// True when x replaces `best`: strictly larger (smaller), or the first NaN.
template <bool kMax, typename T>
__device__ inline bool Beats(T x, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (best != best) return false;
    if (x != x) return true;
  }
  return kMax ? x > best : x < best;
}

// One thread per (o, i) column, walking n in order.
template <bool kMax, typename T>
__global__ void ArgPerThread(const T* x, int64_t* out, int64_t outer, int64_t n, int64_t inner) {
  const int64_t total = outer * inner;
  for (int64_t t = GlobalIndex(); t < total; t += GlobalStride()) {
    const int64_t o = t / inner, i = t % inner;
    const T* p = x + o * n * inner + i;
    T best = p[0];
    int64_t at = 0;
    for (int64_t j = 1; j < n; ++j) {
      const T v = p[j * inner];
      if (Beats<kMax>(v, best)) {
        best = v;
        at = j;
      }
    }
    out[t] = at;
  }
}

// One block per contiguous row (inner == 1): (value, position) pairs combined so
// that the earliest position wins among equals and among NaNs.
template <bool kMax, typename T>
__global__ void ArgPerBlock(const T* x, int64_t* out, int64_t rows, int64_t n) {
  __shared__ T values[kThreads];
  __shared__ int64_t positions[kThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* p = x + row * n;
    T best = p[0];
    int64_t at = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      if (Beats<kMax>(p[j], best)) {
        best = p[j];
        at = j;
      }
    }
    values[threadIdx.x] = best;
    positions[threadIdx.x] = at;
    __syncthreads();
    for (unsigned width = blockDim.x / 2; width > 0; width /= 2) {
      if (threadIdx.x < width) {
        const T v = values[threadIdx.x + width];
        const int64_t j = positions[threadIdx.x + width];
        const T b = values[threadIdx.x];
        const int64_t k = positions[threadIdx.x];
        // The other side wins when it beats ours, or ties (both NaN, or equal)
        // at an earlier position.
        bool take = Beats<kMax>(v, b);
        if (!take && !Beats<kMax>(b, v)) take = j < k;
        if (take) {
          values[threadIdx.x] = v;
          positions[threadIdx.x] = j;
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) out[row] = positions[0];
    __syncthreads();
  }
}

template <bool kMax, typename T>
cudaError_t RunArg(const T* x, int64_t* out, int64_t outer, int64_t n, int64_t inner,
                   cudaStream_t s) {
  if (outer * inner == 0) return cudaSuccess;
  if (inner == 1 && n >= 256) {
    Launch(ArgPerBlock<kMax, T>, RowGrid(outer), kThreads, s, x, out, outer, n);
  } else {
    Launch(ArgPerThread<kMax, T>, BlocksFor(outer * inner), kThreads, s, x, out, outer, n, inner);
  }
  return LastLaunchError();
}

}  // namespace

size_t ReduceScratchBytes(ReduceOp op, DT dt, const ReduceGeom& g, int sms) {
  size_t bytes = AlignUp(PartialsBytes(g, PartialElemSize(dt), sms));
  if (op == ReduceOp::kLogsumexp) bytes += AlignUp(static_cast<size_t>(g.out_count) * ElemSize(dt));
  return bytes;
}

cudaError_t LaunchReduce(ReduceOp op, DT dt, const void* x, void* out, const ReduceGeom& g,
                         void* scratch, int sms, cudaStream_t s) {
  return DispatchAll(dt, [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool>) {
      return cudaErrorInvalidValue;
    } else {
      return ReduceTyped<T>(op, static_cast<const T*>(x), static_cast<T*>(out), g, scratch, sms,
                            s);
    }
  });
}

cudaError_t LaunchArgReduce(bool is_max, DT dt, const void* x, int64_t* out, int64_t outer,
                            int64_t n, int64_t inner, cudaStream_t s) {
  return DispatchAll(dt, [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool>) {
      return cudaErrorInvalidValue;
    } else {
      const T* px = static_cast<const T*>(x);
      return is_max ? RunArg<true>(px, out, outer, n, inner, s)
                    : RunArg<false>(px, out, outer, n, inner, s);
    }
  });
}

}  // namespace cuda
}  // namespace kgrad
