#include "core/scalar.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace kgrad {

Scalar Scalar::FromDouble(DType t, double v) {
  if (IsFloating(t)) return Float(v, t);
  if (t == DType::kBool) return Bool(v != 0);
  // Truncation toward zero, saturating at the type's range; NaN becomes 0 (a cast
  // of an out-of-range double is undefined behaviour in C++).
  double lo = t == DType::kInt32 ? -2147483648.0 : -9223372036854775808.0;
  double hi = t == DType::kInt32 ? 2147483647.0 : 9223372036854775807.0;
  if (std::isnan(v)) return Int(0, t);
  if (v <= lo) return Int(t == DType::kInt32 ? INT32_MIN : INT64_MIN, t);
  if (v >= hi) return Int(t == DType::kInt32 ? INT32_MAX : INT64_MAX, t);
  return Int(static_cast<int64_t>(v), t);
}

bool Scalar::operator==(const Scalar& o) const {
  if (dtype_ != o.dtype_) return false;
  if (is_float()) return f_ == o.f_;
  if (is_bool()) return b_ == o.b_;
  return i_ == o.i_;
}

std::string Scalar::ToString() const {
  if (is_bool()) return b_ ? "true" : "false";
  if (is_float()) {
    std::string s = absl::StrCat(f_);
    // Keep floats recognisable as floats: "2" would read back as an integer.
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
    return s;
  }
  return absl::StrCat(i_);
}

}  // namespace kgrad
