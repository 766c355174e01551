// CPU kernels: nn family.
#include "backends/cpu/cpu_kernels.h"

namespace kgrad {
namespace cpu {

void RegisterNnKernels(KernelTable* table) { (void)table; }

}  // namespace cpu
}  // namespace kgrad
