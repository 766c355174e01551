// Overlapping collectives with computation. The executor hands each collective
// (ExecutorOptions::overlap_collectives) to a CollectiveWorker, whose one thread
// runs them in the order they were handed over (the order every rank runs its
// plan, which the collective contract needs), and goes on with the steps that do
// not read the result; PendingCollectives remembers where each result goes and
// waits for them at the first step that may read one (and before calls, returns
// and the end of the run). With the run order putting collectives as early and
// their readers as late as dependencies allow (CollectivesEarly, run_order.h),
// one bucket's all_reduce proceeds while the backward pass computes the next.
#ifndef KGRAD_BACKENDS_COLLECTIVE_WORKER_H_
#define KGRAD_BACKENDS_COLLECTIVE_WORKER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "backends/communicator.h"
#include "core/node.h"
#include "core/primitive.h"
#include "core/tensor.h"

namespace kgrad {

class CollectiveWorker {
 public:
  using Result = std::shared_future<absl::StatusOr<Tensor>>;

  explicit CollectiveWorker(Communicator* comm);
  ~CollectiveWorker();  // runs what is queued, then joins
  CollectiveWorker(const CollectiveWorker&) = delete;
  CollectiveWorker& operator=(const CollectiveWorker&) = delete;

  // y = p(x) across the ranks (backends/collectives.h), on the worker's thread.
  Result Submit(const Primitive& p, Tensor x);

 private:
  struct Job {
    const Primitive* prim;
    Tensor x;
    std::promise<absl::StatusOr<Tensor>> result;
  };
  void Loop();

  Communicator* comm_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<Job> queue_;
  bool done_ = false;
  std::thread thread_;
};

// The collectives one run has in flight.
class PendingCollectives {
 public:
  struct Entry {
    size_t frame;  // index of the frame whose slot receives the result
    int32_t slot;
    const CNode* node;
    const Primitive* prim;
    CollectiveWorker::Result result;
  };

  ~PendingCollectives();  // waits for what is still in flight (an early error)
  void Add(Entry e) { entries_.push_back(std::move(e)); }
  bool empty() const { return entries_.empty(); }
  // Waits for every entry in order and gives each result to `deliver`; returns
  // the first error `deliver` returns (after all have finished). `waited_ms`
  // (when given) accumulates the time spent waiting.
  absl::Status Resolve(
      absl::FunctionRef<absl::Status(const Entry&, absl::StatusOr<Tensor>)> deliver,
      double* waited_ms);

 private:
  std::vector<Entry> entries_;
};

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_COLLECTIVE_WORKER_H_
