// CUDA kernels: convolution (NCHW activations, OIHW filters) and pooling.
//
// conv2d and both backprops run on cuDNN: groups, stride and dilation through
// the convolution descriptor; FMA math for f32, so no TF32 rounding. The
// algorithm is chosen once per geometry and device (ChooseAndRun): cuDNN's
// heuristics list the candidates, the deterministic ones among them that are not
// FFT or non-fused Winograd (whose f32 rounding strays furthest from direct sums)
// are each timed on the call's own tensors, and the fastest is remembered by the
// device; later calls skip the heuristics (their query alone cost more than
// these convolutions). Workspaces come from the caching allocator. Asymmetric
// padding, which cuDNN's descriptor
// cannot express, becomes an explicit zero-pad of the input (and a slice of the
// input gradient). Shapes beyond cuDNN's int dims run on the CPU.
//
// Pooling: max_pool2d without padding and avg_pool2d with symmetric padding run
// on cuDNN; the other forms, and every backward (max_pool2d_grad,
// max_pool2d_grad_grad, avg_pool2d_grad), run kgrad's kernels (kernels/nn.cu),
// which route through the first max of each window in row-major order with NaN
// winning: the CPU's rule, which cuDNN does not promise (ties are common after
// relu).
//
// Attributes, geometry and input checks are the window rules of ops/conv_window.h,
// shared with inference and the CPU kernels.
#include <algorithm>
#include <array>
#include <climits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/kernel_util.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/conv_window.h"

namespace kgrad {
namespace cuda {
namespace {

using ops::ConvGeom;
using ops::Window;

bool FitsInt(std::initializer_list<int64_t> values) {
  for (int64_t v : values) {
    if (v > INT_MAX) return false;
  }
  return true;
}

// cuDNN takes every dim, attribute and 4-d tensor size as int. 1-D and 3-D
// windows (rank-3 and rank-5 tensors; the ONNX importer lifts 1-D ones to 2-D)
// run on the CPU: the descriptors here are cuDNN's 4-d ones.
bool CudnnCanConvolve(const ConvGeom& g) {
  if (g.win.spatial != 2) return false;
  const Window& k = g.win;
  const int64_t ph = k.pad_lo[ops::kH] + k.pad_hi[ops::kH], pw = k.pad_lo[ops::kW] + k.pad_hi[ops::kW];
  return FitsInt({g.n, g.c, g.h + ph, g.w + pw, g.o, g.kh, g.kw, g.oh, g.ow, k.stride[ops::kH],
                  k.stride[ops::kW], k.dilation[ops::kH], k.dilation[ops::kW], k.groups, k.pad_lo[ops::kH], k.pad_lo[ops::kW],
                  g.n * g.c * (g.h + ph) * (g.w + pw), g.n * g.o * g.oh * g.ow,
                  g.o * g.cg * g.kh * g.kw});
}

// ----- cuDNN descriptors ----------------------------------------------------------------------
// The descriptors of one convolution; destroyed with it.
class ConvDescs {
 public:
  // `g` over the input `xin` as cuDNN reads it (see CudnnInput): with g's padding
  // when it is symmetric, else already padded. Also takes the stream's handle.
  absl::Status Init(const Gpu& gpu, DType dtype, const ConvGeom& g, const Tensor& xin) {
    KGRAD_ASSIGN_OR_RETURN(handle_, gpu.device->Cudnn());
    const cudnnDataType_t type = CudnnDataType(dtype);
    const bool pad = g.win.symmetric();
    auto i = [](int64_t v) { return static_cast<int>(v); };
    KGRAD_RETURN_IF_ERROR(x_.Nchw(dtype, g.n, g.c, xin.dim(2), xin.dim(3)));
    KGRAD_RETURN_IF_ERROR(y_.Nchw(dtype, g.n, g.o, g.oh, g.ow));
    KGRAD_CUDNN_CALL(cudnnCreateFilterDescriptor(w_.out()));
    KGRAD_CUDNN_CALL(cudnnCreateConvolutionDescriptor(conv_.out()));
    KGRAD_CUDNN_CALL(cudnnSetFilter4dDescriptor(w_.get(), type, CUDNN_TENSOR_NCHW, i(g.o), i(g.cg),
                                                i(g.kh), i(g.kw)));
    const Window& k = g.win;
    KGRAD_CUDNN_CALL(cudnnSetConvolution2dDescriptor(
        conv_.get(), pad ? i(k.pad_lo[ops::kH]) : 0, pad ? i(k.pad_lo[ops::kW]) : 0, i(k.stride[ops::kH]),
        i(k.stride[ops::kW]), i(k.dilation[ops::kH]), i(k.dilation[ops::kW]), CUDNN_CROSS_CORRELATION, type));
    KGRAD_CUDNN_CALL(cudnnSetConvolutionGroupCount(conv_.get(), i(k.groups)));
    // FMA math: no TF32 tensor-core rounding of f32 convolutions.
    KGRAD_CUDNN_CALL(cudnnSetConvolutionMathType(
        conv_.get(), dtype == DType::kFloat32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH));
    return absl::OkStatus();
  }

