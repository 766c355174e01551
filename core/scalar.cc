#include "core/scalar.h"

#include "absl/strings/str_cat.h"

namespace kgrad {

Scalar Scalar::FromDouble(DType t, double v) {
  if (IsFloating(t)) return Float(v, t);
  if (t == DType::kBool) return Bool(v != 0);
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
