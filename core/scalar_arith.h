// The one semantics of scalar arithmetic (scalar_add ... scalar_ne), used by
// inference, constant folding, the inliner and the kernels alike, so that a value
// folded at compile time is the value the graph computes at run time.
//
//   Result type (PromoteScalarTypes): a float operand makes the result float (f64
//   if either is f64, else f32); otherwise i64 if either is i64 or both are bool,
//   else i32 (i32 with i32 or with bool). Comparisons give bool.
//   Integers wrap (two's complement) at the result's width, as integer tensors
//   do; division truncates toward zero, MIN / -1 wraps to MIN, and integer
//   division by zero is an error. f32 results are rounded to f32. Comparisons are
//   exact in the promoted type (no detour through double for i64).
#ifndef KGRAD_CORE_SCALAR_ARITH_H_
#define KGRAD_CORE_SCALAR_ARITH_H_

#include "absl/status/statusor.h"
#include "core/primitive.h"
#include "core/scalar.h"

namespace kgrad {

// Whether `id` is one of the binary scalar primitives evaluated here.
bool IsScalarBinaryOp(PrimId id);

// The dtype of `a op b` for the arithmetic ops (bool for comparisons).
DType PromoteScalarTypes(DType a, DType b);
DType ScalarResultType(PrimId id, DType a, DType b);

// `a op b`. InvalidArgument for integer division by zero or an `id` that is not
// a binary scalar primitive.
absl::StatusOr<Scalar> ApplyScalarOp(PrimId id, const Scalar& a, const Scalar& b);

}  // namespace kgrad

#endif  // KGRAD_CORE_SCALAR_ARITH_H_
