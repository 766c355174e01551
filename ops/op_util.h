// Helpers shared by the op families: attribute specs, the checks that inference
// and the kernels (CPU and CUDA) share, and inference functions' helpers with
// uniform error messages.
#ifndef KGRAD_OPS_OP_UTIL_H_
#define KGRAD_OPS_OP_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/abstract.h"
#include "core/dtype.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace kgrad {
namespace ops {

// ----- Attribute specs (for OpDef, ops/op_def.h) ---------------------------------
AttrSpec IntAttr(std::string name, int64_t default_value);
AttrSpec FloatAttr(std::string name, double default_value);
AttrSpec BoolAttr(std::string name, bool default_value);
AttrSpec IntsAttr(std::string name, std::vector<int64_t> default_value);
AttrSpec DTypeAttr(std::string name, DType default_value);
// Attributes without a default (the primitive cannot be made without them).
AttrSpec RequiredAttr(std::string name, AttrType type);

// ----- Checks shared by inference and the kernels ------------------------------------
// What an op's checks see of one tensor input: its dtype and dims (kUnknownDim
// where inference does not know a dim). Inference makes it from an
// AbstractTensor, the CPU and CUDA kernels from a Tensor; each family's checks
// (ops/<family>.h) take it, so all three report the same text. A view: it
// borrows the shape of what it was made from.
struct TensorType {
  TensorType(DType dtype, absl::Span<const int64_t> shape) : dtype(dtype), shape(shape) {}
  TensorType(const AbstractTensor& t) : TensorType(t.dtype(), t.shape()) {}  // NOLINT
  TensorType(const Tensor& t) : TensorType(t.dtype(), t.shape()) {}          // NOLINT

  int rank() const { return static_cast<int>(shape.size()); }
  // "f32[2,?]", as Tensor::TypeString and AbstractTensor::ToString print it.
  std::string ToString() const;

  DType dtype;
  absl::Span<const int64_t> shape;
};

// Who runs a shared check. Both see the same conditions; a few messages were
// worded apart before the checks were shared and both wordings are relied on:
// inference names dtypes where kernels name whole types ("f32" / "f32[2]"),
// names the primitive in attribute errors (a kernel's errors get the node and
// primitive from the executor) and says "must be of shape".
enum class CheckedBy { kInference, kKernel };

// "input 0 must be a f32 or f64 tensor, got i32[3]" unless `t`'s dtype is allowed.
absl::Status CheckDType(int i, TensorType t, DTypeSet allowed);
// "input 0 must be a floating-point tensor, got i32[3]".
absl::Status CheckFloat(int i, TensorType t);
// "inputs 0 and 1 must have the same dtype, got f32 and f64" (inference) or "...,
// got f32[2] and f64[2]" (kernels).
absl::Status CheckSameDType(int i, TensorType a, int j, TensorType b, CheckedBy by);
// The int attribute `name` of `p` as an axis of `t`, normalised: "attribute
// 'axis' of softmax on f32[4,5]: axis 2 is out of range for rank 2 (...)".
absl::StatusOr<int> AxisAttr(const Primitive& p, const std::string& name, TensorType t);

// A tensor seen as [outer, len, inner] around one of its dims: the dims before
// `axis` merged into outer, those after it into inner (the kernels' view of an
// op along an axis).
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};
AxisSplit SplitAtAxis(absl::Span<const int64_t> shape, int axis);

// ----- Inference helpers ---------------------------------------------------------
// "input 1 must be a tensor, got (f32[2], i64)". Inputs are numbered from 0.
absl::Status ArgError(const InferCall& call, int i, absl::string_view expected);

absl::StatusOr<const AbstractTensor*> TensorArg(const InferCall& call, int i);
// Every input as a tensor type (variadic ops: concat, einsum); views of the call's
// abstracts.
absl::StatusOr<std::vector<TensorType>> TensorArgs(const InferCall& call);
// A tensor of a floating dtype.
absl::StatusOr<const AbstractTensor*> FloatTensorArg(const InferCall& call, int i);
absl::StatusOr<const AbstractScalar*> ScalarArg(const InferCall& call, int i);
// A scalar with a constant integer value (tuple indices and the like).
absl::StatusOr<int64_t> ConstIntArg(const InferCall& call, int i);

// Normalises `axes` (negative allowed) against `rank`; empty means all axes when
// `empty_is_all`. Error on duplicates or out-of-range axes.
absl::StatusOr<std::vector<int>> NormalizeAxes(const std::vector<int64_t>& axes, int rank,
                                                bool empty_is_all);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_OP_UTIL_H_
