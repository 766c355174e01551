// CUDA kernels: elementwise family. Inputs are checked with the CPU kernels'
// rules and messages, then one launch of backends/cuda/kernels/elementwise.cu;
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

namespace kgrad {
namespace cuda {
namespace {

// ----- Unary -------------------------------------------------------------------------------
template <UnaryOp kOp, DTypeMask kTypes>
absl::StatusOr<Value> UnaryKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, TypedInput(ctx, 0, kTypes));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x->dtype(), x->shape()));
  KGRAD_LAUNCH(LaunchUnary(kOp, ToDT(x->dtype()), x->raw_data(), y.raw_data(), x->NumElements(),
                           gpu.stream));
  return Value(std::move(y));
}

absl::StatusOr<Value> GeluKernel(KernelContext& ctx) {
  return ctx.prim().GetBool("approximate") ? UnaryKernel<UnaryOp::kGeluTanh, kFloatTypes>(ctx)
                                           : UnaryKernel<UnaryOp::kGeluExact, kFloatTypes>(ctx);
}

// cuDNN's activation over the tensor as [1, n, 1, 1]; n beyond int takes the
// .cu kernel instead.
absl::Status CudnnActivation(const Gpu& gpu, cudnnActivationMode_t mode, const Tensor& x,
                             const Tensor& y) {
  KGRAD_ASSIGN_OR_RETURN(cudnnHandle_t h, gpu.device->Cudnn());
  const cudnnDataType_t type =
      x.dtype() == DType::kFloat32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
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
    const float one_f = 1, zero_f = 0;
    const double one_d = 1, zero_d = 0;
    const bool f32 = x.dtype() == DType::kFloat32;
    s = CudnnStatus(cudnnActivationForward(h, act, f32 ? static_cast<const void*>(&one_f) : &one_d,
                                           desc, x.raw_data(),
                                           f32 ? static_cast<const void*>(&zero_f) : &zero_d,
                                           desc, y.raw_data()),
                    "cudnnActivationForward");
  }
  if (act != nullptr) cudnnDestroyActivationDescriptor(act);
  cudnnDestroyTensorDescriptor(desc);
  return s;
}

template <UnaryOp kOp, cudnnActivationMode_t kMode>
absl::StatusOr<Value> ActivationKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, TypedInput(ctx, 0, kFloatTypes));
  if (x->NumElements() == 0 || x->NumElements() > INT_MAX) {
    return UnaryKernel<kOp, kFloatTypes>(ctx);
  }
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  // cuDNN's activation allows y == x.
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x->dtype(), x->shape()));
  KGRAD_RETURN_IF_ERROR(CudnnActivation(gpu, kMode, *x, y));
  return Value(std::move(y));
}

// ----- Binary and select ----------------------------------------------------------------------
absl::StatusOr<Shape> BroadcastInputs(absl::Span<const Tensor* const> ts) {
  Shape shape = ts[0]->shape();
  for (size_t i = 1; i < ts.size(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(shape, BroadcastShapes(shape, ts[i]->shape()));
  }
  return shape;
}

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

template <BinaryOp kOp, DTypeMask kTypes, bool kBoolOut = false>
absl::StatusOr<Value> BinaryKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* a, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* b, ctx.TensorAt(1));
  KGRAD_RETURN_IF_ERROR(SameDTypes(*a, 0, *b, 1));
  KGRAD_RETURN_IF_ERROR(TypedInput(ctx, 0, kTypes).status());
  KGRAD_ASSIGN_OR_RETURN(Shape shape, BroadcastInputs({a, b}));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  if (kOp == BinaryOp::kDiv && IsInteger(b->dtype()) && NumElementsOf(shape) > 0) {
    KGRAD_RETURN_IF_ERROR(CheckNonZeroDivisor(ctx, gpu, *b));
  }
  const DType out_dtype = kBoolOut ? DType::kBool : a->dtype();
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOrReuse({0, 1}, out_dtype, shape));
  const Shape* ins[2] = {&a->shape(), &b->shape()};
  const BroadcastGeom g = MakeBroadcastGeom(shape, ins);
  KGRAD_LAUNCH(LaunchBinary(kOp, ToDT(a->dtype()), a->raw_data(), b->raw_data(), out.raw_data(),
                            g, gpu.stream));
  return Value(std::move(out));
}

absl::StatusOr<Value> SelectKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* c, TypedInput(ctx, 0, kBoolType));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* a, ctx.TensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* b, ctx.TensorAt(2));
  KGRAD_RETURN_IF_ERROR(SameDTypes(*a, 1, *b, 2));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, BroadcastInputs({c, a, b}));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOrReuse({1, 2, 0}, a->dtype(), shape));
  const Shape* ins[3] = {&c->shape(), &a->shape(), &b->shape()};
  const BroadcastGeom g = MakeBroadcastGeom(shape, ins);
  KGRAD_LAUNCH(LaunchSelect(ToDT(a->dtype()), c->raw_data(), a->raw_data(), b->raw_data(),
                            out.raw_data(), g, gpu.stream));
  return Value(std::move(out));
}

