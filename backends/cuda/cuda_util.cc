// Helpers shared by the host-side CUDA kernels: error statuses, the calling
// thread's stream, scratch, read-backs, index checks and the CPU fallback.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_device.h"
#include "backends/cuda/cuda_context.h"
#include "core/status_macros.h"

namespace kgrad {
namespace cuda {

absl::string_view CallName(absl::string_view expr) {
  size_t paren = expr.find('(');
  return paren == absl::string_view::npos ? expr : expr.substr(0, paren);
}

absl::Status CudaStatus(cudaError_t e, absl::string_view call) {
  if (e == cudaSuccess) return absl::OkStatus();
  std::string msg =
      absl::StrCat(call, " failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
  switch (e) {
    case cudaErrorMemoryAllocation: return absl::ResourceExhaustedError(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver: return absl::UnavailableError(msg);
    default: return absl::InternalError(msg);
  }
}

namespace {

// The code of a cuBLAS or cuDNN failure: both libraries name the same four
// (allocation, initialisation, a bad argument, an unsupported case).
template <typename E>
absl::StatusCode LibraryCode(E e, E alloc_failed, E not_initialized, E bad_param,
                             E not_supported) {
  if (e == alloc_failed) return absl::StatusCode::kResourceExhausted;
  if (e == not_initialized) return absl::StatusCode::kUnavailable;
  if (e == bad_param) return absl::StatusCode::kInvalidArgument;
  if (e == not_supported) return absl::StatusCode::kUnimplemented;
  return absl::StatusCode::kInternal;
}

}  // namespace

absl::Status CublasStatus(cublasStatus_t e, absl::string_view call) {
  if (e == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::Status(LibraryCode(e, CUBLAS_STATUS_ALLOC_FAILED, CUBLAS_STATUS_NOT_INITIALIZED,
                                  CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_NOT_SUPPORTED),
                      absl::StrCat(call, " failed: ", cublasGetStatusName(e), " (",
                                   cublasGetStatusString(e), ")"));
}

absl::Status CudnnStatus(cudnnStatus_t e, absl::string_view call) {
  if (e == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::Status(LibraryCode(e, CUDNN_STATUS_ALLOC_FAILED, CUDNN_STATUS_NOT_INITIALIZED,
                                  CUDNN_STATUS_BAD_PARAM, CUDNN_STATUS_NOT_SUPPORTED),
                      absl::StrCat(call, " failed: ", cudnnGetErrorString(e)));
}

absl::Status LaunchStatus(cudaError_t e, absl::string_view launcher) {
  if (e == cudaSuccess) return absl::OkStatus();
  return CudaStatus(e, absl::StrCat("kernel launch ", launcher));
}

absl::StatusOr<Gpu> GpuOf(const KernelContext& ctx) {
  auto* d = dynamic_cast<CudaDeviceImpl*>(ctx.device());
  if (d == nullptr) {
    return absl::InternalError(absl::StrCat("a CUDA kernel ran on device '",
                                            ctx.device()->name(), "'"));
  }
  KGRAD_ASSIGN_OR_RETURN(ThreadResources * r, d->Resources());
  return Gpu{d, r->stream, d->sms()};
}

absl::StatusOr<Tensor> Scratch(const KernelContext& ctx, size_t bytes) {
  return ctx.Allocate(DType::kBool, {static_cast<int64_t>(bytes)});
}

absl::Status ReadBack(const Gpu& gpu, const void* device_ptr, size_t bytes, void* host) {
  KGRAD_CUDA_CALL(
      cudaMemcpyAsync(host, device_ptr, bytes, cudaMemcpyDeviceToHost, gpu.stream));
  KGRAD_CUDA_CALL(cudaStreamSynchronize(gpu.stream));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> FirstBadIndex(const KernelContext& ctx, const Gpu& gpu, const Tensor& idx,
                                      int64_t lo, int64_t bound, int64_t* value) {
  KGRAD_ASSIGN_OR_RETURN(Tensor flag, Scratch(ctx, sizeof(unsigned long long)));
  auto* first = static_cast<unsigned long long*>(flag.raw_data());
  KGRAD_LAUNCH(LaunchFirstBadIndex(ToDT(idx.dtype()), idx.raw_data(), idx.NumElements(), lo,
                                   bound, first, gpu.stream));
  unsigned long long pos = 0;
  KGRAD_RETURN_IF_ERROR(ReadBack(gpu, first, sizeof(pos), &pos));
  if (pos == ~0ull) return -1;
  const size_t elem = DTypeSize(idx.dtype());
  const char* at = static_cast<const char*>(idx.raw_data()) + pos * elem;
  if (idx.dtype() == DType::kInt32) {
    int32_t v = 0;
    KGRAD_RETURN_IF_ERROR(ReadBack(gpu, at, elem, &v));
    *value = v;
  } else {
    int64_t v = 0;
    KGRAD_RETURN_IF_ERROR(ReadBack(gpu, at, elem, &v));
    *value = v;
  }
  return static_cast<int64_t>(pos);
}

absl::Status MoveInputsToDevice(KernelContext& ctx) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Value& v = ctx.input(i);
    if (!v.is_tensor() || v.tensor().device() == DeviceType::kCuda) continue;
    KGRAD_ASSIGN_OR_RETURN(Tensor t, ctx.device()->CopyToDevice(v.tensor()));
    ctx.mutable_input(i) = Value(std::move(t));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> CpuFallback(KernelContext& ctx) {
  KernelFn cpu = CpuKernels().Get(ctx.prim().id());
  if (cpu == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("no CUDA or CPU kernel for primitive '", ctx.prim().name(), "'"));
  }
  std::vector<Value> host;
  host.reserve(ctx.num_inputs());
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(Value h, ValueToHost(ctx.input(i), ctx.device()));
    host.push_back(std::move(h));
  }
  // Drop our references to the device inputs the executor handed over, so that
  // their memory can be reused while the CPU works.
  for (size_t i = 0; i < ctx.num_inputs(); ++i) ctx.mutable_input(i) = Value();
  KernelContext cpu_ctx(ctx.prim(), absl::MakeSpan(host), CpuDevice(), ctx.communicator());
  KGRAD_ASSIGN_OR_RETURN(Value out, cpu(cpu_ctx));
  return ValueToDevice(out, ctx.device());
}

}  // namespace cuda
}  // namespace kgrad
