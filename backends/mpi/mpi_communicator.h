// MpiCommunicator: a Communicator over MPI (OpenMPI 4.1 from Debian here), for
// data-parallel jobs launched by mpirun, one rank per process:
//
//   mpirun -np 4 kgrad train step.pbtxt --data-parallel ...
//
// Every operation is a non-blocking MPI collective polled against a deadline
// (MpiOptions::timeout_seconds, the CLI's --collective-timeout): a rank that left
// early, died (with mpirun --enable-recovery; otherwise mpirun ends the job) or
// runs another program makes the waiting ranks fail with DeadlineExceeded instead
// of hanging. After a failure the communicator is broken: later calls fail at
// once, and MPI is not finalised (that would wait for the lost rank); the
// process should report and exit non-zero.
//
// MPI is initialised once per process (MPI_THREAD_SERIALIZED) by the first
// Create and finalised when the last communicator made by Create goes away.
#ifndef KGRAD_BACKENDS_MPI_MPI_COMMUNICATOR_H_
#define KGRAD_BACKENDS_MPI_MPI_COMMUNICATOR_H_

#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "backends/communicator.h"

namespace kgrad {

struct MpiOptions {
  // Seconds one collective may wait for the other ranks.
  double timeout_seconds = 300;
};

class MpiCommunicator : public Communicator {
 public:
  // All ranks of the job (a duplicate of MPI_COMM_WORLD, errors returned, not
  // fatal). Outside mpirun: a group of one.
  static absl::StatusOr<std::unique_ptr<MpiCommunicator>> Create(MpiOptions options = {});
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override;
  // The ranks of the job on this machine (they share its cores).
  int local_size() const { return local_size_; }
  // Threads for this rank's kernels: OMP_NUM_THREADS when set, else the
  // machine's cores divided among its ranks (at least 1). Ranks that each start
  // a thread per core oversubscribe the machine, and every parallel region then
  // waits for descheduled threads (2 ranks x 2 threads on 2 cores: 5x slower).
  int ThreadsPerRank() const;

  absl::Status AllReduce(const void* in, void* out, int64_t count, DType dtype,
                         ReduceOp op) override;
  absl::Status AllGather(const void* in, void* out, int64_t bytes) override;
  absl::Status ReduceScatter(const void* in, void* out, int64_t count, DType dtype) override;
  absl::Status Broadcast(void* buf, int64_t bytes, int root) override;
  absl::Status Reduce(const void* in, void* out, int64_t count, DType dtype, int root) override;
  absl::Status Agree(uint64_t value, absl::string_view what) override;

 private:
  struct Impl;
  MpiCommunicator(std::unique_ptr<Impl> impl, MpiOptions options, int rank, int size,
                  int local_size);
  // Runs one collective's MPI calls under mu_: fails at once on a broken
  // communicator; a failure breaks it.
  absl::Status Guarded(absl::FunctionRef<absl::Status()> body);

  std::unique_ptr<Impl> impl_;
  MpiOptions options_;
  int rank_;
  int size_;
  int local_size_;
  absl::Mutex mu_;  // one collective at a time (MPI_THREAD_SERIALIZED)
};

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_MPI_MPI_COMMUNICATOR_H_