  cudnnHandle_t handle() const { return handle_; }
  cudnnTensorDescriptor_t x() const { return x_.get(); }
  cudnnTensorDescriptor_t y() const { return y_.get(); }
  cudnnFilterDescriptor_t w() const { return w_.get(); }
  cudnnConvolutionDescriptor_t conv() const { return conv_.get(); }

 private:
  cudnnHandle_t handle_ = nullptr;
  TensorDesc x_, y_;
  FilterDesc w_;
  ConvolutionDesc conv_;
};

// ----- Algorithm choice ------------------------------------------------------------------------
// Algorithms whose f32 results stay close to direct summation: not FFT (either
// tiling) and not the non-fused Winograd transforms.
bool Precise(cudnnConvolutionFwdAlgo_t a) {
  return a != CUDNN_CONVOLUTION_FWD_ALGO_FFT && a != CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING &&
         a != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool Precise(cudnnConvolutionBwdDataAlgo_t a) {
  return a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT &&
         a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING &&
         a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool Precise(cudnnConvolutionBwdFilterAlgo_t a) {
  return a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT &&
         a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING &&
         a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// A geometry's key in the device's table of chosen algorithms: the operation,
// the dtype and everything cuDNN's descriptors hold.
std::string ConvKey(const char* op, DType dtype, const ConvGeom& g, const Tensor& xin) {
  const Window& k = g.win;
  const bool pad = k.symmetric();
  return absl::StrCat(op, ":", static_cast<int>(dtype), ":", g.n, ",", g.c, ",", xin.dim(2), ",",
                      xin.dim(3), ":", g.o, ",", g.cg, ",", g.kh, ",", g.kw, ":", g.oh, ",", g.ow,
                      ":", pad ? k.pad_lo[ops::kH] : 0, ",", pad ? k.pad_lo[ops::kW] : 0, ":", k.stride[ops::kH], ",",
                      k.stride[ops::kW], ":", k.dilation[ops::kH], ",", k.dilation[ops::kW], ":", k.groups);
}

// Two CUDA events on the call's stream, destroyed with the object.
class EventPair {
 public:
  ~EventPair() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }
  absl::Status Init() {
    KGRAD_CUDA_CALL(cudaEventCreate(&start_));
    KGRAD_CUDA_CALL(cudaEventCreate(&stop_));
    return absl::OkStatus();
  }
  // The time of fn() on `stream` in milliseconds (waits for it).
  template <typename Fn>
  absl::StatusOr<float> Time(cudaStream_t stream, Fn&& fn) {
    KGRAD_CUDA_CALL(cudaEventRecord(start_, stream));
    KGRAD_RETURN_IF_ERROR(fn());
    KGRAD_CUDA_CALL(cudaEventRecord(stop_, stream));
    KGRAD_CUDA_CALL(cudaEventSynchronize(stop_));
    float ms = 0;
    KGRAD_CUDA_CALL(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// Runs algorithm `algo` with a workspace of `bytes` from the caching allocator.
template <typename Algo, typename RunFn>
absl::Status RunWith(const KernelContext& ctx, Algo algo, size_t bytes, RunFn& run,
                     const char* what) {
  Tensor ws;
  if (bytes > 0) {
    KGRAD_ASSIGN_OR_RETURN(ws, Scratch(ctx, bytes));
  }
  return CudnnStatus(run(algo, bytes > 0 ? ws.raw_data() : nullptr, bytes), what);
}

// Runs the convolution run(algo, workspace, bytes) with the algorithm chosen for
// `key` on this device. On the first call for the key: query(perf, &count) lists
// cuDNN's candidates; the deterministic, precise ones (FMA math for f32) are
// each run twice and timed the second time, the fastest is remembered and its
// result left in the output. Without such a candidate, the heuristics' first
// one that runs (deterministic ones first), not remembered.
template <typename Perf, size_t kCount, typename QueryFn, typename RunFn>
absl::Status ChooseAndRun(const KernelContext& ctx, const Gpu& gpu, DType dtype,
                          const std::string& key, QueryFn&& query, RunFn&& run, const char* what) {
  using Algo = decltype(Perf{}.algo);
  CudaDeviceImpl::ConvAlgo known;
  if (gpu.device->FindConvAlgo(key, &known)) {
    return RunWith(ctx, static_cast<Algo>(known.algo), known.workspace, run, what);
  }
  std::array<Perf, kCount> perf;
  int count = 0;
  KGRAD_RETURN_IF_ERROR(query(perf.data(), static_cast<int>(kCount), &count));
  std::vector<const Perf*> timed, others;
  for (int i = 0; i < count; ++i) {
    const Perf& p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    const bool fma = dtype != DType::kFloat32 || p.mathType == CUDNN_FMA_MATH ||
                     p.mathType == CUDNN_DEFAULT_MATH;
    const bool det = p.determinism == CUDNN_DETERMINISTIC;
    (det && fma && Precise(p.algo) ? timed : others).push_back(&p);
  }
  EventPair events;
  KGRAD_RETURN_IF_ERROR(events.Init());
  const Perf* best = nullptr;
  float best_ms = 0;
  absl::Status last = absl::InternalError(absl::StrCat(what, ": cuDNN offered no algorithm"));
  for (const Perf* p : timed) {
    last = RunWith(ctx, p->algo, p->memory, run, what);  // the first run pays set-up costs
    if (!last.ok()) continue;
    absl::StatusOr<float> ms =
        events.Time(gpu.stream, [&] { return RunWith(ctx, p->algo, p->memory, run, what); });
    if (!ms.ok()) {
      last = ms.status();
      continue;
    }
    if (best == nullptr || *ms < best_ms) {
      best = p;
      best_ms = *ms;
    }
  }
  if (best != nullptr) {
    gpu.device->RememberConvAlgo(key, {static_cast<int>(best->algo), best->memory});
    if (best == timed.back()) return absl::OkStatus();  // its result is the last written
    return RunWith(ctx, best->algo, best->memory, run, what);
  }
  std::stable_partition(others.begin(), others.end(),
                        [](const Perf* p) { return p->determinism == CUDNN_DETERMINISTIC; });
  for (const Perf* p : others) {
    last = RunWith(ctx, p->algo, p->memory, run, what);
    if (last.ok()) return last;
  }
  return last;
}

// ----- Asymmetric padding -------------------------------------------------------------------
// cuDNN's descriptor holds one pad per axis, so asymmetric padding is applied to
// the tensors instead: an NCHW `shape` grown by k's padding.
Shape PaddedShape(const Shape& shape, const Window& k) {
  Shape dims = shape;
  dims[2] += k.pad_lo[ops::kH] + k.pad_hi[ops::kH];
  dims[3] += k.pad_lo[ops::kW] + k.pad_hi[ops::kW];
  return dims;
}

// Where the unpadded interior starts in a padded tensor of `strides`.
int64_t InteriorOffset(const Shape& strides, const Window& k) {
  return k.pad_lo[ops::kH] * strides[2] + k.pad_lo[ops::kW] * strides[3];
}

// The x that cuDNN reads: x itself for symmetric padding, else x zero-padded.
absl::StatusOr<Tensor> CudnnInput(const KernelContext& ctx, const Gpu& gpu, const Tensor& x,
                                  const Window& k) {
  if (k.symmetric()) return x;
  const Shape dims = PaddedShape(x.shape(), k);
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x.dtype(), dims));
  KGRAD_RETURN_IF_ERROR(FillTensor(ctx, out, 0.0));
  const Shape strides = RowMajorStrides(dims);
  KGRAD_RETURN_IF_ERROR(
      StridedCopy(DenseRead(x.shape(), strides, InteriorOffset(strides, k)), x, out, gpu.stream));
  return out;
}

// ----- conv2d ---------------------------------------------------------------------------------
absl::StatusOr<Value> Conv2d(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* w, ctx.FloatTensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(ConvGeom g, ops::ConvKernelGeom(ctx.prim(), {x, w}));
  if (!CudnnCanConvolve(g)) return CpuFallback(ctx);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.Allocate(x->dtype(), g.y_shape()));
  if (y.NumElements() == 0) return Value(std::move(y));
  if (g.cg == 0) {  // no input channels: an empty sum
    KGRAD_RETURN_IF_ERROR(FillTensor(ctx, y, 0.0));
    return Value(std::move(y));
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor xin, CudnnInput(ctx, gpu, *x, g.win));
  ConvDescs d;
  KGRAD_RETURN_IF_ERROR(d.Init(gpu, x->dtype(), g, xin));
  cudnnHandle_t h = d.handle();
  const CudnnScale one(x->dtype(), 1), zero(x->dtype(), 0);
  KGRAD_RETURN_IF_ERROR(
      (ChooseAndRun<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
          ctx, gpu, x->dtype(), ConvKey("fwd", x->dtype(), g, xin),
          [&](cudnnConvolutionFwdAlgoPerf_t* perf, int n, int* count) {
            return CudnnStatus(cudnnGetConvolutionForwardAlgorithm_v7(
                                   h, d.x(), d.w(), d.conv(), d.y(), n, count, perf),
                               "cudnnGetConvolutionForwardAlgorithm_v7");
          },
          [&](cudnnConvolutionFwdAlgo_t algo, void* ws, size_t bytes) {
            return cudnnConvolutionForward(h, one.get(), d.x(), xin.raw_data(), d.w(),
                                           w->raw_data(), d.conv(), algo, ws, bytes, zero.get(),
                                           d.y(), y.raw_data());
          },
          "cudnnConvolutionForward")));
  return Value(std::move(y));
}

// ----- conv2d_backprop_input -------------------------------------------------------------------
absl::StatusOr<Value> Conv2dBackpropInput(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* dy, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* w, ctx.FloatTensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x_ref, ctx.FloatTensorAt(2));
  KGRAD_ASSIGN_OR_RETURN(ConvGeom g, ops::ConvKernelGeom(ctx.prim(), {dy, w, x_ref}));
  if (!CudnnCanConvolve(g)) return CpuFallback(ctx);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor dx, ctx.Allocate(dy->dtype(), x_ref->shape()));
  if (dx.NumElements() == 0) return Value(std::move(dx));
  if (g.og == 0 || dy->NumElements() == 0) {  // nothing flows back
    KGRAD_RETURN_IF_ERROR(FillTensor(ctx, dx, 0.0));
    return Value(std::move(dx));
  }
  const bool sym = g.win.symmetric();
  Tensor dxp = dx;  // the gradient of the padded input when padding is explicit
  if (!sym) {
    KGRAD_ASSIGN_OR_RETURN(dxp, ctx.Allocate(dy->dtype(), PaddedShape(dx.shape(), g.win)));
  }
  ConvDescs d;
  KGRAD_RETURN_IF_ERROR(d.Init(gpu, dy->dtype(), g, dxp));
  cudnnHandle_t h = d.handle();
  const CudnnScale one(dy->dtype(), 1), zero(dy->dtype(), 0);
  KGRAD_RETURN_IF_ERROR(
      (ChooseAndRun<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
          ctx, gpu, dy->dtype(), ConvKey("bwd_data", dy->dtype(), g, dxp),
          [&](cudnnConvolutionBwdDataAlgoPerf_t* perf, int n, int* count) {
            return CudnnStatus(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                   h, d.w(), d.y(), d.conv(), d.x(), n, count, perf),
                               "cudnnGetConvolutionBackwardDataAlgorithm_v7");
          },
          [&](cudnnConvolutionBwdDataAlgo_t algo, void* ws, size_t bytes) {
            return cudnnConvolutionBackwardData(h, one.get(), d.w(), w->raw_data(), d.y(),
                                                dy->raw_data(), d.conv(), algo, ws, bytes,
                                                zero.get(), d.x(), dxp.raw_data());
          },
          "cudnnConvolutionBackwardData")));
  if (!sym) {
    // dx is the interior of the padded input's gradient.
    const Shape strides = RowMajorStrides(dxp.shape());
    KGRAD_RETURN_IF_ERROR(StridedCopy(
        DenseWrite(dx.shape(), strides, InteriorOffset(strides, g.win)), dxp, dx, gpu.stream));
  }
  return Value(std::move(dx));
}

