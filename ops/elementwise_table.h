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

// Whether `id` is a row of the table.
constexpr bool IsElementwise(PrimId id) {
  switch (id) {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) case PrimId::k##Name:
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
    return true;
    default:
      return false;
  }
}

// Its operands: 1, 2 or 3 (select); 0 for an id that is not elementwise.
constexpr int ElementwiseArity(PrimId id) {
  switch (id) {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  case PrimId::k##Name:                                                  \
    return arity;
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
    default:
      return 0;
  }
}

// The dtypes `id` accepts: its input's for a unary map, the one dtype of both
// inputs for a binary map, that of a and b for select(cond, a, b) (cond is bool).
// No promotion: outputs keep the input dtype, except the bool of comparisons and
// logical ops (ElementwiseBoolOutput). Empty for an id that is not elementwise.
// constexpr, so that a kernel instantiates its loops for these dtypes only.
constexpr DTypeSet ElementwiseDTypes(PrimId id) {
  switch (id) {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  case PrimId::k##Name:                                                  \
    return dtypes;
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
    default:
      return 0;
  }
}

// Comparisons and logical ops give bool.
constexpr bool ElementwiseBoolOutput(PrimId id) {
  constexpr bool Same = false, Bool = true;
  switch (id) {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  case PrimId::k##Name:                                                  \
    return result;
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
    default:
      return false;
  }
}

// Whether the executor may fuse `id` into a run of elementwise applications.
constexpr bool IsFusedElementwise(PrimId id) {
  constexpr bool Fused = true, Unfused = false;
  switch (id) {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  case PrimId::k##Name:                                                  \
    return fusion;
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
    default:
      return false;
  }
}

// The ONNX op `id` is exactly, or "" (none, or not elementwise).
constexpr const char* ElementwiseOnnxName(PrimId id) {
  switch (id) {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  case PrimId::k##Name:                                                  \
    return onnx;
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
    default:
      return "";
  }
}

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_ELEMENTWISE_TABLE_H_
