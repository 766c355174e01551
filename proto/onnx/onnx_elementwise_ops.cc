// ONNX op mappings of the elementwise family that need more than the one-to-one
// form the op table generates from ops/elementwise_table.inc (onnx_op_table.cc):
// Identity, the variadic Max, Min and Sum, Pow, Gelu, Clip, Mod, BitShift, Cast and
// CastLike. Each states the ONNX form it accepts and the kgrad primitives it
// becomes.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"
#include "proto/onnx/onnx_tensor.h"

namespace kgrad {
namespace onnx_import {

absl::Status AlignConstantDType(NodeContext& c, ImportedValue& a, ImportedValue& b) {
  const AbstractTensor* ta = AsTensor(a.type);
  const AbstractTensor* tb = AsTensor(b.type);
  if (ta == nullptr || tb == nullptr || ta->dtype() == tb->dtype()) return absl::OkStatus();
  ImportedValue& k = b.constant.has_value() ? b : a;
  DType want = (&k == &b ? ta : tb)->dtype();
  if (!k.constant.has_value()) return absl::OkStatus();  // inference reports the mismatch
  KGRAD_ASSIGN_OR_RETURN(k, c.Emit(PrimId::kCast, {k}, {{"dtype", want}}));
  return absl::OkStatus();
}

namespace {

// Identity(x) = x.
Outputs Identity(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  return std::vector<ImportedValue>{x};
}

// Max/Min/Sum(x0, x1, ...) = op(op(x0, x1), ...).
template <PrimId id>
Outputs Variadic(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 64));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue acc, c.Input(0));
  for (int i = 1; i < c.num_inputs(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(i));
    KGRAD_RETURN_IF_ERROR(AlignConstantDType(c, acc, x));
    KGRAD_ASSIGN_OR_RETURN(acc, c.Emit(id, {acc, x}));
  }
  return std::vector<ImportedValue>{acc};
}

// Pow(x, y) in x's dtype (ONNX: the exponent may have another numeric type).
// Float x: y cast to x's dtype; square / sqrt / x for the constant exponents 2, 0.5
// and 1 (exact, and their gradients need no log x); pow otherwise. Integer x: the
// power in float64, cast back (truncated, as ONNX's reference casts NumPy's float
// result), exact while the result stays below 2^53.
Outputs Pow(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, c.TensorType(x));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ty, c.TensorType(y));
  if (!IsFloating(tx->dtype())) {
    if (tx->dtype() == DType::kBool || ty->dtype() == DType::kBool) return c.Error("needs numeric inputs");
    KGRAD_ASSIGN_OR_RETURN(x, c.Emit(PrimId::kCast, {x}, {{"dtype", DType::kFloat64}}));
    KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kCast, {y}, {{"dtype", DType::kFloat64}}));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue z, c.Emit(PrimId::kPow, {x, y}));
    return OneOutput(c.Emit(PrimId::kCast, {z}, {{"dtype", tx->dtype()}}));
  }
  if (y.constant.has_value() && y.constant->NumElements() == 1 && y.constant->rank() <= tx->rank()) {
    double k = y.constant->ElementAsDouble(0);
    if (k == 2) return OneOutput(c.Emit(PrimId::kSquare, {x}));
    if (k == 0.5) return OneOutput(c.Emit(PrimId::kSqrt, {x}));
    if (k == 1 && y.constant->rank() == 0) return std::vector<ImportedValue>{x};
  }
  if (ty->dtype() != tx->dtype()) {
    KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kCast, {y}, {{"dtype", tx->dtype()}}));
  }
  return OneOutput(c.Emit(PrimId::kPow, {x, y}));
}

// Gelu(x){approximate = none | tanh} (opset 20).
Outputs Gelu(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(std::string approx, c.String("approximate", "none"));
  if (approx != "none" && approx != "tanh") return c.Error("approximate must be 'none' or 'tanh'");
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  return OneOutput(c.Emit(PrimId::kGelu, {x}, {{"approximate", approx == "tanh"}}));
}

