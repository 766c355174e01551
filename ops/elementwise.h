// Elementwise primitives: definitions (attributes, inference, bprop rules).
#ifndef KGRAD_OPS_ELEMENTWISE_H_
#define KGRAD_OPS_ELEMENTWISE_H_

#include <vector>

#include "core/primitive.h"

namespace kgrad {
namespace ops {

void RegisterElementwiseOps(std::vector<PrimitiveDef>* defs);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_ELEMENTWISE_H_
