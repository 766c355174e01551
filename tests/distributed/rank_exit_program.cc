// A data-parallel job in which the last rank stops early: `leave` (it finalises
// MPI and exits cleanly while the others still train) or `die` (it exits at
// once with status 1; run under mpirun --enable-recovery so that the others
// live on). Every other rank must fail its next all_reduce with
// DeadlineExceeded within the collective timeout, then fail at once on the
// broken communicator; it prints both statuses (rank_exit_test.sh reads them)
// and exits without finalising, as a process should after losing a peer.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "backends/collectives.h"
#include "backends/mpi/mpi_communicator.h"
#include "ops/registry.h"

int main(int argc, char** argv) {
  using kgrad::Tensor;
  const std::string mode = argc > 1 ? argv[1] : "leave";
  const double timeout = 3;
  auto comm = kgrad::MpiCommunicator::Create(kgrad::MpiOptions{timeout});
  if (!comm.ok()) return 2;
  const int rank = (*comm)->rank(), last = (*comm)->size() - 1;
  auto all_reduce = kgrad::DefaultRegistry().Make(kgrad::PrimId::kAllReduce, {}).value();
  Tensor x = Tensor::Zeros(kgrad::DType::kFloat32, {16}).value();
  // One step together, so that every rank is up and connected.
  if (!kgrad::RunCollective(*all_reduce, x, **comm).ok()) return 3;
  if (rank == last) {
    if (mode == "die") _exit(1);
    comm->reset();  // MPI_Finalize: the process is gone from the job's point of view
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<Tensor> first = kgrad::RunCollective(*all_reduce, x, **comm);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  absl::StatusOr<Tensor> second = kgrad::RunCollective(*all_reduce, x, **comm);
  std::printf("rank %d: first %s after %.1f s: %s\nrank %d: then %s: %s\n", rank,
              absl::StatusCodeToString(first.status().code()).c_str(), waited,
              std::string(first.status().message()).c_str(), rank,
              absl::StatusCodeToString(second.status().code()).c_str(),
              std::string(second.status().message()).c_str());
  std::fflush(stdout);
  _exit(first.ok() ? 4 : 0);
}
