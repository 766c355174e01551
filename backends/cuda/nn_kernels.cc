// CUDA kernels: nn family. softmax / log_softmax and batch_norm (training mode,
// batch statistics) through cuDNN, the tensor seen as NCHW = [outer, axis, inner,
// 1]; shapes beyond cuDNN's int dims take kgrad's own kernels (softmax) or the CPU
// (batch_norm). The cross-entropies, layer_norm and dropout are kgrad's .cu
// kernels (backends/cuda/kernels/nn.cu, elementwise.cu). The checks and
// attributes are ops/nn.h's (as on the CPU).
#include <climits>
#include <utility>

#include "absl/status/status.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/kernel_util.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/nn.h"
#include "ops/op_util.h"

namespace kgrad {
namespace cuda {
namespace {

using ops::AxisSplit;

// ----- cuDNN plumbing ---------------------------------------------------------------------------
// cuDNN takes int dims and strides: the whole tensor must stay below 2^31 elements.
bool FitsCudnn(const AxisSplit& g) {
  return g.outer <= INT_MAX && g.len <= INT_MAX && g.inner <= INT_MAX &&
         g.outer * g.len * g.inner <= INT_MAX;
}

// ----- softmax / log_softmax ---------------------------------------------------------------------
template <bool kLog>
absl::StatusOr<Value> Softmax(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(int axis, ops::ParseSoftmax(ctx.prim(), *x));
  const AxisSplit g = ops::SplitAtAxis(x->shape(), axis);
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
  const CudnnScale one(x->dtype(), 1), zero(x->dtype(), 0);
  KGRAD_CUDNN_CALL(cudnnSoftmaxForward(h, kLog ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE,
                                       CUDNN_SOFTMAX_MODE_CHANNEL, one.get(), desc.get(),
                                       x->raw_data(), zero.get(), desc.get(), y.raw_data()));
  return Value(std::move(y));
}

// ----- Cross-entropies ------------------------------------------------------------------------------
absl::StatusOr<Value> SoftmaxCrossEntropy(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const auto in, ctx.TensorsAt<2>());
  KGRAD_ASSIGN_OR_RETURN(const ops::CrossEntropyAxis ce,
                         ops::ParseSoftmaxCrossEntropyKernel(ctx.prim(), in));
  const Tensor *x = in[0], *labels = in[1];
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor loss, ctx.Allocate(x->dtype(), ce.out));
  const AxisSplit g = ops::SplitAtAxis(x->shape(), ce.axis);
  KGRAD_LAUNCH(LaunchSoftmaxCrossEntropy(ToDT(x->dtype()), x->raw_data(), labels->raw_data(),
                                         loss.raw_data(), g.outer, g.len, g.inner, gpu.stream));
  return Value(std::move(loss));
}

absl::StatusOr<Value> SparseSoftmaxCrossEntropy(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* labels, ctx.TensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(const Shape shape, ops::SparseSoftmaxCrossEntropyShape(*x, *labels));
  const int64_t n = x->dim(0), c = x->dim(1);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  if (n > 0) {
    int64_t value = 0;
    KGRAD_ASSIGN_OR_RETURN(int64_t pos, FirstBadIndex(ctx, gpu, *labels, 0, c, &value));
    if (pos >= 0) return ops::LabelOutOfRange(value, pos, c);
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor loss, ctx.Allocate(x->dtype(), shape));
  KGRAD_LAUNCH(LaunchSparseSoftmaxCrossEntropy(ToDT(x->dtype()), x->raw_data(),
                                               ToDT(labels->dtype()), labels->raw_data(),
                                               loss.raw_data(), n, c, gpu.stream));
  return Value(std::move(loss));
}

// ----- Normalisation -------------------------------------------------------------------------------
// cuDNN wants eps >= CUDNN_BN_MIN_EPSILON, int dims, and more than one value per
// channel; anything else is computed on the host.
bool CudnnTakesBatchNorm(const AxisSplit& g, const ops::NormAttrs& a) {
  return FitsCudnn(g) && g.outer * g.inner >= 2 && a.epsilon >= CUDNN_BN_MIN_EPSILON;
}

// x as [outer, C, inner, 1] and the per-channel parameters' descriptor.
absl::Status BatchNormDescs(DType dtype, const AxisSplit& g, TensorDesc* xdesc, TensorDesc* pdesc) {
  KGRAD_RETURN_IF_ERROR(xdesc->Nchw(dtype, g.outer, g.len, g.inner, 1));
  KGRAD_CUDNN_CALL(cudnnCreateTensorDescriptor(pdesc->out()));
  KGRAD_CUDNN_CALL(cudnnDeriveBNTensorDescriptor(pdesc->get(), xdesc->get(), CUDNN_BATCHNORM_SPATIAL));
  return absl::OkStatus();
}

absl::StatusOr<Value> BatchNorm(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const auto in, ctx.TensorsAt<3>());
  KGRAD_ASSIGN_OR_RETURN(const ops::NormAttrs a, ops::ParseBatchNormKernel(ctx.prim(), in));
  const Tensor *x = in[0], *scale = in[1], *bias = in[2];
  const AxisSplit g = ops::SplitAtAxis(x->shape(), a.axis);
  if (x->NumElements() == 0) return Value(*x);
  if (!CudnnTakesBatchNorm(g, a)) return CpuFallback(ctx);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(cudnnHandle_t h, gpu.device->Cudnn());
  // cuDNN reads x twice (statistics, then the normalisation): no in-place output.
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.Allocate(x->dtype(), x->shape()));
  TensorDesc xdesc, pdesc;
  KGRAD_RETURN_IF_ERROR(BatchNormDescs(x->dtype(), g, &xdesc, &pdesc));
  const CudnnScale one(x->dtype(), 1), zero(x->dtype(), 0);
  KGRAD_CUDNN_CALL(cudnnBatchNormalizationForwardTraining(
      h, CUDNN_BATCHNORM_SPATIAL, one.get(), zero.get(), xdesc.get(), x->raw_data(), xdesc.get(),
      y.raw_data(), pdesc.get(), scale->raw_data(), bias->raw_data(), /*factor=*/1.0,
      /*resultRunningMean=*/nullptr, /*resultRunningVariance=*/nullptr, a.epsilon,
      /*resultSaveMean=*/nullptr, /*resultSaveInvVariance=*/nullptr));
  return Value(std::move(y));
}

