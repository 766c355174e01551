#include "ops/shape_ops.h"

namespace kgrad {
namespace ops {

void RegisterShapeOps(std::vector<PrimitiveDef>* defs) { (void)defs; }

}  // namespace ops
}  // namespace kgrad
