// Elementwise primitives: unary maps, binary maps with NumPy broadcasting, and
// select. No implicit dtype promotion anywhere: binary operands must share one
// dtype, and scalars are not accepted (lift them with scalar_to_tensor first), so
// that a graph's dtypes are exactly what its author wrote. The gradient rules
// (one per differentiable primitive) follow the inference functions.
#include "ops/elementwise.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/bprop_context.h"
#include "ops/op_def.h"
#include "ops/op_util.h"
#include "ops/shape_value.h"

namespace kgrad {
namespace ops {

ew::Attrs ElementwiseAttrs(const Primitive& p) {
  switch (p.id()) {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  case PrimId::k##Name:                                                  \
    return ew::Name##Op::Read(p);
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
    default:
      return {};
  }
}

// ----- Checks shared with the kernels ------------------------------------------------
absl::Status CheckUnary(PrimId id, TensorType x) {
  return CheckDType(0, x, ElementwiseDTypes(id));
}

absl::StatusOr<Shape> BinaryShape(PrimId id, TensorType x, TensorType y, CheckedBy by) {
  KGRAD_RETURN_IF_ERROR(CheckSameDType(0, x, 1, y, by));
  KGRAD_RETURN_IF_ERROR(CheckDType(0, x, ElementwiseDTypes(id)));
  return BroadcastShapes(x.shape, y.shape);
}

absl::StatusOr<Shape> SelectShape(TensorType cond, TensorType a, TensorType b, CheckedBy by) {
  KGRAD_RETURN_IF_ERROR(CheckDType(0, cond, kBoolType));
  KGRAD_RETURN_IF_ERROR(CheckSameDType(1, a, 2, b, by));
  KGRAD_ASSIGN_OR_RETURN(Shape ab, BroadcastShapes(a.shape, b.shape));
  return BroadcastShapes(cond.shape, ab);
}

namespace {

// ----- Inference ------------------------------------------------------------------
// Each op's dtypes and whether it gives bool are its row of the table
// (elementwise_table.inc), read here and by the kernels.

// The result's type is often exactly an input's (same dtype and shape, no shape
// value): that input's abstract is shared rather than another made (a gradient
// has hundreds of thousands of such nodes).
bool IsExactly(const AbstractTensor* t, DType dtype, const Shape& shape) {
  return !t->value().has_value() && t->dtype() == dtype && t->shape() == shape;
}

// y = f(x): same dtype and shape as x.
absl::StatusOr<AbstractPtr> InferUnary(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_RETURN_IF_ERROR(CheckUnary(c.prim.id(), *x));
  std::optional<Shape> value = ArithValue(c);
  if (!value.has_value() && !x->value().has_value()) return c.args[0];
  return WithShapeValue(MakeAbstractTensor(x->dtype(), x->shape()), value);
}

// z = f(x, y) with NumPy broadcasting; both inputs of one dtype the primitive
// accepts; the output has that dtype, or bool for comparisons.
absl::StatusOr<AbstractPtr> InferBinary(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* y, TensorArg(c, 1));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, BinaryShape(c.prim.id(), *x, *y, CheckedBy::kInference));
  const DType dtype = ElementwiseBoolOutput(c.prim.id()) ? DType::kBool : x->dtype();
  std::optional<Shape> value = ArithValue(c);
  if (!value.has_value() && IsExactly(x, dtype, shape)) return c.args[0];
  if (!value.has_value() && IsExactly(y, dtype, shape)) return c.args[1];
  return WithShapeValue(MakeAbstractTensor(dtype, std::move(shape)), value);
}

// bit_shift: a binary map whose direction must be "left" or "right".
absl::StatusOr<AbstractPtr> InferBitShift(const InferCall& c) {
  const std::string& d = c.prim.GetString("direction");
  if (d != "left" && d != "right") {
    return absl::InvalidArgumentError(absl::StrCat(
        "bit_shift: attribute 'direction' must be \"left\" or \"right\", got \"", d, "\""));
  }
  return InferBinary(c);
}

// select(cond, a, b) = cond ? a : b elementwise; the three shapes broadcast together.
absl::StatusOr<AbstractPtr> InferSelect(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* cond, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* a, TensorArg(c, 1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* b, TensorArg(c, 2));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, SelectShape(*cond, *a, *b, CheckedBy::kInference));
  return MakeAbstractTensor(a->dtype(), std::move(shape));
}

// ----- Gradient rules -------------------------------------------------------------
// Each rule emits graph nodes built from differentiable primitives (and the
// zero-gradient comparisons, sign and *_like constants as masks), so its output
// can be differentiated again. Unary maps state only dy/dx (JAX's defjvp):
// dx = dy * f'(x). Binary maps broadcast, so each input's sensitivity is summed
// back to the input's shape (SumToInput).

