// NcclCommunicator: a Communicator over NCCL (it ships with the CUDA toolkit)
// whose buffers are in the memory of one CUDA device, one rank per GPU. Another
// communicator (MPI across processes, or a LocalCommunicator for a job of one)
// carries rank 0's ncclUniqueId to the others:
//
//   auto mpi = MpiCommunicator::Create();
//   auto nccl = NcclCommunicator::Create(**mpi, *CudaDevice(local_rank));
//   ExecutorOptions o;  o.device = *CudaDevice(local_rank);  o.communicator = nccl->get();
//
// The communicator is non-blocking (ncclConfig_t::blocking = 0): creation and
// every collective are polled against a deadline (NcclOptions::timeout_seconds),
// and a rank that leaves or dies makes the others fail with DeadlineExceeded after
// ncclCommAbort; the communicator is then broken. Each collective runs on the
// calling thread's stream of the device, after the kernels that produced its input,
// and the call returns when it has finished.
//
// Built with --config=cuda. Not yet run on a GPU (no GPU machine has been lent
// to this project): tests/cuda/nccl_communicator_test.cc is ready for one.
#ifndef KGRAD_BACKENDS_CUDA_NCCL_COMMUNICATOR_H_
#define KGRAD_BACKENDS_CUDA_NCCL_COMMUNICATOR_H_

#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "backends/communicator.h"
#include "backends/device.h"

namespace kgrad {

struct NcclOptions {
  double timeout_seconds = 300;
};

class NcclCommunicator : public Communicator {
 public:
  // Every rank of `bootstrap` calls this with its own CUDA device.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(Communicator& bootstrap,
                                                                  Device* device,
                                                                  NcclOptions options = {});
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override;
  DeviceType memory() const override { return DeviceType::kCuda; }

  absl::Status AllReduce(const void* in, void* out, int64_t count, DType dtype,
                         ReduceOp op) override;
  absl::Status AllGather(const void* in, void* out, int64_t bytes) override;
  absl::Status ReduceScatter(const void* in, void* out, int64_t count, DType dtype) override;
  absl::Status Broadcast(void* buf, int64_t bytes, int root) override;
  absl::Status Reduce(const void* in, void* out, int64_t count, DType dtype, int root) override;
  absl::Status Agree(uint64_t value, absl::string_view what) override;

 private:
  struct Impl;
  NcclCommunicator(std::unique_ptr<Impl> impl, Device* device, NcclOptions options, int rank,
                   int size);
  // Posts one collective (`post` gets the stream) and waits for it; a failure
  // breaks the communicator.
  absl::Status Run(absl::string_view what, absl::FunctionRef<int(void* stream)> post);

  std::unique_ptr<Impl> impl_;
  Device* device_;
  NcclOptions options_;
  int rank_;
  int size_;
  absl::Mutex mu_;  // one collective at a time
};

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CUDA_NCCL_COMMUNICATOR_H_
