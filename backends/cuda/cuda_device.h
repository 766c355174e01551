// The CUDA device: tensors in GPU memory from a caching allocator, kernels from
// cuBLAS, cuDNN and kgrad's own .cu files (backends/cuda/kernels/), CPU kernels
// as a fallback for what has no device kernel (CudaFallbackPrimitives()).
//
// Streams: every host thread gets its own stream (and cuBLAS/cuDNN handles) per
// device, created on first use and destroyed when the thread exits, so executor
// runs on different threads queue independent work. Kernels, CopyToDevice,
// CopyToHost and Fill run on the calling thread's stream; Synchronize waits for
// it. CopyToDevice waits for its copy, so constants and weights copied at compile
// time are ready for every stream. A device tensor used by a stream other than
// the one that allocated it must not be freed before that stream is synchronised
// (the executor guarantees this: runs end with Synchronize, and constants and
// weights live as long as the executor).
//
// Build with --config=cuda. Without a driver or a GPU, CudaDevice() returns an
// Unavailable status and nothing crashes.
#ifndef KGRAD_BACKENDS_CUDA_CUDA_DEVICE_H_
#define KGRAD_BACKENDS_CUDA_CUDA_DEVICE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "backends/cuda/caching_allocator.h"
#include "backends/device.h"

namespace kgrad {

// The process-wide device for GPU `ordinal` (created on first call, thread-safe).
// Unavailable when there is no driver or no GPU; InvalidArgument for an ordinal
// out of range.
absl::StatusOr<Device*> CudaDevice(int ordinal = 0);

// GPUs visible to this process (0 without a driver).
int CudaDeviceCount();

// Memory statistics of the caching allocator of a device from CudaDevice().
absl::StatusOr<cuda::MemoryStats> CudaMemoryStats(Device* device);
absl::Status CudaResetPeakMemory(Device* device);
// Returns the cached free blocks of a device to the driver (after waiting for
// the calling thread's stream); the bytes released.
absl::StatusOr<size_t> CudaEmptyCache(Device* device);

// The primitives that run through the CPU fallback (copy in, CPU kernel, copy
// out) on every input. Some native kernels also fall back for particular inputs;
// see the report in backends/cuda/README.md.
std::vector<PrimId> CudaFallbackPrimitives();

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CUDA_CUDA_DEVICE_H_
