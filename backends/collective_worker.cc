#include "backends/collective_worker.h"

#include <chrono>

#include "backends/collectives.h"

namespace kgrad {

CollectiveWorker::CollectiveWorker(Communicator* comm) : comm_(comm), thread_([this] { Loop(); }) {}

CollectiveWorker::~CollectiveWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  ready_.notify_one();
  thread_.join();
}

CollectiveWorker::Result CollectiveWorker::Submit(const Primitive& p, Tensor x) {
  std::promise<absl::StatusOr<Tensor>> promise;
  Result result = promise.get_future().share();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Job{&p, std::move(x), std::move(promise)});
  }
  ready_.notify_one();
  return result;
}

void CollectiveWorker::Loop() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [this] { return done_ || !queue_.empty(); });
      if (queue_.empty()) return;  // done, and nothing left to run
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job.result.set_value(RunCollective(*job.prim, job.x, *comm_));
  }
}

PendingCollectives::~PendingCollectives() {
  for (const Entry& e : entries_) e.result.wait();
}

absl::Status PendingCollectives::Resolve(
    absl::FunctionRef<absl::Status(const Entry&, absl::StatusOr<Tensor>)> deliver,
    double* waited_ms) {
  absl::Status first = absl::OkStatus();
  const auto start = std::chrono::steady_clock::now();
  for (const Entry& e : entries_) {
    absl::Status s = deliver(e, e.result.get());
    if (first.ok()) first = s;
  }
  entries_.clear();
  if (waited_ms != nullptr) {
    *waited_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  return first;
}

}  // namespace kgrad
