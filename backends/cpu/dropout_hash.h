// The dropout mask as a counter-based hash: element i of a dropout with `seed`
// is kept iff DropoutUniform(seed, i) >= rate. The value depends only on (seed,
// i), never on threads, chunking or device, so the CPU and CUDA kernels (and a
// recomputation in the backward pass) draw the same mask. Header-only and
// __host__ __device__ under nvcc so that .cu files include it as is.
#ifndef KGRAD_BACKENDS_CPU_DROPOUT_HASH_H_
#define KGRAD_BACKENDS_CPU_DROPOUT_HASH_H_

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define KGRAD_HOST_DEVICE __host__ __device__
#else
#define KGRAD_HOST_DEVICE
#endif

namespace kgrad {

// SplitMix64's finaliser applied to seed * golden-ratio + i (Steele, Lea and Flood,
// "Fast splittable pseudorandom number generators", 2014): for seed 1 and i 0 it
// is the first output of SplitMix64 started from state 0.
KGRAD_HOST_DEVICE inline uint64_t DropoutBits(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1): the top 53 bits of the hash, scaled by 2^-53 (exact in double).
KGRAD_HOST_DEVICE inline double DropoutUniform(uint64_t seed, uint64_t i) {
  return static_cast<double>(DropoutBits(seed, i) >> 11) * 0x1.0p-53;
}

KGRAD_HOST_DEVICE inline bool DropoutKeep(uint64_t seed, uint64_t i, double rate) {
  return DropoutUniform(seed, i) >= rate;
}

// The random primitives' draws for element i of a tensor with `seed`, from the
// same counter-based hash (random_uniform_like, random_normal_like; ONNX's
// RandomUniformLike, RandomNormalLike and, through a uniform, Bernoulli).
KGRAD_HOST_DEVICE inline double UniformAt(uint64_t seed, uint64_t i, double low, double high) {
  return low + (high - low) * DropoutUniform(seed, i);
}

// Box-Muller over the uniforms of 2i and 2i + 1: a standard normal draw, scaled.
KGRAD_HOST_DEVICE inline double NormalAt(uint64_t seed, uint64_t i, double mean, double scale) {
  const double u1 = 1.0 - DropoutUniform(seed, 2 * i);  // in (0, 1]: log is finite
  const double u2 = DropoutUniform(seed, 2 * i + 1);
  return mean + scale * (sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_DROPOUT_HASH_H_
