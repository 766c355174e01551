// The symbolic value of the ONNX export: an elementwise functor's Apply
// (ops/elementwise_functors.h), evaluated on OnnxExpr operands, writes the ONNX
// nodes that compute its formula. So an op with no ONNX twin (log1p, gelu, mod,
// tanh_grad, ...) exports the very expression its kernels compute, and no formula
// is written twice:
//
//   ew::TanhGradOp::Apply(at, y, d) = d * (V(1) - y * y)
//     -> Mul(d, Sub(1, Mul(y, y)))                     (1 an initializer of y's dtype)
//
// What a V offers, in ONNX ops (opset 17):
//   + - * / and unary -      Add Sub Mul Div Neg
//   < <= > >= == on values   Less LessOrEqual Greater GreaterOrEqual Equal (masks:
//                            bool tensors); != is Not(Equal) (NaN != NaN holds)
//   & | ! and != on masks    And Or Not Xor
//   Select(mask, a, b)       Where
//   V(c)                     c as a rank-0 initializer of the other operand's dtype
//                            (the application's when no operand says); an operation
//                            on constants alone is folded in double
//   Exp Log Sin Cos Tanh Sqrt Erf Abs Floor Ceil Asin Acos Atan Sinh Cosh Asinh
//   Acosh Atanh Pow          the ONNX op of the same name
//   Rint                     Round (halves to even, as rint in the default mode)
//   Log1p, Expm1, Erfc       Log(x + 1), Exp(x) - 1, 1 - Erf(x): ONNX has none of
//                            them, so they lose the relative accuracy near 0 (in
//                            the tail, for Erfc) that the C library keeps
//   Fmod                     Mod{fmod=1}
//   Copysign(x, y)           Where(y < 0 or (y == 0 and 1/y < 0), -|x|, |x|) for
//                            floats (a NaN y counts as positive: ONNX cannot read
//                            its sign bit); Where(y < 0, -|x|, |x|) for integers
//   ShiftLeft/ShiftRight     Where(b >= width, 0, BitShift{LEFT|RIGHT}(a, b)): by the
//                            width or more, 0 (ONNX leaves that to the runtime)
//
// `using Scalar = double` sends the functors down their floating branches (their
// integer branches use C++'s integer operators); the operators above compute the
// same for the integer dtypes, where ONNX's Div truncates and Add, Mul wrap.
#ifndef KGRAD_PROTO_ONNX_ONNX_FORMULA_H_
#define KGRAD_PROTO_ONNX_ONNX_FORMULA_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "onnx_proto/onnx.pb.h"

namespace kgrad {
namespace onnx_export_internal {

class Exporter;
class Formula;

// A value of a formula: a tensor the exporter wrote (a value, or a mask: bool), or
// a constant not yet written (it takes its dtype from what it meets).
class OnnxExpr {
 public:
  using Scalar = double;
  explicit OnnxExpr(double constant) : constant_(constant) {}

  bool is_constant() const { return f_ == nullptr; }
  double constant() const { return constant_; }
  bool is_mask() const { return mask_; }
  Formula* formula() const { return f_; }
  const std::string& name() const { return name_; }

 private:
  friend class Formula;
  OnnxExpr(Formula* f, std::string name, bool mask) : f_(f), name_(std::move(name)), mask_(mask) {}
  static OnnxExpr ConstantMask(bool v) {
    OnnxExpr m(v ? 1.0 : 0.0);
    m.mask_ = true;
    return m;
  }

