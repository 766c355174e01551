#include "backends/cuda/cuda_device.h"

#include <array>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_device.h"
#include "backends/cuda/cuda_context.h"
#include "backends/list_kernels.h"
#include "backends/structural_kernels.h"
#include "core/status_macros.h"

namespace kgrad {
namespace cuda {
namespace {

static_assert(static_cast<int>(DType::kFloat32) == static_cast<int>(DT::kF32) &&
                  static_cast<int>(DType::kFloat64) == static_cast<int>(DT::kF64) &&
                  static_cast<int>(DType::kInt32) == static_cast<int>(DT::kI32) &&
                  static_cast<int>(DType::kInt64) == static_cast<int>(DT::kI64) &&
                  static_cast<int>(DType::kBool) == static_cast<int>(DT::kBool),
              "launch.h's DT must number dtypes like kgrad::DType");

constexpr int kMaxDevices = 64;

// The calling thread's resources per device, and the device last made current.
struct ThreadState {
  std::array<std::unique_ptr<ThreadResources>, kMaxDevices> resources;
  int current = -1;
};
thread_local ThreadState tls;

absl::Status SetDevice(int ordinal) {
  if (tls.current == ordinal) return absl::OkStatus();
  KGRAD_CUDA_CALL(cudaSetDevice(ordinal));
  tls.current = ordinal;
  return absl::OkStatus();
}

// The GPU count, or the error that says why there is none.
absl::StatusOr<int> DeviceCount() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the error state
    return absl::UnavailableError(
        absl::StrCat("no CUDA device: cudaGetDeviceCount failed: ", cudaGetErrorName(e), " (",
                     cudaGetErrorString(e), ")"));
  }
  if (count == 0) return absl::UnavailableError("no CUDA device: the driver reports 0 GPUs");
  return count;
}

absl::StatusOr<std::unique_ptr<CudaDeviceImpl>> MakeDevice(int ordinal) {
  KGRAD_RETURN_IF_ERROR(SetDevice(ordinal));
  cudaDeviceProp prop;
  KGRAD_CUDA_CALL(cudaGetDeviceProperties(&prop, ordinal));
  int sms = prop.multiProcessorCount;
  std::string name = absl::StrCat("cuda:", ordinal, " (", prop.name, ", sm_", prop.major,
                                  prop.minor, ")");
  return std::make_unique<CudaDeviceImpl>(ordinal, sms, std::move(name));
}

CudaDeviceImpl* AsCuda(Device* device) {
  if (device == nullptr || device->type() != DeviceType::kCuda) return nullptr;
  return dynamic_cast<CudaDeviceImpl*>(device);
}

// A thread's cuBLAS or cuDNN handle in `slot`, made on first use and bound to the
// thread's stream (both libraries' create / set-stream / destroy, with `status`
// naming the failed call `lib`Create or `lib`SetStream).
template <typename Handle, typename Result>
absl::StatusOr<Handle> HandleOnStream(Handle& slot, cudaStream_t stream,
                                      Result (*create)(Handle*),
                                      Result (*set_stream)(Handle, cudaStream_t),
                                      Result (*destroy)(Handle),
                                      absl::Status (*status)(Result, absl::string_view),
                                      absl::string_view lib) {
  if (slot != nullptr) return slot;
  Handle h = nullptr;
  KGRAD_RETURN_IF_ERROR(status(create(&h), absl::StrCat(lib, "Create")));
  absl::Status bound = status(set_stream(h, stream), absl::StrCat(lib, "SetStream"));
  if (!bound.ok()) {
    destroy(h);
    return bound;
  }
  slot = h;
  return slot;
}

}  // namespace

// ----- Thread resources ------------------------------------------------------------------
ThreadResources::~ThreadResources() {
  // Errors are ignored: at process exit the driver may already be shutting down.
  if (device != nullptr) cudaSetDevice(device->ordinal());
  if (stream != nullptr) cudaStreamSynchronize(stream);
  if (cublas != nullptr) cublasDestroy(cublas);
  if (cudnn != nullptr) cudnnDestroy(cudnn);
  if (stream != nullptr) {
    if (device != nullptr) device->cache().ReleaseStream(stream);
    cudaStreamDestroy(stream);
  }
}

// ----- The device --------------------------------------------------------------------------
CudaDeviceImpl::CudaDeviceImpl(int ordinal, int sms, std::string name)
    : ordinal_(ordinal), sms_(sms), name_(std::move(name)), raw_(ordinal), cache_(&raw_),
      allocator_(this) {}

void* CudaDeviceImpl::RawCudaMemory::Malloc(size_t bytes) {
  if (!SetDevice(ordinal_).ok()) return nullptr;
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError();  // out of memory is not sticky; clear it
    return nullptr;
  }
  return p;
}

