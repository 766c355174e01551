// ONNX QuantizeLinear and DequantizeLinear (opsets 10-21; per tensor and per
// axis, uint8, int8, uint16, int16) composed of primitives:
//
//   QuantizeLinear(x, s, zp){axis}:   q = cast(clip(round(x / s) + zp, qmin, qmax))
//   DequantizeLinear(q, s, zp){axis}: y = (float(q) - zp) * s
//
// round is half to even, as the spec says; a per-axis scale and zero point are
// 1-D along `axis` and broadcast. The quantized integers have no derivative.
// Quantisation-aware training exports each fake-quantised tensor as the pair
// Q -> DQ, whose gradient in torch is the straight-through estimator:
// d/dx = 1 where round(x * (1 / s)) + zp lies in [qmin, qmax], else 0. So Q also
// carries a float surrogate of q (ImportedValue::straight_through): the same
// numbers, plus x / s * mask - stop_gradient(x / s * mask), which is exactly 0
// but has derivative mask / s; a DQ reading q directly dequantises the
// surrogate instead, and the pair's derivative is the mask.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"

namespace kgrad {
namespace onnx_import {
namespace {

using Value = ImportedValue;

// The range of a quantized type (error for the others).
absl::StatusOr<std::pair<double, double>> QuantRange(NodeContext& c, DType t) {
  switch (t) {
    case DType::kUInt8:
      return std::pair<double, double>{0, 255};
    case DType::kInt8:
      return std::pair<double, double>{-128, 127};
    case DType::kUInt16:
      return std::pair<double, double>{0, 65535};
    case DType::kInt16:
      return std::pair<double, double>{-32768, 32767};
    case DType::kInt32:
      return std::pair<double, double>{-2147483648.0, 2147483647.0};
    default:
      return c.Error(absl::StrCat("the quantized type must be uint8, int8, uint16 or int16, got ", DTypeName(t)));
  }
}

// The scale or zero point `v` (input i) shaped to broadcast against x of rank
// `rank`: a scalar (or [1]) as it is, a 1-D tensor of x's dim `axis` along it.
absl::StatusOr<Value> AlongAxis(NodeContext& c, const Value& v, int i, const AbstractTensor& x, int64_t axis) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(v));
  if (t->rank() == 0 || (t->rank() == 1 && t->shape()[0] == 1)) return v;
  const int rank = x.rank();
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (t->rank() != 1 || a < 0 || a >= rank) {
    return c.Error(absl::StrCat("input ", i, " must be a scalar or 1-D along axis ", axis, " of ", x.ToString(),
                                ", got ", t->ToString(), " (blocked quantization is not supported)"));
  }
  if (x.shape()[a] >= 0 && t->shape()[0] >= 0 && x.shape()[a] != t->shape()[0]) {
    return c.Error(absl::StrCat("input ", i, " must have ", x.shape()[a], " entries (dim ", a, " of ",
                                x.ToString(), "), got ", t->ToString()));
  }
  std::vector<int64_t> shape(rank, 1);
  shape[a] = -1;
  return c.Emit(PrimId::kReshape, {v}, {{"shape", shape}});
}

// The zero point (input 2) as a float of `dtype` shaped for x, and its integer
// type (uint8 when absent).
struct ZeroPoint {
  std::optional<Value> value;  // none: 0
  DType type = DType::kUInt8;
};

absl::StatusOr<ZeroPoint> ReadZeroPoint(NodeContext& c, const AbstractTensor& x, int64_t axis, DType dtype) {
  ZeroPoint zp;
  if (!c.HasInput(2)) return zp;
  KGRAD_ASSIGN_OR_RETURN(Value v, c.Input(2));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(v));
  zp.type = t->dtype();
  KGRAD_RETURN_IF_ERROR(QuantRange(c, zp.type).status());
  KGRAD_ASSIGN_OR_RETURN(v, AlongAxis(c, v, 2, x, axis));
  KGRAD_ASSIGN_OR_RETURN(v, c.Emit(PrimId::kCast, {v}, {{"dtype", dtype}}));
  zp.value = v;
  return zp;
}

// The scale (input 1), a float tensor, shaped for x.
absl::StatusOr<Value> ReadScale(NodeContext& c, const AbstractTensor& x, int64_t axis) {
  KGRAD_ASSIGN_OR_RETURN(Value s, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(s));
  if (t->dtype() != DType::kFloat32 && t->dtype() != DType::kFloat64) {
    return c.Error(absl::StrCat("the scale must be float32 or float64, got ", t->ToString()));
  }
  return AlongAxis(c, s, 1, x, axis);
}

absl::Status CheckAttrs(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(int64_t block, c.Int("block_size", 0));
  if (block != 0) return c.Error("blocked quantization (block_size) is not supported");
  return absl::OkStatus();
}

