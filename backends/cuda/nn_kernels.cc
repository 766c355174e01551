// CUDA kernels: nn family. softmax / log_softmax and batch_norm (training mode,
// batch statistics) through cuDNN, the tensor seen as NCHW = [outer, axis, inner,
// 1]; shapes beyond cuDNN's int dims take kgrad's own kernels (softmax) or the CPU
// (batch_norm). The cross-entropies, layer_norm and dropout are kgrad's .cu
// kernels (backends/cuda/kernels/nn.cu, elementwise.cu). Checks and messages
// follow backends/cpu/nn_kernels.cc.
#include <climits>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/kernel_util.h"
#include "core/shape.h"
#include "core/status_macros.h"

namespace kgrad {
namespace cuda {
namespace {

// ----- Checks (the CPU kernels' rules) -------------------------------------------------------
absl::StatusOr<const Tensor*> LikeFirst(const KernelContext& ctx, int i) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* first, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.TensorAt(i));
  if (t->dtype() != first->dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be ",
                                                   DTypeName(first->dtype()), " like input 0, got ",
                                                   t->TypeString()));
  }
  return t;
}

absl::StatusOr<int> AxisAttr(const KernelContext& ctx, const Tensor& t, const char* name) {
  absl::StatusOr<int> axis = NormalizeAxis(ctx.prim().GetInt(name), t.rank());
  if (!axis.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute '", name, "' on ", t.TypeString(), ": ", axis.status().message()));
  }
  return *axis;
}

absl::StatusOr<double> EpsilonAttr(const KernelContext& ctx) {
  const double eps = ctx.prim().GetFloat("epsilon");
  if (!(eps >= 0) || !std::isfinite(eps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'epsilon' must be finite and >= 0, got ", eps));
  }
  return eps;
}

absl::StatusOr<const Tensor*> AffineInput(const KernelContext& ctx, int i,
                                          absl::Span<const int64_t> want) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* p, LikeFirst(ctx, i));
  if (absl::MakeConstSpan(p->shape()) != want) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " must have shape ",
                                                   ShapeToString(want), ", got ", p->TypeString()));
  }
  return p;
}

struct AxisGeometry {
  int64_t outer, len, inner;
};

AxisGeometry Geometry(absl::Span<const int64_t> shape, int axis) {
  AxisGeometry g{1, shape[axis], 1};
  for (int i = 0; i < axis; ++i) g.outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) g.inner *= shape[i];
  return g;
}

// ----- cuDNN plumbing ---------------------------------------------------------------------------
// A tensor descriptor that destroys itself.
class TensorDesc {
 public:
  TensorDesc() = default;
  ~TensorDesc() {
    if (desc_ != nullptr) cudnnDestroyTensorDescriptor(desc_);
  }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;

  absl::Status Nchw(DType dtype, int64_t n, int64_t c, int64_t h, int64_t w) {
    if (desc_ == nullptr) KGRAD_CUDNN_CALL(cudnnCreateTensorDescriptor(&desc_));
    KGRAD_CUDNN_CALL(cudnnSetTensor4dDescriptor(
        desc_, CUDNN_TENSOR_NCHW, dtype == DType::kFloat32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE,
        static_cast<int>(n), static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)));
    return absl::OkStatus();
  }
  cudnnTensorDescriptor_t get() const { return desc_; }
  cudnnTensorDescriptor_t* out() { return &desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

// cuDNN's scaling factors: float for f32 tensors, double for f64.
struct Scale {
  explicit Scale(DType t, double v) : f(static_cast<float>(v)), d(v), f32(t == DType::kFloat32) {}
  const void* get() const { return f32 ? static_cast<const void*>(&f) : &d; }
  float f;
  double d;
  bool f32;
};

// cuDNN takes int dims and strides: the whole tensor must stay below 2^31 elements.
bool FitsCudnn(const AxisGeometry& g) {
  return g.outer <= INT_MAX && g.len <= INT_MAX && g.inner <= INT_MAX &&
         g.outer * g.len * g.inner <= INT_MAX;
}

// ----- softmax / log_softmax ---------------------------------------------------------------------
template <bool kLog>
absl::StatusOr<Value> Softmax(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(ctx, *x, "axis"));
  const AxisGeometry g = Geometry(x->shape(), axis);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  if (x->NumElements() == 0) return Value(*x);
  if (!FitsCudnn(g)) {
    KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x->dtype(), x->shape()));
    KGRAD_LAUNCH(LaunchSoftmax(kLog, ToDT(x->dtype()), x->raw_data(), y.raw_data(), g.outer, g.len,
                               g.inner, gpu.stream));
    return Value(std::move(y));
  }
  KGRAD_ASSIGN_OR_RETURN(cudnnHandle_t h, gpu.device->Cudnn());
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.Allocate(x->dtype(), x->shape()));
  TensorDesc desc;
  KGRAD_RETURN_IF_ERROR(desc.Nchw(x->dtype(), g.outer, g.len, g.inner, 1));
  const Scale one(x->dtype(), 1), zero(x->dtype(), 0);
  KGRAD_CUDNN_CALL(cudnnSoftmaxForward(h, kLog ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE,
                                       CUDNN_SOFTMAX_MODE_CHANNEL, one.get(), desc.get(),
                                       x->raw_data(), zero.get(), desc.get(), y.raw_data()));
  return Value(std::move(y));
}

