// CUDA kernels: convolution (NCHW activations, OIHW filters) and pooling.
//
// conv2d and both backprops run on cuDNN: groups, stride and dilation through
// the convolution descriptor, the algorithm from cuDNN's heuristics (the first
// deterministic one that runs, its workspace from the caching allocator; FMA math
// for f32, so no TF32 rounding). Asymmetric padding, which cuDNN's descriptor
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
// Checks and messages follow backends/cpu/conv_window.cc and conv_kernels.cc.
#include <algorithm>
#include <array>
#include <climits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/kernel_util.h"
#include "core/shape.h"
#include "core/status_macros.h"

namespace kgrad {
namespace cuda {
namespace {

// ----- Attributes and geometry (the rules of backends/cpu/conv_window.cc) ---------------------
struct Window {
  std::array<int64_t, 2> kernel{1, 1};
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> dilation{1, 1};
  std::array<int64_t, 2> pad_lo{0, 0};  // top, left
  std::array<int64_t, 2> pad_hi{0, 0};  // bottom, right
  int64_t groups = 1;

  bool symmetric() const { return pad_lo == pad_hi; }
};

constexpr const char* kAxisNames[2] = {"height", "width"};
constexpr int64_t kMaxAttrValue = kMaxElements;

absl::Status BadAttr(const std::string& name, const std::vector<int64_t>& v,
                     absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be ", expected,
                                                 ", got [", absl::StrJoin(v, ", "), "]"));
}

absl::StatusOr<std::array<int64_t, 2>> PairAttr(const Primitive& p, const std::string& name,
                                                int64_t min) {
  const std::vector<int64_t>& v = p.GetInts(name);
  const std::string expected = absl::StrCat("2 values [h, w], each >= ", min);
  if (v.size() != 2) return BadAttr(name, v, expected);
  for (int64_t x : v) {
    if (x < min || x > kMaxAttrValue) return BadAttr(name, v, expected);
  }
  return std::array<int64_t, 2>{v[0], v[1]};
}

absl::Status ParsePadding(const Primitive& p, Window* w) {
  const std::vector<int64_t>& v = p.GetInts("padding");
  const char* expected = "[pad_h, pad_w] or [top, bottom, left, right], each >= 0";
  if (v.size() != 2 && v.size() != 4) return BadAttr("padding", v, expected);
  for (int64_t x : v) {
    if (x < 0 || x > kMaxAttrValue) return BadAttr("padding", v, expected);
  }
  if (v.size() == 2) {
    w->pad_lo = w->pad_hi = {v[0], v[1]};
  } else {
    w->pad_lo = {v[0], v[2]};
    w->pad_hi = {v[1], v[3]};
  }
  return absl::OkStatus();
}

absl::StatusOr<Window> ConvAttrs(const Primitive& p) {
  Window w;
  KGRAD_ASSIGN_OR_RETURN(w.stride, PairAttr(p, "stride", 1));
  KGRAD_ASSIGN_OR_RETURN(w.dilation, PairAttr(p, "dilation", 1));
  KGRAD_RETURN_IF_ERROR(ParsePadding(p, &w));
  w.groups = p.GetInt("groups");
  if (w.groups < 1 || w.groups > kMaxAttrValue) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'groups' must be >= 1, got ", w.groups));
  }
  return w;
}

absl::StatusOr<Window> PoolAttrs(const Primitive& p) {
  Window w;
  KGRAD_ASSIGN_OR_RETURN(w.kernel, PairAttr(p, "kernel", 1));
  if (p.GetInts("stride").empty()) {
    w.stride = w.kernel;
  } else {
    KGRAD_ASSIGN_OR_RETURN(w.stride, PairAttr(p, "stride", 1));
  }
  KGRAD_RETURN_IF_ERROR(ParsePadding(p, &w));
  return w;
}

