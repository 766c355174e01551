// Element-wise indexing and scans: gather_elements, scatter_elements and cumsum,
// with ONNX's semantics (GatherElements, ScatterElements, CumSum). Their
// definitions (inference, gradient rules), and each op's checks and shape
// formula, written once for inference and the kernels of every backend (the
// conventions of ops/shape_checks.h).
#ifndef KGRAD_OPS_INDEX_OPS_H_
#define KGRAD_OPS_INDEX_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "ops/op_util.h"
#include "ops/shape_checks.h"

namespace kgrad {
namespace ops {

void RegisterIndexOps(std::vector<PrimitiveDef>* defs);

// gather_elements(data, indices){axis}: i32 or i64 indices of data's rank, on
// every dim but axis no larger than data; out has indices' shape (data's dtype).
absl::StatusOr<AxisShape> GatherElementsShape(const Primitive& p, TensorType data,
                                              TensorType indices);

// scatter_elements{reduction}: how an update combines with the element it hits.
enum class ScatterReduction { kNone, kAdd, kMul, kMax, kMin };
absl::StatusOr<ScatterReduction> ParseScatterReduction(const Primitive& p);
// scatter_elements(data, indices, updates){axis, reduction}: indices as for
// gather_elements, updates of data's dtype and indices' shape, a numeric data for
// a reduction other than none; out has data's shape.
struct ScatterElementsSpec {
  int axis = 0;
  ScatterReduction reduction = ScatterReduction::kNone;
  Shape out;
};
absl::StatusOr<ScatterElementsSpec> ParseScatterElements(const Primitive& p, TensorType data,
                                                         TensorType indices, TensorType updates);

// cumsum(x){axis, exclusive, reverse}: a numeric x; out has x's shape.
struct CumSumSpec {
  int axis = 0;
  bool exclusive = false, reverse = false;
  Shape out;
};
absl::StatusOr<CumSumSpec> ParseCumSum(const Primitive& p, TensorType x);

// The error for an index of gather_elements / scatter_elements outside
// [-dim, dim) of `data` at `axis` (OutOfRange: a bad value, not a bad graph).
absl::Status ElementIndexOutOfRange(int64_t index, int64_t position, int axis, TensorType data);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_INDEX_OPS_H_