// ----- Cross-entropies ------------------------------------------------------------------------------
absl::StatusOr<Value> SoftmaxCrossEntropy(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* labels, LikeFirst(ctx, 1));
  if (labels->shape() != x->shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("labels must have the shape of logits, got logits ", x->TypeString(),
                     " and labels ", labels->TypeString()));
  }
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(ctx, *x, "axis"));
  Shape shape = x->shape();
  shape.erase(shape.begin() + axis);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor loss, ctx.Allocate(x->dtype(), shape));
  const AxisGeometry g = Geometry(x->shape(), axis);
  KGRAD_LAUNCH(LaunchSoftmaxCrossEntropy(ToDT(x->dtype()), x->raw_data(), labels->raw_data(),
                                         loss.raw_data(), g.outer, g.len, g.inner, gpu.stream));
  return Value(std::move(loss));
}

absl::StatusOr<Value> SparseSoftmaxCrossEntropy(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* labels, ctx.TensorAt(1));
  if (x->rank() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("input 0 must be logits of rank 2 [N, C], got ", x->TypeString()));
  }
  if (!IsInteger(labels->dtype()) || labels->rank() != 1 || labels->dim(0) != x->dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat("input 1 must be i32 or i64 labels [", x->dim(0),
                                                   "], got ", labels->TypeString()));
  }
  const int64_t n = x->dim(0), c = x->dim(1);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  if (n > 0) {
    int64_t value = 0;
    KGRAD_ASSIGN_OR_RETURN(int64_t pos, FirstBadIndex(ctx, gpu, *labels, c, &value));
    if (pos >= 0) {
      return absl::OutOfRangeError(absl::StrCat("label ", value, " at position ", pos,
                                                " is out of range [0, ", c, ")"));
    }
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor loss, ctx.Allocate(x->dtype(), {n}));
  KGRAD_LAUNCH(LaunchSparseSoftmaxCrossEntropy(ToDT(x->dtype()), x->raw_data(),
                                               ToDT(labels->dtype()), labels->raw_data(),
                                               loss.raw_data(), n, c, gpu.stream));
  return Value(std::move(loss));
}