// A rank-0 constant of input i's dtype (inputs of these rules are tensors whose
// dtype inference has fixed, so this only fails on an ill-typed primal).
#define KGRAD_SCALAR(name, value, i) KGRAD_ASSIGN_OR_RETURN(AnfNode* name, c.ScalarLike(value, i))

// dx = dy * dydx.
absl::Status Chain(BpropContext& c, AnfNode* dydx) {
  c.SetGrad(0, c.Mul(c.Dout(), dydx));
  return absl::OkStatus();
}

// Forward: y = -x.  Backward: dx = -dy.
absl::Status BpropNeg(BpropContext& c) {
  c.SetGrad(0, c.Neg(c.Dout()));
  return absl::OkStatus();
}

// Forward: y = e^x.  Backward: dx = dy * y.
// Residuals: save_outputs (default) y; save_inputs, recompute x, y = e^x again.
absl::Status BpropExp(BpropContext& c) { return Chain(c, c.OutOrRecomputed()); }

// Forward: y = ln x.  Backward: dx = dy / x.
absl::Status BpropLog(BpropContext& c) {
  c.SetGrad(0, c.Div(c.Dout(), c.I(0)));
  return absl::OkStatus();
}

// Forward: y = ln(1 + x).  Backward: dx = dy / (1 + x).
absl::Status BpropLog1p(BpropContext& c) {
  KGRAD_SCALAR(one, 1.0, 0);
  c.SetGrad(0, c.Div(c.Dout(), c.Add(one, c.I(0))));
  return absl::OkStatus();
}

// Forward: y = e^x - 1.  Backward: dx = dy * e^x (not y + 1, which loses the
// relative precision of e^x for very negative x).
absl::Status BpropExpm1(BpropContext& c) { return Chain(c, c.Exp(c.I(0))); }

// The forms of a rule that reads its input x (sin, cos): save_inputs, the
// default, and recompute keep x; save_outputs keeps a companion of x computed
// in the forward pass.
bool SavesCompanion(BpropContext& c) {
  return c.Form({ResidualForm::kSaveInputs, ResidualForm::kSaveOutputs,
                 ResidualForm::kRecompute}) == ResidualForm::kSaveOutputs;
}

// Forward: y = sin x.  Backward: dx = dy * cos x = sin_grad(x, dy).
// Residuals: save_inputs (default), recompute: x, cos x in the backward;
// save_outputs: cos x computed in the forward beside y, dx = dy * (cos x), the
// same product sin_grad computes.
absl::Status BpropSin(BpropContext& c) {
  if (SavesCompanion(c)) return Chain(c, c.InForward(PrimId::kCos, {c.I(0)}));
  c.SetGrad(0, c.Op(PrimId::kSinGrad, {c.I(0), c.Dout()}));
  return absl::OkStatus();
}

// Forward: y = cos x.  Backward: dx = -(dy * sin x) = cos_grad(x, dy).
// Residuals: as sin's, the companion sin x.
absl::Status BpropCos(BpropContext& c) {
  if (SavesCompanion(c)) {
    c.SetGrad(0, c.Neg(c.Mul(c.Dout(), c.InForward(PrimId::kSin, {c.I(0)}))));
    return absl::OkStatus();
  }
  c.SetGrad(0, c.Op(PrimId::kCosGrad, {c.I(0), c.Dout()}));
  return absl::OkStatus();
}

// Forward: g = sin_grad(x, d) = d cos x.
// Backward: dx = sum_to(cos_grad(x, d dg), x) (= -d sin x dg),
// dd = sum_to(sin_grad(x, dg), d).
absl::Status BpropSinGrad(BpropContext& c) {
  c.SetGrad(0, c.SumToInput(c.Op(PrimId::kCosGrad, {c.I(0), c.Mul(c.I(1), c.Dout())}), 0));
  c.SetGrad(1, c.SumToInput(c.Op(PrimId::kSinGrad, {c.I(0), c.Dout()}), 1));
  return absl::OkStatus();
}

// Forward: g = cos_grad(x, d) = -d sin x.
// Backward: dx = sum_to(-(d dg) cos x, x) = sum_to(-sin_grad(x, d dg), x),
// dd = sum_to(cos_grad(x, dg), d).
absl::Status BpropCosGrad(BpropContext& c) {
  c.SetGrad(0, c.SumToInput(c.Neg(c.Op(PrimId::kSinGrad, {c.I(0), c.Mul(c.I(1), c.Dout())})), 0));
  c.SetGrad(1, c.SumToInput(c.Op(PrimId::kCosGrad, {c.I(0), c.Dout()}), 1));
  return absl::OkStatus();
}