absl::StatusOr<int64_t> WindowCount(const Window& w, int axis, int64_t in, bool pool) {
  const char* name = kAxisNames[axis];
  const int64_t k = w.kernel[axis], d = w.dilation[axis], s = w.stride[axis];
  const int64_t lo = w.pad_lo[axis], hi = w.pad_hi[axis];
  if (pool && lo >= k) {
    return absl::InvalidArgumentError(absl::StrCat("the first pooling window along the ", name,
                                                   " lies entirely in the padding (padding ", lo,
                                                   " >= kernel ", k, ")"));
  }
  if (k > 1 && d > kMaxAttrValue / (k - 1)) {
    return absl::InvalidArgumentError(absl::StrCat("the dilated kernel ", name, " (kernel ", k,
                                                   ", dilation ", d, ") is too large"));
  }
  const int64_t eff = d * (k - 1) + 1;
  const int64_t padded = in + lo + hi;
  if (padded < eff) {
    return absl::InvalidArgumentError(
        absl::StrCat("the padded input ", name, " ", padded, " (", in, " + ", lo, " + ", hi,
                     ") is smaller than the ", d > 1 ? "dilated " : "", "kernel ", name, " ", eff));
  }
  const int64_t count = (padded - eff) / s + 1;
  const int64_t last_start = (count - 1) * s - lo;
  if (pool && last_start >= in) {
    return absl::InvalidArgumentError(
        absl::StrCat("the last pooling window along the ", name, " starts at ", last_start,
                     ", past the input ", name, " ", in, ": it lies entirely in the padding"));
  }
  return count;
}

absl::StatusOr<const Tensor*> Nchw(const KernelContext& ctx, size_t i, const char* what) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.FloatTensorAt(i));
  if (t->rank() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", i, " must be a rank-4 ", what, " tensor, got ", t->TypeString()));
  }
  if (i > 0 && t->dtype() != ctx.input(0).tensor().dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be ",
                                                   DTypeName(ctx.input(0).tensor().dtype()),
                                                   " like input 0, got ", t->TypeString()));
  }
  return t;
}

absl::Status ExpectShape(size_t i, const Tensor& t, const Shape& expected, absl::string_view what) {
  if (t.shape() == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be shaped ",
                                                 ShapeToString(expected), " (", what, "), got ",
                                                 t.TypeString()));
}

struct ConvGeom {
  Window win;
  int64_t n, c, h, w;  // input
  int64_t o, kh, kw;   // filter [O, C/groups, KH, KW]
  int64_t oh, ow;      // output
  int64_t cg, og;      // channels per group

  Shape x_shape() const { return {n, c, h, w}; }
  Shape y_shape() const { return {n, o, oh, ow}; }
  Shape w_shape() const { return {o, cg, kh, kw}; }
};

absl::StatusOr<ConvGeom> MakeConvGeom(const Window& win, const Shape& x, size_t xi, const Shape& w,
                                      size_t wi) {
  ConvGeom g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = w[0], g.kh = w[2], g.kw = w[3];
  const int64_t groups = win.groups;
  if (g.c % groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input ", xi, " has ", g.c, " channels (dim 1), not divisible by groups=", groups));
  }
  if (g.o % groups != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", wi, " (filter) has ", g.o,
                     " output channels (dim 0), not divisible by groups=", groups));
  }
  if (w[1] != g.c / groups) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", wi, " (filter) must have C/groups = ", g.c / groups,
                     " input channels (dim 1) for ", g.c, " channels and groups=", groups, ", got ",
                     ShapeToString(w)));
  }
  if (g.kh < 1 || g.kw < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input ", wi, " (filter) must have a kernel of at least 1x1, got ", ShapeToString(w)));
  }
  g.cg = g.c / groups;
  g.og = g.o / groups;
  g.win = win;
  g.win.kernel = {g.kh, g.kw};
  KGRAD_ASSIGN_OR_RETURN(g.oh, WindowCount(g.win, 0, g.h, /*pool=*/false));
  KGRAD_ASSIGN_OR_RETURN(g.ow, WindowCount(g.win, 1, g.w, /*pool=*/false));
  return g;
}

bool FitsInt(std::initializer_list<int64_t> values) {
  for (int64_t v : values) {
    if (v > INT_MAX) return false;
  }
  return true;
}

