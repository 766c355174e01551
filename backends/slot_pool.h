// SlotPool: the frame storage of an executor's runs, kept between runs.
//
// Each frame of a run holds one Value slot per value its graph computes (2,500
// for the step of a 1,000-op chain: 80 KB). Allocating that per run was the
// largest allocation a run made, and in glibc a request of that size first merges
// every small chunk the previous run freed (malloc_consolidate), so the next
// run's small allocations were slow too. A run takes a set of spare slot vectors
// (emptied, capacity kept) when it starts and gives them back when it ends;
// within a run a returning frame's vector serves the next call.
//
// Thread-safe: concurrent runs each take their own set.
#ifndef KGRAD_BACKENDS_SLOT_POOL_H_
#define KGRAD_BACKENDS_SLOT_POOL_H_

#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

#include "core/value.h"

namespace kgrad {

class SlotPool {
 public:
  using Slots = std::vector<Value>;
  using Set = std::vector<Slots>;

  // At most this many spare vectors per set (a deep recursion does not leave one
  // per frame behind) and this many sets (one per concurrent run, up to a bound).
  static constexpr size_t kMaxSpare = 8;
  static constexpr size_t kMaxSets = 16;

  // A set of spare vectors for one run; empty when none is kept.
  Set Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (sets_.empty()) return Set();
    Set s = std::move(sets_.back());
    sets_.pop_back();
    return s;
  }
  void Give(Set s) {
    if (s.empty()) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (sets_.size() < kMaxSets) sets_.push_back(std::move(s));
  }

  // n empty slots, from `spare` when it has a vector.
  static Slots NewSlots(Set* spare, size_t n) {
    if (spare->empty()) return Slots(n);
    Slots v = std::move(spare->back());
    spare->pop_back();
    v.resize(n);
    return v;
  }
  // Empties `v` (its values are released now, as when a frame is destroyed) and
  // keeps it in `spare` if there is room.
  static void Recycle(Set* spare, Slots* v) {
    v->clear();
    if (spare->size() < kMaxSpare) spare->push_back(std::move(*v));
  }

 private:
  std::mutex mu_;
  std::vector<Set> sets_;
};

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_SLOT_POOL_H_