// Forward: y = tanh x.  Backward: dx = dy * (1 - y^2).
// Residuals: save_outputs (default) y; save_inputs, recompute x, y again.
absl::Status BpropTanh(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kTanhGrad, {c.OutOrRecomputed(), c.Dout()}));
  return absl::OkStatus();
}

// Forward: y = sigmoid(x).  Backward: dx = dy * y * (1 - y) = sigmoid_grad(y, dy).
// Residuals: as tanh's.
absl::Status BpropSigmoid(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kSigmoidGrad, {c.OutOrRecomputed(), c.Dout()}));
  return absl::OkStatus();
}

// Forward: g = tanh_grad(y, d) = d * (1 - y^2).
// Backward: dy = sum_to(-2 y d dg, y), dd = sum_to(tanh_grad(y, dg), d).
absl::Status BpropTanhGrad(BpropContext& c) {
  KGRAD_SCALAR(minus_two, -2.0, 0);
  c.SetGrad(0, c.SumToInput(c.Mul(c.Mul(minus_two, c.I(0)), c.Mul(c.I(1), c.Dout())), 0));
  c.SetGrad(1, c.SumToInput(c.Op(PrimId::kTanhGrad, {c.I(0), c.Dout()}), 1));
  return absl::OkStatus();
}

// Forward: g = sigmoid_grad(y, d) = d * y * (1 - y).
// Backward: dy = sum_to(d (1 - 2y) dg, y), dd = sum_to(sigmoid_grad(y, dg), d).
absl::Status BpropSigmoidGrad(BpropContext& c) {
  KGRAD_SCALAR(one, 1.0, 0);
  AnfNode* one_minus_2y = c.Sub(one, c.Add(c.I(0), c.I(0)));
  c.SetGrad(0, c.SumToInput(c.Mul(c.Mul(c.I(1), one_minus_2y), c.Dout()), 0));
  c.SetGrad(1, c.SumToInput(c.Op(PrimId::kSigmoidGrad, {c.I(0), c.Dout()}), 1));
  return absl::OkStatus();
}

// Forward: y = relu(x) = x < 0 ? 0 : x.  Backward: dx = x > 0 ? dy : 0 (0 at the
// kink x = 0, and for NaN) = relu_grad(y, dy): y > 0 exactly where x > 0, so the
// rule reads the output, which the next layer keeps alive anyway, rather than
// holding x (or a mask of it) until the backward pass.
// Residuals: save_outputs (default) y; save_inputs, recompute x itself, the
// same sign test (nothing to recompute).
absl::Status BpropRelu(BpropContext& c) {
  const ResidualForm f =
      c.Form({ResidualForm::kSaveOutputs, ResidualForm::kSaveInputs, ResidualForm::kRecompute});
  AnfNode* sign = f == ResidualForm::kSaveOutputs ? c.Out() : c.I(0);
  c.SetGrad(0, c.Op(PrimId::kReluGrad, {sign, c.Dout()}));
  return absl::OkStatus();
}

// Forward: g = relu_grad(x, d) = x > 0 ? d : 0, piecewise constant in x (relu's
// rule passes y = relu(x) as x: same sign test).
// Backward: dx = 0 (almost everywhere), dd = sum_to(relu_grad(x, dg), d).
absl::Status BpropReluGrad(BpropContext& c) {
  c.SetGrad(1, c.SumToInput(c.Op(PrimId::kReluGrad, {c.I(0), c.Dout()}), 1));
  return absl::OkStatus();
}

// Forward: y = thresholded_relu(x){alpha} = x > alpha ? x : 0.
// Backward: dx = x > alpha ? dy : 0 (0 at the jump x = alpha, and for NaN).
absl::Status BpropThresholdedRelu(BpropContext& c) {
  KGRAD_SCALAR(alpha, c.prim().GetFloat("alpha"), 0);
  KGRAD_SCALAR(zero, 0.0, 0);
  c.SetGrad(0, c.Select(c.Op(PrimId::kGreater, {c.I(0), alpha}), c.Dout(), zero));
  return absl::OkStatus();
}

// Forward: y = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2.
// Backward: dx = dy * (Phi(x) + x phi(x)), phi(x) = e^(-x^2/2) / sqrt(2 pi).
absl::Status GeluExact(BpropContext& c) {
  AnfNode* x = c.I(0);
  KGRAD_SCALAR(half, 0.5, 0);
  KGRAD_SCALAR(one, 1.0, 0);
  KGRAD_SCALAR(minus_half, -0.5, 0);
  KGRAD_SCALAR(rsqrt2, 0.70710678118654752440, 0);
  KGRAD_SCALAR(rsqrt_2pi, 0.39894228040143267794, 0);
  AnfNode* cdf = c.Mul(half, c.Add(one, c.Op(PrimId::kErf, {c.Mul(x, rsqrt2)})));
  AnfNode* pdf = c.Mul(rsqrt_2pi, c.Exp(c.Mul(minus_half, c.Square(x))));
  return Chain(c, c.Add(cdf, c.Mul(x, pdf)));
}

