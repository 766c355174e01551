// The calling thread's handling of subnormal ("denormal") floats, and a scope
// that flushes them to zero.
//
// Why: on many x86 cores an add or multiply that takes or makes a subnormal float
// costs ~100 cycles instead of ~4. Long products of small factors (a gradient
// carried back through hundreds of tanh/sin steps) pass through the subnormal
// range on their way to zero and run many times slower there. Flushing trades
// gradual underflow (values below 1.2e-38 in f32, 2.2e-308 in f64 become 0) for
// speed, as PyTorch's torch.set_flush_denormal and ONNX Runtime's
// session.set_denormal_as_zero do; like them, kgrad keeps IEEE behaviour unless
// asked (ExecutorOptions::flush_denormals).
//
// The mode is per thread (x86 MXCSR: FTZ flushes results, DAZ reads subnormal
// inputs as zero). ParallelFor carries the caller's mode into its workers for the
// length of each region, so a kernel's threads all compute the same way.
#ifndef KGRAD_BACKENDS_CPU_DENORMALS_H_
#define KGRAD_BACKENDS_CPU_DENORMALS_H_

#include <cstdint>

#if defined(__SSE2__) || defined(_M_X64)
#include <immintrin.h>
#define KGRAD_HAS_MXCSR 1
#endif

namespace kgrad {
namespace cpu {

#ifdef KGRAD_HAS_MXCSR
// MXCSR bits: flush-to-zero (bit 15) and denormals-are-zero (bit 6).
inline constexpr uint32_t kFlushBits = 0x8040;
#else
inline constexpr uint32_t kFlushBits = 0;
#endif

// Whether this build can flush subnormals (x86-64 only for now).
inline constexpr bool kCanFlushDenormals = kFlushBits != 0;

// The calling thread's flush bits (0: IEEE gradual underflow).
inline uint32_t DenormalMode() {
#ifdef KGRAD_HAS_MXCSR
  return _mm_getcsr() & kFlushBits;
#else
  return 0;
#endif
}

// Sets the calling thread's flush bits to `mode` (from DenormalMode) and puts
// the old ones back at the end of the scope; the rest of the control word
// (rounding, exception masks) is left alone. A no-op when the mode is already
// `mode`, the common case.
class ScopedDenormalMode {
 public:
  explicit ScopedDenormalMode(uint32_t mode) {
#ifdef KGRAD_HAS_MXCSR
    saved_ = _mm_getcsr();
    if ((saved_ & kFlushBits) != mode) {
      _mm_setcsr((saved_ & ~kFlushBits) | mode);
      changed_ = true;
    }
#else
    (void)mode;
#endif
  }
  ~ScopedDenormalMode() {
#ifdef KGRAD_HAS_MXCSR
    if (changed_) _mm_setcsr((_mm_getcsr() & ~kFlushBits) | (saved_ & kFlushBits));
#endif
  }
  ScopedDenormalMode(const ScopedDenormalMode&) = delete;
  ScopedDenormalMode& operator=(const ScopedDenormalMode&) = delete;

 private:
  uint32_t saved_ = 0;
  bool changed_ = false;
};

}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_DENORMALS_H_
