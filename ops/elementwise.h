// Elementwise primitives: definitions (attributes, inference, bprop rules), and
// the checks and output shapes that inference and the CPU and CUDA kernels share.
// Their facts (dtypes, bool results, ...) are the table's (elementwise_table.h).
#ifndef KGRAD_OPS_ELEMENTWISE_H_
#define KGRAD_OPS_ELEMENTWISE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "ops/elementwise_table.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {

void RegisterElementwiseOps(std::vector<PrimitiveDef>* defs);

// The application's attributes packed for its functor (ew::<Name>Op::Read): what
// the CPU and CUDA kernels pass to every element. `p` is elementwise.
ew::Attrs ElementwiseAttrs(const Primitive& p);

// A unary map `id` on x: x's dtype must be one `id` accepts. The output has x's
// type (bool for logical_not, whose input is bool).
absl::Status CheckUnary(PrimId id, TensorType x);

// A binary map `id` on (x, y): one dtype, accepted by `id`; the output shape
// (NumPy broadcasting). The output dtype is x's, or bool (ElementwiseBoolOutput).
absl::StatusOr<Shape> BinaryShape(PrimId id, TensorType x, TensorType y, CheckedBy by);

// select(cond, a, b): cond bool, a and b one dtype; the shape all three
// broadcast to. The output dtype is a's.
absl::StatusOr<Shape> SelectShape(TensorType cond, TensorType a, TensorType b, CheckedBy by);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_ELEMENTWISE_H_
