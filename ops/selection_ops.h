// Selection by value: topk and nonzero (ONNX's TopK and NonZero), whose outputs'
// positions depend on the input's values. Their definitions (inference, topk's
// gradient rule) and their checks and shapes, written once for inference and
// the kernels (the conventions of ops/shape_checks.h).
#ifndef KGRAD_OPS_SELECTION_OPS_H_
#define KGRAD_OPS_SELECTION_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {

void RegisterSelectionOps(std::vector<PrimitiveDef>* defs);

// topk(x, k){axis, largest, sorted}: the k largest (smallest unless `largest`)
// elements of x along axis and their indices, in order (largest first, or
// smallest first), equal elements by ascending index; a NaN counts as larger
// than every number (NumPy's sort order). x is numeric of rank >= 1; k is a
// one-element operand (CheckScalarOperand, ops/shape_checks.h) whose element is
// given here: a number in [0, dim] (dim: x's dim at axis, checked when known), or
// at inference a dim symbol or kUnknownValue, which the output dim at axis then
// is (as ?). `sorted` = 0 allows any order (ONNX), so the sorted order serves both.
struct TopKSpec {
  int axis = 0;
  int64_t k = 0;  // the output dim at axis (a number, a symbol or kUnknownDim)
  bool largest = true;
  Shape out;      // the values' and the indices' shape
};
absl::StatusOr<TopKSpec> TopKShape(const Primitive& p, TensorType x, int64_t k);

// unique(x){axis, sorted}: the distinct elements of x (axis empty: x flattened) or
// its distinct slices along axis ([a]), ONNX's Unique: (y, indices, inverse,
// counts) with y in ascending (lexicographic for slices; NaN last, NaNs equal)
// order when sorted, else in order of first occurrence; indices the first
// occurrence of each along the axis, inverse the position in y of every
// element (slice), counts their multiplicities. `count` is y's length along the
// axis (known at run time; kUnknownDim at inference).
struct UniqueSpec {
  int axis = -1;  // -1: flattened
  int64_t outer = 1, len = 0, inner = 1;  // x as [outer, len, inner]
  Shape y;         // y's shape for `count`
};
absl::StatusOr<UniqueSpec> UniqueShape(const Primitive& p, TensorType x, int64_t count);

// nonzero(x): the coordinates of x's nonzero elements (true, != 0; NaN counts),
// in row-major order, as an i64 [rank(x), count] tensor (NumPy's nonzero stacked;
// [0, count] for a rank-0 x, as ONNX says). `count` is known only when x has no
// elements (0); inference gives kUnknownDim otherwise.
Shape NonZeroShape(TensorType x, int64_t count);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_SELECTION_OPS_H_