Outputs QuantizeLinear(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 3));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_RETURN_IF_ERROR(CheckAttrs(c));
  KGRAD_ASSIGN_OR_RETURN(Value x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, c.TensorType(x));
  if (tx->dtype() != DType::kFloat32 && tx->dtype() != DType::kFloat64) {
    return c.Error(absl::StrCat("x must be float32 or float64, got ", tx->ToString()));
  }
  const DType dt = tx->dtype();
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", 1));
  KGRAD_ASSIGN_OR_RETURN(Value s, ReadScale(c, *tx, axis));
  KGRAD_ASSIGN_OR_RETURN(s, c.Emit(PrimId::kCast, {s}, {{"dtype", dt}}));
  KGRAD_ASSIGN_OR_RETURN(ZeroPoint zp, ReadZeroPoint(c, *tx, axis, dt));
  KGRAD_ASSIGN_OR_RETURN(auto range, QuantRange(c, zp.type));
  KGRAD_ASSIGN_OR_RETURN(Value xs, c.Emit(PrimId::kDiv, {x, s}));
  KGRAD_ASSIGN_OR_RETURN(Value q, c.Emit(PrimId::kRound, {xs}));
  if (zp.value.has_value()) {
    KGRAD_ASSIGN_OR_RETURN(q, c.Emit(PrimId::kAdd, {q, *zp.value}));
  }
  KGRAD_ASSIGN_OR_RETURN(Value lo, c.Scalar(dt, range.first));
  KGRAD_ASSIGN_OR_RETURN(Value hi, c.Scalar(dt, range.second));
  KGRAD_ASSIGN_OR_RETURN(Value clipped, c.Emit(PrimId::kMaximum, {q, lo}));
  KGRAD_ASSIGN_OR_RETURN(clipped, c.Emit(PrimId::kMinimum, {clipped, hi}));
  KGRAD_ASSIGN_OR_RETURN(Value out, c.Emit(PrimId::kCast, {clipped}, {{"dtype", zp.type}}));
  // The straight-through surrogate: clipped + (xs * mask - stop_gradient(xs * mask)).
  // The mask is torch's (fake_quantize_*_cachemask): round(x * (1 / s)) + zp in
  // [qmin, qmax], x times the reciprocal, which at the range's ends can round
  // differently from x / s (a per-channel weight's largest magnitude lands on
  // qmax + 1/2 exactly).
  KGRAD_ASSIGN_OR_RETURN(Value one, c.Scalar(dt, 1.0));
  KGRAD_ASSIGN_OR_RETURN(Value inv, c.Emit(PrimId::kDiv, {one, s}));
  KGRAD_ASSIGN_OR_RETURN(Value xinv, c.Emit(PrimId::kMul, {x, inv}));
  KGRAD_ASSIGN_OR_RETURN(Value qt, c.Emit(PrimId::kRound, {xinv}));
  if (zp.value.has_value()) {
    KGRAD_ASSIGN_OR_RETURN(qt, c.Emit(PrimId::kAdd, {qt, *zp.value}));
  }
  KGRAD_ASSIGN_OR_RETURN(Value ge, c.Emit(PrimId::kGreaterEqual, {qt, lo}));
  KGRAD_ASSIGN_OR_RETURN(Value le, c.Emit(PrimId::kLessEqual, {qt, hi}));
  KGRAD_ASSIGN_OR_RETURN(Value inside, c.Emit(PrimId::kLogicalAnd, {ge, le}));
  KGRAD_ASSIGN_OR_RETURN(Value mask, c.Emit(PrimId::kCast, {inside}, {{"dtype", dt}}));
  KGRAD_ASSIGN_OR_RETURN(Value through, c.Emit(PrimId::kMul, {xs, mask}));
  KGRAD_ASSIGN_OR_RETURN(Value frozen, c.Emit(PrimId::kStopGradient, {through}));
  KGRAD_ASSIGN_OR_RETURN(Value zero, c.Emit(PrimId::kSub, {through, frozen}));
  KGRAD_ASSIGN_OR_RETURN(Value surrogate, c.Emit(PrimId::kAdd, {clipped, zero}));
  out.straight_through = c.NodeOf(surrogate);
  out.straight_through_type = surrogate.type;
  return std::vector<Value>{out};
}

Outputs DequantizeLinear(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 3));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_RETURN_IF_ERROR(CheckAttrs(c));
  KGRAD_ASSIGN_OR_RETURN(Value q, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tq, c.TensorType(q));
  KGRAD_RETURN_IF_ERROR(QuantRange(c, tq->dtype()).status());
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", 1));
  KGRAD_ASSIGN_OR_RETURN(Value s, ReadScale(c, *tq, axis));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ts, c.TensorType(s));
  const DType dt = ts->dtype();
  KGRAD_ASSIGN_OR_RETURN(ZeroPoint zp, ReadZeroPoint(c, *tq, axis, dt));
  if (zp.value.has_value() && zp.type != tq->dtype()) {
    return c.Error(absl::StrCat("the zero point must have x's type ", DTypeName(tq->dtype()), ", got ",
                                DTypeName(zp.type)));
  }
  Value f;
  if (q.straight_through != nullptr) {
    // Straight from a QuantizeLinear: its float surrogate (the same numbers).
    KGRAD_ASSIGN_OR_RETURN(
        f, c.Emit(PrimId::kCast, {Value{q.straight_through, q.straight_through_type, std::nullopt}},
                  {{"dtype", dt}}));
  } else {
    KGRAD_ASSIGN_OR_RETURN(f, c.Emit(PrimId::kCast, {q}, {{"dtype", dt}}));
  }
  if (zp.value.has_value()) {
    KGRAD_ASSIGN_OR_RETURN(f, c.Emit(PrimId::kSub, {f, *zp.value}));
  }
  return OneOutput(c.Emit(PrimId::kMul, {f, s}));
}

}  // namespace

void AddQuantizeOps(OpTable* t) {
  AddMappings(t, {{"QuantizeLinear", QuantizeLinear}, {"DequantizeLinear", DequantizeLinear}});
}

}  // namespace onnx_import
}  // namespace kgrad