// Forward: y = x (1 + tanh u) / 2 = x s, u = k (x + a x^3), s = sigmoid(2u),
// k = sqrt(2/pi), a = 0.044715.
// Backward: dx = dy * (s + 2 k x s (1 - s) (1 + 3 a x^2)) (1 - tanh^2 u = 4 s (1 - s);
// the sigmoid form avoids the cancellation of 1 + tanh u, as the kernel does).
absl::Status GeluTanh(BpropContext& c) {
  AnfNode* x = c.I(0);
  KGRAD_SCALAR(one, 1.0, 0);
  KGRAD_SCALAR(a, 0.044715, 0);
  KGRAD_SCALAR(three_a, 3 * 0.044715, 0);
  KGRAD_SCALAR(two_k, 2 * 0.79788456080286535588, 0);
  AnfNode* x2 = c.Square(x);
  AnfNode* two_u = c.Mul(two_k, c.Mul(x, c.Add(one, c.Mul(a, x2))));
  AnfNode* s = c.Op(PrimId::kSigmoid, {two_u});
  AnfNode* ds = c.Mul(s, c.Sub(one, s));
  AnfNode* slope = c.Mul(c.Mul(two_k, x), c.Mul(ds, c.Add(one, c.Mul(three_a, x2))));
  return Chain(c, c.Add(s, slope));
}

absl::Status BpropGelu(BpropContext& c) {
  return c.prim().GetBool("approximate") ? GeluTanh(c) : GeluExact(c);
}

// Forward: y = ln(1 + e^x).  Backward: dx = dy * sigmoid(x).
absl::Status BpropSoftplus(BpropContext& c) {
  return Chain(c, c.Op(PrimId::kSigmoid, {c.I(0)}));
}

// Forward: y = sqrt x.  Backward: dx = dy * 0.5 / y.
absl::Status BpropSqrt(BpropContext& c) {
  KGRAD_SCALAR(half, 0.5, 0);
  return Chain(c, c.Div(half, c.Out()));
}

// Forward: y = 1 / sqrt x.  Backward: dx = dy * (-0.5 y / x).
absl::Status BpropRsqrt(BpropContext& c) {
  KGRAD_SCALAR(minus_half, -0.5, 0);
  return Chain(c, c.Mul(minus_half, c.Div(c.Out(), c.I(0))));
}

// Forward: y = |x|.  Backward: dx = dy * sign(x) (0 at the kink x = 0).
absl::Status BpropAbs(BpropContext& c) { return Chain(c, c.Op(PrimId::kSign, {c.I(0)})); }

// Forward: y = x^2.  Backward: dx = dy * 2x.
absl::Status BpropSquare(BpropContext& c) {
  KGRAD_SCALAR(two, 2.0, 0);
  return Chain(c, c.Mul(two, c.I(0)));
}

// Forward: y = 1 / x.  Backward: dx = -(dy * y^2).
absl::Status BpropReciprocal(BpropContext& c) {
  c.SetGrad(0, c.Neg(c.Mul(c.Dout(), c.Square(c.Out()))));
  return absl::OkStatus();
}

// Forward: y = erf x.  Backward: dx = dy * 2/sqrt(pi) e^(-x^2).
absl::Status BpropErf(BpropContext& c) {
  KGRAD_SCALAR(two_rsqrt_pi, 1.12837916709551257390, 0);
  return Chain(c, c.Mul(two_rsqrt_pi, c.Exp(c.Neg(c.Square(c.I(0))))));
}

// Forward: y = asin x.  Backward: dx = dy / sqrt(1 - x^2).
absl::Status BpropAsin(BpropContext& c) {
  KGRAD_SCALAR(one, 1.0, 0);
  return Chain(c, c.Op(PrimId::kRsqrt, {c.Sub(one, c.Square(c.I(0)))}));
}

// Forward: y = acos x.  Backward: dx = -dy / sqrt(1 - x^2).
absl::Status BpropAcos(BpropContext& c) {
  KGRAD_SCALAR(one, 1.0, 0);
  return Chain(c, c.Neg(c.Op(PrimId::kRsqrt, {c.Sub(one, c.Square(c.I(0)))})));
}

