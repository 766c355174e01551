// The shape family: reshape(_like), transpose, broadcast_to(_like),
// sum_to(_like), expand_dims, squeeze, concat, split, slice(_grad), gather,
// scatter_add, pad, one_hot, cast and fill: their definitions (attributes,
// inference, bprop rules), in shape_ops.cc. Each op's attribute parse, input
// checks and shape formula, shared with the kernels of every backend, are in
// ops/shape_checks.h. The shape-related families beside it have their own
// headers: ops/index_ops.h, ops/dynamic_shape_ops.h, ops/dynamic_index_ops.h,
// ops/dynamic_axes_ops.h and ops/selection_ops.h.
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
