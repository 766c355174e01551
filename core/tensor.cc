#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <list>
#include <mutex>
#include <vector>

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace kgrad {
namespace {

// std::mutex, not absl::Mutex: Debian's Abseil is not built with ThreadSanitizer,
// so TSAN cannot see absl::Mutex's synchronisation and reports every guarded
// access as a race; pthread mutexes are intercepted by all sanitizers. This
// wrapper carries the annotations clang's thread-safety analysis checks
// (libstdc++'s std::mutex has none, and clang warns on GUARDED_BY over it).
class ABSL_LOCKABLE HostMutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds a HostMutex for its scope, or until Release.
class ABSL_SCOPED_LOCKABLE HostLock {
 public:
  explicit HostLock(HostMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~HostLock() ABSL_UNLOCK_FUNCTION() {
    if (mu_ != nullptr) mu_->Unlock();
  }
  HostLock(const HostLock&) = delete;
  HostLock& operator=(const HostLock&) = delete;
  void Release() ABSL_UNLOCK_FUNCTION() {
    mu_->Unlock();
    mu_ = nullptr;
  }

 private:
  HostMutex* mu_;
};

class HostAllocator final : public Allocator {
 public:
  DeviceType device() const override { return DeviceType::kCpu; }

  void* Allocate(size_t bytes) override {
    size_t size = RoundUp(bytes);
    {
      HostLock lock(&mu_);
      Account(static_cast<int64_t>(size));
      if (size < kCacheFrom) {
        std::vector<void*>& free_list = small_[size / kSmallAlign];
        if (!free_list.empty()) {
          void* p = free_list.back();
          free_list.pop_back();
          small_cached_ -= static_cast<int64_t>(size);
          return p;
        }
      } else {
        auto it = cache_.find(size);
        if (it != cache_.end() && !it->second.empty()) {
          // The most recently freed block of the size (its pages are the likeliest
          // to be resident).
          auto block = it->second.back();
          it->second.pop_back();
          void* p = block->ptr;
          lru_.erase(block);
          cached_ -= static_cast<int64_t>(size);
          return p;
        }
      }
    }
    void* p = std::aligned_alloc(64, size);
    if (p == nullptr) {
      HostLock lock(&mu_);
      Account(-static_cast<int64_t>(size));
    }
    return p;
  }

  void Free(void* ptr, size_t bytes) override {
    size_t size = RoundUp(bytes);
    {
      HostLock lock(&mu_);
      Account(-static_cast<int64_t>(size));
      if (size < kCacheFrom) {
        if (small_cached_ + static_cast<int64_t>(size) <= kMaxSmallCached) {
          small_[size / kSmallAlign].push_back(ptr);
          small_cached_ += static_cast<int64_t>(size);
          return;
        }
      } else if (static_cast<int64_t>(size) <= kMaxCached) {
        // Room is made by dropping the blocks cached longest ago: a cache full of
        // one workload's sizes would otherwise refuse every block of the next one
        // (a model run after another paid page faults on every run: 4x slower).
        std::vector<void*> evicted = EvictFor(static_cast<int64_t>(size));
        lru_.push_back(Cached{size, ptr});
        cache_[size].push_back(std::prev(lru_.end()));
        cached_ += static_cast<int64_t>(size);
        lock.Release();
        for (void* p : evicted) std::free(p);
        return;
      }
    }
    std::free(ptr);
  }

  AllocatorStats Stats() {
    HostLock lock(&mu_);
    return AllocatorStats{in_use_, peak_, cached_ + small_cached_};
  }
  void ResetPeak() {
    HostLock lock(&mu_);
    peak_ = in_use_;
  }

 private:
  // Large blocks (from kCacheFrom, rounded to 4 KiB so that similar requests
  // share a class) are cached against page faults, up to kMaxCached. Small
  // blocks (multiples of 64 bytes) are kept on a free list per size, up to
  // kMaxSmallCached in all: 64-byte alignment is memalign for glibc, which
  // splits a larger chunk and frees the ends on every call, and a graph of small
  // tensors allocates one per node per run (the unfused step of a 1,000-op
  // chain on 16 floats: 0.160 -> 0.137 us per node, medians of 7).
  static constexpr size_t kCacheFrom = 64 * 1024;
  static constexpr size_t kSmallAlign = 64;
  static constexpr int64_t kMaxCached = int64_t{1} << 30;
#if defined(ABSL_HAVE_ADDRESS_SANITIZER)
  // Under AddressSanitizer small blocks go back to malloc at once, so that a use
  // of a freed small tensor is still reported.
  static constexpr int64_t kMaxSmallCached = 0;
#else
  static constexpr int64_t kMaxSmallCached = int64_t{16} << 20;
#endif

  static size_t RoundUp(size_t bytes) {
    size_t align = bytes >= kCacheFrom ? 4096 : kSmallAlign;
    size_t r = (bytes + align - 1) / align * align;
    return r == 0 ? 64 : r;
  }
  // Removes the oldest cached blocks until `size` more bytes fit under the bound;
  // returns them to be freed outside the lock.
  std::vector<void*> EvictFor(int64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<void*> evicted;
    while (cached_ + size > kMaxCached && !lru_.empty()) {
      const Cached& oldest = lru_.front();
      // Within one size, blocks enter and leave the deque in the list's order, so
      // the list's oldest block is its size's front.
      std::deque<std::list<Cached>::iterator>& same = cache_[oldest.size];
      same.pop_front();
      if (same.empty()) cache_.erase(oldest.size);
      cached_ -= static_cast<int64_t>(oldest.size);
      evicted.push_back(oldest.ptr);
      lru_.pop_front();
    }
    return evicted;
  }
  void Account(int64_t delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    in_use_ += delta;
    peak_ = std::max(peak_, in_use_);
  }

  HostMutex mu_;
  struct Cached {
    size_t size;
    void* ptr;
  };
  // Cached blocks, oldest first, and per size the positions of that size's blocks
  // in the list (oldest first too).
  std::list<Cached> lru_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<size_t, std::deque<std::list<Cached>::iterator>> cache_ ABSL_GUARDED_BY(mu_);
  int64_t cached_ ABSL_GUARDED_BY(mu_) = 0;
  // Free small blocks by size / kSmallAlign (most recently freed last).
  std::vector<void*> small_[kCacheFrom / kSmallAlign] ABSL_GUARDED_BY(mu_);
  int64_t small_cached_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_ ABSL_GUARDED_BY(mu_) = 0;
};

HostAllocator* Host() {
  static HostAllocator* const allocator = new HostAllocator();
  return allocator;
}

}  // namespace

const char* DeviceTypeName(DeviceType d) {
  return d == DeviceType::kCpu ? "cpu" : "cuda";
}

Allocator* CpuAllocator() { return Host(); }
AllocatorStats CpuAllocatorStats() { return Host()->Stats(); }
void ResetCpuAllocatorPeak() { Host()->ResetPeak(); }

Buffer::~Buffer() {
  if (data_ != nullptr) allocator_->Free(data_, bytes_);
}

absl::StatusOr<Tensor> Tensor::Create(DType dtype, absl::Span<const int64_t> shape,
                                      Allocator* allocator) {
  KGRAD_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape));
  size_t bytes = static_cast<size_t>(n) * DTypeSize(dtype);
  void* data = allocator->Allocate(bytes);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of ", DeviceTypeName(allocator->device()), " memory allocating ",
                     bytes, " bytes for ", DTypeName(dtype), ShapeToString(shape)));
  }
  auto impl = std::make_shared<Impl>();
  impl->dtype = dtype;
  impl->shape = Shape(shape.begin(), shape.end());
  impl->num_elements = n;
  impl->buffer = std::make_shared<Buffer>(allocator, data, bytes);
  return Tensor(std::move(impl));
}

