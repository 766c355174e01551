#include "proto/onnx/onnx_formula.h"

#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "proto/onnx/onnx_exporter.h"

namespace kgrad {
namespace onnx_export_internal {

// ----- Formula --------------------------------------------------------------------------
absl::StatusOr<std::string> Formula::Result(const OnnxExpr& v) const {
  if (v.is_constant()) {
    return absl::InternalError("the elementwise formula gives a constant, not a tensor");
  }
  return v.name();
}

OnnxExpr Formula::Apply(const char* op, const std::vector<const OnnxExpr*>& in, bool mask,
                        void (*attrs)(onnx::NodeProto*)) {
  std::vector<std::string> names;
  for (const OnnxExpr* v : in) names.push_back(NameOf(*v));
  NodeProto* n = e_.Add(op, std::move(names));
  if (attrs != nullptr) attrs(n);
  return OnnxExpr(this, n->output(0), mask);
}

std::string Formula::NameOf(const OnnxExpr& v) {
  if (!v.is_constant()) return v.name();
  const double c = v.constant();
  uint64_t bits;
  std::memcpy(&bits, &c, sizeof bits);
  auto [it, fresh] = constants_.try_emplace({v.is_mask(), bits});
  if (fresh) it->second = e_.Scalar(v.is_mask() ? DType::kBool : dtype_, c);
  return it->second;
}

// ----- Operators ------------------------------------------------------------------------
namespace {

// The formula of the first operand that is a tensor; null when all are constants.
Formula* FormulaOf(std::initializer_list<const OnnxExpr*> in) {
  for (const OnnxExpr* v : in) {
    if (!v->is_constant()) return v->formula();
  }
  return nullptr;
}

// op(x), or fold(x) on a constant.
OnnxExpr Unary(const char* op, const OnnxExpr& x, double (*fold)(double)) {
  if (x.is_constant()) return OnnxExpr(fold(x.constant()));
  return x.formula()->Apply(op, {&x}, x.is_mask());
}

// op(a, b) of two values, or fold(a, b) on constants.
OnnxExpr Arith(const char* op, const OnnxExpr& a, const OnnxExpr& b, double (*fold)(double, double),
               void (*attrs)(onnx::NodeProto*) = nullptr) {
  Formula* f = FormulaOf({&a, &b});
  if (f == nullptr) return OnnxExpr(fold(a.constant(), b.constant()));
  return f->Apply(op, {&a, &b}, false, attrs);
}

// A mask: op(a, b), or fold(a, b) on constants.
OnnxExpr Logic(const char* op, const OnnxExpr& a, const OnnxExpr& b, bool (*fold)(double, double)) {
  Formula* f = FormulaOf({&a, &b});
  if (f == nullptr) return Formula::ConstantMask(fold(a.constant(), b.constant()));
  return f->Apply(op, {&a, &b}, true);
}

// a shifted by b (unsigned integers): 0 by the width or more, as the functor's
// ShiftLeft/ShiftRight and NumPy give (ONNX's BitShift leaves that case open).
OnnxExpr Shift(const OnnxExpr& a, const OnnxExpr& b, bool left) {
  Formula* f = FormulaOf({&a, &b});
  if (f == nullptr) {
    const double p = std::ldexp(1.0, static_cast<int>(b.constant()));
    return OnnxExpr(b.constant() >= 64 ? 0 : left ? a.constant() * p : std::floor(a.constant() / p));
  }
  const OnnxExpr shifted =
      f->Apply("BitShift", {&a, &b}, false,
               left ? +[](onnx::NodeProto* n) { SetString(n, "direction", "LEFT"); }
                    : +[](onnx::NodeProto* n) { SetString(n, "direction", "RIGHT"); });
  const OnnxExpr width(static_cast<double>(DTypeSize(f->dtype()) * 8));
  return Select(b >= width, OnnxExpr(0.0), shifted);
}

}  // namespace

OnnxExpr operator+(const OnnxExpr& a, const OnnxExpr& b) {
  return Arith("Add", a, b, [](double x, double y) { return x + y; });
}
OnnxExpr operator-(const OnnxExpr& a, const OnnxExpr& b) {
  return Arith("Sub", a, b, [](double x, double y) { return x - y; });
}
OnnxExpr operator*(const OnnxExpr& a, const OnnxExpr& b) {
  return Arith("Mul", a, b, [](double x, double y) { return x * y; });
}
OnnxExpr operator/(const OnnxExpr& a, const OnnxExpr& b) {
  return Arith("Div", a, b, [](double x, double y) { return x / y; });
}
OnnxExpr operator-(const OnnxExpr& x) {
  return Unary("Neg", x, [](double v) { return -v; });
}

OnnxExpr operator<(const OnnxExpr& a, const OnnxExpr& b) {
  return Logic("Less", a, b, [](double x, double y) { return x < y; });
}
OnnxExpr operator<=(const OnnxExpr& a, const OnnxExpr& b) {
  return Logic("LessOrEqual", a, b, [](double x, double y) { return x <= y; });
}
OnnxExpr operator>(const OnnxExpr& a, const OnnxExpr& b) {
  return Logic("Greater", a, b, [](double x, double y) { return x > y; });
}
OnnxExpr operator>=(const OnnxExpr& a, const OnnxExpr& b) {
  return Logic("GreaterOrEqual", a, b, [](double x, double y) { return x >= y; });
}
OnnxExpr operator==(const OnnxExpr& a, const OnnxExpr& b) {
  return Logic("Equal", a, b, [](double x, double y) { return x == y; });
}
// Masks differ where exactly one holds (Xor); values where they are not equal
// (NaN included).
OnnxExpr operator!=(const OnnxExpr& a, const OnnxExpr& b) {
  if (a.is_mask() || b.is_mask()) {
    return Logic("Xor", a, b, [](double x, double y) { return (x != 0) != (y != 0); });
  }
  return !(a == b);
}
OnnxExpr operator&(const OnnxExpr& a, const OnnxExpr& b) {
  return Logic("And", a, b, [](double x, double y) { return x != 0 && y != 0; });
}
OnnxExpr operator|(const OnnxExpr& a, const OnnxExpr& b) {
  return Logic("Or", a, b, [](double x, double y) { return x != 0 || y != 0; });
}
OnnxExpr operator!(const OnnxExpr& m) {
  if (m.is_constant()) return Formula::ConstantMask(m.constant() == 0);
  return m.formula()->Apply("Not", {&m}, true);
}

OnnxExpr Select(const OnnxExpr& mask, const OnnxExpr& a, const OnnxExpr& b) {
  if (mask.is_constant()) return mask.constant() != 0 ? a : b;
  return mask.formula()->Apply("Where", {&mask, &a, &b}, a.is_mask() && b.is_mask());
}

// ----- Math functions ---------------------------------------------------------------------
#define KGRAD_ONNX_UNARY(Name, op, fold) \
  OnnxExpr Name(const OnnxExpr& x) { return Unary(op, x, [](double v) { return fold(v); }); }
KGRAD_ONNX_UNARY(Exp, "Exp", std::exp)
KGRAD_ONNX_UNARY(Log, "Log", std::log)
KGRAD_ONNX_UNARY(Sin, "Sin", std::sin)
KGRAD_ONNX_UNARY(Cos, "Cos", std::cos)
KGRAD_ONNX_UNARY(Tanh, "Tanh", std::tanh)
KGRAD_ONNX_UNARY(Sqrt, "Sqrt", std::sqrt)
KGRAD_ONNX_UNARY(Erf, "Erf", std::erf)
KGRAD_ONNX_UNARY(Abs, "Abs", std::fabs)
KGRAD_ONNX_UNARY(Floor, "Floor", std::floor)
KGRAD_ONNX_UNARY(Ceil, "Ceil", std::ceil)
KGRAD_ONNX_UNARY(Rint, "Round", std::nearbyint)
KGRAD_ONNX_UNARY(Asin, "Asin", std::asin)
KGRAD_ONNX_UNARY(Acos, "Acos", std::acos)
KGRAD_ONNX_UNARY(Atan, "Atan", std::atan)
KGRAD_ONNX_UNARY(Sinh, "Sinh", std::sinh)
KGRAD_ONNX_UNARY(Cosh, "Cosh", std::cosh)
KGRAD_ONNX_UNARY(Asinh, "Asinh", std::asinh)
KGRAD_ONNX_UNARY(Acosh, "Acosh", std::acosh)
KGRAD_ONNX_UNARY(Atanh, "Atanh", std::atanh)
#undef KGRAD_ONNX_UNARY

OnnxExpr Log1p(const OnnxExpr& x) { return Log(x + OnnxExpr(1.0)); }
OnnxExpr Expm1(const OnnxExpr& x) { return Exp(x) - OnnxExpr(1.0); }
OnnxExpr Erfc(const OnnxExpr& x) { return OnnxExpr(1.0) - Erf(x); }

OnnxExpr Pow(const OnnxExpr& a, const OnnxExpr& b) {
  return Arith("Pow", a, b, [](double x, double y) { return std::pow(x, y); });
}
OnnxExpr Fmod(const OnnxExpr& a, const OnnxExpr& b) {
  return Arith("Mod", a, b, [](double x, double y) { return std::fmod(x, y); },
               [](onnx::NodeProto* n) { SetInt(n, "fmod", 1); });
}

// |x| with y's sign: y's sign bit is set where y < 0, or y is -0 (1 / -0 = -inf).
OnnxExpr Copysign(const OnnxExpr& x, const OnnxExpr& y) {
  if (y.is_constant()) {
    if (x.is_constant()) return OnnxExpr(std::copysign(x.constant(), y.constant()));
    return std::signbit(y.constant()) ? -Abs(x) : Abs(x);
  }
  const OnnxExpr zero(0.0);
  OnnxExpr negative = y < zero;
  if (IsDifferentiable(y.formula()->dtype())) {
    negative = negative | ((y == zero) & (OnnxExpr(1.0) / y < zero));
  }
  const OnnxExpr magnitude = Abs(x);
  return Select(negative, -magnitude, magnitude);
}

OnnxExpr ShiftLeft(OnnxExpr a, OnnxExpr b) { return Shift(a, b, true); }
OnnxExpr ShiftRight(OnnxExpr a, OnnxExpr b) { return Shift(a, b, false); }

}  // namespace onnx_export_internal
}  // namespace kgrad
