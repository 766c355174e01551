// Lists: values whose length is known only at run time and whose elements share
// one type (core/abstract.h, AbstractList). They hold what ONNX calls sequences
// (SequenceConstruct, SequenceInsert in a Loop, SplitToSequence,
// ConcatFromSequence) and optionals (a list of at most one element), and what a
// loop appends to.
//
//   make_list(x...)               the list [x_0, ..., x_n] (no inputs: empty)
//   list_len(l)                   its length, an i64 scalar
//   list_getitem(l, i)            l[i]
//   list_setitem(l, i, v)         l with l[i] replaced by v
//   list_insert(l, i, v)          l with v inserted before position i (i = len:
//                                 appended)
//   list_erase(l, i)              l without l[i]
//   list_concat(l){axis, new_axis}  the elements joined along axis (stacked along
//                                 a new axis when new_axis)
//   list_concat_grad(l, dy){axis, new_axis}  dy cut into pieces shaped like l's
//                                 elements (list_concat's adjoint)
//   split_to_list(x[, split]){axis, keepdims}  x cut along axis into a list
//
// Indices are integer scalars; a negative one counts from the end (for
// list_insert, from the end of the list before the insertion, as ONNX's
// SequenceInsert), and one outside the list is an OutOfRange error at run time.
// Every list op is differentiable: the adjoint of a list is a list of the same
// length (zeros where nothing flows), and each op's adjoint is another list op.
#ifndef KGRAD_OPS_LIST_OPS_H_
#define KGRAD_OPS_LIST_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/primitive.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {

void RegisterListOps(std::vector<PrimitiveDef>* defs);

// Index `i` of a list of `size` elements, normalised to [0, size) (to [0, size]
// when `insert`): the check the kernels make and the message they give.
absl::StatusOr<int64_t> ListPosition(int64_t i, int64_t size, bool insert);

// split_to_list(x[, split]){axis, keepdims}: the sizes of the pieces along axis.
// `split` is null (pieces of 1; keepdims = 0 then drops the axis from each),
// one element (chunks of that size, the last one smaller when the dim is not a
// multiple of it) or a list of sizes (>= 0, summing to the dim). `split_rank` is
// the split operand's rank (0 or 1). With an unknown dim the sizes are unknown
// (an empty `sizes`) unless they are listed.
struct ListSplitSpec {
  int axis = 0;
  bool squeeze = false;        // drop the axis from each piece
  std::vector<int64_t> sizes;  // one per piece
};
absl::StatusOr<ListSplitSpec> SplitToListSpec(const Primitive& p, TensorType x, int split_rank,
                                              const std::vector<int64_t>* split);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_LIST_OPS_H_
