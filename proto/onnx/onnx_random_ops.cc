// ONNX's random ops as kgrad's seeded random primitives (ops/nn.cc):
//   RandomUniformLike(x){dtype, low, high, seed} = random_uniform_like(x)
//   RandomNormalLike(x){dtype, mean, scale, seed} = random_normal_like(x)
//   RandomUniform / RandomNormal{shape, ...}     = the same of zeros of `shape`
//   Bernoulli(p){dtype, seed}                     = cast(random_uniform_like(p) < p)
// Element i is a draw of kgrad's counter-based hash at (seed, i), so a seed gives
// the same numbers on every run and device; ONNX leaves the numbers to the
// runtime (numpy's, ONNX Runtime's and kgrad's differ). An absent seed is 0: the
// model stays a function of its inputs.
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"
#include "proto/onnx/onnx_tensor.h"

namespace kgrad {
namespace onnx_import {
namespace {

// The seed attribute (a float in ONNX) as an integer; fractions are dropped.
absl::StatusOr<int64_t> Seed(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(double seed, c.Float("seed", 0));
  if (!std::isfinite(seed) || std::abs(seed) > 9.2e18) {
    return c.Error(absl::StrCat("seed ", seed, " is out of range"));
  }
  return static_cast<int64_t>(seed);
}

// The dtype attribute (an ONNX element type), else `dflt`.
absl::StatusOr<DType> DTypeAttribute(NodeContext& c, DType dflt) {
  if (!c.HasAttr("dtype")) return dflt;
  KGRAD_ASSIGN_OR_RETURN(int64_t code, c.Int("dtype", 0));
  absl::StatusOr<DType> d = DTypeFromOnnx(static_cast<int32_t>(code));
  if (!d.ok()) return c.Error(d.status().message());
  return *d;
}

// The output dtype of the draws: the dtype attribute, else `dflt`; f32 or f64.
absl::StatusOr<DType> OutputType(NodeContext& c, DType dflt) {
  KGRAD_ASSIGN_OR_RETURN(DType t, DTypeAttribute(c, dflt));
  if (t != DType::kFloat32 && t != DType::kFloat64) {
    return c.Error(absl::StrCat("the output type must be float or double, got ", DTypeName(t)));
  }
  return t;
}

// The distribution's attributes of the primitive `id`.
absl::StatusOr<AttrMap> DrawAttrs(NodeContext& c, PrimId id, DType t) {
  KGRAD_ASSIGN_OR_RETURN(int64_t seed, Seed(c));
  AttrMap a = {{"seed", seed}, {"dtype", t}};
  if (id == PrimId::kRandomUniformLike) {
    KGRAD_ASSIGN_OR_RETURN(double low, c.Float("low", 0));
    KGRAD_ASSIGN_OR_RETURN(double high, c.Float("high", 1));
    a["low"] = low;
    a["high"] = high;
  } else {
    KGRAD_ASSIGN_OR_RETURN(double mean, c.Float("mean", 0));
    KGRAD_ASSIGN_OR_RETURN(double scale, c.Float("scale", 1));
    a["mean"] = mean;
    a["scale"] = scale;
  }
  return a;
}

// RandomUniformLike / RandomNormalLike(x): x's shape; the type x's when float.
template <PrimId id>
Outputs RandomLike(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  const bool is_float = t->dtype() == DType::kFloat32 || t->dtype() == DType::kFloat64;
  KGRAD_ASSIGN_OR_RETURN(DType out, OutputType(c, is_float ? t->dtype() : DType::kFloat32));
  KGRAD_ASSIGN_OR_RETURN(AttrMap attrs, DrawAttrs(c, id, out));
  return OneOutput(c.Emit(id, {x}, std::move(attrs)));
}

// RandomUniform / RandomNormal{shape}: of a constant of that shape.
template <PrimId id>
Outputs RandomOfShape(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(0, 0));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  if (!c.HasAttr("shape")) return c.Error("attribute 'shape' is required");
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> shape, c.Ints("shape", {}));
  absl::StatusOr<int64_t> n = CheckedNumElements(Shape(shape.begin(), shape.end()));
  if (!n.ok() || *n > c.importer().options().max_folded_elements) {
    return c.Error(absl::StrCat("shape [", absl::StrJoin(shape, ", "), "] is invalid or too large"));
  }
  KGRAD_ASSIGN_OR_RETURN(DType out, OutputType(c, DType::kFloat32));
  KGRAD_ASSIGN_OR_RETURN(AttrMap attrs, DrawAttrs(c, id, out));
  KGRAD_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Zeros(DType::kBool, Shape(shape.begin(), shape.end())));
  return OneOutput(c.Emit(id, {c.Const(std::move(zeros))}, std::move(attrs)));
}

// Bernoulli(p){dtype, seed}: 1 where a uniform draw is below p, else 0.
Outputs Bernoulli(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue p, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(p));
  if (t->dtype() != DType::kFloat32 && t->dtype() != DType::kFloat64) {
    return c.Error(absl::StrCat("the probabilities must be float or double, got ", t->ToString()));
  }
  KGRAD_ASSIGN_OR_RETURN(DType out, DTypeAttribute(c, t->dtype()));
  KGRAD_ASSIGN_OR_RETURN(int64_t seed, Seed(c));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue u,
                         c.Emit(PrimId::kRandomUniformLike, {p},
                                {{"seed", seed}, {"dtype", t->dtype()}, {"low", 0.0}, {"high", 1.0}}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue hit, c.Emit(PrimId::kLess, {u, p}));
  return OneOutput(c.Emit(PrimId::kCast, {hit}, {{"dtype", out}}));
}

}  // namespace

void AddRandomOps(OpTable* t) {
  AddMappings(t, {{"RandomUniformLike", RandomLike<PrimId::kRandomUniformLike>},
                  {"RandomNormalLike", RandomLike<PrimId::kRandomNormalLike>},
                  {"RandomUniform", RandomOfShape<PrimId::kRandomUniformLike>},
                  {"RandomNormal", RandomOfShape<PrimId::kRandomNormalLike>},
                  {"Bernoulli", Bernoulli}});
}

}  // namespace onnx_import
}  // namespace kgrad
