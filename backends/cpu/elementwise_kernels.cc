// CPU kernels: elementwise family.
#include "backends/cpu/cpu_kernels.h"

namespace kgrad {
namespace cpu {

void RegisterElementwiseKernels(KernelTable* table) { (void)table; }

}  // namespace cpu
}  // namespace kgrad