// ----- Normalisation -------------------------------------------------------------------------------
absl::StatusOr<Value> BatchNorm(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.FloatTensorAt(0));
  if (x->rank() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("input 0 must have rank >= 2, got ", x->TypeString()));
  }
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(ctx, *x, "axis"));
  KGRAD_ASSIGN_OR_RETURN(double eps, EpsilonAttr(ctx));
  const int64_t channels[1] = {x->dim(axis)};
  KGRAD_ASSIGN_OR_RETURN(const Tensor* scale, AffineInput(ctx, 1, channels));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* bias, AffineInput(ctx, 2, channels));
  const AxisGeometry g = Geometry(x->shape(), axis);
  if (x->NumElements() == 0) return Value(*x);
  // cuDNN wants eps >= CUDNN_BN_MIN_EPSILON, int dims, and more than one value
  // per channel; anything else is computed on the host.
  if (!FitsCudnn(g) || g.outer * g.inner < 2 || eps < CUDNN_BN_MIN_EPSILON) {
    return CpuFallback(ctx);
  }
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(cudnnHandle_t h, gpu.device->Cudnn());
  // cuDNN reads x twice (statistics, then the normalisation): no in-place output.
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.Allocate(x->dtype(), x->shape()));
  TensorDesc xdesc, pdesc;
  KGRAD_RETURN_IF_ERROR(xdesc.Nchw(x->dtype(), g.outer, g.len, g.inner, 1));
  KGRAD_CUDNN_CALL(cudnnCreateTensorDescriptor(pdesc.out()));
  KGRAD_CUDNN_CALL(cudnnDeriveBNTensorDescriptor(pdesc.get(), xdesc.get(), CUDNN_BATCHNORM_SPATIAL));
  const Scale one(x->dtype(), 1), zero(x->dtype(), 0);
  KGRAD_CUDNN_CALL(cudnnBatchNormalizationForwardTraining(
      h, CUDNN_BATCHNORM_SPATIAL, one.get(), zero.get(), xdesc.get(), x->raw_data(), xdesc.get(),
      y.raw_data(), pdesc.get(), scale->raw_data(), bias->raw_data(), /*factor=*/1.0,
      /*resultRunningMean=*/nullptr, /*resultRunningVariance=*/nullptr, eps,
      /*resultSaveMean=*/nullptr, /*resultSaveInvVariance=*/nullptr));
  return Value(std::move(y));
}

absl::StatusOr<Value> LayerNorm(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(int begin, AxisAttr(ctx, *x, "begin_norm_axis"));
  KGRAD_ASSIGN_OR_RETURN(double eps, EpsilonAttr(ctx));
  absl::Span<const int64_t> normalized = absl::MakeConstSpan(x->shape()).subspan(begin);
  KGRAD_ASSIGN_OR_RETURN(const Tensor* scale, AffineInput(ctx, 1, normalized));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* bias, AffineInput(ctx, 2, normalized));
  const int64_t n = NumElementsOf(normalized);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x->dtype(), x->shape()));
  if (y.NumElements() == 0) return Value(std::move(y));
  KGRAD_LAUNCH(LaunchLayerNorm(ToDT(x->dtype()), x->raw_data(), scale->raw_data(),
                               bias->raw_data(), y.raw_data(), y.NumElements() / n, n, eps,
                               gpu.stream));
  return Value(std::move(y));
}

// ----- dropout ------------------------------------------------------------------------------------
absl::StatusOr<Value> Dropout(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.FloatTensorAt(0));
  const double rate = ctx.prim().GetFloat("rate");
  if (!(rate >= 0 && rate < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'rate' of dropout must be in [0, 1), got ", rate));
  }
  const uint64_t seed = static_cast<uint64_t>(ctx.prim().GetInt("seed"));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x->dtype(), x->shape()));
  KGRAD_LAUNCH(LaunchDropout(ToDT(x->dtype()), x->raw_data(), y.raw_data(), y.NumElements(), seed,
                             rate, gpu.stream));
  return Value(std::move(y));
}

}  // namespace

void RegisterNnKernels(KernelTable* t) {
  t->Set(PrimId::kSoftmax, OnDevice<Softmax<false>>);
  t->Set(PrimId::kLogSoftmax, OnDevice<Softmax<true>>);
  t->Set(PrimId::kSoftmaxCrossEntropy, OnDevice<SoftmaxCrossEntropy>);
  t->Set(PrimId::kSparseSoftmaxCrossEntropy, OnDevice<SparseSoftmaxCrossEntropy>);
  t->Set(PrimId::kBatchNorm, OnDevice<BatchNorm>);
  t->Set(PrimId::kLayerNorm, OnDevice<LayerNorm>);
  t->Set(PrimId::kDropout, OnDevice<Dropout>);
}

}  // namespace cuda
}  // namespace kgrad
