#include "ops/conv.h"

namespace kgrad {
namespace ops {

void RegisterConvOps(std::vector<PrimitiveDef>* defs) { (void)defs; }

}  // namespace ops
}  // namespace kgrad
