// Elementwise primitives: unary maps, binary maps with NumPy broadcasting, and
// select. No implicit dtype promotion anywhere: binary operands must share one
// dtype, and scalars are not accepted (lift them with scalar_to_tensor first), so
// that a graph's dtypes are exactly what its author wrote.
#include "ops/elementwise.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {
namespace {

// ----- Dtype sets -------------------------------------------------------------
using DTypeMask = uint32_t;
constexpr DTypeMask Bit(DType t) { return DTypeMask{1} << static_cast<int>(t); }
constexpr DTypeMask kFloatTypes = Bit(DType::kFloat32) | Bit(DType::kFloat64);
constexpr DTypeMask kNumericTypes = kFloatTypes | Bit(DType::kInt32) | Bit(DType::kInt64);
constexpr DTypeMask kBoolType = Bit(DType::kBool);
constexpr DTypeMask kAllTypes = kNumericTypes | kBoolType;

// "f32, f64, i32 or i64".
std::string MaskNames(DTypeMask mask) {
  std::string out;
  int remaining = __builtin_popcount(mask);
  for (int i = 0; i < kNumDTypes; ++i) {
    if ((mask & Bit(static_cast<DType>(i))) == 0) continue;
    --remaining;
    absl::StrAppend(&out, DTypeName(static_cast<DType>(i)),
                    remaining == 0 ? "" : (remaining == 1 ? " or " : ", "));
  }
  return out;
}

// Input `i` as a tensor whose dtype is in `allowed`.
absl::StatusOr<const AbstractTensor*> TypedTensorArg(const InferCall& c, int i,
                                                     DTypeMask allowed) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorArg(c, i));
  if ((allowed & Bit(t->dtype())) == 0) {
    return ArgError(c, i, absl::StrCat("a ", MaskNames(allowed), " tensor"));
  }
  return t;
}

// ----- Unary ----------------------------------------------------------------------
// y = f(x): same dtype and shape as x.
template <DTypeMask kAllowed>
absl::StatusOr<AbstractPtr> InferUnary(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TypedTensorArg(c, 0, kAllowed));
  return MakeAbstractTensor(x->dtype(), x->shape());
}

// ----- Binary ---------------------------------------------------------------------
// z = f(x, y) with NumPy broadcasting; both inputs one dtype from `kAllowed`; the
// output has that dtype, or bool for comparisons.
template <DTypeMask kAllowed, bool kBoolOut>
absl::StatusOr<AbstractPtr> InferBinary(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* y, TensorArg(c, 1));
  KGRAD_RETURN_IF_ERROR(SameDType(c, {0, 1}));
  KGRAD_RETURN_IF_ERROR(TypedTensorArg(c, 0, kAllowed).status());
  KGRAD_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(x->shape(), y->shape()));
  return MakeAbstractTensor(kBoolOut ? DType::kBool : x->dtype(), std::move(shape));
}

// select(cond, a, b) = cond ? a : b elementwise; the three shapes broadcast together.
absl::StatusOr<AbstractPtr> InferSelect(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* cond, TypedTensorArg(c, 0, kBoolType));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* a, TensorArg(c, 1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* b, TensorArg(c, 2));
  KGRAD_RETURN_IF_ERROR(SameDType(c, {1, 2}));
  KGRAD_ASSIGN_OR_RETURN(Shape ab, BroadcastShapes(a->shape(), b->shape()));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(cond->shape(), ab));
  return MakeAbstractTensor(a->dtype(), std::move(shape));
}

// Outputs that carry no gradient (bool results, piecewise-constant maps).
PrimitiveDef ZeroGradient(PrimitiveDef d) {
  d.zero_gradient = true;
  return d;
}

// Linear in every differentiable input.
PrimitiveDef Linear(PrimitiveDef d) {
  d.linear = true;
  return d;
}

