// The caching allocator's logic on host memory (no GPU needed): size classes,
// reuse per stream, stream release, out-of-memory retry, statistics, threads.
#include "backends/cuda/caching_allocator.h"

#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kgrad {
namespace cuda {
namespace {

// malloc-backed RawMemory with a byte limit and counters.
class FakeMemory : public RawMemory {
 public:
  explicit FakeMemory(size_t limit = SIZE_MAX) : limit_(limit) {}
  void set_limit(size_t limit) { limit_ = limit; }
  ~FakeMemory() override { EXPECT_EQ(live_, 0u) << "blocks leaked to the fake device"; }

  void* Malloc(size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (used_ + bytes > limit_) return nullptr;
    used_ += bytes;
    ++mallocs_;
    ++live_;
    void* p = std::malloc(bytes);
    sizes_.push_back({p, bytes});
    return p;
  }
  void Free(void* ptr) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = sizes_.begin(); it != sizes_.end(); ++it) {
      if (it->first == ptr) {
        used_ -= it->second;
        sizes_.erase(it);
        break;
      }
    }
    --live_;
    std::free(ptr);
  }
  void WaitForAllWork() override { ++waits_; }
  int mallocs() const { return mallocs_; }
  int waits() const { return waits_; }
  size_t used() const { return used_; }

 private:
  std::mutex mu_;
  size_t limit_;
  size_t used_ = 0;
  int mallocs_ = 0;
  int waits_ = 0;
  size_t live_ = 0;
  std::vector<std::pair<void*, size_t>> sizes_;
};

// Two stream tags.
const char kStreams[2] = {0, 0};
const void* const A = &kStreams[0];
const void* const B = &kStreams[1];

TEST(SizeClassTest, RoundsUpWithBoundedWaste) {
  EXPECT_EQ(SizeClassOf(0), kMinBlockBytes);
  EXPECT_EQ(SizeClassOf(1), kMinBlockBytes);
  EXPECT_EQ(SizeClassOf(512), 512u);
  EXPECT_EQ(SizeClassOf(513), 1024u);
  EXPECT_EQ(SizeClassOf(4096), 4096u);
  EXPECT_EQ(SizeClassOf(4097), 5120u);  // quarter steps of 4096
  EXPECT_EQ(SizeClassOf(kLargeBlockBytes), kLargeBlockBytes);
  EXPECT_EQ(SizeClassOf(kLargeBlockBytes + 1), kLargeBlockBytes + kLargeStepBytes);
  for (size_t bytes = 1; bytes < (size_t{1} << 31); bytes = bytes * 3 / 2 + 7) {
    size_t c = SizeClassOf(bytes);
    ASSERT_GE(c, bytes);
    ASSERT_EQ(c % 512, 0u) << bytes;
    if (bytes > 4096) {
      EXPECT_LT(static_cast<double>(c - bytes), 0.25 * static_cast<double>(bytes)) << bytes;
    }
    EXPECT_EQ(SizeClassOf(c), c) << "a class is its own class: " << bytes;
  }
  EXPECT_EQ(SizeClassOf(SIZE_MAX), 0u);  // overflow
}

// An allocator `a` over fake memory `raw` (destroyed first: its cached blocks go
// back to `raw`, which then checks that nothing leaked).
class CachingAllocatorTest : public ::testing::Test {
 protected:
  // Frees each of `blocks` (results not checked).
  void FreeAll(std::initializer_list<void*> blocks) {
    for (void* p : blocks) a.Free(p);
  }

  FakeMemory raw;
  CachingAllocator a{&raw};
};

TEST_F(CachingAllocatorTest, ReusesFreedBlocksOfTheSameClassOnTheSameStream) {
  void* p = a.Allocate(1000, A);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(a.BlockSize(p), 1024u);
  EXPECT_TRUE(a.Free(p));
  void* q = a.Allocate(900, A);  // same class (1024)
  EXPECT_EQ(q, p);
  EXPECT_EQ(raw.mallocs(), 1);
  MemoryStats s = a.stats();
  EXPECT_EQ(s.allocations, 2);
  EXPECT_EQ(s.cache_hits, 1);
  EXPECT_EQ(s.raw_mallocs, 1);
  EXPECT_EQ(s.bytes_in_use, 1024);
  EXPECT_EQ(s.requested_bytes, 900);
  EXPECT_TRUE(a.Free(q));
}

