#include "backends/cuda/nccl_communicator.h"

#include <nccl.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_context.h"
#include "core/status_macros.h"

namespace kgrad {

struct NcclCommunicator::Impl {
  ncclComm_t comm = nullptr;
  uint64_t* scratch = nullptr;  // 2 words on the device, for Agree
  absl::Status broken;          // the first failure; every later call returns it
};

namespace {

absl::Status NcclError(ncclResult_t r, absl::string_view what) {
  return absl::InternalError(absl::StrCat("NCCL ", what, " failed: ", ncclGetErrorString(r)));
}

absl::StatusOr<ncclDataType_t> NcclType(DType t) {
  return ReductionType(t, ncclFloat32, ncclFloat64, ncclInt32, ncclInt64);
}

using Clock = std::chrono::steady_clock;

Clock::time_point Deadline(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Waits until the communicator has no operation in progress (non-blocking NCCL).
absl::Status WaitForComm(ncclComm_t comm, Clock::time_point deadline, double timeout,
                         absl::string_view what) {
  for (int polls = 0;; ++polls) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return NcclError(r, what);
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) return NcclError(state, what);
    if (Clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "NCCL ", what, " did not complete within the collective timeout (", timeout,
          " s): another rank left, died, or runs a different program"));
    }
    if (polls > 200) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(Communicator& bootstrap,
                                                                          Device* device,
                                                                          NcclOptions options) {
  if (device == nullptr || device->type() != DeviceType::kCuda) {
    return absl::InvalidArgumentError("an NCCL communicator needs a CUDA device");
  }
  if (bootstrap.memory() != DeviceType::kCpu) {
    return absl::InvalidArgumentError("the bootstrap communicator must work on host buffers");
  }
  if (options.timeout_seconds <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("the collective timeout must be > 0 seconds, got ",
                                                   options.timeout_seconds));
  }
  auto* cuda_device = static_cast<cuda::CudaDeviceImpl*>(device);
  KGRAD_RETURN_IF_ERROR(cuda_device->Resources().status());  // makes the device current
  ncclUniqueId id;
  if (bootstrap.rank() == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) return NcclError(r, "ncclGetUniqueId");
  }
  KGRAD_RETURN_IF_ERROR(bootstrap.Broadcast(&id, sizeof(id), 0));
  auto impl = std::make_unique<Impl>();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&impl->comm, bootstrap.size(), id, bootstrap.rank(), &config);
  if (r != ncclSuccess && r != ncclInProgress) return NcclError(r, "ncclCommInitRankConfig");
  absl::Status ready = WaitForComm(impl->comm, Deadline(options.timeout_seconds),
                                   options.timeout_seconds, "communicator creation");
  if (!ready.ok()) {
    ncclCommAbort(impl->comm);
    return ready;
  }
  KGRAD_CUDA_CALL(cudaMalloc(reinterpret_cast<void**>(&impl->scratch), 2 * sizeof(uint64_t)));
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(
      std::move(impl), device, options, bootstrap.rank(), bootstrap.size()));
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl, Device* device, NcclOptions options,
                                   int rank, int size)
    : impl_(std::move(impl)), device_(device), options_(options), rank_(rank), size_(size) {}

NcclCommunicator::~NcclCommunicator() {
  if (impl_->scratch != nullptr) cudaFree(impl_->scratch);
  if (!impl_->broken.ok()) return;  // aborted already
  const ncclResult_t f = ncclCommFinalize(impl_->comm);
  if (f == ncclSuccess || f == ncclInProgress) {
    (void)WaitForComm(impl_->comm, Deadline(options_.timeout_seconds), options_.timeout_seconds,
                      "communicator shutdown");
  }
  ncclCommDestroy(impl_->comm);
}

std::string NcclCommunicator::name() const {
  return absl::StrCat("nccl rank ", rank_, " of ", size_, " (", device_->name(), ")");
}

