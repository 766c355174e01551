// CPU kernels: reduce family.
#include "backends/cpu/cpu_kernels.h"

namespace kgrad {
namespace cpu {

void RegisterReduceKernels(KernelTable* table) { (void)table; }

}  // namespace cpu
}  // namespace kgrad
