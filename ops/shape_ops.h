// Shape primitives: definitions (attributes, inference, bprop rules).
#ifndef KGRAD_OPS_SHAPE_OPS_H_
#define KGRAD_OPS_SHAPE_OPS_H_

#include <vector>

#include "core/primitive.h"

namespace kgrad {
namespace ops {

void RegisterShapeOps(std::vector<PrimitiveDef>* defs);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_SHAPE_OPS_H_
