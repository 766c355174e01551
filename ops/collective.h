// Collective primitives: each rank of a communicator (backends/communicator.h)
// applies the same collective to its own x; the ranks exchange values. Definitions
// (attributes, inference, gradient rules) and the checks that inference and the
// kernels share.
//
//   all_reduce{op, ranks}(x)        y = op over ranks of x (op: sum | mean | max | min)
//   all_gather{axis, ranks}(x)      y = concat over ranks of x along axis
//   reduce_scatter{axis, ranks}(x)  y = block `rank` (along axis) of the sum over ranks
//   broadcast{root, ranks}(x)       y = x of rank `root`
//   reduce_to{root, ranks}(x)       y = sum over ranks of x on `root`, zeros elsewhere
//
// `ranks` is the communicator size the graph is built for (0: not stated; then the
// gathered/scattered dim is unknown to inference). Kernels check it against the
// communicator they run on.
//
// Gradient convention (as JAX's psum and MindSpore's AllReduce): the objective is
// the sum over ranks of each rank's own objective, L = sum_r L_r(y_r), and each
// rank holds the cotangent of its own output. Then every rule is again a
// collective: the adjoint of all_reduce{sum} is all_reduce{sum}, of all_gather
// reduce_scatter, of broadcast reduce_to (and the reverse of each).
#ifndef KGRAD_OPS_COLLECTIVE_H_
#define KGRAD_OPS_COLLECTIVE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {

void RegisterCollectiveOps(std::vector<PrimitiveDef>* defs);

// Whether `id` is one of the collectives above.
bool IsCollective(PrimId id);

enum class CollectiveReduce { kSum, kMean, kMax, kMin };

// all_reduce's `op` attribute ("sum", "mean", "max" or "min").
absl::StatusOr<CollectiveReduce> ParseCollectiveReduce(const Primitive& p);

// Checks collective `p` on x for a communicator of `ranks` ranks (0: unknown) and
// returns the output dims (kUnknownDim where they depend on an unknown count):
// dtypes (numeric; floating for mean), the axis, reduce_scatter's divisibility,
// root in range.
absl::StatusOr<Shape> CollectiveOutShape(const Primitive& p, TensorType x, int64_t ranks);

// The `ranks` attribute checked against the communicator's size (kernels).
absl::Status CheckCollectiveRanks(const Primitive& p, int64_t communicator_size);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_COLLECTIVE_H_