// batch_norm_grad(x, scale, dy) -> (dx, dscale, dbias) by cuDNN's backward, which
// recomputes the statistics (no saved mean passed); what cuDNN cannot take (see
// BatchNorm) runs on the host, in double.
absl::StatusOr<Value> BatchNormGrad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const auto in, ctx.TensorsAt<3>());
  KGRAD_ASSIGN_OR_RETURN(const ops::NormAttrs a, ops::ParseBatchNormGradKernel(ctx.prim(), in));
  const Tensor *x = in[0], *scale = in[1], *dy = in[2];
  const AxisSplit g = ops::SplitAtAxis(x->shape(), a.axis);
  if (x->NumElements() == 0 || !CudnnTakesBatchNorm(g, a)) return CpuFallback(ctx);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(cudnnHandle_t h, gpu.device->Cudnn());
  KGRAD_ASSIGN_OR_RETURN(Tensor dx, ctx.Allocate(x->dtype(), x->shape()));
  KGRAD_ASSIGN_OR_RETURN(Tensor ds, ctx.Allocate(x->dtype(), scale->shape()));
  KGRAD_ASSIGN_OR_RETURN(Tensor db, ctx.Allocate(x->dtype(), scale->shape()));
  TensorDesc xdesc, pdesc;
  KGRAD_RETURN_IF_ERROR(BatchNormDescs(x->dtype(), g, &xdesc, &pdesc));
  const CudnnScale one(x->dtype(), 1), zero(x->dtype(), 0);
  KGRAD_CUDNN_CALL(cudnnBatchNormalizationBackward(
      h, CUDNN_BATCHNORM_SPATIAL, one.get(), zero.get(), one.get(), zero.get(), xdesc.get(),
      x->raw_data(), xdesc.get(), dy->raw_data(), xdesc.get(), dx.raw_data(), pdesc.get(),
      scale->raw_data(), ds.raw_data(), db.raw_data(), a.epsilon, /*savedMean=*/nullptr,
      /*savedInvVariance=*/nullptr));
  return Value::Tuple({Value(std::move(dx)), Value(std::move(ds)), Value(std::move(db))});
}

absl::StatusOr<Value> LayerNorm(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const auto in, ctx.TensorsAt<3>());
  KGRAD_ASSIGN_OR_RETURN(const ops::NormAttrs a, ops::ParseLayerNormKernel(ctx.prim(), in));
  const Tensor *x = in[0], *scale = in[1], *bias = in[2];
  // Each row holds the normalised dims [begin_norm_axis, rank).
  const int64_t n = NumElementsOf(absl::MakeConstSpan(x->shape()).subspan(a.axis));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x->dtype(), x->shape()));
  if (y.NumElements() == 0) return Value(std::move(y));
  KGRAD_LAUNCH(LaunchLayerNorm(ToDT(x->dtype()), x->raw_data(), scale->raw_data(),
                               bias->raw_data(), y.raw_data(), y.NumElements() / n, n, a.epsilon,
                               gpu.stream));
  return Value(std::move(y));
}

// ----- dropout ------------------------------------------------------------------------------------
absl::StatusOr<Value> Dropout(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const ops::DropoutAttrs a, ops::ParseDropout(ctx.prim(), *x));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x->dtype(), x->shape()));
  KGRAD_LAUNCH(LaunchDropout(ToDT(x->dtype()), x->raw_data(), y.raw_data(), y.NumElements(), a.seed,
                             a.rate, gpu.stream));
  return Value(std::move(y));
}

}  // namespace

void RegisterNnKernels(KernelTable* t) {
  t->Set(PrimId::kSoftmax, OnDevice<Softmax<false>>);
  t->Set(PrimId::kLogSoftmax, OnDevice<Softmax<true>>);
  t->Set(PrimId::kSoftmaxCrossEntropy, OnDevice<SoftmaxCrossEntropy>);
  t->Set(PrimId::kSparseSoftmaxCrossEntropy, OnDevice<SparseSoftmaxCrossEntropy>);
  t->Set(PrimId::kBatchNorm, OnDevice<BatchNorm>);
  t->Set(PrimId::kBatchNormGrad, OnDevice<BatchNormGrad>);
  t->Set(PrimId::kLayerNorm, OnDevice<LayerNorm>);
  t->Set(PrimId::kDropout, OnDevice<Dropout>);
}

}  // namespace cuda
}  // namespace kgrad
