// Registration of the CPU kernels, one function per op family (each in its own
// translation unit so that Eigen-heavy files compile separately).
#ifndef KGRAD_BACKENDS_CPU_CPU_KERNELS_H_
#define KGRAD_BACKENDS_CPU_CPU_KERNELS_H_

#include "backends/kernel.h"

namespace kgrad {
namespace cpu {

void RegisterElementwiseKernels(KernelTable* table);
void RegisterReduceKernels(KernelTable* table);
void RegisterShapeKernels(KernelTable* table);
void RegisterLinalgKernels(KernelTable* table);
void RegisterNnKernels(KernelTable* table);
void RegisterConvKernels(KernelTable* table);

}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_CPU_KERNELS_H_