// cuDNN takes every dim, attribute and 4-d tensor size as int.
bool CudnnCanConvolve(const ConvGeom& g) {
  const Window& k = g.win;
  const int64_t ph = k.pad_lo[0] + k.pad_hi[0], pw = k.pad_lo[1] + k.pad_hi[1];
  return FitsInt({g.n, g.c, g.h + ph, g.w + pw, g.o, g.kh, g.kw, g.oh, g.ow, k.stride[0],
                  k.stride[1], k.dilation[0], k.dilation[1], k.groups, k.pad_lo[0], k.pad_lo[1],
                  g.n * g.c * (g.h + ph) * (g.w + pw), g.n * g.o * g.oh * g.ow,
                  g.o * g.cg * g.kh * g.kw});
}

// ----- cuDNN descriptors ----------------------------------------------------------------------
cudnnDataType_t CudnnType(DType t) {
  return t == DType::kFloat32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
}

// The descriptors of one convolution; destroyed with it.
class ConvDescs {
 public:
  ~ConvDescs() {
    if (x_ != nullptr) cudnnDestroyTensorDescriptor(x_);
    if (y_ != nullptr) cudnnDestroyTensorDescriptor(y_);
    if (w_ != nullptr) cudnnDestroyFilterDescriptor(w_);
    if (conv_ != nullptr) cudnnDestroyConvolutionDescriptor(conv_);
  }

  // `g` with symmetric padding pad_lo (the caller pads explicitly otherwise) and
  // the input of height h and width w.
  absl::Status Init(DType dtype, const ConvGeom& g, int64_t h, int64_t w, bool pad) {
    const cudnnDataType_t type = CudnnType(dtype);
    auto i = [](int64_t v) { return static_cast<int>(v); };
    KGRAD_CUDNN_CALL(cudnnCreateTensorDescriptor(&x_));
    KGRAD_CUDNN_CALL(cudnnCreateTensorDescriptor(&y_));
    KGRAD_CUDNN_CALL(cudnnCreateFilterDescriptor(&w_));
    KGRAD_CUDNN_CALL(cudnnCreateConvolutionDescriptor(&conv_));
    KGRAD_CUDNN_CALL(
        cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, type, i(g.n), i(g.c), i(h), i(w)));
    KGRAD_CUDNN_CALL(
        cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NCHW, type, i(g.n), i(g.o), i(g.oh), i(g.ow)));
    KGRAD_CUDNN_CALL(
        cudnnSetFilter4dDescriptor(w_, type, CUDNN_TENSOR_NCHW, i(g.o), i(g.cg), i(g.kh), i(g.kw)));
    const Window& k = g.win;
    KGRAD_CUDNN_CALL(cudnnSetConvolution2dDescriptor(
        conv_, pad ? i(k.pad_lo[0]) : 0, pad ? i(k.pad_lo[1]) : 0, i(k.stride[0]), i(k.stride[1]),
        i(k.dilation[0]), i(k.dilation[1]), CUDNN_CROSS_CORRELATION, type));
    KGRAD_CUDNN_CALL(cudnnSetConvolutionGroupCount(conv_, i(k.groups)));
    // FMA math: no TF32 tensor-core rounding of f32 convolutions.
    KGRAD_CUDNN_CALL(cudnnSetConvolutionMathType(
        conv_, dtype == DType::kFloat32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH));
    return absl::OkStatus();
  }

  cudnnTensorDescriptor_t x() const { return x_; }
  cudnnTensorDescriptor_t y() const { return y_; }
  cudnnFilterDescriptor_t w() const { return w_; }
  cudnnConvolutionDescriptor_t conv() const { return conv_; }

 private:
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
};

struct Scale {
  explicit Scale(DType t, double v) : f(static_cast<float>(v)), d(v), f32(t == DType::kFloat32) {}
  const void* get() const { return f32 ? static_cast<const void*>(&f) : &d; }
  float f;
  double d;
  bool f32;
};