void CudaDeviceImpl::RawCudaMemory::Free(void* ptr) {
  if (SetDevice(ordinal_).ok()) cudaFree(ptr);
}

void CudaDeviceImpl::RawCudaMemory::WaitForAllWork() {
  if (SetDevice(ordinal_).ok()) cudaDeviceSynchronize();
}

void* CudaDeviceImpl::StreamAllocator::Allocate(size_t bytes) {
  absl::StatusOr<ThreadResources*> r = device_->Resources();
  if (!r.ok()) return nullptr;
  return device_->cache_.Allocate(bytes, (*r)->stream);
}

void CudaDeviceImpl::StreamAllocator::Free(void* ptr, size_t) { device_->cache_.Free(ptr); }

absl::StatusOr<ThreadResources*> CudaDeviceImpl::Resources() {
  std::unique_ptr<ThreadResources>& slot = tls.resources[ordinal_];
  KGRAD_RETURN_IF_ERROR(SetDevice(ordinal_));
  if (slot != nullptr) return slot.get();
  auto r = std::make_unique<ThreadResources>();
  r->device = this;
  KGRAD_CUDA_CALL(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
  slot = std::move(r);
  return slot.get();
}

absl::StatusOr<cublasHandle_t> CudaDeviceImpl::Cublas() {
  KGRAD_ASSIGN_OR_RETURN(ThreadResources * r, Resources());
  return HandleOnStream(r->cublas, r->stream, cublasCreate, cublasSetStream, cublasDestroy,
                        CublasStatus, "cublas");
}

absl::StatusOr<cudnnHandle_t> CudaDeviceImpl::Cudnn() {
  KGRAD_ASSIGN_OR_RETURN(ThreadResources * r, Resources());
  return HandleOnStream(r->cudnn, r->stream, cudnnCreate, cudnnSetStream, cudnnDestroy,
                        CudnnStatus, "cudnn");
}

bool CudaDeviceImpl::FindConvAlgo(const std::string& key, ConvAlgo* out) const {
  absl::MutexLock lock(&conv_mu_);
  auto it = conv_algos_.find(key);
  if (it == conv_algos_.end()) return false;
  *out = it->second;
  return true;
}

void CudaDeviceImpl::RememberConvAlgo(const std::string& key, ConvAlgo algo) {
  absl::MutexLock lock(&conv_mu_);
  conv_algos_[key] = algo;
}

KernelFn CudaDeviceImpl::kernel(PrimId id) const { return CudaKernels().Get(id); }

absl::StatusOr<Tensor> CudaDeviceImpl::CopyToDevice(const Tensor& host) {
  if (host.device() == DeviceType::kCuda) {
    if (host.buffer()->allocator() == &allocator_) return host;
    // Another GPU's tensor: through the host.
    return absl::UnimplementedError(
        absl::StrCat("cannot copy ", host.TypeString(), " from another CUDA device to ", name_));
  }
  KGRAD_ASSIGN_OR_RETURN(ThreadResources * r, Resources());
  KGRAD_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(host.dtype(), host.shape(), &allocator_));
  if (host.nbytes() > 0) {
    KGRAD_CUDA_CALL(cudaMemcpyAsync(t.raw_data(), host.raw_data(), host.nbytes(),
                                    cudaMemcpyHostToDevice, r->stream));
    // Waiting makes the tensor usable from every stream (constants and weights are
    // copied once and read by every thread's runs).
    KGRAD_CUDA_CALL(cudaStreamSynchronize(r->stream));
  }
  return t;
}

absl::StatusOr<Tensor> CudaDeviceImpl::CopyToHost(const Tensor& tensor) {
  if (tensor.device() == DeviceType::kCpu) return tensor;
  KGRAD_ASSIGN_OR_RETURN(ThreadResources * r, Resources());
  KGRAD_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(tensor.dtype(), tensor.shape()));
  if (tensor.nbytes() > 0) {
    KGRAD_CUDA_CALL(cudaMemcpyAsync(t.raw_data(), tensor.raw_data(), tensor.nbytes(),
                                    cudaMemcpyDeviceToHost, r->stream));
  }
  KGRAD_CUDA_CALL(cudaStreamSynchronize(r->stream));
  return t;
}

absl::StatusOr<Tensor> CudaDeviceImpl::Fill(DType dtype, absl::Span<const int64_t> shape,
                                            double value) {
  if (!Allows(kAllTypes, dtype)) {  // a storage dtype: the device code has no fill for it
    KGRAD_ASSIGN_OR_RETURN(Tensor host, Tensor::Full(dtype, shape, value));
    return CopyToDevice(host);
  }
  KGRAD_ASSIGN_OR_RETURN(ThreadResources * r, Resources());
  KGRAD_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(dtype, shape, &allocator_));
  KGRAD_RETURN_IF_ERROR(
      LaunchStatus(LaunchFill(ToDT(dtype), t.raw_data(), t.NumElements(), value, r->stream),
                   "LaunchFill"));
  return t;
}