absl::Status NcclCommunicator::Run(absl::string_view what, absl::FunctionRef<int(void* stream)> post) {
  absl::MutexLock lock(&mu_);
  if (!impl_->broken.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(name(), " is broken by an earlier failure: ", impl_->broken.message()));
  }
  auto fail = [&](absl::Status s) {
    impl_->broken = s;
    ncclCommAbort(impl_->comm);
    return absl::Status(s.code(), absl::StrCat(name(), ": ", s.message()));
  };
  absl::StatusOr<cuda::ThreadResources*> res = static_cast<cuda::CudaDeviceImpl*>(device_)->Resources();
  if (!res.ok()) return res.status();
  cudaStream_t stream = (*res)->stream;
  const auto deadline = Deadline(options_.timeout_seconds);
  ncclResult_t r = static_cast<ncclResult_t>(post(stream));
  if (r != ncclSuccess && r != ncclInProgress) return fail(NcclError(r, what));
  absl::Status posted = WaitForComm(impl_->comm, deadline, options_.timeout_seconds, what);
  if (!posted.ok()) return fail(posted);
  for (int polls = 0;; ++polls) {
    cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess) return absl::OkStatus();
    if (q != cudaErrorNotReady) return fail(cuda::CudaStatus(q, "cudaStreamQuery"));
    absl::Status comm = WaitForComm(impl_->comm, deadline, options_.timeout_seconds, what);
    if (!comm.ok()) return fail(comm);
    if (Clock::now() > deadline) {
      return fail(absl::DeadlineExceededError(absl::StrCat(
          "NCCL ", what, " did not complete within the collective timeout (", options_.timeout_seconds,
          " s): another rank left, died, or runs a different program")));
    }
    if (polls > 200) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

absl::Status NcclCommunicator::AllReduce(const void* in, void* out, int64_t count, DType dtype,
                                         ReduceOp op) {
  KGRAD_ASSIGN_OR_RETURN(ncclDataType_t t, NcclType(dtype));
  const ncclRedOp_t nop = op == ReduceOp::kMax ? ncclMax : op == ReduceOp::kMin ? ncclMin : ncclSum;
  return Run("all_reduce", [&](void* s) {
    return static_cast<int>(ncclAllReduce(in, out, static_cast<size_t>(count), t, nop, impl_->comm,
                                          static_cast<cudaStream_t>(s)));
  });
}

absl::Status NcclCommunicator::AllGather(const void* in, void* out, int64_t bytes) {
  return Run("all_gather", [&](void* s) {
    return static_cast<int>(ncclAllGather(in, out, static_cast<size_t>(bytes), ncclChar, impl_->comm,
                                          static_cast<cudaStream_t>(s)));
  });
}

absl::Status NcclCommunicator::ReduceScatter(const void* in, void* out, int64_t count, DType dtype) {
  KGRAD_ASSIGN_OR_RETURN(ncclDataType_t t, NcclType(dtype));
  return Run("reduce_scatter", [&](void* s) {
    return static_cast<int>(ncclReduceScatter(in, out, static_cast<size_t>(count), t, ncclSum,
                                              impl_->comm, static_cast<cudaStream_t>(s)));
  });
}

absl::Status NcclCommunicator::Broadcast(void* buf, int64_t bytes, int root) {
  if (root < 0 || root >= size_) {
    return absl::InvalidArgumentError(absl::StrCat("root ", root, " is not a rank of ", size_));
  }
  return Run("broadcast", [&](void* s) {
    return static_cast<int>(ncclBroadcast(buf, buf, static_cast<size_t>(bytes), ncclChar, root,
                                          impl_->comm, static_cast<cudaStream_t>(s)));
  });
}

absl::Status NcclCommunicator::Reduce(const void* in, void* out, int64_t count, DType dtype, int root) {
  KGRAD_ASSIGN_OR_RETURN(ncclDataType_t t, NcclType(dtype));
  if (root < 0 || root >= size_) {
    return absl::InvalidArgumentError(absl::StrCat("root ", root, " is not a rank of ", size_));
  }
  return Run("reduce_to", [&](void* s) {
    return static_cast<int>(ncclReduce(in, out, static_cast<size_t>(count), t, ncclSum, root,
                                       impl_->comm, static_cast<cudaStream_t>(s)));
  });
}

absl::Status NcclCommunicator::Agree(uint64_t value, absl::string_view what) {
  uint64_t mine[2] = {value, ~value};
  uint64_t most[2] = {0, 0};
  uint64_t* scratch = impl_->scratch;
  KGRAD_RETURN_IF_ERROR(Run("agreement", [&](void* s) {
    auto stream = static_cast<cudaStream_t>(s);
    if (cudaMemcpyAsync(scratch, mine, sizeof(mine), cudaMemcpyHostToDevice, stream) != cudaSuccess) {
      return static_cast<int>(ncclUnhandledCudaError);
    }
    return static_cast<int>(ncclAllReduce(scratch, scratch, 2, ncclUint64, ncclMax, impl_->comm, stream));
  }));
  KGRAD_CUDA_CALL(cudaMemcpy(most, scratch, sizeof(most), cudaMemcpyDeviceToHost));
  if (most[0] == mine[0] && most[1] == mine[1]) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name(), ": the ranks disagree about ", what));
}

}  // namespace kgrad