// Runs run(algo, workspace, bytes) over cuDNN's heuristic candidates (`perf`,
// `count` of them): the deterministic ones first, each with its workspace from
// the caching allocator, until one succeeds. The last error otherwise.
template <typename Perf, typename RunFn>
absl::Status RunBestAlgo(const KernelContext& ctx, const Perf* perf, int count, RunFn&& run,
                         const char* what) {
  std::vector<const Perf*> order;
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < count; ++i) {
      const bool det = perf[i].determinism == CUDNN_DETERMINISTIC;
      if (perf[i].status == CUDNN_STATUS_SUCCESS && det == (pass == 0)) order.push_back(&perf[i]);
    }
  }
  absl::Status last = absl::InternalError(absl::StrCat(what, ": cuDNN offered no algorithm"));
  for (const Perf* p : order) {
    Tensor ws;
    if (p->memory > 0) {
      absl::StatusOr<Tensor> t = Scratch(ctx, p->memory);
      if (!t.ok()) {
        last = t.status();
        continue;
      }
      ws = *std::move(t);
    }
    last = CudnnStatus(run(p->algo, p->memory > 0 ? ws.raw_data() : nullptr, p->memory), what);
    if (last.ok()) return last;
  }
  return last;
}

// x zero-padded by the window's padding (for asymmetric padding).
absl::StatusOr<Tensor> PadInput(const KernelContext& ctx, const Gpu& gpu, const Tensor& x,
                                const Window& k) {
  Shape dims = x.shape();
  dims[2] += k.pad_lo[0] + k.pad_hi[0];
  dims[3] += k.pad_lo[1] + k.pad_hi[1];
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x.dtype(), dims));
  KGRAD_RETURN_IF_ERROR(FillTensor(ctx, out, 0.0));
  const Shape strides = RowMajorStrides(dims);
  const int64_t offset = k.pad_lo[0] * strides[2] + k.pad_lo[1] * strides[3];
  KGRAD_RETURN_IF_ERROR(StridedCopy(DenseRead(x.shape(), strides, offset), x, out, gpu.stream));
  return out;
}

// ----- conv2d ---------------------------------------------------------------------------------
absl::StatusOr<Value> Conv2d(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(Window win, ConvAttrs(ctx.prim()));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, Nchw(ctx, 0, "NCHW input"));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* w, Nchw(ctx, 1, "OIHW filter"));
  KGRAD_ASSIGN_OR_RETURN(ConvGeom g, MakeConvGeom(win, x->shape(), 0, w->shape(), 1));
  if (!CudnnCanConvolve(g)) return CpuFallback(ctx);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.Allocate(x->dtype(), g.y_shape()));
  if (y.NumElements() == 0) return Value(std::move(y));
  if (g.cg == 0) {  // no input channels: an empty sum
    KGRAD_RETURN_IF_ERROR(FillTensor(ctx, y, 0.0));
    return Value(std::move(y));
  }
  const bool sym = g.win.symmetric();
  Tensor xin = *x;
  if (!sym) {
    KGRAD_ASSIGN_OR_RETURN(xin, PadInput(ctx, gpu, *x, g.win));
  }
  KGRAD_ASSIGN_OR_RETURN(cudnnHandle_t h, gpu.device->Cudnn());
  ConvDescs d;
  KGRAD_RETURN_IF_ERROR(d.Init(x->dtype(), g, xin.dim(2), xin.dim(3), sym));
  std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf;
  int count = 0;
  KGRAD_CUDNN_CALL(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x(), d.w(), d.conv(), d.y(),
                                                          static_cast<int>(perf.size()), &count,
                                                          perf.data()));
  const Scale one(x->dtype(), 1), zero(x->dtype(), 0);
  KGRAD_RETURN_IF_ERROR(RunBestAlgo(
      ctx, perf.data(), count,
      [&](cudnnConvolutionFwdAlgo_t algo, void* ws, size_t bytes) {
        return cudnnConvolutionForward(h, one.get(), d.x(), xin.raw_data(), d.w(), w->raw_data(),
                                       d.conv(), algo, ws, bytes, zero.get(), d.y(), y.raw_data());
      },
      "cudnnConvolutionForward"));
  return Value(std::move(y));
}

