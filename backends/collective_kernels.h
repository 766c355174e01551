// Kernels of the collective primitives (ops/collective.h): host tensors through
// the run's communicator (KernelContext::communicator, from
// ExecutorOptions::communicator). Registered by the CPU device; other devices
// stage through the host.
#ifndef KGRAD_BACKENDS_COLLECTIVE_KERNELS_H_
#define KGRAD_BACKENDS_COLLECTIVE_KERNELS_H_

#include "backends/kernel.h"

namespace kgrad {

void RegisterCollectiveKernels(KernelTable* table);

// Sets `kernel` for every collective primitive (ops::IsCollective): a device's
// collectives share one kernel that dispatches on the primitive.
void SetCollectiveKernel(KernelTable* table, KernelFn kernel);

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_COLLECTIVE_KERNELS_H_