// ----- conv2d_backprop_filter ------------------------------------------------------------------
absl::StatusOr<Value> Conv2dBackpropFilter(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* dy, ctx.FloatTensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* w_ref, ctx.FloatTensorAt(2));
  KGRAD_ASSIGN_OR_RETURN(ConvGeom g, ops::ConvKernelGeom(ctx.prim(), {x, dy, w_ref}));
  if (!CudnnCanConvolve(g)) return CpuFallback(ctx);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor dw, ctx.Allocate(x->dtype(), g.w_shape()));
  if (dw.NumElements() == 0) return Value(std::move(dw));
  if (dy->NumElements() == 0) {  // an empty sum over the batch and positions
    KGRAD_RETURN_IF_ERROR(FillTensor(ctx, dw, 0.0));
    return Value(std::move(dw));
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor xin, CudnnInput(ctx, gpu, *x, g.win));
  ConvDescs d;
  KGRAD_RETURN_IF_ERROR(d.Init(gpu, x->dtype(), g, xin));
  cudnnHandle_t h = d.handle();
  const CudnnScale one(x->dtype(), 1), zero(x->dtype(), 0);
  KGRAD_RETURN_IF_ERROR(
      (ChooseAndRun<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
          ctx, gpu, x->dtype(), ConvKey("bwd_filter", x->dtype(), g, xin),
          [&](cudnnConvolutionBwdFilterAlgoPerf_t* perf, int n, int* count) {
            return CudnnStatus(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                   h, d.x(), d.y(), d.conv(), d.w(), n, count, perf),
                               "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
          },
          [&](cudnnConvolutionBwdFilterAlgo_t algo, void* ws, size_t bytes) {
            return cudnnConvolutionBackwardFilter(h, one.get(), d.x(), xin.raw_data(), d.y(),
                                                  dy->raw_data(), d.conv(), algo, ws, bytes,
                                                  zero.get(), d.w(), dw.raw_data());
          },
          "cudnnConvolutionBackwardFilter")));
  return Value(std::move(dw));
}

