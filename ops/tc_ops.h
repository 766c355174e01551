// The `tc` primitive: tc{def}(x_0, ..., x_n), a tensor comprehension block in
// TC's syntax (ops/tc_block.h) applied to its inputs in signature order; the
// output, or a tuple of the outputs when there are several. Inference and the
// kernels check it with ops/tc_analysis.h; the gradient rule is another `tc`
// (ops/tc_adjoint.h), so every order differentiates, and forward mode comes
// from transposing it like every primitive's.
#ifndef KGRAD_OPS_TC_OPS_H_
#define KGRAD_OPS_TC_OPS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/primitive.h"
#include "ops/op_util.h"
#include "ops/tc_analysis.h"
#include "ops/tc_block.h"

namespace kgrad {
namespace ops {

void RegisterTcOps(std::vector<PrimitiveDef>* defs);

// The block of a `tc` application, checked against its operands (inference's
// abstract types or the kernels' tensors).
struct TcCall {
  tc::Block block;
  tc::Analysis analysis;
};
absl::StatusOr<TcCall> ParseTcCall(const Primitive& p, absl::Span<const TensorType> operands);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_TC_OPS_H_
