#include "backends/mpi/mpi_communicator.h"

#include <mpi/mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <climits>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kgrad {

struct MpiCommunicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  bool owns_mpi = false;  // this process's MPI was initialised by Create
  absl::Status broken;    // the first failure; every later call returns it
};

namespace {

// MPI has no per-communicator counter for "Create made it": MPI_Init happens
// once per process, and MPI_Finalize once after the last communicator is gone.
// (A count of live communicators, not configuration: the registry rule is about
// op tables.)
int& LiveCommunicators() {
  static int live = 0;
  return live;
}
absl::Mutex& LifecycleMutex() {
  static absl::Mutex mu;
  return mu;
}

absl::Status MpiError(int rc, absl::string_view what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return absl::InternalError(absl::StrCat("MPI ", what, " failed: ", std::string(text, len)));
}

absl::StatusOr<MPI_Datatype> Arithmetic(DType t) {
  return ReductionType<MPI_Datatype>(t, MPI_FLOAT, MPI_DOUBLE, MPI_INT32_T, MPI_INT64_T);
}

absl::StatusOr<int> IntCount(int64_t n) {
  if (n < 0 || n > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("a collective of ", n, " elements exceeds MPI's int counts"));
  }
  return static_cast<int>(n);
}

// An arithmetic collective's MPI arguments.
struct MpiArithmetic {
  MPI_Datatype type;
  int count;
};
absl::StatusOr<MpiArithmetic> ArithmeticArgs(DType dtype, int64_t count) {
  absl::StatusOr<MPI_Datatype> type = Arithmetic(dtype);
  if (!type.ok()) return type.status();
  absl::StatusOr<int> n = IntCount(count);
  if (!n.ok()) return n.status();
  return MpiArithmetic{*type, *n};
}

absl::Status CheckRoot(int root, int size) {
  if (root >= 0 && root < size) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("root ", root, " is not a rank of ", size));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MpiCommunicator>> MpiCommunicator::Create(MpiOptions options) {
  if (options.timeout_seconds <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("the collective timeout must be > 0 seconds, got ",
                                                   options.timeout_seconds));
  }
  auto impl = std::make_unique<Impl>();
  absl::MutexLock lock(&LifecycleMutex());
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return absl::FailedPreconditionError("MPI was finalised in this process");
  if (!initialized) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Init_thread");
    impl->owns_mpi = true;
  }
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &impl->comm);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(impl->comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 1, local_size = 1;
  MPI_Comm_rank(impl->comm, &rank);
  MPI_Comm_size(impl->comm, &size);
  // The ranks sharing this machine's memory (MPI-3's shared-memory split).
  MPI_Comm local = MPI_COMM_NULL;
  if (MPI_Comm_split_type(impl->comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
    MPI_Comm_size(local, &local_size);
    MPI_Comm_free(&local);
  }
  ++LiveCommunicators();
  return std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(std::move(impl), options, rank, size, local_size));
}

MpiCommunicator::MpiCommunicator(std::unique_ptr<Impl> impl, MpiOptions options, int rank, int size,
                                 int local_size)
    : impl_(std::move(impl)), options_(options), rank_(rank), size_(size), local_size_(local_size) {}

int MpiCommunicator::ThreadsPerRank() const {
  int threads = 0;
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env != nullptr && absl::SimpleAtoi(env, &threads) && threads > 0) return threads;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, local_size_));
}

MpiCommunicator::~MpiCommunicator() {
  absl::MutexLock lock(&LifecycleMutex());
  --LiveCommunicators();
  // A broken communicator has a request the lost rank never answers: freeing it
  // or finalising would wait for that rank forever.
  if (!impl_->broken.ok()) return;
  MPI_Comm_free(&impl_->comm);
  if (LiveCommunicators() == 0) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
}

std::string MpiCommunicator::name() const {
  return absl::StrCat("mpi rank ", rank_, " of ", size_);
}

namespace {

// Polls `request` until it completes, MPI reports an error, or the deadline.
absl::Status Wait(MPI_Request* request, double timeout_seconds, absl::string_view what) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_seconds));
  for (int polls = 0;; ++polls) {
    int done = 0;
    int rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return MpiError(rc, what);
    if (done) return absl::OkStatus();
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "MPI ", what, " did not complete within the collective timeout (", timeout_seconds,
          " s): another rank left, died, or runs a different program"));
    }
    // Spin briefly (small collectives finish in microseconds), then give the
    // core away: with more ranks than cores the peer needs it to progress.
    if (polls > 200) {
      std::this_thread::sleep_for(std::chrono::microseconds(polls > 20000 ? 500 : 20));
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace

absl::Status MpiCommunicator::Guarded(absl::FunctionRef<absl::Status()> body) {
  absl::MutexLock lock(&mu_);
  if (!impl_->broken.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(name(), " is broken by an earlier failure: ", impl_->broken.message()));
  }
  absl::Status status = body();
  if (status.ok()) return status;
  impl_->broken = status;
  return absl::Status(status.code(), absl::StrCat(name(), ": ", status.message()));
}