// ----- Pooling ---------------------------------------------------------------------------------
// The window's geometry (ops/conv_window.h); `PoolGeom` is what the native kernels
// (kernels/launch.h) take.
using Pool = ops::PoolGeom;

PoolGeom LaunchGeom(const Pool& p) {
  PoolGeom g;
  g.planes = p.n * p.c;
  g.h = p.h, g.w = p.w, g.oh = p.oh, g.ow = p.ow;
  g.kh = p.win.kernel[ops::kH], g.kw = p.win.kernel[ops::kW];
  g.sh = p.win.stride[ops::kH], g.sw = p.win.stride[ops::kW];
  g.pad_top = p.win.pad_lo[ops::kH], g.pad_left = p.win.pad_lo[ops::kW];
  g.count_include_pad = p.count_include_pad;
  return g;
}

// cuDNN takes every dim, attribute and 4-d tensor size as int.
bool CudnnCanPool(const Pool& g) {
  const Window& k = g.win;
  return FitsInt({g.n, g.c, g.h, g.w, g.oh, g.ow, k.kernel[ops::kH], k.kernel[ops::kW], k.stride[ops::kH],
                  k.stride[ops::kW], k.pad_lo[ops::kH], k.pad_lo[ops::kW], g.n * g.c * g.h * g.w,
                  g.n * g.c * g.oh * g.ow});
}

