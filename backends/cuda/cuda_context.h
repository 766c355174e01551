// Internal to backends/cuda: the device class, the per-thread resources (stream,
// cuBLAS and cuDNN handles) and the helpers every host-side kernel uses.
#ifndef KGRAD_BACKENDS_CUDA_CUDA_CONTEXT_H_
#define KGRAD_BACKENDS_CUDA_CUDA_CONTEXT_H_

#include <cstdint>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "backends/cpu/cpu_kernels.h"  // KGRAD_KERNEL_FAMILIES
#include "backends/cuda/caching_allocator.h"
#include "backends/cuda/kernels/launch.h"
#include "backends/device.h"
#include "backends/kernel.h"
#include "core/status_macros.h"

namespace kgrad {
namespace cuda {

// ----- Errors ------------------------------------------------------------------------
// OK, or an error naming `call` (the library function: "cudaMemcpyAsync") and the
// library's own error name and text. Out of memory maps to ResourceExhausted, no
// driver/device to Unavailable, cuDNN's unsupported configurations to
// Unimplemented, anything else to Internal.
absl::Status CudaStatus(cudaError_t e, absl::string_view call);
absl::Status CublasStatus(cublasStatus_t e, absl::string_view call);
absl::Status CudnnStatus(cudnnStatus_t e, absl::string_view call);

// The library call's name from its expression text: "cudaMalloc(&p, n)" -> "cudaMalloc".
absl::string_view CallName(absl::string_view expr);

#define KGRAD_CUDA_CALL(expr) \
  KGRAD_RETURN_IF_ERROR(::kgrad::cuda::CudaStatus((expr), ::kgrad::cuda::CallName(#expr)))
#define KGRAD_CUBLAS_CALL(expr) \
  KGRAD_RETURN_IF_ERROR(::kgrad::cuda::CublasStatus((expr), ::kgrad::cuda::CallName(#expr)))
#define KGRAD_CUDNN_CALL(expr) \
  KGRAD_RETURN_IF_ERROR(::kgrad::cuda::CudnnStatus((expr), ::kgrad::cuda::CallName(#expr)))

// ----- The device --------------------------------------------------------------------
class CudaDeviceImpl;

// One thread's resources on one device. Made on the thread's first use of the
// device; destroyed at thread exit (after its stream has finished).
struct ThreadResources {
  CudaDeviceImpl* device = nullptr;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;  // created on first use
  cudnnHandle_t cudnn = nullptr;    // created on first use
  ~ThreadResources();
};

class CudaDeviceImpl final : public Device {
 public:
  CudaDeviceImpl(int ordinal, int sms, std::string name);

  DeviceType type() const override { return DeviceType::kCuda; }
  std::string name() const override { return name_; }
  Allocator* allocator() override { return &allocator_; }
  KernelFn kernel(PrimId id) const override;
  absl::StatusOr<Tensor> CopyToDevice(const Tensor& host) override;
  absl::StatusOr<Tensor> CopyToHost(const Tensor& tensor) override;
  absl::StatusOr<Tensor> Fill(DType dtype, absl::Span<const int64_t> shape,
                              double value) override;
  absl::Status Synchronize() override;

  int ordinal() const { return ordinal_; }
  int sms() const { return sms_; }
  CachingAllocator& cache() { return cache_; }
  // The calling thread's resources (makes this device current on the thread).
  absl::StatusOr<ThreadResources*> Resources();
  absl::StatusOr<cublasHandle_t> Cublas();
  absl::StatusOr<cudnnHandle_t> Cudnn();

  // The cuDNN convolution algorithm chosen on this device for a geometry (a key
  // made by conv_kernels.cc, which times the candidates on a geometry's first
  // call): false when none is chosen yet.
  struct ConvAlgo {
    int algo = 0;
    size_t workspace = 0;
  };
  bool FindConvAlgo(const std::string& key, ConvAlgo* out) const;
  void RememberConvAlgo(const std::string& key, ConvAlgo algo);

 private:
  class RawCudaMemory final : public RawMemory {
   public:
    explicit RawCudaMemory(int ordinal) : ordinal_(ordinal) {}
    void* Malloc(size_t bytes) override;
    void Free(void* ptr) override;
    void WaitForAllWork() override;

   private:
    int ordinal_;
  };
  class StreamAllocator final : public Allocator {
   public:
    explicit StreamAllocator(CudaDeviceImpl* device) : device_(device) {}
    DeviceType device() const override { return DeviceType::kCuda; }
    void* Allocate(size_t bytes) override;
    void Free(void* ptr, size_t bytes) override;

   private:
    CudaDeviceImpl* device_;
  };

  int ordinal_;
  int sms_;
  std::string name_;
  RawCudaMemory raw_;
  CachingAllocator cache_;
  StreamAllocator allocator_;
  mutable absl::Mutex conv_mu_;
  absl::flat_hash_map<std::string, ConvAlgo> conv_algos_ ABSL_GUARDED_BY(conv_mu_);
};

// The CUDA kernel table (native kernels, structural kernels, CPU fallbacks).
const KernelTable& CudaKernels();

// ----- Helpers for host-side kernels ------------------------------------------------------
// What a kernel call runs on.
struct Gpu {
  CudaDeviceImpl* device;
  cudaStream_t stream;
  int sms;
};
// The device of `ctx` with the calling thread's stream.
absl::StatusOr<Gpu> GpuOf(const KernelContext& ctx);

// kgrad dtype <-> launcher dtype (same numbering).
inline DT ToDT(DType t) { return static_cast<DT>(static_cast<int>(t)); }

// cuDNN's data type of a f32 or f64 tensor.
inline cudnnDataType_t CudnnDataType(DType t) {
  return t == DType::kFloat32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
}

// cuDNN's scaling factors (alpha, beta): float for f32 tensors, double for f64.
struct CudnnScale {
  CudnnScale(DType t, double v) : f(static_cast<float>(v)), d(v), f32(t == DType::kFloat32) {}
  const void* get() const { return f32 ? static_cast<const void*>(&f) : &d; }
  float f;
  double d;
  bool f32;
};

// A cuDNN descriptor that destroys itself with `kDestroy`; made by passing out()
// to its create call.
template <typename Desc, cudnnStatus_t (*kDestroy)(Desc)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() = default;
  ~CudnnDescriptor() {
    if (desc_ != nullptr) kDestroy(desc_);
  }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;

  Desc get() const { return desc_; }
  Desc* out() { return &desc_; }

 private:
  Desc desc_ = nullptr;
};
using FilterDesc = CudnnDescriptor<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvolutionDesc =
    CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using PoolingDesc = CudnnDescriptor<cudnnPoolingDescriptor_t, cudnnDestroyPoolingDescriptor>;
using ActivationDesc =
    CudnnDescriptor<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;

// A tensor descriptor, also made by Nchw.
class TensorDesc : public CudnnDescriptor<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor> {
 public:
  // An NCHW tensor of `dtype` (created on the first call).
  absl::Status Nchw(DType dtype, int64_t n, int64_t c, int64_t h, int64_t w) {
    if (get() == nullptr) KGRAD_CUDNN_CALL(cudnnCreateTensorDescriptor(out()));
    KGRAD_CUDNN_CALL(cudnnSetTensor4dDescriptor(
        get(), CUDNN_TENSOR_NCHW, CudnnDataType(dtype),
        static_cast<int>(n), static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)));
    return absl::OkStatus();
  }
};

// Turns a launcher's result into a Status naming the launcher.
absl::Status LaunchStatus(cudaError_t e, absl::string_view launcher);
#define KGRAD_LAUNCH(expr) \
  KGRAD_RETURN_IF_ERROR(::kgrad::cuda::LaunchStatus((expr), ::kgrad::cuda::CallName(#expr)))

// Device scratch of `bytes` bytes (a bool tensor; freed back to the stream's cache
// when it goes out of scope, which is safe: later work on the stream runs after
// the kernels that use it).
absl::StatusOr<Tensor> Scratch(const KernelContext& ctx, size_t bytes);

// Copies `bytes` from device memory to `host` and waits for the copy.
absl::Status ReadBack(const Gpu& gpu, const void* device_ptr, size_t bytes, void* host);

// Position of the first index outside [lo, bound) in the index tensor `idx` (i32
// or i64), read back from the device; -1 when all are in range. `value` gets the
// bad index.
absl::StatusOr<int64_t> FirstBadIndex(const KernelContext& ctx, const Gpu& gpu, const Tensor& idx,
                                      int64_t lo, int64_t bound, int64_t* value);

// A kernel that runs F after copying any host tensor among its inputs to the
// device (tuple constants keep their tensors on the host, for instance).
absl::Status MoveInputsToDevice(KernelContext& ctx);
template <KernelFn F>
absl::StatusOr<Value> OnDevice(KernelContext& ctx) {
  absl::Status s = MoveInputsToDevice(ctx);
  if (!s.ok()) return s;
  return F(ctx);
}

// Runs the CPU kernel of ctx's primitive on host copies of the inputs and copies
// the result back (tensors and tuples of tensors).
absl::StatusOr<Value> CpuFallback(KernelContext& ctx);

// ----- Registration, one function per op family --------------------------------------------
KGRAD_KERNEL_FAMILIES(KGRAD_DECLARE_REGISTER_KERNELS)
// The collectives (collective_kernels.cc): on the device with an NCCL
// communicator, through the host with an MPI one.
void RegisterCollectiveKernels(KernelTable* table);

}  // namespace cuda
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CUDA_CUDA_CONTEXT_H_
