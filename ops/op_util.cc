#include "ops/op_util.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"

namespace kgrad {
namespace ops {

PrimitiveDef MakeDef(PrimId id, int min_inputs, int max_inputs, InferFn infer,
                     std::vector<AttrSpec> attrs) {
  PrimitiveDef d;
  d.id = id;
  d.name = PrimIdName(id);
  d.min_inputs = min_inputs;
  d.max_inputs = max_inputs;
  d.infer = infer;
  d.attrs = std::move(attrs);
  return d;
}

AttrSpec IntAttr(std::string name, int64_t v) {
  return AttrSpec{std::move(name), AttrType::kInt, AttrValue(v)};
}
AttrSpec FloatAttr(std::string name, double v) {
  return AttrSpec{std::move(name), AttrType::kFloat, AttrValue(v)};
}
AttrSpec BoolAttr(std::string name, bool v) {
  return AttrSpec{std::move(name), AttrType::kBool, AttrValue(v)};
}
AttrSpec StringAttr(std::string name, std::string v) {
  return AttrSpec{std::move(name), AttrType::kString, AttrValue(std::move(v))};
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

absl::StatusOr<const AbstractTensor*> FloatTensorArg(const InferCall& call, int i) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorArg(call, i));
  if (!IsFloating(t->dtype())) return ArgError(call, i, "a floating-point tensor");
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

absl::StatusOr<AbstractPtr> TensorLikeArg(const InferCall& call, int i) {
  if (i < static_cast<int>(call.args.size())) {
    if (AsTensor(call.args[i]) != nullptr) return call.args[i];
    if (const AbstractScalar* s = AsScalar(call.args[i])) {
      return MakeAbstractTensor(s->dtype(), {});
    }
  }
  return ArgError(call, i, "a tensor or scalar");
}

absl::Status SameDType(const InferCall& call, std::initializer_list<int> indices) {
  std::optional<DType> first;
  int first_i = 0;
  for (int i : indices) {
    KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorArg(call, i));
    if (!first.has_value()) {
      first = t->dtype();
      first_i = i;
    } else if (t->dtype() != *first) {
      return absl::InvalidArgumentError(absl::StrCat(
          "inputs ", first_i, " and ", i, " must have the same dtype, got ",
          DTypeName(*first), " and ", DTypeName(t->dtype())));
    }
  }
  return absl::OkStatus();
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
