// The facts of ops/elementwise_table.inc as constexpr functions of a PrimId.
// Dependency-free (the CUDA device code includes it), like the functors
// (elementwise_functors.h). Code generated per row includes the table itself.
#ifndef KGRAD_OPS_ELEMENTWISE_TABLE_H_
#define KGRAD_OPS_ELEMENTWISE_TABLE_H_

#include "core/dtype_set.h"
#include "core/primitive_id.h"
#include "ops/elementwise_functors.h"

namespace kgrad {
namespace ops {

// One row's facts (the columns of elementwise_table.inc after the name).
struct ElementwiseRow {
  PrimId id;
  int arity;         // 1, 2 or 3 (select)
  DTypeSet dtypes;   // of the value operands
  bool bool_output;  // comparisons and logical ops give bool
  bool fused;        // the executor may fuse it into a run
  const char* onnx;  // the ONNX op it is exactly, or ""
};

namespace elementwise_internal {
// The tokens of the table's result and fusion columns.
struct Token {
  static constexpr bool Same = false, Bool = true, Fused = true, Unfused = false;
};
inline constexpr ElementwiseRow kRows[] = {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  {PrimId::k##Name, arity, dtypes, Token::result, Token::fusion, onnx},
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
};
inline constexpr int kNumRows = sizeof(kRows) / sizeof(kRows[0]);

// primitive_ids.inc lists the rows first, in order: row i is PrimId i.
constexpr bool RowsAreTheFirstIds() {
  for (int i = 0; i < kNumRows; ++i) {
    if (static_cast<int>(kRows[i].id) != i) return false;
  }
  return true;
}
static_assert(RowsAreTheFirstIds(), "core/primitive_ids.inc must list the table's rows first");
}  // namespace elementwise_internal

// Whether `id` is a row of the table.
constexpr bool IsElementwise(PrimId id) {
  return static_cast<int>(id) < elementwise_internal::kNumRows;
}

// `id`'s row; an empty row (arity 0, no dtypes, onnx "") for an id that is not
// elementwise.
constexpr ElementwiseRow ElementwiseRowOf(PrimId id) {
  return IsElementwise(id) ? elementwise_internal::kRows[static_cast<int>(id)]
                           : ElementwiseRow{id, 0, 0, false, false, ""};
}

// Its operands: 1, 2 or 3 (select); 0 for an id that is not elementwise.
constexpr int ElementwiseArity(PrimId id) { return ElementwiseRowOf(id).arity; }

// The dtypes `id` accepts: its input's for a unary map, the one dtype of both
// inputs for a binary map, that of a and b for select(cond, a, b) (cond is bool).
// No promotion: outputs keep the input dtype, except the bool of comparisons and
// logical ops (ElementwiseBoolOutput). Empty for an id that is not elementwise.
// constexpr, so that a kernel instantiates its loops for these dtypes only.
constexpr DTypeSet ElementwiseDTypes(PrimId id) { return ElementwiseRowOf(id).dtypes; }

// Comparisons and logical ops give bool.
constexpr bool ElementwiseBoolOutput(PrimId id) { return ElementwiseRowOf(id).bool_output; }

// Whether the executor may fuse `id` into a run of elementwise applications.
constexpr bool IsFusedElementwise(PrimId id) { return ElementwiseRowOf(id).fused; }

// The ONNX op `id` is exactly, or "" (none, or not elementwise).
constexpr const char* ElementwiseOnnxName(PrimId id) { return ElementwiseRowOf(id).onnx; }

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_ELEMENTWISE_TABLE_H_
