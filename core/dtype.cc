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
