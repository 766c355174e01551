// Communicator: the ranks of one data-parallel job and the collective operations
// between them, on host buffers. Implementations wrap an existing engine (MPI:
// backends/mpi/mpi_communicator.h); LocalCommunicator is the group of one process.
//
// The collective contract: every rank calls the same operations in the same
// order with matching sizes. Where a rank breaks it (it left, it died, it called
// something else) an implementation returns a Status within its timeout on every
// rank still waiting, never hangs; after such an error the communicator is
// broken and every later call fails at once (as NCCL's communicators after an
// abort).
//
// A communicator is used by one run at a time: collectives of concurrent runs
// would interleave differently on different ranks.
#ifndef KGRAD_BACKENDS_COMMUNICATOR_H_
#define KGRAD_BACKENDS_COMMUNICATOR_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace kgrad {

enum class ReduceOp { kSum, kMax, kMin };

// The error for a reduction over `dtype` when it is not one of the reducible
// element types (f32, f64, i32, i64).
absl::Status NotReducible(DType dtype);

// An engine's element type for a reduction over `dtype`: `f32`, `f64`, `i32` or
// `i64` (MPI_FLOAT, ncclFloat64, ...), else NotReducible.
template <typename T>
absl::StatusOr<T> ReductionType(DType dtype, T f32, T f64, T i32, T i64) {
  switch (dtype) {
    case DType::kFloat32: return f32;
    case DType::kFloat64: return f64;
    case DType::kInt32: return i32;
    case DType::kInt64: return i64;
    default: return NotReducible(dtype);
  }
}

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "mpi rank 1 of 4".
  virtual std::string name() const = 0;
  // Where the buffers of the operations below live: host memory (MPI), or the
  // memory of a CUDA device (NCCL: backends/cuda/nccl_communicator.h).
  virtual DeviceType memory() const { return DeviceType::kCpu; }

  // `count` elements of `dtype` (f32, f64, i32 or i64 for the reductions) at `in`,
  // reduced over ranks into `out` (may be `in`). Every rank gets bit-identical
  // results (each element is reduced once and then distributed).
  virtual absl::Status AllReduce(const void* in, void* out, int64_t count, DType dtype,
                                 ReduceOp op) = 0;
  // `bytes` from every rank, concatenated in rank order into `out` (size() * bytes).
  virtual absl::Status AllGather(const void* in, void* out, int64_t bytes) = 0;
  // `in` holds size() blocks of `count` elements; `out` gets the sum over ranks
  // of block rank().
  virtual absl::Status ReduceScatter(const void* in, void* out, int64_t count, DType dtype) = 0;
  // `bytes` at `buf` of rank `root` copied into `buf` of every rank.
  virtual absl::Status Broadcast(void* buf, int64_t bytes, int root) = 0;
  // The sum over ranks of `count` elements into `out` of rank `root` (`out` of
  // the other ranks is left alone).
  virtual absl::Status Reduce(const void* in, void* out, int64_t count, DType dtype, int root) = 0;
  // Ok on every rank when every rank passes the same `value`; otherwise an error
  // on every rank saying that the ranks disagree about `what`.
  virtual absl::Status Agree(uint64_t value, absl::string_view what) = 0;
};

// The group of one process: every collective is a copy.
class LocalCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "local rank 0 of 1"; }
  absl::Status AllReduce(const void* in, void* out, int64_t count, DType dtype,
                         ReduceOp op) override;
  absl::Status AllGather(const void* in, void* out, int64_t bytes) override;
  absl::Status ReduceScatter(const void* in, void* out, int64_t count, DType dtype) override;
  absl::Status Broadcast(void* buf, int64_t bytes, int root) override;
  absl::Status Reduce(const void* in, void* out, int64_t count, DType dtype, int root) override;
  absl::Status Agree(uint64_t value, absl::string_view what) override;
};

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_COMMUNICATOR_H_
