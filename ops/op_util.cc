#include "ops/op_util.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"

namespace kgrad {
namespace ops {

AttrSpec IntAttr(std::string name, int64_t v) {
  return AttrSpec{std::move(name), AttrType::kInt, AttrValue(v)};
}
AttrSpec FloatAttr(std::string name, double v) {
  return AttrSpec{std::move(name), AttrType::kFloat, AttrValue(v)};
}
AttrSpec BoolAttr(std::string name, bool v) {
  return AttrSpec{std::move(name), AttrType::kBool, AttrValue(v)};
}
AttrSpec IntsAttr(std::string name, std::vector<int64_t> v) {
  return AttrSpec{std::move(name), AttrType::kInts, AttrValue(std::move(v))};
}
AttrSpec DTypeAttr(std::string name, DType v) {
  return AttrSpec{std::move(name), AttrType::kDType, AttrValue(v)};
}
AttrSpec RequiredAttr(std::string name, AttrType type) {
  return AttrSpec{std::move(name), type, std::nullopt};
}

std::string TensorType::ToString() const {
  return absl::StrCat(DTypeName(dtype), ShapeToString(shape));
}

absl::Status CheckDType(int i, TensorType t, DTypeSet allowed) {
  if (Allows(allowed, t.dtype)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "input ", i, " must be a ", DTypeSetNames(allowed), " tensor, got ", t.ToString()));
}

absl::Status CheckFloat(int i, TensorType t) {
  if (IsFloating(t.dtype)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("input ", i, " must be a floating-point tensor, got ", t.ToString()));
}

absl::Status CheckSameDType(int i, TensorType a, int j, TensorType b, CheckedBy by) {
  if (a.dtype == b.dtype) return absl::OkStatus();
  const bool types = by == CheckedBy::kKernel;
  return absl::InvalidArgumentError(
      absl::StrCat("inputs ", i, " and ", j, " must have the same dtype, got ",
                   types ? a.ToString() : DTypeName(a.dtype), " and ",
                   types ? b.ToString() : DTypeName(b.dtype)));
}

absl::StatusOr<int> AxisAttr(const Primitive& p, const std::string& name, TensorType t) {
  absl::StatusOr<int> axis = NormalizeAxis(p.GetInt(name), t.rank());
  if (axis.ok()) return axis;
  return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' of ", p.name(), " on ",
                                                 t.ToString(), ": ", axis.status().message()));
}

AxisSplit SplitAtAxis(absl::Span<const int64_t> shape, int axis) {
  AxisSplit s;
  s.len = shape[axis];
  for (int i = 0; i < axis; ++i) s.outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) s.inner *= shape[i];
  return s;
}

absl::Status ArgError(const InferCall& call, int i, absl::string_view expected) {
  std::string got = i < static_cast<int>(call.args.size()) ? AbstractToString(call.args[i])
                                                           : "nothing";
  return absl::InvalidArgumentError(
      absl::StrCat("input ", i, " must be ", expected, ", got ", got));
}

absl::StatusOr<const AbstractTensor*> TensorArg(const InferCall& call, int i) {
  const AbstractTensor* t = i < static_cast<int>(call.args.size()) ? AsTensor(call.args[i]) : nullptr;
  if (t == nullptr) return ArgError(call, i, "a tensor");
  return t;
}

absl::StatusOr<std::vector<TensorType>> TensorArgs(const InferCall& call) {
  std::vector<TensorType> out;
  for (int i = 0; i < static_cast<int>(call.args.size()); ++i) {
    KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorArg(call, i));
    out.push_back(*t);
  }
  return out;
}

absl::StatusOr<const AbstractTensor*> FloatTensorArg(const InferCall& call, int i) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorArg(call, i));
  KGRAD_RETURN_IF_ERROR(CheckFloat(i, *t));
  return t;
}

absl::StatusOr<const AbstractScalar*> ScalarArg(const InferCall& call, int i) {
  const AbstractScalar* s = i < static_cast<int>(call.args.size()) ? AsScalar(call.args[i]) : nullptr;
  if (s == nullptr) return ArgError(call, i, "a scalar");
  return s;
}

absl::StatusOr<int64_t> ConstIntArg(const InferCall& call, int i) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractScalar* s, ScalarArg(call, i));
  if (!IsInteger(s->dtype()) || !s->value().has_value()) {
    return ArgError(call, i, "a constant integer");
  }
  return s->value()->AsInt();
}

absl::StatusOr<std::vector<int>> NormalizeAxes(const std::vector<int64_t>& axes, int rank,
                                                bool empty_is_all) {
  std::vector<int> out;
  if (axes.empty() && empty_is_all) {
    for (int i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t a : axes) {
    KGRAD_ASSIGN_OR_RETURN(int n, NormalizeAxis(a, rank));
    if (std::find(out.begin(), out.end(), n) != out.end()) {
      return absl::InvalidArgumentError(absl::StrCat("axis ", a, " is repeated"));
    }
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ops
}  // namespace kgrad