// Forward: y = atan x.  Backward: dx = dy / (1 + x^2).
absl::Status BpropAtan(BpropContext& c) {
  KGRAD_SCALAR(one, 1.0, 0);
  c.SetGrad(0, c.Div(c.Dout(), c.Add(one, c.Square(c.I(0)))));
  return absl::OkStatus();
}

// Forward: y = sinh x.  Backward: dx = dy * cosh x.
absl::Status BpropSinh(BpropContext& c) { return Chain(c, c.Op(PrimId::kCosh, {c.I(0)})); }

// Forward: y = cosh x.  Backward: dx = dy * sinh x.
absl::Status BpropCosh(BpropContext& c) { return Chain(c, c.Op(PrimId::kSinh, {c.I(0)})); }

// Forward: y = asinh x.  Backward: dx = dy / sqrt(x^2 + 1).
absl::Status BpropAsinh(BpropContext& c) {
  KGRAD_SCALAR(one, 1.0, 0);
  return Chain(c, c.Op(PrimId::kRsqrt, {c.Add(c.Square(c.I(0)), one)}));
}

// Forward: y = acosh x (x >= 1).  Backward: dx = dy / sqrt(x^2 - 1).
absl::Status BpropAcosh(BpropContext& c) {
  KGRAD_SCALAR(one, 1.0, 0);
  return Chain(c, c.Op(PrimId::kRsqrt, {c.Sub(c.Square(c.I(0)), one)}));
}

// Forward: y = atanh x.  Backward: dx = dy / (1 - x^2).
absl::Status BpropAtanh(BpropContext& c) {
  KGRAD_SCALAR(one, 1.0, 0);
  c.SetGrad(0, c.Div(c.Dout(), c.Sub(one, c.Square(c.I(0)))));
  return absl::OkStatus();
}

// Forward: y = x + z.  Backward: dx = sum_to(dy, x), dz = sum_to(dy, z).
absl::Status BpropAdd(BpropContext& c) {
  c.SetGrad(0, c.SumToInput(c.Dout(), 0));
  c.SetGrad(1, c.SumToInput(c.Dout(), 1));
  return absl::OkStatus();
}

// Forward: y = x - z.  Backward: dx = sum_to(dy, x), dz = sum_to(-dy, z).
absl::Status BpropSub(BpropContext& c) {
  c.SetGrad(0, c.SumToInput(c.Dout(), 0));
  c.SetGrad(1, c.SumToInput(c.Neg(c.Dout()), 1));
  return absl::OkStatus();
}

// Forward: y = x * z.  Backward: dx = sum_to(dy * z, x), dz = sum_to(dy * x, z).
absl::Status BpropMul(BpropContext& c) {
  c.SetGrad(0, c.SumToInput(c.Mul(c.Dout(), c.I(1)), 0));
  c.SetGrad(1, c.SumToInput(c.Mul(c.Dout(), c.I(0)), 1));
  return absl::OkStatus();
}

// Forward: y = x / z.  Backward: dx = sum_to(dy / z, x), dz = sum_to(-(dy / z) * y, z).
absl::Status BpropDiv(BpropContext& c) {
  AnfNode* t = c.Div(c.Dout(), c.I(1));
  c.SetGrad(0, c.SumToInput(t, 0));
  c.SetGrad(1, c.SumToInput(c.Neg(c.Mul(t, c.Out())), 1));
  return absl::OkStatus();
}

// Forward: y = x^z.
// Backward: dx = sum_to(dy * z * x^(z-1), x), dz = sum_to(dy * y * ln x, z).
// As in JAX, the base is replaced by 1 where z == 0 (x^0 is constant: dx = 0, not
// 0 * 0^-1 = NaN at x = 0), and ln x by 0 where x == 0 (dz = 0 there for z > 0,
// the limit of y ln x). ln x is NaN for x < 0: dz needs x > 0 (or x == 0).
absl::Status BpropPow(BpropContext& c) {
  AnfNode* x = c.I(0);
  AnfNode* z = c.I(1);
  KGRAD_SCALAR(zero, 0.0, 0);
  KGRAD_SCALAR(one, 1.0, 0);
  AnfNode* base = c.Select(c.Op(PrimId::kEqual, {z, zero}), one, x);
  AnfNode* dydx = c.Mul(z, c.Op(PrimId::kPow, {base, c.Sub(z, one)}));
  c.SetGrad(0, c.SumToInput(c.Mul(c.Dout(), dydx), 0));
  AnfNode* log_x = c.Log(c.Select(c.Op(PrimId::kEqual, {x, zero}), one, x));
  c.SetGrad(1, c.SumToInput(c.Mul(c.Dout(), c.Mul(c.Out(), log_x)), 1));
  return absl::OkStatus();
}

