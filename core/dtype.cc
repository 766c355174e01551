#include "core/dtype.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kgrad {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kBool: return 1;
  }
  return 0;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32: return "f32";
    case DType::kFloat64: return "f64";
    case DType::kInt32: return "i32";
    case DType::kInt64: return "i64";
    case DType::kBool: return "bool";
  }
  return "?";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  if (name == "f32" || name == "float32") return DType::kFloat32;
  if (name == "f64" || name == "float64") return DType::kFloat64;
  if (name == "i32" || name == "int32") return DType::kInt32;
  if (name == "i64" || name == "int64") return DType::kInt64;
  if (name == "bool") return DType::kBool;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dtype '", name, "'; expected one of f32, f64, i32, i64, bool"));
}

}  // namespace kgrad
