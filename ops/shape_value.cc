// Shape values through the integer ops (ops/shape_value.h).
#include "ops/shape_value.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

#include "core/dim_symbol.h"
#include "core/dtype.h"

namespace kgrad {
namespace ops {
namespace {

const AbstractTensor* Arg(const InferCall& c, size_t i) {
  return i < c.args.size() ? AsTensor(c.args[i]) : nullptr;
}

// A number, as opposed to a dim symbol or kUnknownValue.
bool IsNumber(int64_t v) { return v != kUnknownValue && !IsSymbolDim(v); }

// A folded number as a value element: the int32 wrap for i32, and kUnknownValue
// where the number would read as a symbol (huge negative int64s).
int64_t Number(int64_t v, DType dtype) {
  if (dtype == DType::kInt32) v = static_cast<int32_t>(static_cast<uint32_t>(v));
  return IsNumber(v) ? v : kUnknownValue;
}

// Two's-complement arithmetic without undefined behaviour (the kernels' WrapAdd...).
int64_t Wrap(uint64_t v) { return static_cast<int64_t>(v); }

// One element of a binary integer op: numbers fold, symbols keep their identities.
int64_t Binary(PrimId id, int64_t a, int64_t b, DType dtype) {
  const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  const bool na = IsNumber(a), nb = IsNumber(b);
  switch (id) {
    case PrimId::kAdd:
      if (na && nb) return Number(Wrap(ua + ub), dtype);
      return b == 0 ? a : a == 0 ? b : kUnknownValue;  // s + 0, 0 + s
    case PrimId::kSub:
      if (na && nb) return Number(Wrap(ua - ub), dtype);
      return b == 0 ? a : kUnknownValue;  // s - 0
    case PrimId::kMul:
      if (na && nb) return Number(Wrap(ua * ub), dtype);
      if (a == 0 || b == 0) return 0;  // s * 0 (a symbol is a finite size)
      return b == 1 ? a : a == 1 ? b : kUnknownValue;  // s * 1, 1 * s
    case PrimId::kDiv:
      if (na && nb) {
        if (b == 0) return kUnknownValue;  // the kernel rejects it
        if (b == -1) return Number(Wrap(0 - ua), dtype);  // INT_MIN / -1 wraps
        return Number(a / b, dtype);                      // C++ truncates toward zero
      }
      return b == 1 ? a : kUnknownValue;  // s / 1
    case PrimId::kMaximum:
      if (na && nb) return std::max(a, b);
      return a == b && a != kUnknownValue ? a : kUnknownValue;
    case PrimId::kMinimum:
      if (na && nb) return std::min(a, b);
      return a == b && a != kUnknownValue ? a : kUnknownValue;
    default:
      return kUnknownValue;
  }
}

bool IsArith(PrimId id) {
  return id == PrimId::kAdd || id == PrimId::kSub || id == PrimId::kMul || id == PrimId::kDiv ||
         id == PrimId::kMaximum || id == PrimId::kMinimum;
}

}  // namespace

AbstractPtr WithShapeValue(AbstractPtr out, const std::optional<Shape>& value) {
  const AbstractTensor* t = AsTensor(out);
  if (!value || t == nullptr || t->rank() > 1) return out;
  return MakeAbstractShapeValue(t->dtype(), t->shape(), *value);
}

std::optional<Shape> GatherValue(const InferCall& c) {
  const AbstractTensor* params = Arg(c, 0);
  const AbstractTensor* indices = Arg(c, 1);
  if (params == nullptr || indices == nullptr || params->rank() != 1 || !params->value() ||
      !indices->value() || indices->rank() > 1) {
    return std::nullopt;
  }
  const Shape& v = *params->value();
  const int64_t n = static_cast<int64_t>(v.size());
  Shape out;
  for (int64_t k : *indices->value()) {
    if (!IsNumber(k)) return std::nullopt;
    if (k < 0) k += n;  // negative indices count from the end
    if (k < 0 || k >= n) return std::nullopt;  // out of range: the kernel's error
    out.push_back(v[k]);
  }
  return out;
}

std::optional<Shape> ConcatValue(const InferCall& c) {
  Shape out;
  for (size_t i = 0; i < c.args.size(); ++i) {
    const AbstractTensor* x = Arg(c, i);
    if (x == nullptr || x->rank() != 1 || x->shape()[0] < 0) return std::nullopt;
    if (out.size() + x->shape()[0] > static_cast<size_t>(kMaxShapeValue)) return std::nullopt;
    if (x->value()) {
      out.insert(out.end(), x->value()->begin(), x->value()->end());
    } else {
      out.insert(out.end(), x->shape()[0], kUnknownValue);
    }
  }
  return out;  // a rank-1 concat has axis 0 (or -1) only
}

std::optional<Shape> SameElementsValue(const InferCall& c) {
  const AbstractTensor* x = Arg(c, 0);
  if (x == nullptr || !x->value()) return std::nullopt;
  return *x->value();  // WithShapeValue drops it when the output's count differs
}

std::optional<Shape> SliceValue(const InferCall& c, int64_t begin, int64_t stride, int64_t count) {
  const AbstractTensor* x = Arg(c, 0);
  if (x == nullptr || x->rank() != 1 || !x->value() || count < 0) return std::nullopt;
  const Shape& v = *x->value();
  Shape out;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t k = begin + i * stride;
    if (k < 0 || k >= static_cast<int64_t>(v.size())) return std::nullopt;
    out.push_back(v[k]);
  }
  return out;
}

std::optional<Shape> CastValue(const InferCall& c) {
  const AbstractTensor* x = Arg(c, 0);
  const DType to = c.prim.GetDType("dtype");
  if (x == nullptr || !x->value() || !IsInteger(to)) return std::nullopt;
  Shape out = *x->value();
  for (int64_t& v : out) {
    if (IsNumber(v)) v = Number(v, to);
  }
  return out;
}

std::optional<Shape> ArithValue(const InferCall& c) {
  const PrimId id = c.prim.id();
  const AbstractTensor* a = Arg(c, 0);
  if (a == nullptr || !a->value() || !IsInteger(a->dtype())) return std::nullopt;
  if (id == PrimId::kNeg) {
    Shape out = *a->value();
    for (int64_t& v : out) {
      v = IsNumber(v) ? Number(Wrap(0 - static_cast<uint64_t>(v)), a->dtype()) : kUnknownValue;
    }
    return out;
  }
  const AbstractTensor* b = Arg(c, 1);
  if (!IsArith(id) || b == nullptr || !b->value()) return std::nullopt;
  const Shape& va = *a->value();
  const Shape& vb = *b->value();
  const size_t n = std::max(va.size(), vb.size());
  if ((va.size() != n && va.size() != 1) || (vb.size() != n && vb.size() != 1)) return std::nullopt;
  Shape out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(Binary(id, va[va.size() == 1 ? 0 : i], vb[vb.size() == 1 ? 0 : i], a->dtype()));
  }
  return out;
}

}  // namespace ops
}  // namespace kgrad