// dy routed to x where `x_wins` (shaped like y), to z elsewhere.
absl::Status RouteByMask(BpropContext& c, PrimId x_wins) {
  KGRAD_SCALAR(zero, 0.0, 0);
  AnfNode* mask = c.Op(x_wins, {c.I(0), c.I(1)});
  c.SetGrad(0, c.SumToInput(c.Select(mask, c.Dout(), zero), 0));
  c.SetGrad(1, c.SumToInput(c.Select(mask, zero, c.Dout()), 1));
  return absl::OkStatus();
}

// Forward: y = max(x, z) (the kernel returns x where x > z or x is NaN, else z).
// Backward: dx = sum_to(x > z ? dy : 0, x), dz = sum_to(x > z ? 0 : dy, z): the
// whole of dy goes to the larger input, and on a tie to z, the one the kernel
// returns.
absl::Status BpropMaximum(BpropContext& c) { return RouteByMask(c, PrimId::kGreater); }

// Forward: y = min(x, z).  Backward: dx = sum_to(x < z ? dy : 0, x),
// dz = sum_to(x < z ? 0 : dy, z): to the smaller input; a tie goes to z.
absl::Status BpropMinimum(BpropContext& c) { return RouteByMask(c, PrimId::kLess); }

// Forward: y = cond ? a : b.  Backward: da = sum_to(cond ? dy : 0, a),
// db = sum_to(cond ? 0 : dy, b); cond (bool) gets nothing.
absl::Status BpropSelect(BpropContext& c) {
  KGRAD_SCALAR(zero, 0.0, 1);
  c.SetGrad(1, c.SumToInput(c.Select(c.I(0), c.Dout(), zero), 1));
  c.SetGrad(2, c.SumToInput(c.Select(c.I(0), zero, c.Dout()), 2));
  return absl::OkStatus();
}

// Forward: y = mod(a, b){fmod} = a - b * q, with q = floor(a / b) (fmod false:
// the sign of b, Python's %) or q = trunc(a / b) (fmod true: C's fmod, the sign
// of a). q is piecewise constant, so away from the jumps (a / b an integer)
// Backward: da = sum_to(dy, a), db = sum_to(-dy * q, b). trunc is written as
// q < 0 ? ceil(q) : floor(q) of the quotient.
absl::Status BpropMod(BpropContext& c) {
  KGRAD_SCALAR(zero, 0.0, 0);
  AnfNode* ratio = c.Div(c.I(0), c.I(1));
  AnfNode* q = c.Op(PrimId::kFloor, {ratio});
  if (c.prim().GetBool("fmod")) {
    q = c.Select(c.Op(PrimId::kLess, {ratio, zero}), c.Op(PrimId::kCeil, {ratio}), q);
  }
  c.SetGrad(0, c.SumToInput(c.Dout(), 0));
  c.SetGrad(1, c.SumToInput(c.Neg(c.Mul(c.Dout(), q)), 1));
  return absl::OkStatus();
}

#undef KGRAD_SCALAR