namespace {

// Posts one non-blocking operation (rc from its MPI call) and waits for it.
absl::Status PostAndWait(int rc, MPI_Request* request, double timeout, absl::string_view what) {
  if (rc != MPI_SUCCESS) return MpiError(rc, what);
  return Wait(request, timeout, what);
}

}  // namespace

absl::Status MpiCommunicator::AllReduce(const void* in, void* out, int64_t count, DType dtype,
                                        ReduceOp op) {
  absl::StatusOr<MpiArithmetic> a = ArithmeticArgs(dtype, count);
  if (!a.ok()) return a.status();
  const double t = options_.timeout_seconds;
  return Guarded([&] {
    MPI_Request r;
    if (op != ReduceOp::kSum) {
      // max and min are exact: any order gives every rank the same bits.
      return PostAndWait(MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, a->count, a->type,
                                          op == ReduceOp::kMax ? MPI_MAX : MPI_MIN, impl_->comm, &r),
                         &r, t, "all_reduce");
    }
    // A sum's bits depend on its order: each block is reduced on one rank
    // (reduce-scatter) and copied to all (all-gather), so every rank holds the
    // same bits, as a ring all-reduce does.
    std::vector<int> counts(size_), displs(size_);
    for (int k = 0; k < size_; ++k) {
      counts[k] = a->count / size_ + (k < a->count % size_ ? 1 : 0);
      displs[k] = k == 0 ? 0 : displs[k - 1] + counts[k - 1];
    }
    const size_t esize = DTypeSize(dtype);
    std::vector<char> block(static_cast<size_t>(counts[rank_]) * esize + 1);
    absl::Status s = PostAndWait(MPI_Ireduce_scatter(in, block.data(), counts.data(), a->type,
                                                     MPI_SUM, impl_->comm, &r),
                                 &r, t, "all_reduce (reduce-scatter)");
    if (!s.ok()) return s;
    return PostAndWait(MPI_Iallgatherv(block.data(), counts[rank_], a->type, out, counts.data(),
                                       displs.data(), a->type, impl_->comm, &r),
                       &r, t, "all_reduce (all-gather)");
  });
}

absl::Status MpiCommunicator::AllGather(const void* in, void* out, int64_t bytes) {
  absl::StatusOr<int> n = IntCount(bytes);
  if (!n.ok()) return n.status();
  return Guarded([&] {
    MPI_Request r;
    return PostAndWait(MPI_Iallgather(in, *n, MPI_BYTE, out, *n, MPI_BYTE, impl_->comm, &r), &r,
                         options_.timeout_seconds, "all_gather");
  });
}

absl::Status MpiCommunicator::ReduceScatter(const void* in, void* out, int64_t count,
                                            DType dtype) {
  absl::StatusOr<MpiArithmetic> a = ArithmeticArgs(dtype, count);
  if (!a.ok()) return a.status();
  return Guarded([&] {
    MPI_Request r;
    return PostAndWait(
        MPI_Ireduce_scatter_block(in, out, a->count, a->type, MPI_SUM, impl_->comm, &r), &r,
        options_.timeout_seconds, "reduce_scatter");
  });
}

absl::Status MpiCommunicator::Broadcast(void* buf, int64_t bytes, int root) {
  absl::StatusOr<int> n = IntCount(bytes);
  if (!n.ok()) return n.status();
  if (absl::Status s = CheckRoot(root, size_); !s.ok()) return s;
  return Guarded([&] {
    MPI_Request r;
    return PostAndWait(MPI_Ibcast(buf, *n, MPI_BYTE, root, impl_->comm, &r), &r,
                         options_.timeout_seconds, "broadcast");
  });
}

absl::Status MpiCommunicator::Reduce(const void* in, void* out, int64_t count, DType dtype,
                                     int root) {
  absl::StatusOr<MpiArithmetic> a = ArithmeticArgs(dtype, count);
  if (!a.ok()) return a.status();
  if (absl::Status s = CheckRoot(root, size_); !s.ok()) return s;
  return Guarded([&] {
    MPI_Request r;
    return PostAndWait(MPI_Ireduce(in, out, a->count, a->type, MPI_SUM, root, impl_->comm, &r), &r,
                         options_.timeout_seconds, "reduce_to");
  });
}

absl::Status MpiCommunicator::Agree(uint64_t value, absl::string_view what) {
  uint64_t mine[2] = {value, ~value};
  uint64_t most[2] = {0, 0};
  absl::Status s = Guarded([&] {
    MPI_Request r;
    return PostAndWait(MPI_Iallreduce(mine, most, 2, MPI_UINT64_T, MPI_MAX, impl_->comm, &r), &r,
                       options_.timeout_seconds, "agreement");
  });
  if (!s.ok()) return s;
  // Equal everywhere iff the largest value and the largest complement are ours
  // (then the smallest value is ours too); otherwise every rank sees a difference.
  if (most[0] == mine[0] && most[1] == mine[1]) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name(), ": the ranks disagree about ", what));
}

}  // namespace kgrad
