// Convolution and pooling primitives (NCHW): definitions (attributes, inference,
// bprop rules).
#ifndef KGRAD_OPS_CONV_H_
#define KGRAD_OPS_CONV_H_

#include <vector>

#include "core/primitive.h"

namespace kgrad {
namespace ops {

void RegisterConvOps(std::vector<PrimitiveDef>* defs);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_CONV_H_