// ----- Registration -----------------------------------------------------------------
// Outputs that carry no gradient (bool results, piecewise-constant maps).
void RegisterUnary(std::vector<PrimitiveDef>* defs) {
  // Each op's dtypes: ElementwiseDTypes (elementwise.h).
  // neg(x) = -x.
  defs->push_back(OpDef(PrimId::kNeg, 1, 1, InferUnary).Bprop(BpropNeg).ZeroIfAny({0}).Linear());
  // abs(x) = |x|.
  defs->push_back(OpDef(PrimId::kAbs, 1, 1, InferUnary).Bprop(BpropAbs));
  // sign(x) = -1, 0 or 1 (0 at 0, NaN at NaN); piecewise constant, so no gradient.
  defs->push_back(OpDef(PrimId::kSign, 1, 1, InferUnary).ZeroGradient());
  // square(x) = x * x.
  defs->push_back(OpDef(PrimId::kSquare, 1, 1, InferUnary).Bprop(BpropSquare));
  // exp(x) = e^x.
  defs->push_back(OpDef(PrimId::kExp, 1, 1, InferUnary).Bprop(BpropExp));
  // log(x) = ln x (-inf at 0, NaN below).
  defs->push_back(OpDef(PrimId::kLog, 1, 1, InferUnary).Bprop(BpropLog));
  // log1p(x) = ln(1 + x), accurate near 0.
  defs->push_back(OpDef(PrimId::kLog1p, 1, 1, InferUnary).Bprop(BpropLog1p));
  // expm1(x) = e^x - 1, accurate near 0.
  defs->push_back(OpDef(PrimId::kExpm1, 1, 1, InferUnary).Bprop(BpropExpm1));
  // sin(x).
  defs->push_back(OpDef(PrimId::kSin, 1, 1, InferUnary).Bprop(BpropSin));
  // cos(x).
  defs->push_back(OpDef(PrimId::kCos, 1, 1, InferUnary).Bprop(BpropCos));
  // tanh(x).
  defs->push_back(OpDef(PrimId::kTanh, 1, 1, InferUnary).Bprop(BpropTanh));
  // sigmoid(x) = 1 / (1 + e^-x), no overflow for large |x|.
  defs->push_back(OpDef(PrimId::kSigmoid, 1, 1, InferUnary).Bprop(BpropSigmoid));
  // relu(x) = max(x, 0).
  defs->push_back(OpDef(PrimId::kRelu, 1, 1, InferUnary).Bprop(BpropRelu));
  // gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)); with approximate=true
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  defs->push_back(
      OpDef(PrimId::kGelu, 1, 1, InferUnary, {BoolAttr("approximate", false)}).Bprop(BpropGelu));
  // softplus(x) = ln(1 + e^x), computed as max(x, 0) + log1p(e^-|x|).
  defs->push_back(OpDef(PrimId::kSoftplus, 1, 1, InferUnary).Bprop(BpropSoftplus));
  // sqrt(x).
  defs->push_back(OpDef(PrimId::kSqrt, 1, 1, InferUnary).Bprop(BpropSqrt));
  // rsqrt(x) = 1 / sqrt(x).
  defs->push_back(OpDef(PrimId::kRsqrt, 1, 1, InferUnary).Bprop(BpropRsqrt));
  // reciprocal(x) = 1 / x.
  defs->push_back(OpDef(PrimId::kReciprocal, 1, 1, InferUnary).Bprop(BpropReciprocal));
  // erf(x) = 2/sqrt(pi) * integral_0^x e^(-t^2) dt.
  defs->push_back(OpDef(PrimId::kErf, 1, 1, InferUnary).Bprop(BpropErf));
  // floor(x), ceil(x), round(x) (halves to even, as ONNX Round and IEEE
  // roundeven); piecewise constant, so no gradient.
  defs->push_back(OpDef(PrimId::kFloor, 1, 1, InferUnary).ZeroGradient());
  defs->push_back(OpDef(PrimId::kCeil, 1, 1, InferUnary).ZeroGradient());
  defs->push_back(OpDef(PrimId::kRound, 1, 1, InferUnary).ZeroGradient());
  // The inverse trigonometric and the hyperbolic functions (NaN outside their
  // domains, as in C).
  defs->push_back(OpDef(PrimId::kAsin, 1, 1, InferUnary).Bprop(BpropAsin));
  defs->push_back(OpDef(PrimId::kAcos, 1, 1, InferUnary).Bprop(BpropAcos));
  defs->push_back(OpDef(PrimId::kAtan, 1, 1, InferUnary).Bprop(BpropAtan));
  defs->push_back(OpDef(PrimId::kSinh, 1, 1, InferUnary).Bprop(BpropSinh));
  defs->push_back(OpDef(PrimId::kCosh, 1, 1, InferUnary).Bprop(BpropCosh));
  defs->push_back(OpDef(PrimId::kAsinh, 1, 1, InferUnary).Bprop(BpropAsinh));
  defs->push_back(OpDef(PrimId::kAcosh, 1, 1, InferUnary).Bprop(BpropAcosh));
  defs->push_back(OpDef(PrimId::kAtanh, 1, 1, InferUnary).Bprop(BpropAtanh));
  // logical_not(x) = !x (bool only).
  defs->push_back(OpDef(PrimId::kLogicalNot, 1, 1, InferUnary).ZeroGradient());
  // thresholded_relu(x){alpha} = x > alpha ? x : 0.
  defs->push_back(OpDef(PrimId::kThresholdedRelu, 1, 1, InferUnary, {FloatAttr("alpha", 1.0)})
                      .Bprop(BpropThresholdedRelu)
                      .ZeroIfAny({0}));
}

