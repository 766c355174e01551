// Nn primitives: definitions (attributes, inference, bprop rules).
#ifndef KGRAD_OPS_NN_H_
#define KGRAD_OPS_NN_H_

#include <vector>

#include "core/primitive.h"

namespace kgrad {
namespace ops {

void RegisterNnOps(std::vector<PrimitiveDef>* defs);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_NN_H_
