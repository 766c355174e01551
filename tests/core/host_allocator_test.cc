// The process-wide host allocator's block caches (core/tensor.h): freed large
// blocks are handed out again, and a cache filled by one workload's sizes makes
// room for the next workload's blocks instead of refusing them; freed small
// blocks are handed out again by size, aligned, up to a bound.
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "absl/base/config.h"
#include "core/tensor.h"
#include "gtest/gtest.h"

namespace kgrad {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr int64_t kBound = int64_t{1} << 30;  // the cache's bound (core/tensor.cc)
#if defined(ABSL_HAVE_ADDRESS_SANITIZER)  // gcc or clang
constexpr int64_t kSmallBound = 0;  // not cached, so that ASAN sees uses after free
#else
constexpr int64_t kSmallBound = int64_t{16} << 20;  // the small blocks' bound
#endif

TEST(HostAllocatorTest, AFreedLargeBlockIsHandedOutAgain) {
  Allocator* a = CpuAllocator();
  void* p = a->Allocate(3 * kMiB + 123);
  ASSERT_NE(p, nullptr);
  const int64_t cached_before = CpuAllocatorStats().cached_bytes;
  a->Free(p, 3 * kMiB + 123);
  EXPECT_EQ(CpuAllocatorStats().cached_bytes, cached_before + static_cast<int64_t>(3 * kMiB + 4096));
  void* q = a->Allocate(3 * kMiB + 100);  // same 4 KiB class
  EXPECT_EQ(q, p);
  EXPECT_EQ(CpuAllocatorStats().cached_bytes, cached_before);
  a->Free(q, 3 * kMiB + 100);
}

TEST(HostAllocatorTest, AFullCacheMakesRoomForANewSize) {
  Allocator* a = CpuAllocator();
  // Fill the cache past its bound with blocks of one size (address space only:
  // the pages are never touched).
  const size_t old_size = 64 * kMiB;
  std::vector<void*> blocks;
  for (int64_t total = 0; total <= kBound; total += static_cast<int64_t>(old_size)) {
    void* p = a->Allocate(old_size);
    ASSERT_NE(p, nullptr);
    blocks.push_back(p);
  }
  for (void* p : blocks) a->Free(p, old_size);
  EXPECT_LE(CpuAllocatorStats().cached_bytes, kBound);
  EXPECT_GT(CpuAllocatorStats().cached_bytes, kBound - static_cast<int64_t>(old_size));

  // A block of another size, larger than the room left, is cached by releasing
  // the oldest blocks...
  const size_t new_size = 96 * kMiB;
  void* p = a->Allocate(new_size);
  ASSERT_NE(p, nullptr);
  a->Free(p, new_size);
  const int64_t cached = CpuAllocatorStats().cached_bytes;
  EXPECT_LE(cached, kBound);
  // ...and handed out again from the cache.
  void* q = a->Allocate(new_size);
  EXPECT_EQ(q, p);
  EXPECT_EQ(CpuAllocatorStats().cached_bytes, cached - static_cast<int64_t>(new_size));
  a->Free(q, new_size);
  // The old size's remaining blocks are still served from the cache.
  const int64_t before_old = CpuAllocatorStats().cached_bytes;
  void* r = a->Allocate(old_size);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(CpuAllocatorStats().cached_bytes, before_old - static_cast<int64_t>(old_size));
  a->Free(r, old_size);
}

TEST(HostAllocatorTest, BytesInUseAreCountedWhetherOrNotCached) {
  Allocator* a = CpuAllocator();
  const int64_t in_use = CpuAllocatorStats().bytes_in_use;
  void* small = a->Allocate(100);
  void* large = a->Allocate(2 * kMiB);
  EXPECT_EQ(CpuAllocatorStats().bytes_in_use, in_use + 128 + static_cast<int64_t>(2 * kMiB));
  a->Free(small, 100);
  a->Free(large, 2 * kMiB);
  EXPECT_EQ(CpuAllocatorStats().bytes_in_use, in_use);
}

TEST(HostAllocatorTest, AFreedSmallBlockIsHandedOutAgainForItsSizeOnly) {
  if (kSmallBound == 0) GTEST_SKIP() << "small blocks are not cached under ASAN";
  Allocator* a = CpuAllocator();
  void* p = a->Allocate(200);  // the 256-byte class
  ASSERT_NE(p, nullptr);
  a->Free(p, 200);
  void* other = a->Allocate(300);  // the 320-byte class: not that block
  EXPECT_NE(other, p);
  void* q = a->Allocate(250);
  EXPECT_EQ(q, p);
  a->Free(other, 300);
  a->Free(q, 250);
}

TEST(HostAllocatorTest, SmallBlocksAre64ByteAlignedAndDistinct) {
  Allocator* a = CpuAllocator();
  std::vector<void*> blocks;
  std::set<void*> seen;
  for (size_t bytes : {1, 63, 64, 65, 100, 4000, 65535}) {
    for (int i = 0; i < 3; ++i) {
      void* p = a->Allocate(bytes);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
      EXPECT_TRUE(seen.insert(p).second) << "block handed out twice";
      std::memset(p, 0xab, bytes);
      blocks.push_back(p);
    }
  }
  size_t k = 0;
  for (size_t bytes : {1, 63, 64, 65, 100, 4000, 65535}) {
    for (int i = 0; i < 3; ++i) a->Free(blocks[k++], bytes);
  }
}

TEST(HostAllocatorTest, CachedSmallBlocksAreBounded) {
  if (kSmallBound == 0) GTEST_SKIP() << "small blocks are not cached under ASAN";
  Allocator* a = CpuAllocator();
  const int64_t before = CpuAllocatorStats().cached_bytes;
  const size_t bytes = 32 * 1024;
  std::vector<void*> blocks;
  for (int64_t total = 0; total <= 2 * kSmallBound; total += static_cast<int64_t>(bytes)) {
    blocks.push_back(a->Allocate(bytes));
    ASSERT_NE(blocks.back(), nullptr);
  }
  for (void* p : blocks) a->Free(p, bytes);
  EXPECT_LE(CpuAllocatorStats().cached_bytes - before, kSmallBound);
  EXPECT_GT(CpuAllocatorStats().cached_bytes - before, 0);
}

}  // namespace
}  // namespace kgrad
