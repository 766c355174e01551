// A host emulation of the slice of CUDA that kgrad's .cu files use, so that the
// same source, compiled by the host C++ compiler with KGRAD_CUDA_EMULATION,
// runs on any machine: tests check the kernels' index arithmetic, block
// reductions and launch planning against the CPU kernels without a GPU.
//
// A launch runs its blocks one after another; the block's threads are real
// threads that meet at a barrier for __syncthreads() (so __shared__ arrays,
// emulated as function statics, are shared by one block at a time). Atomics take
// one global lock. Streams are ignored (launches complete before returning).
// Not for production: it is slow, and grids are kept small (kMaxEmulatedBlocks).
#ifndef KGRAD_BACKENDS_CUDA_KERNELS_EMULATION_H_
#define KGRAD_BACKENDS_CUDA_KERNELS_EMULATION_H_

#include <math.h>

#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

// ----- Types and qualifiers -----------------------------------------------------------------
enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
typedef enum cudaError cudaError_t;
typedef struct CUstream_st* cudaStream_t;

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}  // NOLINT
};

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

namespace kgrad {
namespace cuda {
namespace emu {

// Grid-stride kernels need not run every block they ask for, nor every thread:
// blocks are emulated with at most kMaxEmulatedThreads threads (a power of two,
// as the block reductions require), which also checks that kernels use
// blockDim rather than the launch constant.
inline constexpr unsigned kMaxEmulatedBlocks = 3;
inline constexpr unsigned kMaxEmulatedThreads = 8;

// A reusable barrier for the threads of one block.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t gen = generation_;
    if (++waiting_ == n_) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != gen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
  int waiting_ = 0;
  uint64_t generation_ = 0;
};

struct ThreadState {
  dim3 block_idx, thread_idx, block_dim, grid_dim;
  Barrier* barrier = nullptr;
};

inline ThreadState& State() {
  thread_local ThreadState s;
  return s;
}

inline std::mutex& AtomicMutex() {
  static std::mutex mu;
  return mu;
}

// Runs `kernel` (a callable of no arguments, reading the thread state) over the grid.
inline void Run(dim3 grid, unsigned threads, const std::function<void()>& kernel) {
  grid.x = grid.x < kMaxEmulatedBlocks ? grid.x : kMaxEmulatedBlocks;
  threads = threads < kMaxEmulatedThreads ? threads : kMaxEmulatedThreads;
  Barrier barrier(static_cast<int>(threads));
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      ThreadState& s = State();
      s.thread_idx = dim3(t);
      s.block_dim = dim3(threads);
      s.grid_dim = grid;
      s.barrier = &barrier;
      for (unsigned by = 0; by < grid.y; ++by) {
        for (unsigned bx = 0; bx < grid.x; ++bx) {
          s.block_idx = dim3(bx, by);
          kernel();
          barrier.Wait();  // the next block reuses the shared arrays
        }
      }
    });
  }
  for (std::thread& w : workers) w.join();
}

}  // namespace emu
}  // namespace cuda
}  // namespace kgrad

#define blockIdx (::kgrad::cuda::emu::State().block_idx)
#define threadIdx (::kgrad::cuda::emu::State().thread_idx)
#define blockDim (::kgrad::cuda::emu::State().block_dim)
#define gridDim (::kgrad::cuda::emu::State().grid_dim)

inline void __syncthreads() { ::kgrad::cuda::emu::State().barrier->Wait(); }

inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  std::lock_guard<std::mutex> lock(::kgrad::cuda::emu::AtomicMutex());
  const unsigned long long old = *p;
  if (v < old) *p = v;
  return old;
}

template <typename T>
inline T atomicAdd(T* p, T v) {
  std::lock_guard<std::mutex> lock(::kgrad::cuda::emu::AtomicMutex());
  const T old = *p;
  *p = old + v;
  return old;
}

#endif  // KGRAD_BACKENDS_CUDA_KERNELS_EMULATION_H_