TEST_F(CachingAllocatorTest, OtherClassesAndOtherStreamsGetNewBlocks) {
  void* p = a.Allocate(1000, A);
  a.Free(p);
  void* big = a.Allocate(5000, A);  // another class
  EXPECT_NE(big, p);
  void* other = a.Allocate(1000, B);  // the cached block belongs to stream A
  EXPECT_NE(other, p);
  EXPECT_EQ(raw.mallocs(), 3);
  FreeAll({big, other});
}

TEST_F(CachingAllocatorTest, ReleasedStreamsHandTheirBlocksToEveryStream) {
  void* cached = a.Allocate(1000, A);
  void* live = a.Allocate(3000, A);
  a.Free(cached);
  a.ReleaseStream(A);
  EXPECT_EQ(a.Allocate(1000, B), cached);  // an idle block serves any stream
  a.Free(live);                            // freed after its stream went away
  EXPECT_EQ(a.Allocate(3000, B), live);
  EXPECT_EQ(raw.mallocs(), 2);
  FreeAll({cached, live});
}

TEST_F(CachingAllocatorTest, StatisticsTrackUsePeakAndCache) {
  void* p = a.Allocate(2048, A);
  void* q = a.Allocate(2048, A);
  MemoryStats s = a.stats();
  EXPECT_EQ(s.bytes_in_use, 4096);
  EXPECT_EQ(s.peak_bytes_in_use, 4096);
  EXPECT_EQ(s.bytes_reserved, 4096);
  a.Free(p);
  s = a.stats();
  EXPECT_EQ(s.bytes_in_use, 2048);
  EXPECT_EQ(s.peak_bytes_in_use, 4096);
  EXPECT_EQ(s.bytes_cached, 2048);
  EXPECT_EQ(s.bytes_reserved, 4096);
  a.ResetPeak();
  EXPECT_EQ(a.stats().peak_bytes_in_use, 2048);
  EXPECT_EQ(a.EmptyCache(), 2048u);
  s = a.stats();
  EXPECT_EQ(s.bytes_cached, 0);
  EXPECT_EQ(s.bytes_reserved, 2048);
  EXPECT_EQ(s.raw_frees, 1);
  EXPECT_EQ(raw.used(), 2048u);
  a.Free(q);
}

TEST_F(CachingAllocatorTest, OutOfMemoryEmptiesTheCacheAndRetries) {
  raw.set_limit(8192);
  void* p = a.Allocate(4096, A);
  void* q = a.Allocate(4096, A);
  ASSERT_NE(q, nullptr);
  FreeAll({p, q});
  // 8192 bytes are cached as two 4096 blocks; a 6000-byte block needs them back.
  void* r = a.Allocate(6000, A);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(a.stats().bytes_cached, 0);
  EXPECT_EQ(raw.waits(), 1) << "cached blocks may still be in use by their streams";
  // Nothing left to give back: a plain failure.
  EXPECT_EQ(a.Allocate(4096, A), nullptr);
  EXPECT_EQ(a.stats().failed_allocations, 1);
  a.Free(r);
}

TEST_F(CachingAllocatorTest, UnknownPointersAreIgnored) {
  int x = 0;
  EXPECT_FALSE(a.Free(&x));
  EXPECT_FALSE(a.Free(nullptr));
  void* p = a.Allocate(10, A);
  EXPECT_TRUE(a.Free(p));
  EXPECT_FALSE(a.Free(p));  // a double free is caught, not cached twice
  EXPECT_EQ(a.stats().bytes_cached, 512);
}

TEST_F(CachingAllocatorTest, ThreadsAllocateConcurrently) {
  constexpr int kThreads = 8, kRounds = 2000;
  std::vector<int> tags(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<void*> mine;
      for (int i = 0; i < kRounds; ++i) {
        mine.push_back(a.Allocate(64 * (1 + (i * 7 + t) % 50), &tags[t]));
        if (mine.size() > 10) {
          a.Free(mine.front());
          mine.erase(mine.begin());
        }
      }
      for (void* p : mine) a.Free(p);
    });
  }
  for (std::thread& t : threads) t.join();
  MemoryStats s = a.stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_EQ(s.allocations, kThreads * kRounds);
  EXPECT_GT(s.cache_hits, s.allocations / 2);
  EXPECT_EQ(s.bytes_cached, s.bytes_reserved);
}

}  // namespace
}  // namespace cuda
}  // namespace kgrad
