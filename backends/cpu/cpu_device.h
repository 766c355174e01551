// The CPU device: host memory, Eigen/OpenMP kernels. One process-wide instance.
#ifndef KGRAD_BACKENDS_CPU_CPU_DEVICE_H_
#define KGRAD_BACKENDS_CPU_CPU_DEVICE_H_

#include "backends/device.h"

namespace kgrad {

Device* CpuDevice();

// The CPU kernel table (built once, immutable).
const KernelTable& CpuKernels();

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_CPU_DEVICE_H_
