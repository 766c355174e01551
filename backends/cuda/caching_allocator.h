// A caching allocator for device memory, independent of CUDA so that its logic
// is testable on any machine: the device side is a RawMemory (cudaMalloc/cudaFree
// for CUDA, malloc in tests).
//
// Requests are rounded up to a size class; a freed block goes to the free list of
// its (stream, size class) and serves the next request of that class on that
// stream. Reuse within a stream is safe without synchronisation because a stream
// runs its work in order: a kernel queued after the free cannot start before the
// kernels queued before it, which were the block's last users. A block never
// crosses to another stream while it may still be in use; a stream that goes away
// hands its blocks back (ReleaseStream) once its work is done, and they then serve
// any stream. RawMemory::Malloc runs only when no cached block fits; when it fails,
// every cached block is returned to the device and the request retried.
//
// Threading: every method is thread-safe (one mutex; the critical sections are a
// few hash-map operations).
#ifndef KGRAD_BACKENDS_CUDA_CACHING_ALLOCATOR_H_
#define KGRAD_BACKENDS_CUDA_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace kgrad {
namespace cuda {

// The smallest block (cudaMalloc aligns to 256 bytes; 512 keeps tiny tensors in
// one class).
inline constexpr size_t kMinBlockBytes = 512;
// Up to this size classes step by a quarter of the power of two below the request
// (waste under 25%); above it, by kLargeStepBytes (waste under 25%, shrinking as
// blocks grow).
inline constexpr size_t kLargeBlockBytes = size_t{64} << 20;
inline constexpr size_t kLargeStepBytes = size_t{16} << 20;

// The block size a request of `bytes` gets (>= bytes, >= kMinBlockBytes).
// Returns 0 when the rounded size would overflow size_t.
size_t SizeClassOf(size_t bytes);

// Where blocks come from. Malloc returns nullptr when out of memory.
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  virtual void* Malloc(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  // Called once before cached blocks are returned (EmptyCache, or an allocation
  // that ran out of memory): their streams may still have queued work using
  // them, so the device waits for everything first.
  virtual void WaitForAllWork() {}
};

struct MemoryStats {
  int64_t bytes_in_use = 0;        // size classes of the blocks handed out
  int64_t peak_bytes_in_use = 0;   // since creation or ResetPeak()
  int64_t requested_bytes = 0;     // what the live allocations asked for
  int64_t bytes_cached = 0;        // free blocks kept for reuse
  int64_t bytes_reserved = 0;      // in use + cached: what RawMemory holds
  int64_t peak_bytes_reserved = 0;
  int64_t allocations = 0;         // Allocate calls that succeeded
  int64_t cache_hits = 0;          // of those, served from a free list
  int64_t raw_mallocs = 0;         // RawMemory::Malloc calls that succeeded
  int64_t raw_frees = 0;
  int64_t failed_allocations = 0;  // requests that found no memory even after emptying
};

class CachingAllocator {
 public:
  // `raw` must outlive the allocator.
  explicit CachingAllocator(RawMemory* raw) : raw_(raw) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` for use on `stream` (an opaque tag; nullptr is a
  // valid stream), or nullptr when out of memory.
  void* Allocate(size_t bytes, const void* stream);
  // Returns a block to the free list of the stream it was allocated on. Unknown
  // pointers (and nullptr) are ignored and return false.
  bool Free(void* ptr);
  // `stream` is gone and its work is finished: its cached blocks serve any
  // stream from now on, and so will its live blocks once freed.
  void ReleaseStream(const void* stream);
  // Returns every cached block to RawMemory; the bytes released.
  size_t EmptyCache();

  MemoryStats stats() const;
  void ResetPeak();
  // The size class of a live block (0 for an unknown pointer).
  size_t BlockSize(const void* ptr) const;

 private:
  struct Block {
    size_t size;       // size class
    size_t requested;  // what the caller asked for
    const void* stream;
  };
  using FreeKey = std::pair<const void*, size_t>;  // (stream, size class)

  void* TakeCached(const void* stream, size_t size);  // mu_ held
  size_t EmptyCacheLocked();                          // mu_ held
  void UpdatePeaks();                                 // mu_ held

  RawMemory* raw_;
  mutable std::mutex mu_;
  absl::flat_hash_map<void*, Block> live_;
  absl::flat_hash_map<FreeKey, std::vector<void*>> free_;
  MemoryStats stats_;
};

}  // namespace cuda
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CUDA_CACHING_ALLOCATOR_H_
