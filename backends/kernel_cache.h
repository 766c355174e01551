// A compiled step's memo across runs: copies a kernel derives from inputs that
// stay the same from one run to the next (the executor's own weights), such as a
// convolution's weights in oneDNN's blocked layout. At batch 1 re-deriving them
// every call cost resnet18 15% of its forward (47 MB of weights read and written
// per run); ONNX Runtime prepacks them once in the same way.
//
// It also keeps what a kernel compiles from its step's attributes and input
// types (tc's parsed block and statement programs: 0.05 ms per call of max
// pooling's adjoint block), one plan per signature, so that a step whose shapes
// do not change compiles once.
//
// An entry holds a reference to its source tensor, so that the source's buffer
// can neither be freed and handed to another tensor at the same address nor be
// updated in place (kernels reuse only buffers nothing else references) while
// the entry exists: a source matches when it is the same buffer with the same
// dtype and shape. Thread-safe: concurrent runs of one executor share it.
#ifndef KGRAD_BACKENDS_KERNEL_CACHE_H_
#define KGRAD_BACKENDS_KERNEL_CACHE_H_

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace kgrad {

class KernelCache {
 public:
  // The tensor stored for `source` under `key` (what the kernel derived and how,
  // e.g. the target layout's bytes), or nullopt.
  std::optional<Tensor> Find(const Tensor& source, const std::string& key) const;
  // Stores `derived` for (`source`, `key`), replacing any entry for `key` (the
  // step's weight changed), and the oldest entry when kMaxEntries are held (a
  // step whose input shapes change from run to run keeps the last few).
  void Store(const Tensor& source, std::string key, Tensor derived);
  size_t size() const;

  // The plan stored under `key` (the kernel's name and the input types it was
  // compiled for), or nullptr. Plans are immutable once stored: concurrent runs
  // share them.
  std::shared_ptr<const void> FindPlan(const std::string& key) const;
  // Stores `plan` under `key`, the oldest going when kMaxEntries are held.
  void StorePlan(std::string key, std::shared_ptr<const void> plan);
  size_t num_plans() const;

  // FindPlan as the kernel's own type (the kernel that stored it).
  template <typename P>
  std::shared_ptr<const P> FindPlanAs(const std::string& key) const {
    return std::static_pointer_cast<const P>(FindPlan(key));
  }

  static constexpr size_t kMaxEntries = 4;

 private:
  struct Entry {
    Tensor source;
    std::string key;
    Tensor derived;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;  // a handful per step: linear search
  std::vector<std::pair<std::string, std::shared_ptr<const void>>> plans_;
};

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_KERNEL_CACHE_H_
