// Scalar: a typed number or bool outside any tensor (loop counters, tuple indices,
// attributes that flow as data).
#ifndef KGRAD_CORE_SCALAR_H_
#define KGRAD_CORE_SCALAR_H_

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace kgrad {

class Scalar {
 public:
  Scalar() : dtype_(DType::kInt64), i_(0) {}
  static Scalar Int(int64_t v, DType t = DType::kInt64) { Scalar s; s.dtype_ = t; s.i_ = v; return s; }
  static Scalar Float(double v, DType t = DType::kFloat64) { Scalar s; s.dtype_ = t; s.f_ = v; return s; }
  static Scalar Bool(bool v) { Scalar s; s.dtype_ = DType::kBool; s.b_ = v; return s; }
  // `v` converted to `t` (integers: truncated toward zero, saturating at the
  // type's range, NaN to 0).
  static Scalar FromDouble(DType t, double v);

  DType dtype() const { return dtype_; }
  bool is_float() const { return IsFloating(dtype_); }
  bool is_int() const { return IsInteger(dtype_); }
  bool is_bool() const { return dtype_ == DType::kBool; }

  int64_t AsInt() const { return is_float() ? static_cast<int64_t>(f_) : is_bool() ? b_ : i_; }
  double AsDouble() const { return is_float() ? f_ : is_bool() ? (b_ ? 1.0 : 0.0) : static_cast<double>(i_); }
  bool AsBool() const { return is_float() ? f_ != 0 : is_bool() ? b_ : i_ != 0; }

  bool operator==(const Scalar& o) const;
  bool operator!=(const Scalar& o) const { return !(*this == o); }
  // "3", "2.5", "true"; the printer adds the dtype where it is not the default.
  std::string ToString() const;

 private:
  DType dtype_;
  union {
    int64_t i_;
    double f_;
    bool b_;
  };
};

}  // namespace kgrad

#endif  // KGRAD_CORE_SCALAR_H_