absl::Status CudaDeviceImpl::Synchronize() {
  KGRAD_ASSIGN_OR_RETURN(ThreadResources * r, Resources());
  KGRAD_CUDA_CALL(cudaStreamSynchronize(r->stream));
  return absl::OkStatus();
}

// ----- The kernel table --------------------------------------------------------------------
namespace {

struct Table {
  KernelTable kernels;
  KernelTable native;  // the CUDA kernels wrapped by StorageTypesOnHost
  std::vector<PrimId> fallbacks;
};

const Table& TheTable();

// The device code knows only f32, f64, i32, i64 and bool: a call with a storage
// dtype (u8, f16, ...; core/dtype.h) among its tensors or as its cast target runs
// through the host, like a primitive without a CUDA kernel.
bool TouchesStorageDType(const KernelContext& ctx) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Value& v = ctx.input(i);
    if (v.is_tensor() && !Allows(kAllTypes, v.tensor().dtype())) return true;
  }
  return ctx.prim().id() == PrimId::kCast && !Allows(kAllTypes, ctx.prim().GetDType("dtype"));
}

absl::StatusOr<Value> StorageTypesOnHost(KernelContext& ctx) {
  if (TouchesStorageDType(ctx)) return CpuFallback(ctx);
  return TheTable().native.Get(ctx.prim().id())(ctx);
}

const Table& TheTable() {
  static const Table* const table = [] {
    auto* t = new Table();
    RegisterStructuralKernels(&t->kernels);
    RegisterListKernels(&t->kernels);
    RegisterElementwiseKernels(&t->kernels);
    RegisterReduceKernels(&t->kernels);
    RegisterShapeKernels(&t->kernels);
    RegisterLinalgKernels(&t->kernels);
    RegisterNnKernels(&t->kernels);
    RegisterConvKernels(&t->kernels);
    RegisterCollectiveKernels(&t->kernels);
    // Whatever the CPU has and CUDA lacks runs through the host; every CUDA
    // kernel checks each call for storage dtypes (a loop over the inputs).
    const KernelTable& cpu = CpuKernels();
    for (int i = 0; i < kNumPrimIds; ++i) {
      PrimId id = static_cast<PrimId>(i);
      if (t->kernels.Get(id) == nullptr && cpu.Get(id) != nullptr) {
        t->kernels.Set(id, CpuFallback);
        t->fallbacks.push_back(id);
      } else if (t->kernels.Get(id) != nullptr) {
        t->native.Set(id, t->kernels.Get(id));
        t->kernels.Set(id, StorageTypesOnHost);
      }
    }
    return t;
  }();
  return *table;
}

}  // namespace

const KernelTable& CudaKernels() { return TheTable().kernels; }

}  // namespace cuda

// ----- Public API ------------------------------------------------------------------------------
int CudaDeviceCount() {
  absl::StatusOr<int> n = cuda::DeviceCount();
  return n.ok() ? *n : 0;
}

absl::StatusOr<Device*> CudaDevice(int ordinal) {
  static std::mutex mu;
  static std::array<cuda::CudaDeviceImpl*, cuda::kMaxDevices> devices{};
  std::lock_guard<std::mutex> lock(mu);
  KGRAD_ASSIGN_OR_RETURN(int count, cuda::DeviceCount());
  if (ordinal < 0 || ordinal >= count || ordinal >= cuda::kMaxDevices) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device ", ordinal, " does not exist (", count, " visible)"));
  }
  if (devices[ordinal] == nullptr) {
    KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaDeviceImpl> d, cuda::MakeDevice(ordinal));
    devices[ordinal] = d.release();  // process-wide, never destroyed
  }
  return devices[ordinal];
}

absl::StatusOr<cuda::MemoryStats> CudaMemoryStats(Device* device) {
  cuda::CudaDeviceImpl* d = cuda::AsCuda(device);
  if (d == nullptr) return absl::InvalidArgumentError("not a CUDA device");
  return d->cache().stats();
}

absl::Status CudaResetPeakMemory(Device* device) {
  cuda::CudaDeviceImpl* d = cuda::AsCuda(device);
  if (d == nullptr) return absl::InvalidArgumentError("not a CUDA device");
  d->cache().ResetPeak();
  return absl::OkStatus();
}

absl::StatusOr<size_t> CudaEmptyCache(Device* device) {
  cuda::CudaDeviceImpl* d = cuda::AsCuda(device);
  if (d == nullptr) return absl::InvalidArgumentError("not a CUDA device");
  KGRAD_RETURN_IF_ERROR(d->Synchronize());
  return d->cache().EmptyCache();
}

std::vector<PrimId> CudaFallbackPrimitives() { return cuda::TheTable().fallbacks; }

}  // namespace kgrad
