// A compiled step's memo across runs: copies a kernel derives from inputs that
// stay the same from one run to the next (the executor's own weights), such as a
// convolution's weights in oneDNN's blocked layout. At batch 1 re-deriving them
// every call cost resnet18 15% of its forward (47 MB of weights read and written
// per run); ONNX Runtime prepacks them once in the same way.
//
// An entry holds a reference to its source tensor, so that the source's buffer
// can neither be freed and handed to another tensor at the same address nor be
// updated in place (kernels reuse only buffers nothing else references) while
// the entry exists: a source matches when it is the same buffer with the same
// dtype and shape. Thread-safe: concurrent runs of one executor share it.
#ifndef KGRAD_BACKENDS_KERNEL_CACHE_H_
#define KGRAD_BACKENDS_KERNEL_CACHE_H_

#include <mutex>
#include <optional>
#include <string>
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

  static constexpr size_t kMaxEntries = 4;

 private:
  struct Entry {
    Tensor source;
    std::string key;
    Tensor derived;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;  // a handful per step: linear search
};

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_KERNEL_CACHE_H_