// cuDNN's pooling forward (symmetric padding only).
absl::Status CudnnPool(const Gpu& gpu, cudnnPoolingMode_t mode, const Pool& g, const Tensor& x,
                       const Tensor& y) {
  KGRAD_ASSIGN_OR_RETURN(cudnnHandle_t h, gpu.device->Cudnn());
  auto i = [](int64_t v) { return static_cast<int>(v); };
  TensorDesc xd, yd;
  PoolingDesc pd;
  KGRAD_RETURN_IF_ERROR(xd.Nchw(x.dtype(), g.n, g.c, g.h, g.w));
  KGRAD_RETURN_IF_ERROR(yd.Nchw(x.dtype(), g.n, g.c, g.oh, g.ow));
  KGRAD_CUDNN_CALL(cudnnCreatePoolingDescriptor(pd.out()));
  KGRAD_CUDNN_CALL(cudnnSetPooling2dDescriptor(
      pd.get(), mode, CUDNN_PROPAGATE_NAN, i(g.win.kernel[ops::kH]), i(g.win.kernel[ops::kW]),
      i(g.win.pad_lo[ops::kH]), i(g.win.pad_lo[ops::kW]), i(g.win.stride[ops::kH]), i(g.win.stride[ops::kW])));
  const CudnnScale one(x.dtype(), 1), zero(x.dtype(), 0);
  KGRAD_CUDNN_CALL(cudnnPoolingForward(h, pd.get(), one.get(), xd.get(), x.raw_data(), zero.get(),
                                       yd.get(), y.raw_data()));
  return absl::OkStatus();
}

