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
    case DType::kUInt8: return 1;
    case DType::kInt8: return 1;
    case DType::kInt16: return 2;
    case DType::kUInt16: return 2;
    case DType::kUInt32: return 4;
    case DType::kUInt64: return 8;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
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
    case DType::kUInt8: return "u8";
    case DType::kInt8: return "i8";
    case DType::kInt16: return "i16";
    case DType::kUInt16: return "u16";
    case DType::kUInt32: return "u32";
    case DType::kUInt64: return "u64";
    case DType::kFloat16: return "f16";
    case DType::kBFloat16: return "bf16";
  }
  return "?";
}

absl::StatusOr<DType> DTypeFromName(absl::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (name == DTypeName(static_cast<DType>(i))) return static_cast<DType>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name, "' (expected ", DTypeSetNames(kEveryType), ")"));
}

std::string DTypeSetNames(DTypeSet set) {
  std::string out;
  int remaining = __builtin_popcount(set);
  for (int i = 0; i < kNumDTypes; ++i) {
    if (!Allows(set, static_cast<DType>(i))) continue;
    --remaining;
    absl::StrAppend(&out, DTypeName(static_cast<DType>(i)),
                    remaining == 0 ? "" : (remaining == 1 ? " or " : ", "));
  }
  return out;
}

}  // namespace kgrad
