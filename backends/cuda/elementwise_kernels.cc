// CUDA kernels: elementwise family. Inputs are checked by ops/elementwise.h (as
// on the CPU), then one launch of backends/cuda/kernels/elementwise.cu, which
// computes the op's functor; relu, sigmoid and tanh go through cuDNN's
// activation (NaN propagating).
// Outputs reuse a uniquely owned input buffer when they can (every output
// element depends only on the input elements at its own position).
#include <climits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/kernel_util.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/elementwise.h"

namespace kgrad {
namespace cuda {
namespace {

// ----- Unary -------------------------------------------------------------------------------
absl::StatusOr<Value> UnaryKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_RETURN_IF_ERROR(ops::CheckUnary(ctx.prim().id(), *x));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x->dtype(), x->shape()));
  KGRAD_LAUNCH(LaunchUnary(ctx.prim().id(), ToDT(x->dtype()), ops::ElementwiseAttrs(ctx.prim()),
                           x->raw_data(), y.raw_data(), x->NumElements(), gpu.stream));
  return Value(std::move(y));
}

// cuDNN's activation over the tensor as [1, n, 1, 1]; n beyond int takes the
// .cu kernel instead.
absl::Status CudnnActivation(const Gpu& gpu, cudnnActivationMode_t mode, const Tensor& x,
                             const Tensor& y) {
  KGRAD_ASSIGN_OR_RETURN(cudnnHandle_t h, gpu.device->Cudnn());
  TensorDesc desc;
  ActivationDesc act;
  KGRAD_RETURN_IF_ERROR(desc.Nchw(x.dtype(), 1, x.NumElements(), 1, 1));
  KGRAD_CUDNN_CALL(cudnnCreateActivationDescriptor(act.out()));
  KGRAD_CUDNN_CALL(cudnnSetActivationDescriptor(act.get(), mode, CUDNN_PROPAGATE_NAN, 0.0));
  const CudnnScale one(x.dtype(), 1), zero(x.dtype(), 0);
  KGRAD_CUDNN_CALL(cudnnActivationForward(h, act.get(), one.get(), desc.get(), x.raw_data(),
                                          zero.get(), desc.get(), y.raw_data()));
  return absl::OkStatus();
}

template <cudnnActivationMode_t kMode>
absl::StatusOr<Value> ActivationKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_RETURN_IF_ERROR(ops::CheckUnary(ctx.prim().id(), *x));
  if (x->NumElements() == 0 || x->NumElements() > INT_MAX) return UnaryKernel(ctx);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  // cuDNN's activation allows y == x.
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x->dtype(), x->shape()));
  KGRAD_RETURN_IF_ERROR(CudnnActivation(gpu, kMode, *x, y));
  return Value(std::move(y));
}

// ----- Binary and select ----------------------------------------------------------------------
// Integer division by zero has no value: reject it before computing anything
// (the check runs on the device; its answer is read back).
absl::Status CheckNonZeroDivisor(const KernelContext& ctx, const Gpu& gpu, const Tensor& b) {
  KGRAD_ASSIGN_OR_RETURN(Tensor flag, Scratch(ctx, sizeof(unsigned long long)));
  auto* first = static_cast<unsigned long long*>(flag.raw_data());
  KGRAD_LAUNCH(LaunchFirstZero(ToDT(b.dtype()), b.raw_data(), b.NumElements(), first, gpu.stream));
  unsigned long long pos = 0;
  KGRAD_RETURN_IF_ERROR(ReadBack(gpu, first, sizeof(pos), &pos));
  if (pos == ~0ull) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "integer division by zero: input 1 (", b.TypeString(), ") has a zero element"));
}

absl::StatusOr<Value> BinaryKernel(KernelContext& ctx) {
  const PrimId id = ctx.prim().id();
  KGRAD_ASSIGN_OR_RETURN(const Tensor* a, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* b, ctx.TensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, ops::BinaryShape(id, *a, *b, ops::CheckedBy::kKernel));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  if ((id == PrimId::kDiv || id == PrimId::kMod) && IsInteger(b->dtype()) &&
      NumElementsOf(shape) > 0) {
    KGRAD_RETURN_IF_ERROR(CheckNonZeroDivisor(ctx, gpu, *b));
  }
  const DType out_dtype = ops::ElementwiseBoolOutput(id) ? DType::kBool : a->dtype();
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOrReuse({0, 1}, out_dtype, shape));
  const Shape* ins[2] = {&a->shape(), &b->shape()};
  const BroadcastGeom g = MakeBroadcastGeom(shape, ins);
  KGRAD_LAUNCH(LaunchBinary(id, ToDT(a->dtype()), ops::ElementwiseAttrs(ctx.prim()), a->raw_data(),
                            b->raw_data(), out.raw_data(), g, gpu.stream));
  return Value(std::move(out));
}

absl::StatusOr<Value> SelectKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* c, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* a, ctx.TensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* b, ctx.TensorAt(2));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, ops::SelectShape(*c, *a, *b, ops::CheckedBy::kKernel));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOrReuse({1, 2, 0}, a->dtype(), shape));
  const Shape* ins[3] = {&c->shape(), &a->shape(), &b->shape()};
  const BroadcastGeom g = MakeBroadcastGeom(shape, ins);
  KGRAD_LAUNCH(LaunchSelect(ToDT(a->dtype()), c->raw_data(), a->raw_data(), b->raw_data(),
                            out.raw_data(), g, gpu.stream));
  return Value(std::move(out));
}

// One kernel per row of the table; select has its own.
template <int kArity>
void SetKernel(KernelTable* t, PrimId id) {
  if constexpr (kArity == 1) {
    t->Set(id, OnDevice<UnaryKernel>);
  } else if constexpr (kArity == 2) {
    t->Set(id, OnDevice<BinaryKernel>);
  } else {
    t->Set(id, OnDevice<SelectKernel>);
  }
}

}  // namespace

void RegisterElementwiseKernels(KernelTable* t) {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  SetKernel<arity>(t, PrimId::k##Name);
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
  // relu, sigmoid and tanh through cuDNN's activation (NaN propagating).
  t->Set(PrimId::kTanh, OnDevice<ActivationKernel<CUDNN_ACTIVATION_TANH>>);
  t->Set(PrimId::kSigmoid, OnDevice<ActivationKernel<CUDNN_ACTIVATION_SIGMOID>>);
  t->Set(PrimId::kRelu, OnDevice<ActivationKernel<CUDNN_ACTIVATION_RELU>>);
}

}  // namespace cuda
}  // namespace kgrad
