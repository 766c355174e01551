// Linalg primitives: definitions (attributes, inference, bprop rules).
#ifndef KGRAD_OPS_LINALG_H_
#define KGRAD_OPS_LINALG_H_

#include <vector>

#include "core/primitive.h"

namespace kgrad {
namespace ops {

void RegisterLinalgOps(std::vector<PrimitiveDef>* defs);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_LINALG_H_