// Per window: the plane position of its first max (scratch, int64).
absl::StatusOr<Tensor> Argmax(const KernelContext& ctx, const Gpu& gpu, const Pool& g,
                              const Tensor& x, const Tensor* y) {
  KGRAD_ASSIGN_OR_RETURN(Tensor idx, ctx.Allocate(DType::kInt64, g.y_shape()));
  KGRAD_LAUNCH(LaunchMaxPoolArgmax(ToDT(x.dtype()), x.raw_data(),
                                   y != nullptr ? y->raw_data() : nullptr,
                                   idx.mutable_data<int64_t>(), LaunchGeom(g), gpu.stream));
  return idx;
}

// max_pool2d(x) and avg_pool2d(x): cuDNN where it pools like the CPU (max without
// padding, average with symmetric padding), else the native kernels.
absl::StatusOr<Value> PoolForward(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(Pool g, ops::PoolKernelGeom(ctx.prim(), {x}));
  if (g.win.spatial != 2) return CpuFallback(ctx);  // 2-D kernels only
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.Allocate(x->dtype(), g.y_shape()));
  if (y.NumElements() == 0) return Value(std::move(y));
  const bool cudnn = g.win.symmetric() && CudnnCanPool(g);
  if (ctx.prim().id() == PrimId::kMaxPool2d) {
    if (cudnn && g.win.pad_lo == ops::Axes{0, 0, 0}) {
      KGRAD_RETURN_IF_ERROR(CudnnPool(gpu, CUDNN_POOLING_MAX, g, *x, y));
    } else {
      KGRAD_RETURN_IF_ERROR(Argmax(ctx, gpu, g, *x, &y).status());
    }
  } else if (cudnn) {
    KGRAD_RETURN_IF_ERROR(CudnnPool(gpu,
                                    g.count_include_pad
                                        ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                        : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
                                    g, *x, y));
  } else {
    KGRAD_LAUNCH(
        LaunchAvgPool(ToDT(x->dtype()), x->raw_data(), y.raw_data(), LaunchGeom(g), gpu.stream));
  }
  return Value(std::move(y));
}

