// Reduce primitives: definitions (attributes, inference, bprop rules).
#ifndef KGRAD_OPS_REDUCE_H_
#define KGRAD_OPS_REDUCE_H_

#include <vector>

#include "core/primitive.h"

namespace kgrad {
namespace ops {

void RegisterReduceOps(std::vector<PrimitiveDef>* defs);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_REDUCE_H_
