// Reduction primitives: definitions (attributes, inference, bprop rules), and
// the checks and output shapes that inference and the CPU and CUDA kernels share.
#ifndef KGRAD_OPS_REDUCE_H_
#define KGRAD_OPS_REDUCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {

void RegisterReduceOps(std::vector<PrimitiveDef>* defs);

// What reduce_*{axes, keepdims} or argmax/argmin{axis, keepdims} does to x.
struct ReduceAxes {
  std::vector<bool> reduced;  // per dim of x: folded into the output
  std::vector<int> axes;      // the reduced dims, ascending
  Shape out_shape;            // x's dims, reduced ones dropped (kept as 1 when keepdims)
  DType out_dtype;            // x's; i64 indices for argmax/argmin
};

// Checks reduction `p` on x and parses its axes: x's dtype (floating for
// reduce_mean and logsumexp, numeric otherwise); axes in range and not repeated
// (none: all); no empty reduced axis where the result needs an element
// (reduce_max/min, argmax/argmin), when its size is known.
absl::StatusOr<ReduceAxes> ParseReduceAxes(const Primitive& p, TensorType x);

// A reduction's input dims as the kernels walk them: size-1 dims dropped and
// row-major neighbours of one kind (kept or reduced) merged, outermost first.
struct ReduceGroups {
  Shape sizes;                // merged dims
  std::vector<bool> reduced;  // per merged dim
  int64_t out_count = 1;      // output elements
  int64_t red_count = 1;      // input elements folded into each output
};
ReduceGroups GroupReduceDims(absl::Span<const int64_t> in, const std::vector<bool>& reduced);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_REDUCE_H_