// max_pool2d_grad(x, dy) (kScatter) and max_pool2d_grad_grad(x, ddx): one kernel
// finds each window's argmax (int64 scratch), a second scatters dy to it or
// gathers ddx from it.
template <bool kScatter>
absl::StatusOr<Value> RouteArgmax(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* src, ctx.FloatTensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(Pool g, ops::PoolKernelGeom(ctx.prim(), {x, src}));
  if (g.win.spatial != 2) return CpuFallback(ctx);  // 2-D kernels only
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor out,
                         ctx.Allocate(x->dtype(), ops::OutputShape(ctx.prim().id(), g)));
  if (out.NumElements() == 0) return Value(std::move(out));
  KGRAD_ASSIGN_OR_RETURN(Tensor idx, Argmax(ctx, gpu, g, *x, nullptr));
  if (kScatter) {
    KGRAD_LAUNCH(LaunchMaxPoolGrad(ToDT(x->dtype()), idx.data<int64_t>(), src->raw_data(),
                                   out.raw_data(), LaunchGeom(g), gpu.stream));
  } else {
    KGRAD_LAUNCH(LaunchGatherArgmax(ToDT(x->dtype()), idx.data<int64_t>(), src->raw_data(),
                                    out.raw_data(), LaunchGeom(g), gpu.stream));
  }
  return Value(std::move(out));
}

// avg_pool2d_grad(dy, x_ref) -> dx shaped like x_ref.
absl::StatusOr<Value> AvgPoolGrad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* dy, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x_ref, ctx.FloatTensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(Pool g, ops::PoolKernelGeom(ctx.prim(), {dy, x_ref}));
  if (g.win.spatial != 2) return CpuFallback(ctx);  // 2-D kernels only
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor dx, ctx.Allocate(dy->dtype(), x_ref->shape()));
  KGRAD_LAUNCH(LaunchAvgPoolGrad(ToDT(dy->dtype()), dy->raw_data(), dx.raw_data(), LaunchGeom(g),
                                 gpu.stream));
  return Value(std::move(dx));
}

}  // namespace

void RegisterConvKernels(KernelTable* t) {
  t->Set(PrimId::kConv2d, OnDevice<Conv2d>);
  t->Set(PrimId::kConv2dBackpropInput, OnDevice<Conv2dBackpropInput>);
  t->Set(PrimId::kConv2dBackpropFilter, OnDevice<Conv2dBackpropFilter>);
  t->Set(PrimId::kMaxPool2d, OnDevice<PoolForward>);
  t->Set(PrimId::kMaxPool2dGrad, OnDevice<RouteArgmax</*kScatter=*/true>>);
  t->Set(PrimId::kMaxPool2dGradGrad, OnDevice<RouteArgmax</*kScatter=*/false>>);
  t->Set(PrimId::kAvgPool2d, OnDevice<PoolForward>);
  t->Set(PrimId::kAvgPool2dGrad, OnDevice<AvgPoolGrad>);
}

}  // namespace cuda
}  // namespace kgrad
