// CPU kernels: shape family.
#include "backends/cpu/cpu_kernels.h"

namespace kgrad {
namespace cpu {

void RegisterShapeKernels(KernelTable* table) { (void)table; }

}  // namespace cpu
}  // namespace kgrad
