// The boundary between the host kernels (backends/cuda/*.cc, built by the C++
// toolchain) and the device code (backends/cuda/kernels/*.cu, built by nvcc into
// static libraries): plain structs and launch functions, no Abseil and only the
// dependency-free kgrad headers (the dtype and primitive enums, the elementwise
// table and functors), so that nvcc compiles the .cu files alone.
//
// Every launcher queues work on `stream` and returns the launch's cudaError_t
// (cudaSuccess, or the error of the launch itself: a bad configuration, no
// device); errors inside a kernel surface at the next synchronisation. The host
// side validates shapes, dtypes and attributes before calling, so launchers
// assume valid arguments. Element counts and strides are int64 throughout.
#ifndef KGRAD_BACKENDS_CUDA_KERNELS_LAUNCH_H_
#define KGRAD_BACKENDS_CUDA_KERNELS_LAUNCH_H_

#include <cstddef>
#include <cstdint>

#include "core/primitive_id.h"
#include "ops/elementwise_functors.h"

#if defined(KGRAD_CUDA_EMULATION)
#include "backends/cuda/kernels/emulation.h"  // host emulation for tests (no GPU)
#else
#include <cuda_runtime_api.h>
#endif

namespace kgrad {
namespace cuda {

// Element types, numbered like kgrad::DType (checked by a static_assert on the
// host side).
enum class DT : int { kF32 = 0, kF64 = 1, kI32 = 2, kI64 = 3, kBool = 4 };

// Geometry structs hold at most this many dims (kgrad's kMaxRank).
inline constexpr int kMaxDims = 16;

// ----- Elementwise (elementwise.cu) ------------------------------------------------
// Each op is its row of ops/elementwise_table.inc and its functor: `id` names the
// row, `at` carries the application's attributes (ops::ElementwiseAttrs).
// y[i] = op(x[i]) for a unary `id`; y may be x. The host checks that `id` accepts `dt`.
cudaError_t LaunchUnary(PrimId id, DT dt, const ew::Attrs& at, const void* x, void* y, int64_t n,
                        cudaStream_t s);

// An output of `count` elements walked over `rank` merged dims (outermost first),
// with up to three operands reading at per-dim strides (0 on broadcast dims).
struct BroadcastGeom {
  int rank = 0;
  int64_t count = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[3][kMaxDims] = {};
};

// out = op(a, b) for a binary `id`, with broadcasting; comparisons and logical
// ops write bool. `dt` is the operand dtype.
cudaError_t LaunchBinary(PrimId id, DT dt, const ew::Attrs& at, const void* a, const void* b,
                         void* out, const BroadcastGeom& g, cudaStream_t s);
// out = c ? a : b (operand 0 of the geometry is c, 1 is a, 2 is b).
cudaError_t LaunchSelect(DT dt, const void* c, const void* a, const void* b, void* out,
                         const BroadcastGeom& g, cudaStream_t s);
// out[i] = value converted to dt (floats to integers saturate, NaN gives 0).
cudaError_t LaunchFill(DT dt, void* out, int64_t n, double value, cudaStream_t s);
// y[i] = x[i] converted (kgrad's cast rules: saturating, NaN -> 0, != 0 for bool).
cudaError_t LaunchCast(DT from, DT to, const void* x, void* y, int64_t n, cudaStream_t s);
// y[i] = x[i] * keep(seed, i) / (1 - rate), keep from backends/cpu/dropout_hash.h.
cudaError_t LaunchDropout(DT dt, const void* x, void* y, int64_t n, uint64_t seed, double rate,
                          cudaStream_t s);

// Device-side checks. `*first` (device memory, set to ~0 by the launcher) ends
// as the smallest position i with a bad element, or stays ~0.
// Bad index: idx[i] outside [lo, bound) (idx is i32 or i64).
cudaError_t LaunchFirstBadIndex(DT idx_dt, const void* idx, int64_t n, int64_t lo, int64_t bound,
                                unsigned long long* first, cudaStream_t s);
// Bad divisor: x[i] == 0 (integer dtypes).
cudaError_t LaunchFirstZero(DT dt, const void* x, int64_t n, unsigned long long* first,
                            cudaStream_t s);

// ----- Reductions (reduce.cu) -------------------------------------------------------
enum class ReduceOp : int { kSum, kMean, kProd, kMax, kMin, kLogsumexp };

// out[o] = fold over r of x[offset(o) + offset(r)]: o runs row-major over
// out_dims (the output is dense in that order), r over red_dims; offsets are sums
// of index * stride. A rank-0 side has one element. Also describes transposes
// (red_rank 0), diagonals (summed strides) and sum_to.
struct ReduceGeom {
  int out_rank = 0;
  int red_rank = 0;
  int64_t out_count = 1;
  int64_t red_count = 1;
  int64_t out_dims[kMaxDims] = {};
  int64_t out_strides[kMaxDims] = {};
  int64_t red_dims[kMaxDims] = {};
  int64_t red_strides[kMaxDims] = {};
};

// Scratch bytes LaunchReduce needs for this problem on a device with `sms`
// multiprocessors (0 when none).
size_t ReduceScratchBytes(ReduceOp op, DT dt, const ReduceGeom& g, int sms);
// Empty reductions give the identity (sum 0, prod 1, mean NaN, logsumexp -inf;
// max/min of nothing is rejected by the host). Integer sums and products wrap;
// max/min propagate NaN.
cudaError_t LaunchReduce(ReduceOp op, DT dt, const void* x, void* out, const ReduceGeom& g,
                         void* scratch, int sms, cudaStream_t s);

// x seen as [outer, n, inner], n > 0: out[o, i] = position along n of the first
// largest (is_max) or smallest element; a NaN counts as the extremum.
cudaError_t LaunchArgReduce(bool is_max, DT dt, const void* x, int64_t* out, int64_t outer,
                            int64_t n, int64_t inner, cudaStream_t s);

// ----- Data movement (shape.cu) ------------------------------------------------------
// dst[dst_offset + sum_k i_k * dst_strides[k]] = src[src_offset + sum_k i_k * src_strides[k]]
// for every index i of dims (strides and offsets in elements).
struct CopyGeom {
  int rank = 0;
  int64_t count = 1;
  int64_t src_offset = 0;
  int64_t dst_offset = 0;
  int64_t dims[kMaxDims] = {};
  int64_t src_strides[kMaxDims] = {};
  int64_t dst_strides[kMaxDims] = {};
};
// Elements of elem_size bytes (1, 4 or 8).
cudaError_t LaunchStridedCopy(int elem_size, const void* src, void* dst, const CopyGeom& g,
                              cudaStream_t s);

// params seen as [outer, dim, inner], n indices (checked on the host side):
// out[o, j, k] = params[o, idx[j], k].
cudaError_t LaunchGather(int elem_size, const void* params, DT idx_dt, const void* idx,
                         void* out, int64_t outer, int64_t dim, int64_t inner, int64_t n,
                         cudaStream_t s);
// out (already holding the input) seen as [outer, dim, inner]:
// out[o, idx[j], k] += upd[o, j, k]. Integer adds wrap.
cudaError_t LaunchScatterAdd(DT dt, void* out, const void* upd, DT idx_dt, const void* idx,
                             int64_t outer, int64_t dim, int64_t inner, int64_t n,
                             cudaStream_t s);
// gather_elements / scatter_elements: an index tensor of shape dims[0, rank) whose
// element at coordinates c names the element of `data` at c with its value (plus
// axis_dim when negative: the host checked [-axis_dim, axis_dim)) in place of
// c[axis].
struct ElementsGeom {
  int rank = 0;
  int axis = 0;
  int64_t count = 0;     // elements of the index tensor
  int64_t axis_dim = 0;  // data's dim at axis
  int64_t dims[kMaxDims] = {};          // the index tensor's shape
  int64_t data_strides[kMaxDims] = {};  // data's row-major strides
};
// out[i] = data[the element index i names]; elements of elem_size bytes.
cudaError_t LaunchGatherElements(int elem_size, const void* data, DT idx_dt, const void* idx,
                                 void* out, const ElementsGeom& g, cudaStream_t s);
// scatter_elements' reductions, numbered like ops::ScatterReduction.
enum class ScatterOp : int { kNone = 0, kAdd = 1, kMul = 2, kMax = 3, kMin = 4 };
// out (already holding data) at the element each index names combined with the
// update at the index's position: replaced (kNone), or folded by the reduction
// (integers wrap; NaN wins max and min). Where indices name one element twice,
// in the index tensor's row-major order, as the CPU kernel does.
cudaError_t LaunchScatterElements(DT dt, ScatterOp op, void* out, const void* upd, DT idx_dt,
                                  const void* idx, const ElementsGeom& g, cudaStream_t s);
// cumsum of x seen as [outer, len, inner] along len (backwards when reverse; each
// output without its own element when exclusive); integers wrap.
cudaError_t LaunchCumSum(DT dt, const void* x, void* y, int64_t outer, int64_t len, int64_t inner,
                         bool exclusive, bool reverse, cudaStream_t s);

// out seen as [outer, depth, inner]: on where idx[o, k] == d, else off (an index
// outside [0, depth) gives an all-off row).
cudaError_t LaunchOneHot(DT out_dt, DT idx_dt, const void* idx, void* out, int64_t outer,
                         int64_t depth, int64_t inner, double on, double off, cudaStream_t s);

// ----- nn (nn.cu) ------------------------------------------------------------------------
// loss[o, i] = sum_j labels * (max - x + log sum exp(x - max)) along the middle
// axis of [outer, len, inner] (f32/f64).
cudaError_t LaunchSoftmaxCrossEntropy(DT dt, const void* x, const void* labels, void* loss,
                                      int64_t outer, int64_t len, int64_t inner, cudaStream_t s);
// loss[i] = max_i - x[i, label_i] + log sum_j exp(x[i, j] - max_i); labels checked.
cudaError_t LaunchSparseSoftmaxCrossEntropy(DT dt, const void* x, DT label_dt,
                                            const void* labels, void* loss, int64_t n,
                                            int64_t c, cudaStream_t s);
// Rows of n elements: y = (x - mean) * rsqrt(var + eps) * scale + bias, the
// statistics and the affine map in double. y may be x.
cudaError_t LaunchLayerNorm(DT dt, const void* x, const void* scale, const void* bias, void* y,
                            int64_t rows, int64_t n, double eps, cudaStream_t s);
// Softmax (log: log_softmax) along the middle axis of [outer, len, inner], used
// where cuDNN cannot take the shape (dims beyond int).
cudaError_t LaunchSoftmax(bool log, DT dt, const void* x, void* y, int64_t outer, int64_t len,
                          int64_t inner, cudaStream_t s);

// Pooling over NCHW planes; windows start at i * stride - pad_top (rows) and
// j * stride - pad_left (columns); cells outside the input are padding.
struct PoolGeom {
  int64_t planes = 0;  // N * C
  int64_t h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;
  int64_t pad_top = 0, pad_left = 0;
  bool count_include_pad = true;
};
// Per window: the plane position of its first max (row-major window order; a NaN
// wins) into idx, and the max into y when y is not null.
cudaError_t LaunchMaxPoolArgmax(DT dt, const void* x, void* y, int64_t* idx, const PoolGeom& g,
                                cudaStream_t s);
// dx[cell] = sum of dy over the windows whose argmax is the cell.
cudaError_t LaunchMaxPoolGrad(DT dt, const int64_t* idx, const void* dy, void* dx,
                              const PoolGeom& g, cudaStream_t s);
// y[window] = src[argmax of the window] (max_pool2d_grad_grad).
cudaError_t LaunchGatherArgmax(DT dt, const int64_t* idx, const void* src, void* y,
                               const PoolGeom& g, cudaStream_t s);
// Average pooling and its adjoint (divisor KH*KW, or the window's real cells
// without count_include_pad).
cudaError_t LaunchAvgPool(DT dt, const void* x, void* y, const PoolGeom& g, cudaStream_t s);
cudaError_t LaunchAvgPoolGrad(DT dt, const void* dy, void* dx, const PoolGeom& g,
                              cudaStream_t s);

}  // namespace cuda
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CUDA_KERNELS_LAUNCH_H_
