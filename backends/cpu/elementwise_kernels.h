// The elementwise family's registration, split over two translation units.
#ifndef KGRAD_BACKENDS_CPU_ELEMENTWISE_KERNELS_H_
#define KGRAD_BACKENDS_CPU_ELEMENTWISE_KERNELS_H_

#include "backends/kernel.h"

namespace kgrad {
namespace cpu {

// The binary maps (elementwise_binary_kernels.cc); RegisterElementwiseKernels
// calls it.
void RegisterBinaryElementwiseKernels(KernelTable* table);

}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_ELEMENTWISE_KERNELS_H_