// ----- conv2d_backprop_input -------------------------------------------------------------------
absl::StatusOr<Value> Conv2dBackpropInput(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(Window win, ConvAttrs(ctx.prim()));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* dy, Nchw(ctx, 0, "NCHW gradient"));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* w, Nchw(ctx, 1, "OIHW filter"));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x_ref, Nchw(ctx, 2, "NCHW input-shape"));
  KGRAD_ASSIGN_OR_RETURN(ConvGeom g, MakeConvGeom(win, x_ref->shape(), 2, w->shape(), 1));
  KGRAD_RETURN_IF_ERROR(ExpectShape(0, *dy, g.y_shape(), "the conv2d output of inputs 2 and 1"));
  if (!CudnnCanConvolve(g)) return CpuFallback(ctx);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor dx, ctx.Allocate(dy->dtype(), x_ref->shape()));
  if (dx.NumElements() == 0) return Value(std::move(dx));
  if (g.og == 0 || dy->NumElements() == 0) {  // nothing flows back
    KGRAD_RETURN_IF_ERROR(FillTensor(ctx, dx, 0.0));
    return Value(std::move(dx));
  }
  const bool sym = g.win.symmetric();
  const Window& k = g.win;
  Tensor dxp = dx;  // the gradient of the padded input when padding is explicit
  if (!sym) {
    Shape padded = dx.shape();
    padded[2] += k.pad_lo[0] + k.pad_hi[0];
    padded[3] += k.pad_lo[1] + k.pad_hi[1];
    KGRAD_ASSIGN_OR_RETURN(dxp, ctx.Allocate(dy->dtype(), padded));
  }
  KGRAD_ASSIGN_OR_RETURN(cudnnHandle_t h, gpu.device->Cudnn());
  ConvDescs d;
  KGRAD_RETURN_IF_ERROR(d.Init(dy->dtype(), g, dxp.dim(2), dxp.dim(3), sym));
  std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perf;
  int count = 0;
  KGRAD_CUDNN_CALL(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w(), d.y(), d.conv(), d.x(),
                                                               static_cast<int>(perf.size()),
                                                               &count, perf.data()));
  const Scale one(dy->dtype(), 1), zero(dy->dtype(), 0);
  KGRAD_RETURN_IF_ERROR(RunBestAlgo(
      ctx, perf.data(), count,
      [&](cudnnConvolutionBwdDataAlgo_t algo, void* ws, size_t bytes) {
        return cudnnConvolutionBackwardData(h, one.get(), d.w(), w->raw_data(), d.y(),
                                            dy->raw_data(), d.conv(), algo, ws, bytes, zero.get(),
                                            d.x(), dxp.raw_data());
      },
      "cudnnConvolutionBackwardData"));
  if (!sym) {
    // dx is the interior of the padded input's gradient.
    const Shape strides = RowMajorStrides(dxp.shape());
    const int64_t offset = k.pad_lo[0] * strides[2] + k.pad_lo[1] * strides[3];
    KGRAD_RETURN_IF_ERROR(
        StridedCopy(DenseWrite(dx.shape(), strides, offset), dxp, dx, gpu.stream));
  }
  return Value(std::move(dx));
}

