#include "core/scalar_arith.h"

#include <cstdint>
#include <optional>

#include "absl/strings/str_cat.h"

namespace kgrad {
namespace {

// Two's-complement arithmetic in uint64 (no signed-overflow UB), then narrowed to
// the result's width.
int64_t Narrow(uint64_t v, DType t) {
  if (t == DType::kInt32) return static_cast<int32_t>(static_cast<uint32_t>(v));
  return static_cast<int64_t>(v);
}

// The comparisons, for integers and floats alike; nullopt for another primitive.
template <typename N>
std::optional<bool> Compare(PrimId id, N a, N b) {
  switch (id) {
    case PrimId::kScalarLt: return a < b;
    case PrimId::kScalarLe: return a <= b;
    case PrimId::kScalarGt: return a > b;
    case PrimId::kScalarGe: return a >= b;
    case PrimId::kScalarEq: return a == b;
    case PrimId::kScalarNe: return a != b;
    default: return std::nullopt;
  }
}

absl::StatusOr<Scalar> IntegerOp(PrimId id, int64_t i, int64_t j, DType t) {
  if (std::optional<bool> c = Compare(id, i, j)) return Scalar::Bool(*c);
  uint64_t x = static_cast<uint64_t>(i), y = static_cast<uint64_t>(j);
  switch (id) {
    case PrimId::kScalarAdd: return Scalar::Int(Narrow(x + y, t), t);
    case PrimId::kScalarSub: return Scalar::Int(Narrow(x - y, t), t);
    case PrimId::kScalarMul: return Scalar::Int(Narrow(x * y, t), t);
    case PrimId::kScalarDiv:
      if (j == 0) return absl::InvalidArgumentError("integer division by zero");
      // MIN / -1 is the one quotient that overflows: negate by wrapping instead.
      return Scalar::Int(j == -1 ? Narrow(0 - x, t) : Narrow(static_cast<uint64_t>(i / j), t), t);
    default: break;
  }
  return absl::InvalidArgumentError("not a binary scalar primitive");
}

absl::StatusOr<Scalar> FloatOp(PrimId id, double x, double y, DType t) {
  auto round = [t](double v) { return t == DType::kFloat32 ? static_cast<double>(static_cast<float>(v)) : v; };
  x = round(x);
  y = round(y);
  if (std::optional<bool> c = Compare(id, x, y)) return Scalar::Bool(*c);
  switch (id) {
    case PrimId::kScalarAdd: return Scalar::Float(round(x + y), t);
    case PrimId::kScalarSub: return Scalar::Float(round(x - y), t);
    case PrimId::kScalarMul: return Scalar::Float(round(x * y), t);
    case PrimId::kScalarDiv: return Scalar::Float(round(x / y), t);
    default: break;
  }
  return absl::InvalidArgumentError("not a binary scalar primitive");
}

bool IsComparison(PrimId id) {
  return id == PrimId::kScalarLt || id == PrimId::kScalarLe || id == PrimId::kScalarGt ||
         id == PrimId::kScalarGe || id == PrimId::kScalarEq || id == PrimId::kScalarNe;
}

}  // namespace

bool IsScalarBinaryOp(PrimId id) {
  return id == PrimId::kScalarAdd || id == PrimId::kScalarSub || id == PrimId::kScalarMul ||
         id == PrimId::kScalarDiv || IsComparison(id);
}

DType PromoteScalarTypes(DType a, DType b) {
  if (IsFloating(a) || IsFloating(b)) {
    return a == DType::kFloat64 || b == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  }
  if (a == DType::kInt64 || b == DType::kInt64) return DType::kInt64;
  if (a == DType::kBool && b == DType::kBool) return DType::kInt64;
  return DType::kInt32;
}

DType ScalarResultType(PrimId id, DType a, DType b) {
  return IsComparison(id) ? DType::kBool : PromoteScalarTypes(a, b);
}

absl::StatusOr<Scalar> ApplyScalarOp(PrimId id, const Scalar& a, const Scalar& b) {
  if (!IsScalarBinaryOp(id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("primitive ", static_cast<int>(id), " is not a binary scalar primitive"));
  }
  // Operands are converted to the promoted type first (an i32 operand of an i32
  // op is taken at 32 bits), then the operation runs in that type.
  DType t = PromoteScalarTypes(a.dtype(), b.dtype());
  if (IsFloating(t)) return FloatOp(id, a.AsDouble(), b.AsDouble(), t);
  int64_t i = a.AsInt(), j = b.AsInt();
  if (t == DType::kInt32) {
    i = Narrow(static_cast<uint64_t>(i), t);
    j = Narrow(static_cast<uint64_t>(j), t);
  }
  return IntegerOp(id, i, j, t);
}

}  // namespace kgrad
