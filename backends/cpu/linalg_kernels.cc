// CPU kernels: linalg family.
#include "backends/cpu/cpu_kernels.h"

namespace kgrad {
namespace cpu {

void RegisterLinalgKernels(KernelTable* table) { (void)table; }

}  // namespace cpu
}  // namespace kgrad
