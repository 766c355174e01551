#include "ops/nn.h"

namespace kgrad {
namespace ops {

void RegisterNnOps(std::vector<PrimitiveDef>* defs) { (void)defs; }

}  // namespace ops
}  // namespace kgrad