  Formula* f_ = nullptr;  // null for a constant
  std::string name_;      // the tensor, when f_ is set
  bool mask_ = false;     // a bool tensor (or constant) from a comparison
  double constant_ = 0;   // the value, when f_ is null
};

OnnxExpr operator+(const OnnxExpr& a, const OnnxExpr& b);
OnnxExpr operator-(const OnnxExpr& a, const OnnxExpr& b);
OnnxExpr operator*(const OnnxExpr& a, const OnnxExpr& b);
OnnxExpr operator/(const OnnxExpr& a, const OnnxExpr& b);
OnnxExpr operator-(const OnnxExpr& x);
OnnxExpr operator<(const OnnxExpr& a, const OnnxExpr& b);
OnnxExpr operator<=(const OnnxExpr& a, const OnnxExpr& b);
OnnxExpr operator>(const OnnxExpr& a, const OnnxExpr& b);
OnnxExpr operator>=(const OnnxExpr& a, const OnnxExpr& b);
OnnxExpr operator==(const OnnxExpr& a, const OnnxExpr& b);
OnnxExpr operator!=(const OnnxExpr& a, const OnnxExpr& b);
OnnxExpr operator&(const OnnxExpr& a, const OnnxExpr& b);
OnnxExpr operator|(const OnnxExpr& a, const OnnxExpr& b);
OnnxExpr operator!(const OnnxExpr& m);

// The math functions, found by argument-dependent lookup from the functors.
OnnxExpr Select(const OnnxExpr& mask, const OnnxExpr& a, const OnnxExpr& b);
OnnxExpr Exp(const OnnxExpr& x);
OnnxExpr Log(const OnnxExpr& x);
OnnxExpr Log1p(const OnnxExpr& x);
OnnxExpr Expm1(const OnnxExpr& x);
OnnxExpr Sin(const OnnxExpr& x);
OnnxExpr Cos(const OnnxExpr& x);
OnnxExpr Tanh(const OnnxExpr& x);
OnnxExpr Sqrt(const OnnxExpr& x);
OnnxExpr Erf(const OnnxExpr& x);
OnnxExpr Erfc(const OnnxExpr& x);
OnnxExpr Abs(const OnnxExpr& x);
OnnxExpr Floor(const OnnxExpr& x);
OnnxExpr Ceil(const OnnxExpr& x);
OnnxExpr Rint(const OnnxExpr& x);
OnnxExpr Asin(const OnnxExpr& x);
OnnxExpr Acos(const OnnxExpr& x);
OnnxExpr Atan(const OnnxExpr& x);
OnnxExpr Sinh(const OnnxExpr& x);
OnnxExpr Cosh(const OnnxExpr& x);
OnnxExpr Asinh(const OnnxExpr& x);
OnnxExpr Acosh(const OnnxExpr& x);
OnnxExpr Atanh(const OnnxExpr& x);
OnnxExpr Pow(const OnnxExpr& a, const OnnxExpr& b);
OnnxExpr Fmod(const OnnxExpr& a, const OnnxExpr& b);
OnnxExpr Copysign(const OnnxExpr& x, const OnnxExpr& y);
// By value, as ew::ShiftLeft<T> takes them: the non-template wins the tie.
OnnxExpr ShiftLeft(OnnxExpr a, OnnxExpr b);
OnnxExpr ShiftRight(OnnxExpr a, OnnxExpr b);

// One application's formula: where its nodes go, and the dtype of its value
// operands, which its constants take (masks' constants are bool). Lives while the
// functor's Apply runs; not shared between threads.
class Formula {
 public:
  Formula(Exporter& e, DType dtype) : e_(e), dtype_(dtype) {}
  Formula(const Formula&) = delete;
  Formula& operator=(const Formula&) = delete;

  DType dtype() const { return dtype_; }
  // The operand held by tensor `name`: a value of dtype(), or a mask.
  OnnxExpr Operand(const std::string& name, bool mask = false) { return OnnxExpr(this, name, mask); }
  // The tensor holding the result; an error for a constant (a functor whose value
  // does not depend on its operands).
  absl::StatusOr<std::string> Result(const OnnxExpr& v) const;

  // For the operators (onnx_formula.cc): a node `op`(in...) whose output is a value
  // or a mask; `attrs` sets its attributes. At least one input is a tensor.
  OnnxExpr Apply(const char* op, const std::vector<const OnnxExpr*>& in, bool mask,
                 void (*attrs)(onnx::NodeProto*) = nullptr);
  static OnnxExpr ConstantMask(bool v) { return OnnxExpr::ConstantMask(v); }

 private:
  // The tensor of `v`; a constant is written once per kind and bit pattern (-0 is
  // not 0).
  std::string NameOf(const OnnxExpr& v);

  Exporter& e_;
  DType dtype_;
  absl::flat_hash_map<std::pair<bool, uint64_t>, std::string> constants_;
};

}  // namespace onnx_export_internal
}  // namespace kgrad

#endif  // KGRAD_PROTO_ONNX_ONNX_FORMULA_H_
