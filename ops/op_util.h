// Helpers shared by the op families: declaring PrimitiveDefs and writing
// inference functions with uniform error messages.
#ifndef KGRAD_OPS_OP_UTIL_H_
#define KGRAD_OPS_OP_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/abstract.h"
#include "core/primitive.h"

namespace kgrad {
namespace ops {

// ----- Declaring primitives ----------------------------------------------------
// A definition with fixed arity [min_inputs, max_inputs] (max -1: variadic).
PrimitiveDef MakeDef(PrimId id, int min_inputs, int max_inputs, InferFn infer,
                     std::vector<AttrSpec> attrs = {});

AttrSpec IntAttr(std::string name, int64_t default_value);
AttrSpec FloatAttr(std::string name, double default_value);
AttrSpec BoolAttr(std::string name, bool default_value);
AttrSpec StringAttr(std::string name, std::string default_value);
AttrSpec IntsAttr(std::string name, std::vector<int64_t> default_value);
AttrSpec DTypeAttr(std::string name, DType default_value);
// Attributes without a default (the primitive cannot be made without them).
AttrSpec RequiredAttr(std::string name, AttrType type);

// ----- Inference helpers ---------------------------------------------------------
// "input 1 must be a tensor, got (f32[2], i64)". Inputs are numbered from 0.
absl::Status ArgError(const InferCall& call, int i, absl::string_view expected);

absl::StatusOr<const AbstractTensor*> TensorArg(const InferCall& call, int i);
// A tensor of a floating dtype.
absl::StatusOr<const AbstractTensor*> FloatTensorArg(const InferCall& call, int i);
absl::StatusOr<const AbstractScalar*> ScalarArg(const InferCall& call, int i);
// A scalar with a constant integer value (tuple indices and the like).
absl::StatusOr<int64_t> ConstIntArg(const InferCall& call, int i);
// Tensor, or scalar treated as a rank-0 tensor of its dtype.
absl::StatusOr<AbstractPtr> TensorLikeArg(const InferCall& call, int i);

// Same dtype for inputs `indices`; error names both.
absl::Status SameDType(const InferCall& call, std::initializer_list<int> indices);

// Normalises `axes` (negative allowed) against `rank`; empty means all axes when
// `empty_is_all`. Error on duplicates or out-of-range axes.
absl::StatusOr<std::vector<int>> NormalizeAxes(const std::vector<int64_t>& axes, int rank,
                                                bool empty_is_all);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_OP_UTIL_H_