// ----- conv2d_backprop_filter ------------------------------------------------------------------
absl::StatusOr<Value> Conv2dBackpropFilter(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(Window win, ConvAttrs(ctx.prim()));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, Nchw(ctx, 0, "NCHW input"));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* dy, Nchw(ctx, 1, "NCHW gradient"));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* w_ref, Nchw(ctx, 2, "OIHW filter-shape"));
  KGRAD_ASSIGN_OR_RETURN(ConvGeom g, MakeConvGeom(win, x->shape(), 0, w_ref->shape(), 2));
  KGRAD_RETURN_IF_ERROR(ExpectShape(1, *dy, g.y_shape(), "the conv2d output of inputs 0 and 2"));
  if (!CudnnCanConvolve(g)) return CpuFallback(ctx);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor dw, ctx.Allocate(x->dtype(), g.w_shape()));
  if (dw.NumElements() == 0) return Value(std::move(dw));
  if (dy->NumElements() == 0) {  // an empty sum over the batch and positions
    KGRAD_RETURN_IF_ERROR(FillTensor(ctx, dw, 0.0));
    return Value(std::move(dw));
  }
  const bool sym = g.win.symmetric();
  Tensor xin = *x;
  if (!sym) {
    KGRAD_ASSIGN_OR_RETURN(xin, PadInput(ctx, gpu, *x, g.win));
  }
  KGRAD_ASSIGN_OR_RETURN(cudnnHandle_t h, gpu.device->Cudnn());
  ConvDescs d;
  KGRAD_RETURN_IF_ERROR(d.Init(x->dtype(), g, xin.dim(2), xin.dim(3), sym));
  std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> perf;
  int count = 0;
  KGRAD_CUDNN_CALL(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x(), d.y(), d.conv(), d.w(),
                                                                 static_cast<int>(perf.size()),
                                                                 &count, perf.data()));
  const Scale one(x->dtype(), 1), zero(x->dtype(), 0);
  KGRAD_RETURN_IF_ERROR(RunBestAlgo(
      ctx, perf.data(), count,
      [&](cudnnConvolutionBwdFilterAlgo_t algo, void* ws, size_t bytes) {
        return cudnnConvolutionBackwardFilter(h, one.get(), d.x(), xin.raw_data(), d.y(),
                                              dy->raw_data(), d.conv(), algo, ws, bytes,
                                              zero.get(), d.w(), dw.raw_data());
      },
      "cudnnConvolutionBackwardFilter"));
  return Value(std::move(dw));
}

// ----- Pooling ---------------------------------------------------------------------------------
struct Pool {
  Window win;
  int64_t n, c, h, w, oh, ow;
  bool count_include_pad = true;

  Shape y_shape() const { return {n, c, oh, ow}; }
  PoolGeom geom() const {
    PoolGeom g;
    g.planes = n * c;
    g.h = h, g.w = w, g.oh = oh, g.ow = ow;
    g.kh = win.kernel[0], g.kw = win.kernel[1];
    g.sh = win.stride[0], g.sw = win.stride[1];
    g.pad_top = win.pad_lo[0], g.pad_left = win.pad_lo[1];
    g.count_include_pad = count_include_pad;
    return g;
  }
  bool fits_int() const {
    return FitsInt({n, c, h, w, oh, ow, win.kernel[0], win.kernel[1], win.stride[0],
                    win.stride[1], win.pad_lo[0], win.pad_lo[1], n * c * h * w, n * c * oh * ow});
  }
};

absl::StatusOr<Pool> MakePool(const Primitive& p, const Shape& x) {
  Pool g;
  KGRAD_ASSIGN_OR_RETURN(g.win, PoolAttrs(p));
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  KGRAD_ASSIGN_OR_RETURN(g.oh, WindowCount(g.win, 0, g.h, /*pool=*/true));
  KGRAD_ASSIGN_OR_RETURN(g.ow, WindowCount(g.win, 1, g.w, /*pool=*/true));
  if (p.id() == PrimId::kAvgPool2d || p.id() == PrimId::kAvgPool2dGrad) {
    g.count_include_pad = p.GetBool("count_include_pad");
  }
  return g;
}

