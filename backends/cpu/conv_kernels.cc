// CPU kernels: conv family.
#include "backends/cpu/cpu_kernels.h"

namespace kgrad {
namespace cpu {

void RegisterConvKernels(KernelTable* table) { (void)table; }

}  // namespace cpu
}  // namespace kgrad