template <UnaryOp kOp, DTypeMask kTypes>
void SetUnary(KernelTable* t, PrimId id) {
  t->Set(id, OnDevice<UnaryKernel<kOp, kTypes>>);
}

template <BinaryOp kOp, DTypeMask kTypes, bool kBoolOut = false>
void SetBinary(KernelTable* t, PrimId id) {
  t->Set(id, OnDevice<BinaryKernel<kOp, kTypes, kBoolOut>>);
}

}  // namespace

void RegisterElementwiseKernels(KernelTable* t) {
  SetUnary<UnaryOp::kNeg, kNumericTypes>(t, PrimId::kNeg);
  SetUnary<UnaryOp::kAbs, kNumericTypes>(t, PrimId::kAbs);
  SetUnary<UnaryOp::kSign, kNumericTypes>(t, PrimId::kSign);
  SetUnary<UnaryOp::kSquare, kNumericTypes>(t, PrimId::kSquare);
  SetUnary<UnaryOp::kExp, kFloatTypes>(t, PrimId::kExp);
  SetUnary<UnaryOp::kLog, kFloatTypes>(t, PrimId::kLog);
  SetUnary<UnaryOp::kLog1p, kFloatTypes>(t, PrimId::kLog1p);
  SetUnary<UnaryOp::kExpm1, kFloatTypes>(t, PrimId::kExpm1);
  SetUnary<UnaryOp::kSin, kFloatTypes>(t, PrimId::kSin);
  SetUnary<UnaryOp::kCos, kFloatTypes>(t, PrimId::kCos);
  t->Set(PrimId::kTanh, OnDevice<ActivationKernel<UnaryOp::kTanh, CUDNN_ACTIVATION_TANH>>);
  t->Set(PrimId::kSigmoid,
         OnDevice<ActivationKernel<UnaryOp::kSigmoid, CUDNN_ACTIVATION_SIGMOID>>);
  t->Set(PrimId::kRelu, OnDevice<ActivationKernel<UnaryOp::kRelu, CUDNN_ACTIVATION_RELU>>);
  t->Set(PrimId::kGelu, OnDevice<GeluKernel>);
  SetUnary<UnaryOp::kSoftplus, kFloatTypes>(t, PrimId::kSoftplus);
  SetUnary<UnaryOp::kSqrt, kFloatTypes>(t, PrimId::kSqrt);
  SetUnary<UnaryOp::kRsqrt, kFloatTypes>(t, PrimId::kRsqrt);
  SetUnary<UnaryOp::kReciprocal, kFloatTypes>(t, PrimId::kReciprocal);
  SetUnary<UnaryOp::kErf, kFloatTypes>(t, PrimId::kErf);
  SetUnary<UnaryOp::kLogicalNot, kBoolType>(t, PrimId::kLogicalNot);
  SetBinary<BinaryOp::kAdd, kNumericTypes>(t, PrimId::kAdd);
  SetBinary<BinaryOp::kSub, kNumericTypes>(t, PrimId::kSub);
  SetBinary<BinaryOp::kMul, kNumericTypes>(t, PrimId::kMul);
  SetBinary<BinaryOp::kDiv, kNumericTypes>(t, PrimId::kDiv);
  SetBinary<BinaryOp::kPow, kFloatTypes>(t, PrimId::kPow);
  SetBinary<BinaryOp::kMaximum, kNumericTypes>(t, PrimId::kMaximum);
  SetBinary<BinaryOp::kMinimum, kNumericTypes>(t, PrimId::kMinimum);
  SetBinary<BinaryOp::kEqual, kAllTypes, true>(t, PrimId::kEqual);
  SetBinary<BinaryOp::kNotEqual, kAllTypes, true>(t, PrimId::kNotEqual);
  SetBinary<BinaryOp::kLess, kNumericTypes, true>(t, PrimId::kLess);
  SetBinary<BinaryOp::kLessEqual, kNumericTypes, true>(t, PrimId::kLessEqual);
  SetBinary<BinaryOp::kGreater, kNumericTypes, true>(t, PrimId::kGreater);
  SetBinary<BinaryOp::kGreaterEqual, kNumericTypes, true>(t, PrimId::kGreaterEqual);
  SetBinary<BinaryOp::kLogicalAnd, kBoolType, true>(t, PrimId::kLogicalAnd);
  SetBinary<BinaryOp::kLogicalOr, kBoolType, true>(t, PrimId::kLogicalOr);
  t->Set(PrimId::kSelect, OnDevice<SelectKernel>);
}

}  // namespace cuda
}  // namespace kgrad