// cuDNN's pooling forward (symmetric padding only).
absl::Status CudnnPool(const Gpu& gpu, cudnnPoolingMode_t mode, const Pool& g, const Tensor& x,
                       const Tensor& y) {
  KGRAD_ASSIGN_OR_RETURN(cudnnHandle_t h, gpu.device->Cudnn());
  auto i = [](int64_t v) { return static_cast<int>(v); };
  const cudnnDataType_t type = CudnnType(x.dtype());
  cudnnTensorDescriptor_t xd = nullptr, yd = nullptr;
  cudnnPoolingDescriptor_t pd = nullptr;
  absl::Status s = CudnnStatus(cudnnCreateTensorDescriptor(&xd), "cudnnCreateTensorDescriptor");
  if (s.ok()) s = CudnnStatus(cudnnCreateTensorDescriptor(&yd), "cudnnCreateTensorDescriptor");
  if (s.ok()) s = CudnnStatus(cudnnCreatePoolingDescriptor(&pd), "cudnnCreatePoolingDescriptor");
  if (s.ok()) {
    s = CudnnStatus(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, type, i(g.n), i(g.c), i(g.h),
                                               i(g.w)),
                    "cudnnSetTensor4dDescriptor");
  }
  if (s.ok()) {
    s = CudnnStatus(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, type, i(g.n), i(g.c),
                                               i(g.oh), i(g.ow)),
                    "cudnnSetTensor4dDescriptor");
  }
  if (s.ok()) {
    s = CudnnStatus(cudnnSetPooling2dDescriptor(pd, mode, CUDNN_PROPAGATE_NAN, i(g.win.kernel[0]),
                                                i(g.win.kernel[1]), i(g.win.pad_lo[0]),
                                                i(g.win.pad_lo[1]), i(g.win.stride[0]),
                                                i(g.win.stride[1])),
                    "cudnnSetPooling2dDescriptor");
  }
  if (s.ok()) {
    const Scale one(x.dtype(), 1), zero(x.dtype(), 0);
    s = CudnnStatus(cudnnPoolingForward(h, pd, one.get(), xd, x.raw_data(), zero.get(), yd,
                                        y.raw_data()),
                    "cudnnPoolingForward");
  }
  if (pd != nullptr) cudnnDestroyPoolingDescriptor(pd);
  if (yd != nullptr) cudnnDestroyTensorDescriptor(yd);
  if (xd != nullptr) cudnnDestroyTensorDescriptor(xd);
  return s;
}

// Per window: the plane position of its first max (scratch, int64).
absl::StatusOr<Tensor> Argmax(const KernelContext& ctx, const Gpu& gpu, const Pool& g,
                              const Tensor& x, const Tensor* y) {
  KGRAD_ASSIGN_OR_RETURN(Tensor idx, ctx.Allocate(DType::kInt64, g.y_shape()));
  KGRAD_LAUNCH(LaunchMaxPoolArgmax(ToDT(x.dtype()), x.raw_data(),
                                   y != nullptr ? y->raw_data() : nullptr,
                                   idx.mutable_data<int64_t>(), g.geom(), gpu.stream));
  return idx;
}

absl::StatusOr<Value> MaxPool(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, Nchw(ctx, 0, "NCHW input"));
  KGRAD_ASSIGN_OR_RETURN(Pool g, MakePool(ctx.prim(), x->shape()));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.Allocate(x->dtype(), g.y_shape()));
  if (y.NumElements() == 0) return Value(std::move(y));
  const bool no_pad = g.win.pad_lo == std::array<int64_t, 2>{0, 0} && g.win.symmetric();
  if (no_pad && g.fits_int()) {
    KGRAD_RETURN_IF_ERROR(CudnnPool(gpu, CUDNN_POOLING_MAX, g, *x, y));
  } else {
    KGRAD_RETURN_IF_ERROR(Argmax(ctx, gpu, g, *x, &y).status());
  }
  return Value(std::move(y));
}

absl::StatusOr<Value> AvgPool(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, Nchw(ctx, 0, "NCHW input"));
  KGRAD_ASSIGN_OR_RETURN(Pool g, MakePool(ctx.prim(), x->shape()));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.Allocate(x->dtype(), g.y_shape()));
  if (y.NumElements() == 0) return Value(std::move(y));
  if (g.win.symmetric() && g.fits_int()) {
    KGRAD_RETURN_IF_ERROR(CudnnPool(gpu,
                                    g.count_include_pad
                                        ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                        : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
                                    g, *x, y));
  } else {
    KGRAD_LAUNCH(LaunchAvgPool(ToDT(x->dtype()), x->raw_data(), y.raw_data(), g.geom(),
                               gpu.stream));
  }
  return Value(std::move(y));
}

