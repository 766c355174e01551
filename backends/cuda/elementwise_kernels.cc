// CUDA kernels: elementwise family. Inputs are checked by ops/elementwise.h (as
// on the CPU), then one launch of backends/cuda/kernels/elementwise.cu;
// relu, sigmoid and tanh go through cuDNN's activation (NaN propagating).
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
template <UnaryOp kOp>
absl::StatusOr<Value> UnaryKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_RETURN_IF_ERROR(ops::CheckUnary(ctx.prim().id(), *x));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x->dtype(), x->shape()));
  KGRAD_LAUNCH(LaunchUnary(kOp, ToDT(x->dtype()), x->raw_data(), y.raw_data(), x->NumElements(),
                           gpu.stream));
  return Value(std::move(y));
}

absl::StatusOr<Value> GeluKernel(KernelContext& ctx) {
  return ctx.prim().GetBool("approximate") ? UnaryKernel<UnaryOp::kGeluTanh>(ctx)
                                           : UnaryKernel<UnaryOp::kGeluExact>(ctx);
}

// cuDNN's activation over the tensor as [1, n, 1, 1]; n beyond int takes the
// .cu kernel instead.
absl::Status CudnnActivation(const Gpu& gpu, cudnnActivationMode_t mode, const Tensor& x,
                             const Tensor& y) {
  KGRAD_ASSIGN_OR_RETURN(cudnnHandle_t h, gpu.device->Cudnn());
  const cudnnDataType_t type = CudnnDataType(x.dtype());
  cudnnTensorDescriptor_t desc = nullptr;
  cudnnActivationDescriptor_t act = nullptr;
  KGRAD_CUDNN_CALL(cudnnCreateTensorDescriptor(&desc));
  absl::Status s = CudnnStatus(cudnnCreateActivationDescriptor(&act),
                               "cudnnCreateActivationDescriptor");
  if (s.ok()) {
    const int n = static_cast<int>(x.NumElements());
    s = CudnnStatus(cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, type, 1, n, 1, 1),
                    "cudnnSetTensor4dDescriptor");
  }
  if (s.ok()) {
    s = CudnnStatus(cudnnSetActivationDescriptor(act, mode, CUDNN_PROPAGATE_NAN, 0.0),
                    "cudnnSetActivationDescriptor");
  }
  if (s.ok()) {
    const CudnnScale one(x.dtype(), 1), zero(x.dtype(), 0);
    s = CudnnStatus(cudnnActivationForward(h, act, one.get(), desc, x.raw_data(), zero.get(), desc,
                                           y.raw_data()),
                    "cudnnActivationForward");
  }
  if (act != nullptr) cudnnDestroyActivationDescriptor(act);
  cudnnDestroyTensorDescriptor(desc);
  return s;
}

template <UnaryOp kOp, cudnnActivationMode_t kMode>
absl::StatusOr<Value> ActivationKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_RETURN_IF_ERROR(ops::CheckUnary(ctx.prim().id(), *x));
  if (x->NumElements() == 0 || x->NumElements() > INT_MAX) return UnaryKernel<kOp>(ctx);
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

template <BinaryOp kOp>
absl::StatusOr<Value> BinaryKernel(KernelContext& ctx) {
  const PrimId id = ctx.prim().id();
  KGRAD_ASSIGN_OR_RETURN(const Tensor* a, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* b, ctx.TensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, ops::BinaryShape(id, *a, *b, ops::CheckedBy::kKernel));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  if ((kOp == BinaryOp::kDiv || kOp == BinaryOp::kMod || kOp == BinaryOp::kFMod) &&
      IsInteger(b->dtype()) && NumElementsOf(shape) > 0) {
    KGRAD_RETURN_IF_ERROR(CheckNonZeroDivisor(ctx, gpu, *b));
  }
  const DType out_dtype = ops::ElementwiseBoolOutput(id) ? DType::kBool : a->dtype();
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOrReuse({0, 1}, out_dtype, shape));
  const Shape* ins[2] = {&a->shape(), &b->shape()};
  const BroadcastGeom g = MakeBroadcastGeom(shape, ins);
  KGRAD_LAUNCH(LaunchBinary(kOp, ToDT(a->dtype()), a->raw_data(), b->raw_data(), out.raw_data(),
                            g, gpu.stream));
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

// mod(a, b){fmod}: the sign of a with fmod, of b without.
absl::StatusOr<Value> ModKernel(KernelContext& ctx) {
  return ctx.prim().GetBool("fmod") ? BinaryKernel<BinaryOp::kFMod>(ctx)
                                    : BinaryKernel<BinaryOp::kMod>(ctx);
}

template <UnaryOp kOp>
void SetUnary(KernelTable* t, PrimId id) {
  t->Set(id, OnDevice<UnaryKernel<kOp>>);
}

template <BinaryOp kOp>
void SetBinary(KernelTable* t, PrimId id) {
  t->Set(id, OnDevice<BinaryKernel<kOp>>);
}

}  // namespace

