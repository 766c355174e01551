#include "backends/cuda/caching_allocator.h"

#include <algorithm>
#include <limits>

namespace kgrad {
namespace cuda {
namespace {

// The stream tag of blocks whose stream is gone: they serve any stream.
const char kIdleStream = 0;
const void* const kIdle = &kIdleStream;

// Rounds `bytes` up to a multiple of `step` (a power of two); 0 on overflow.
size_t RoundUp(size_t bytes, size_t step) {
  if (bytes > std::numeric_limits<size_t>::max() - (step - 1)) return 0;
  return (bytes + step - 1) & ~(step - 1);
}

}  // namespace

size_t SizeClassOf(size_t bytes) {
  if (bytes <= kMinBlockBytes) return kMinBlockBytes;
  if (bytes > kLargeBlockBytes) return RoundUp(bytes, kLargeStepBytes);
  // The highest power of two below `bytes`, p: classes between p and 2p step by p/4.
  size_t p = size_t{1} << (63 - __builtin_clzll(static_cast<unsigned long long>(bytes - 1)));
  return RoundUp(bytes, std::max<size_t>(p / 4, kMinBlockBytes));
}

CachingAllocator::~CachingAllocator() { EmptyCache(); }

void* CachingAllocator::TakeCached(const void* stream, size_t size) {
  for (const void* tag : {stream, kIdle}) {
    auto it = free_.find(FreeKey{tag, size});
    if (it == free_.end() || it->second.empty()) continue;
    void* p = it->second.back();
    it->second.pop_back();
    stats_.bytes_cached -= static_cast<int64_t>(size);
    return p;
  }
  return nullptr;
}

void* CachingAllocator::Allocate(size_t bytes, const void* stream) {
  const size_t size = SizeClassOf(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (size == 0) {
    ++stats_.failed_allocations;
    return nullptr;
  }
  void* p = TakeCached(stream, size);
  if (p != nullptr) {
    ++stats_.cache_hits;
  } else {
    p = raw_->Malloc(size);
    if (p == nullptr && stats_.bytes_cached > 0) {
      // Out of memory with blocks cached for other sizes or streams: give them
      // back and try once more.
      EmptyCacheLocked();
      p = raw_->Malloc(size);
    }
    if (p == nullptr) {
      ++stats_.failed_allocations;
      return nullptr;
    }
    ++stats_.raw_mallocs;
    stats_.bytes_reserved += static_cast<int64_t>(size);
  }
  live_[p] = Block{size, bytes, stream};
  ++stats_.allocations;
  stats_.bytes_in_use += static_cast<int64_t>(size);
  stats_.requested_bytes += static_cast<int64_t>(bytes);
  UpdatePeaks();
  return p;
}

bool CachingAllocator::Free(void* ptr) {
  if (ptr == nullptr) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return false;
  const Block b = it->second;
  live_.erase(it);
  free_[FreeKey{b.stream, b.size}].push_back(ptr);
  stats_.bytes_in_use -= static_cast<int64_t>(b.size);
  stats_.requested_bytes -= static_cast<int64_t>(b.requested);
  stats_.bytes_cached += static_cast<int64_t>(b.size);
  return true;
}

void CachingAllocator::ReleaseStream(const void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<FreeKey> keys;
  for (const auto& [key, blocks] : free_) {
    if (key.first == stream && !blocks.empty()) keys.push_back(key);
  }
  for (const FreeKey& key : keys) {
    std::vector<void*> blocks = std::move(free_[key]);
    free_.erase(key);
    std::vector<void*>& idle = free_[FreeKey{kIdle, key.second}];
    idle.insert(idle.end(), blocks.begin(), blocks.end());
  }
  for (auto& [ptr, block] : live_) {
    if (block.stream == stream) block.stream = kIdle;
  }
}

size_t CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  return EmptyCacheLocked();
}

size_t CachingAllocator::EmptyCacheLocked() {
  if (stats_.bytes_cached == 0) return 0;
  raw_->WaitForAllWork();
  size_t released = 0;
  for (auto& [key, blocks] : free_) {
    for (void* p : blocks) {
      raw_->Free(p);
      ++stats_.raw_frees;
      released += key.second;
    }
  }
  free_.clear();
  stats_.bytes_cached = 0;
  stats_.bytes_reserved -= static_cast<int64_t>(released);
  return released;
}

void CachingAllocator::UpdatePeaks() {
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.peak_bytes_reserved = std::max(stats_.peak_bytes_reserved, stats_.bytes_reserved);
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
  stats_.peak_bytes_reserved = stats_.bytes_reserved;
}

size_t CachingAllocator::BlockSize(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(const_cast<void*>(ptr));
  return it == live_.end() ? 0 : it->second.size;
}

}  // namespace cuda
}  // namespace kgrad