// max_pool2d_grad(x, dy) -> dx shaped like x.
absl::StatusOr<Value> MaxPoolGrad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, Nchw(ctx, 0, "NCHW input"));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* dy, Nchw(ctx, 1, "NCHW gradient"));
  KGRAD_ASSIGN_OR_RETURN(Pool g, MakePool(ctx.prim(), x->shape()));
  KGRAD_RETURN_IF_ERROR(ExpectShape(1, *dy, g.y_shape(), "the pooled shape of input 0"));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor dx, ctx.Allocate(x->dtype(), x->shape()));
  if (dx.NumElements() == 0) return Value(std::move(dx));
  KGRAD_ASSIGN_OR_RETURN(Tensor idx, Argmax(ctx, gpu, g, *x, nullptr));
  KGRAD_LAUNCH(LaunchMaxPoolGrad(ToDT(x->dtype()), idx.data<int64_t>(), dy->raw_data(),
                                 dx.raw_data(), g.geom(), gpu.stream));
  return Value(std::move(dx));
}

// max_pool2d_grad_grad(x, ddx) -> shaped like max_pool2d(x).
absl::StatusOr<Value> MaxPoolGradGrad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, Nchw(ctx, 0, "NCHW input"));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* ddx, Nchw(ctx, 1, "NCHW input-gradient"));
  KGRAD_RETURN_IF_ERROR(ExpectShape(1, *ddx, x->shape(), "like input 0"));
  KGRAD_ASSIGN_OR_RETURN(Pool g, MakePool(ctx.prim(), x->shape()));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.Allocate(x->dtype(), g.y_shape()));
  if (y.NumElements() == 0) return Value(std::move(y));
  KGRAD_ASSIGN_OR_RETURN(Tensor idx, Argmax(ctx, gpu, g, *x, nullptr));
  KGRAD_LAUNCH(LaunchGatherArgmax(ToDT(x->dtype()), idx.data<int64_t>(), ddx->raw_data(),
                                  y.raw_data(), g.geom(), gpu.stream));
  return Value(std::move(y));
}

// avg_pool2d_grad(dy, x_ref) -> dx shaped like x_ref.
absl::StatusOr<Value> AvgPoolGrad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* dy, Nchw(ctx, 0, "NCHW gradient"));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x_ref, Nchw(ctx, 1, "NCHW input-shape"));
  KGRAD_ASSIGN_OR_RETURN(Pool g, MakePool(ctx.prim(), x_ref->shape()));
  KGRAD_RETURN_IF_ERROR(ExpectShape(0, *dy, g.y_shape(), "the pooled shape of input 1"));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor dx, ctx.Allocate(dy->dtype(), x_ref->shape()));
  KGRAD_LAUNCH(LaunchAvgPoolGrad(ToDT(dy->dtype()), dy->raw_data(), dx.raw_data(), g.geom(),
                                 gpu.stream));
  return Value(std::move(dx));
}

}  // namespace

void RegisterConvKernels(KernelTable* t) {
  t->Set(PrimId::kConv2d, OnDevice<Conv2d>);
  t->Set(PrimId::kConv2dBackpropInput, OnDevice<Conv2dBackpropInput>);
  t->Set(PrimId::kConv2dBackpropFilter, OnDevice<Conv2dBackpropFilter>);
  t->Set(PrimId::kMaxPool2d, OnDevice<MaxPool>);
  t->Set(PrimId::kMaxPool2dGrad, OnDevice<MaxPoolGrad>);
  t->Set(PrimId::kMaxPool2dGradGrad, OnDevice<MaxPoolGradGrad>);
  t->Set(PrimId::kAvgPool2d, OnDevice<AvgPool>);
  t->Set(PrimId::kAvgPool2dGrad, OnDevice<AvgPoolGrad>);
}

}  // namespace cuda
}  // namespace kgrad