absl::StatusOr<Tensor> Tensor::Zeros(DType dtype, absl::Span<const int64_t> shape) {
  KGRAD_ASSIGN_OR_RETURN(Tensor t, Create(dtype, shape));
  std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

absl::StatusOr<Tensor> Tensor::Full(DType dtype, absl::Span<const int64_t> shape,
                                    double value) {
  KGRAD_ASSIGN_OR_RETURN(Tensor t, Create(dtype, shape));
  DispatchDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = t.mutable_data<T>();
    T v = static_cast<T>(value);
    for (int64_t i = 0; i < t.NumElements(); ++i) p[i] = v;
  });
  return t;
}

Tensor Tensor::Reshaped(absl::Span<const int64_t> shape) const {
  auto impl = std::make_shared<Impl>(*impl_);
  impl->shape = Shape(shape.begin(), shape.end());
  return Tensor(std::move(impl));
}

Tensor Tensor::Clone() const {
  Tensor out = Create(dtype(), shape()).value();
  std::memcpy(out.raw_data(), raw_data(), nbytes());
  return out;
}

double Tensor::ElementAsDouble(int64_t i) const {
  return DispatchDType(dtype(), [&](auto zero) -> double {
    using T = decltype(zero);
    return static_cast<double>(data<T>()[i]);
  });
}

std::string Tensor::TypeString() const {
  return absl::StrCat(DTypeName(dtype()), ShapeToString(shape()));
}

std::string Tensor::DebugString(int max_elements) const {
  if (!defined()) return "<undefined tensor>";
  std::string s = TypeString() + "{";
  if (device() != DeviceType::kCpu) return s + "on " + DeviceTypeName(device()) + "}";
  int64_t n = NumElements();
  for (int64_t i = 0; i < n && i < max_elements; ++i) {
    if (i) s += ", ";
    if (dtype() == DType::kBool) {
      s += data<bool>()[i] ? "true" : "false";
    } else {
      absl::StrAppend(&s, ElementAsDouble(i));
    }
  }
  if (n > max_elements) s += ", ...";
  return s + "}";
}

bool TensorsEqual(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  return std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace kgrad