void RegisterElementwiseKernels(KernelTable* t) {
  SetUnary<UnaryOp::kNeg>(t, PrimId::kNeg);
  SetUnary<UnaryOp::kAbs>(t, PrimId::kAbs);
  SetUnary<UnaryOp::kSign>(t, PrimId::kSign);
  SetUnary<UnaryOp::kSquare>(t, PrimId::kSquare);
  SetUnary<UnaryOp::kExp>(t, PrimId::kExp);
  SetUnary<UnaryOp::kLog>(t, PrimId::kLog);
  SetUnary<UnaryOp::kLog1p>(t, PrimId::kLog1p);
  SetUnary<UnaryOp::kExpm1>(t, PrimId::kExpm1);
  SetUnary<UnaryOp::kSin>(t, PrimId::kSin);
  SetUnary<UnaryOp::kCos>(t, PrimId::kCos);
  t->Set(PrimId::kTanh, OnDevice<ActivationKernel<UnaryOp::kTanh, CUDNN_ACTIVATION_TANH>>);
  t->Set(PrimId::kSigmoid,
         OnDevice<ActivationKernel<UnaryOp::kSigmoid, CUDNN_ACTIVATION_SIGMOID>>);
  t->Set(PrimId::kRelu, OnDevice<ActivationKernel<UnaryOp::kRelu, CUDNN_ACTIVATION_RELU>>);
  t->Set(PrimId::kGelu, OnDevice<GeluKernel>);
  SetUnary<UnaryOp::kSoftplus>(t, PrimId::kSoftplus);
  SetUnary<UnaryOp::kSqrt>(t, PrimId::kSqrt);
  SetUnary<UnaryOp::kRsqrt>(t, PrimId::kRsqrt);
  SetUnary<UnaryOp::kReciprocal>(t, PrimId::kReciprocal);
  SetUnary<UnaryOp::kErf>(t, PrimId::kErf);
  SetUnary<UnaryOp::kLogicalNot>(t, PrimId::kLogicalNot);
  SetUnary<UnaryOp::kFloor>(t, PrimId::kFloor);
  SetUnary<UnaryOp::kCeil>(t, PrimId::kCeil);
  SetUnary<UnaryOp::kRound>(t, PrimId::kRound);
  SetUnary<UnaryOp::kAsin>(t, PrimId::kAsin);
  SetUnary<UnaryOp::kAcos>(t, PrimId::kAcos);
  SetUnary<UnaryOp::kAtan>(t, PrimId::kAtan);
  SetUnary<UnaryOp::kSinh>(t, PrimId::kSinh);
  SetUnary<UnaryOp::kCosh>(t, PrimId::kCosh);
  SetUnary<UnaryOp::kAsinh>(t, PrimId::kAsinh);
  SetUnary<UnaryOp::kAcosh>(t, PrimId::kAcosh);
  SetUnary<UnaryOp::kAtanh>(t, PrimId::kAtanh);
  SetBinary<BinaryOp::kAdd>(t, PrimId::kAdd);
  SetBinary<BinaryOp::kSub>(t, PrimId::kSub);
  SetBinary<BinaryOp::kMul>(t, PrimId::kMul);
  SetBinary<BinaryOp::kDiv>(t, PrimId::kDiv);
  SetBinary<BinaryOp::kPow>(t, PrimId::kPow);
  SetBinary<BinaryOp::kMaximum>(t, PrimId::kMaximum);
  SetBinary<BinaryOp::kMinimum>(t, PrimId::kMinimum);
  SetBinary<BinaryOp::kEqual>(t, PrimId::kEqual);
  SetBinary<BinaryOp::kNotEqual>(t, PrimId::kNotEqual);
  SetBinary<BinaryOp::kLess>(t, PrimId::kLess);
  SetBinary<BinaryOp::kLessEqual>(t, PrimId::kLessEqual);
  SetBinary<BinaryOp::kGreater>(t, PrimId::kGreater);
  SetBinary<BinaryOp::kGreaterEqual>(t, PrimId::kGreaterEqual);
  SetBinary<BinaryOp::kLogicalAnd>(t, PrimId::kLogicalAnd);
  SetBinary<BinaryOp::kTanhGrad>(t, PrimId::kTanhGrad);
  SetBinary<BinaryOp::kSigmoidGrad>(t, PrimId::kSigmoidGrad);
  SetBinary<BinaryOp::kSinGrad>(t, PrimId::kSinGrad);
  SetBinary<BinaryOp::kCosGrad>(t, PrimId::kCosGrad);
  SetBinary<BinaryOp::kReluGrad>(t, PrimId::kReluGrad);
  SetBinary<BinaryOp::kLogicalOr>(t, PrimId::kLogicalOr);
  t->Set(PrimId::kMod, OnDevice<ModKernel>);
  t->Set(PrimId::kSelect, OnDevice<SelectKernel>);
}

}  // namespace cuda
}  // namespace kgrad