// Clip(x, min, max) = minimum(maximum(x, min), max); the bounds are optional inputs
// (opset 11+) or attributes (before).
Outputs Clip(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 3));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Input(0));
  for (int i = 1; i <= 2; ++i) {
    ImportedValue bound;
    if (c.HasInput(i)) {
      KGRAD_ASSIGN_OR_RETURN(bound, c.Input(i));
    } else if (c.HasAttr(i == 1 ? "min" : "max")) {
      KGRAD_ASSIGN_OR_RETURN(double v, c.Float(i == 1 ? "min" : "max", 0));
      KGRAD_ASSIGN_OR_RETURN(bound, c.ScalarLike(y, v));
    } else {
      continue;
    }
    KGRAD_RETURN_IF_ERROR(AlignConstantDType(c, y, bound));
    KGRAD_ASSIGN_OR_RETURN(y, c.Emit(i == 1 ? PrimId::kMaximum : PrimId::kMinimum, {y, bound}));
  }
  return std::vector<ImportedValue>{y};
}

// Mod(a, b){fmod=0} = mod(a, b){fmod}. ONNX requires fmod=1 for floats.
Outputs Mod(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue a, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue b, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(int64_t fmod, c.Int("fmod", 0));
  if (fmod != 0 && fmod != 1) return c.Error(absl::StrCat("fmod must be 0 or 1, got ", fmod));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ta, c.TensorType(a));
  if (fmod == 0 && IsDifferentiable(ta->dtype())) {
    return c.Error(absl::StrCat("fmod must be 1 for a floating-point input, got fmod=0 with ",
                                ta->ToString()));
  }
  return OneOutput(c.Emit(PrimId::kMod, {a, b}, {{"fmod", fmod == 1}}));
}

// BitShift(x, y){direction} = bit_shift(x, y){direction: left | right}.
Outputs BitShift(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(std::string d, c.String("direction", ""));
  if (d != "LEFT" && d != "RIGHT") {
    return c.Error(absl::StrCat("direction must be \"LEFT\" or \"RIGHT\", got \"", d, "\""));
  }
  return OneOutput(c.Emit(PrimId::kBitShift, {x, y}, {{"direction", std::string(d == "LEFT" ? "left" : "right")}}));
}

// Cast(x){to}.
Outputs Cast(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(int64_t to, c.Int("to", 0));
  absl::StatusOr<DType> t = DTypeFromOnnx(static_cast<int32_t>(to));
  if (!t.ok()) return c.Error(absl::StrCat("attribute 'to': ", t.status().message()));
  const AbstractTensor* tx = AsTensor(x.type);
  if (tx != nullptr && tx->dtype() == *t) return std::vector<ImportedValue>{x};
  return OneOutput(c.Emit(PrimId::kCast, {x}, {{"dtype", *t}}));
}

// CastLike(x, like) (opset 15): Cast to like's element type; like's values and
// shape are not read.
Outputs CastLike(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue like, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, c.TensorType(x));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tl, c.TensorType(like));
  if (tx->dtype() == tl->dtype()) return std::vector<ImportedValue>{x};
  return OneOutput(c.Emit(PrimId::kCast, {x}, {{"dtype", tl->dtype()}}));
}

}  // namespace

void AddElementwiseOps(OpTable* t) {
  AddMappings(t, {{"Identity", Identity}, {"Gelu", Gelu}, {"Pow", Pow},
                  {"Max", Variadic<PrimId::kMaximum>}, {"Min", Variadic<PrimId::kMinimum>},
                  {"Sum", Variadic<PrimId::kAdd>}, {"Clip", Clip}, {"Mod", Mod},
                  {"BitShift", BitShift}, {"Cast", Cast}, {"CastLike", CastLike}});
}

}  // namespace onnx_import
}  // namespace kgrad