void RegisterUnary(std::vector<PrimitiveDef>* defs) {
  constexpr auto kNumeric = InferUnary<kNumericTypes>;
  constexpr auto kFloat = InferUnary<kFloatTypes>;
  // neg(x) = -x.
  defs->push_back(Linear(MakeDef(PrimId::kNeg, 1, 1, kNumeric)));
  // abs(x) = |x|.
  defs->push_back(MakeDef(PrimId::kAbs, 1, 1, kNumeric));
  // sign(x) = -1, 0 or 1 (0 at 0, NaN at NaN); piecewise constant, so no gradient.
  defs->push_back(ZeroGradient(MakeDef(PrimId::kSign, 1, 1, kNumeric)));
  // square(x) = x * x.
  defs->push_back(MakeDef(PrimId::kSquare, 1, 1, kNumeric));
  // exp(x) = e^x.
  defs->push_back(MakeDef(PrimId::kExp, 1, 1, kFloat));
  // log(x) = ln x (-inf at 0, NaN below).
  defs->push_back(MakeDef(PrimId::kLog, 1, 1, kFloat));
  // log1p(x) = ln(1 + x), accurate near 0.
  defs->push_back(MakeDef(PrimId::kLog1p, 1, 1, kFloat));
  // expm1(x) = e^x - 1, accurate near 0.
  defs->push_back(MakeDef(PrimId::kExpm1, 1, 1, kFloat));
  // sin(x).
  defs->push_back(MakeDef(PrimId::kSin, 1, 1, kFloat));
  // cos(x).
  defs->push_back(MakeDef(PrimId::kCos, 1, 1, kFloat));
  // tanh(x).
  defs->push_back(MakeDef(PrimId::kTanh, 1, 1, kFloat));
  // sigmoid(x) = 1 / (1 + e^-x), no overflow for large |x|.
  defs->push_back(MakeDef(PrimId::kSigmoid, 1, 1, kFloat));
  // relu(x) = max(x, 0).
  defs->push_back(MakeDef(PrimId::kRelu, 1, 1, kFloat));
  // gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)); with approximate=true
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  defs->push_back(MakeDef(PrimId::kGelu, 1, 1, kFloat, {BoolAttr("approximate", false)}));
  // softplus(x) = ln(1 + e^x), computed as max(x, 0) + log1p(e^-|x|).
  defs->push_back(MakeDef(PrimId::kSoftplus, 1, 1, kFloat));
  // sqrt(x).
  defs->push_back(MakeDef(PrimId::kSqrt, 1, 1, kFloat));
  // rsqrt(x) = 1 / sqrt(x).
  defs->push_back(MakeDef(PrimId::kRsqrt, 1, 1, kFloat));
  // reciprocal(x) = 1 / x.
  defs->push_back(MakeDef(PrimId::kReciprocal, 1, 1, kFloat));
  // erf(x) = 2/sqrt(pi) * integral_0^x e^(-t^2) dt.
  defs->push_back(MakeDef(PrimId::kErf, 1, 1, kFloat));
  // logical_not(x) = !x (bool only).
  defs->push_back(ZeroGradient(MakeDef(PrimId::kLogicalNot, 1, 1, InferUnary<kBoolType>)));
}

void RegisterBinary(std::vector<PrimitiveDef>* defs) {
  constexpr auto kArith = InferBinary<kNumericTypes, false>;
  // add(x, y) = x + y.
  defs->push_back(Linear(MakeDef(PrimId::kAdd, 2, 2, kArith)));
  // sub(x, y) = x - y.
  defs->push_back(Linear(MakeDef(PrimId::kSub, 2, 2, kArith)));
  // mul(x, y) = x * y.
  defs->push_back(MakeDef(PrimId::kMul, 2, 2, kArith));
  // div(x, y) = x / y; integers truncate toward zero, integer y == 0 is an error.
  defs->push_back(MakeDef(PrimId::kDiv, 2, 2, kArith));
  // pow(x, y) = x^y (floating only).
  defs->push_back(MakeDef(PrimId::kPow, 2, 2, InferBinary<kFloatTypes, false>));
  // maximum(x, y) = max(x, y), NaN if either is NaN.
  defs->push_back(MakeDef(PrimId::kMaximum, 2, 2, kArith));
  // minimum(x, y) = min(x, y), NaN if either is NaN.
  defs->push_back(MakeDef(PrimId::kMinimum, 2, 2, kArith));

  // Comparisons: bool outputs carry no gradient. equal/not_equal take any dtype,
  // the orderings any numeric dtype.
  constexpr auto kEq = InferBinary<kAllTypes, true>;
  constexpr auto kOrder = InferBinary<kNumericTypes, true>;
  // equal(x, y) = x == y.
  defs->push_back(ZeroGradient(MakeDef(PrimId::kEqual, 2, 2, kEq)));
  // not_equal(x, y) = x != y.
  defs->push_back(ZeroGradient(MakeDef(PrimId::kNotEqual, 2, 2, kEq)));
  // less(x, y) = x < y.
  defs->push_back(ZeroGradient(MakeDef(PrimId::kLess, 2, 2, kOrder)));
  // less_equal(x, y) = x <= y.
  defs->push_back(ZeroGradient(MakeDef(PrimId::kLessEqual, 2, 2, kOrder)));
  // greater(x, y) = x > y.
  defs->push_back(ZeroGradient(MakeDef(PrimId::kGreater, 2, 2, kOrder)));
  // greater_equal(x, y) = x >= y.
  defs->push_back(ZeroGradient(MakeDef(PrimId::kGreaterEqual, 2, 2, kOrder)));
  constexpr auto kLogic = InferBinary<kBoolType, true>;
  // logical_and(x, y) = x && y (bool only).
  defs->push_back(ZeroGradient(MakeDef(PrimId::kLogicalAnd, 2, 2, kLogic)));
  // logical_or(x, y) = x || y (bool only).
  defs->push_back(ZeroGradient(MakeDef(PrimId::kLogicalOr, 2, 2, kLogic)));

  // select(cond, a, b) = cond ? a : b; linear in (a, b), cond is a bool and not
  // differentiable.
  defs->push_back(Linear(MakeDef(PrimId::kSelect, 3, 3, InferSelect)));
}

}  // namespace

void RegisterElementwiseOps(std::vector<PrimitiveDef>* defs) {
  RegisterUnary(defs);
  RegisterBinary(defs);
}

}  // namespace ops
}  // namespace kgrad
