#include "core/dtype.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kgrad {

size_t DTypeSize(DType t) {
  switch (t) {
#define KGRAD_DTYPE_SIZE(Name, number, T, name) \
  case DType::Name:                           \
    return sizeof(T);
    KGRAD_DTYPES(KGRAD_DTYPE_SIZE)
#undef KGRAD_DTYPE_SIZE
  }
  return 0;
}

const char* DTypeName(DType t) {
  switch (t) {
#define KGRAD_DTYPE_NAME(Name, number, T, name) \
  case DType::Name:                           \
    return name;
    KGRAD_DTYPES(KGRAD_DTYPE_NAME)
#undef KGRAD_DTYPE_NAME
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