void RegisterBinary(std::vector<PrimitiveDef>* defs) {
  // add(x, y) = x + y.
  defs->push_back(
      OpDef(PrimId::kAdd, 2, 2, InferBinary).Bprop(BpropAdd).ZeroIfAll({0, 1}).Linear());
  // sub(x, y) = x - y.
  defs->push_back(
      OpDef(PrimId::kSub, 2, 2, InferBinary).Bprop(BpropSub).ZeroIfAll({0, 1}).Linear());
  // mul(x, y) = x * y.
  defs->push_back(OpDef(PrimId::kMul, 2, 2, InferBinary).Bprop(BpropMul).ZeroIfAny({0, 1}));
  // div(x, y) = x / y; integers truncate toward zero, integer y == 0 is an error.
  defs->push_back(OpDef(PrimId::kDiv, 2, 2, InferBinary).Bprop(BpropDiv).ZeroIfAny({0}));
  // pow(x, y) = x^y (floating only).
  defs->push_back(OpDef(PrimId::kPow, 2, 2, InferBinary).Bprop(BpropPow));
  // maximum(x, y) = max(x, y), NaN if either is NaN.
  defs->push_back(OpDef(PrimId::kMaximum, 2, 2, InferBinary).Bprop(BpropMaximum));
  // minimum(x, y) = min(x, y), NaN if either is NaN.
  defs->push_back(OpDef(PrimId::kMinimum, 2, 2, InferBinary).Bprop(BpropMinimum));
  // mod(x, y){fmod} = x - y * floor(x / y), the sign of y (Python's %, ONNX Mod
  // fmod=0), or with fmod x - y * trunc(x / y), the sign of x (C's fmod). Integer
  // y == 0 is an error, as for div; MIN mod -1 is 0.
  defs->push_back(OpDef(PrimId::kMod, 2, 2, InferBinary, {BoolAttr("fmod", false)})
                      .Bprop(BpropMod)
                      .ZeroIfAny({0}));

  // tanh_grad(y, d) = d * (1 - y^2) and sigmoid_grad(y, d) = d * y * (1 - y): the
  // backward maps of tanh and sigmoid from their output, fused (one pass instead
  // of three); linear in d, so zero when d is.
  defs->push_back(OpDef(PrimId::kTanhGrad, 2, 2, InferBinary).Bprop(BpropTanhGrad).ZeroIfAny({1}));
  defs->push_back(
      OpDef(PrimId::kSigmoidGrad, 2, 2, InferBinary).Bprop(BpropSigmoidGrad).ZeroIfAny({1}));
  defs->push_back(OpDef(PrimId::kSinGrad, 2, 2, InferBinary).Bprop(BpropSinGrad).ZeroIfAny({1}));
  defs->push_back(OpDef(PrimId::kCosGrad, 2, 2, InferBinary).Bprop(BpropCosGrad).ZeroIfAny({1}));
  defs->push_back(OpDef(PrimId::kReluGrad, 2, 2, InferBinary).Bprop(BpropReluGrad).ZeroIfAny({1}));

  // bit_shift(x, y){direction} = x << y or x >> y, elementwise on unsigned
  // integers; a shift by the width or more gives 0 (NumPy's left_shift and
  // right_shift on unsigned types). Integer-valued: no gradient.
  defs->push_back(OpDef(PrimId::kBitShift, 2, 2, InferBitShift,
                        {RequiredAttr("direction", AttrType::kString)})
                      .ZeroGradient());

  // Comparisons: bool outputs carry no gradient. equal/not_equal take any dtype,
  // the orderings any numeric dtype.
  // equal(x, y) = x == y.
  defs->push_back(OpDef(PrimId::kEqual, 2, 2, InferBinary).ZeroGradient());
  // not_equal(x, y) = x != y.
  defs->push_back(OpDef(PrimId::kNotEqual, 2, 2, InferBinary).ZeroGradient());
  // less(x, y) = x < y.
  defs->push_back(OpDef(PrimId::kLess, 2, 2, InferBinary).ZeroGradient());
  // less_equal(x, y) = x <= y.
  defs->push_back(OpDef(PrimId::kLessEqual, 2, 2, InferBinary).ZeroGradient());
  // greater(x, y) = x > y.
  defs->push_back(OpDef(PrimId::kGreater, 2, 2, InferBinary).ZeroGradient());
  // greater_equal(x, y) = x >= y.
  defs->push_back(OpDef(PrimId::kGreaterEqual, 2, 2, InferBinary).ZeroGradient());
  // logical_and(x, y) = x && y (bool only).
  defs->push_back(OpDef(PrimId::kLogicalAnd, 2, 2, InferBinary).ZeroGradient());
  // logical_or(x, y) = x || y (bool only).
  defs->push_back(OpDef(PrimId::kLogicalOr, 2, 2, InferBinary).ZeroGradient());

  // select(cond, a, b) = cond ? a : b; linear in (a, b), cond is a bool and not
  // differentiable.
  defs->push_back(
      OpDef(PrimId::kSelect, 3, 3, InferSelect).Bprop(BpropSelect).ZeroIfAll({1, 2}).Linear());
}

}  // namespace

void RegisterElementwiseOps(std::vector<PrimitiveDef>* defs) {
  RegisterUnary(defs);
  RegisterBinary(defs);
}

}  // namespace ops
}  // namespace kgrad
