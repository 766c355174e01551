// ONNX op mappings: the activation functions PyTorch's exporter emits that kgrad
// has no primitive for, each an exact composition of primitives (so each inherits
// their gradient rules), the variadic Mean, Xor, IsNaN, IsInf and Tan.
//
// Branches that are not taken still run and are then masked by select, and
// select's adjoint hands them a zero cotangent; an exp in such a branch is
// therefore clamped to its own domain (expm1(min(x, 0))) so that a large x cannot
// produce inf * 0 = NaN in the gradient.
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"

namespace kgrad {
namespace onnx_import {
namespace {

// The one tensor input of an activation (float types are checked by the primitives).
absl::StatusOr<ImportedValue> OnlyInput(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  return c.Input(0);
}

// a * x for a constant a (x itself when a == 1).
absl::StatusOr<ImportedValue> Scale(NodeContext& c, const ImportedValue& x, double a) {
  if (a == 1) return x;
  KGRAD_ASSIGN_OR_RETURN(ImportedValue k, c.ScalarLike(x, a));
  return c.Emit(PrimId::kMul, {x, k});
}

// x compared with the constant v by `cmp` (a bool tensor shaped like x).
absl::StatusOr<ImportedValue> Compare(NodeContext& c, PrimId cmp, const ImportedValue& x,
                                      double v) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue k, c.ScalarLike(x, v));
  return c.Emit(cmp, {x, k});
}

// alpha * expm1(min(x, 0) / alpha): the negative branch of Elu (alpha = 1 inside),
// Selu and Celu, finite for every x.
absl::StatusOr<ImportedValue> NegativeBranch(NodeContext& c, const ImportedValue& x,
                                             double inner, double outer) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue zero, c.ScalarLike(x, 0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue neg, c.Emit(PrimId::kMinimum, {x, zero}));
  KGRAD_ASSIGN_OR_RETURN(neg, Scale(c, neg, inner));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue e, c.Emit(PrimId::kExpm1, {neg}));
  return Scale(c, e, outer);
}

// select(x > 0, x, neg) scaled by gamma.
absl::StatusOr<ImportedValue> PositiveOr(NodeContext& c, const ImportedValue& x,
                                         const ImportedValue& neg, double gamma) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue pos, Compare(c, PrimId::kGreater, x, 0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Emit(PrimId::kSelect, {pos, x, neg}));
  return Scale(c, y, gamma);
}

}  // namespace

// max(0, min(1, alpha * x + beta)).
absl::StatusOr<ImportedValue> HardSigmoidOf(NodeContext& c, const ImportedValue& x,
                                            double alpha, double beta) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, Scale(c, x, alpha));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue b, c.ScalarLike(x, beta));
  KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kAdd, {y, b}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue one, c.ScalarLike(x, 1));
  KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kMinimum, {y, one}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue zero, c.ScalarLike(x, 0));
  return c.Emit(PrimId::kMaximum, {y, zero});
}

absl::StatusOr<ImportedValue> LeakyReluOf(NodeContext& c, const ImportedValue& x, double alpha) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue pos, Compare(c, PrimId::kGreaterEqual, x, 0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue neg, Scale(c, x, alpha));
  return c.Emit(PrimId::kSelect, {pos, x, neg});
}

absl::StatusOr<ImportedValue> ThresholdedReluOf(NodeContext& c, const ImportedValue& x, double alpha) {
  return c.Emit(PrimId::kThresholdedRelu, {x}, {{"alpha", alpha}});
}

absl::StatusOr<ImportedValue> SoftsignOf(NodeContext& c, const ImportedValue& x) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue a, c.Emit(PrimId::kAbs, {x}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue one, c.ScalarLike(x, 1));
  KGRAD_ASSIGN_OR_RETURN(a, c.Emit(PrimId::kAdd, {a, one}));
  return c.Emit(PrimId::kDiv, {x, a});
}

namespace {

// Elu(x){alpha=1} = x if x > 0 else alpha * (exp(x) - 1).
Outputs Elu(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, OnlyInput(c));
  KGRAD_ASSIGN_OR_RETURN(double alpha, c.Float("alpha", 1.0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue neg, NegativeBranch(c, x, 1.0, alpha));
  return OneOutput(PositiveOr(c, x, neg, 1.0));
}

// Selu(x){alpha=1.6732632, gamma=1.0507010} = gamma * (x if x > 0 else
// alpha * (exp(x) - 1)). The defaults are ONNX's float constants.
Outputs Selu(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, OnlyInput(c));
  KGRAD_ASSIGN_OR_RETURN(double alpha, c.Float("alpha", 1.67326319217681884765625));
  KGRAD_ASSIGN_OR_RETURN(double gamma, c.Float("gamma", 1.05070102214813232421875));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue neg, NegativeBranch(c, x, 1.0, alpha));
  return OneOutput(PositiveOr(c, x, neg, gamma));
}

// Celu(x){alpha=1} = max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
Outputs Celu(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, OnlyInput(c));
  KGRAD_ASSIGN_OR_RETURN(double alpha, c.Float("alpha", 1.0));
  if (alpha == 0) return c.Error("attribute 'alpha' must be non-zero");
  KGRAD_ASSIGN_OR_RETURN(ImportedValue neg, NegativeBranch(c, x, 1.0 / alpha, alpha));
  return OneOutput(PositiveOr(c, x, neg, 1.0));
}

// LeakyRelu(x){alpha=0.01} = x if x >= 0 else alpha * x.
Outputs LeakyRelu(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, OnlyInput(c));
  KGRAD_ASSIGN_OR_RETURN(double alpha, c.Float("alpha", 0.01));
  return OneOutput(LeakyReluOf(c, x, alpha));
}

// PRelu(x, slope) = x if x >= 0 else slope * x, slope broadcast to x (ONNX's
// unidirectional broadcasting; kgrad's two-way broadcasting then must keep x's
// shape, which the check below asserts where shapes are known).
Outputs PRelu(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue slope, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, c.TensorType(x));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ts, c.TensorType(slope));
  if (ts->rank() > tx->rank()) {
    return c.Error(absl::StrCat("slope ", ts->ToString(), " must broadcast to X ", tx->ToString()));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue pos, Compare(c, PrimId::kGreaterEqual, x, 0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue neg, c.Emit(PrimId::kMul, {x, slope}));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tn, c.TensorType(neg));
  bool keeps_x = tn->rank() == tx->rank();
  for (int i = 0; keeps_x && i < tx->rank(); ++i) {
    keeps_x = tx->shape()[i] < 0 || tn->shape()[i] == tx->shape()[i];
  }
  if (!keeps_x) {
    return c.Error(absl::StrCat("slope ", ts->ToString(), " must broadcast to X ", tx->ToString()));
  }
  return OneOutput(c.Emit(PrimId::kSelect, {pos, x, neg}));
}

// HardSigmoid(x){alpha=0.2, beta=0.5} = max(0, min(1, alpha * x + beta)).
Outputs HardSigmoid(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, OnlyInput(c));
  KGRAD_ASSIGN_OR_RETURN(double alpha, c.Float("alpha", 0.2));
  KGRAD_ASSIGN_OR_RETURN(double beta, c.Float("beta", 0.5));
  return OneOutput(HardSigmoidOf(c, x, alpha, beta));
}

// HardSwish(x) = x * max(0, min(1, x / 6 + 1/2)).
Outputs HardSwish(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, OnlyInput(c));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue h, HardSigmoidOf(c, x, 1.0 / 6.0, 0.5));
  return OneOutput(c.Emit(PrimId::kMul, {x, h}));
}

// Softsign(x) = x / (1 + |x|).
Outputs Softsign(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, OnlyInput(c));
  return OneOutput(SoftsignOf(c, x));
}

// Mish(x) = x * tanh(softplus(x)).
Outputs Mish(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, OnlyInput(c));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue s, c.Emit(PrimId::kSoftplus, {x}));
  KGRAD_ASSIGN_OR_RETURN(s, c.Emit(PrimId::kTanh, {s}));
  return OneOutput(c.Emit(PrimId::kMul, {x, s}));
}

// Shrink(x){bias=0, lambd=0.5} = x + bias if x < -lambd, x - bias if x > lambd,
// else 0.
Outputs Shrink(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, OnlyInput(c));
  KGRAD_ASSIGN_OR_RETURN(double bias, c.Float("bias", 0.0));
  KGRAD_ASSIGN_OR_RETURN(double lambd, c.Float("lambd", 0.5));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue lo, Compare(c, PrimId::kLess, x, -lambd));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue hi, Compare(c, PrimId::kGreater, x, lambd));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue b, c.ScalarLike(x, bias));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue plus, c.Emit(PrimId::kAdd, {x, b}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue minus, c.Emit(PrimId::kSub, {x, b}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue zero, c.ScalarLike(x, 0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Emit(PrimId::kSelect, {hi, minus, zero}));
  return OneOutput(c.Emit(PrimId::kSelect, {lo, plus, y}));
}

// Mean(x0, x1, ...) = (x0 + x1 + ...) / n, NumPy broadcasting.
Outputs Mean(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 64));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue acc, c.Input(0));
  for (int i = 1; i < c.num_inputs(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(i));
    KGRAD_ASSIGN_OR_RETURN(acc, c.Emit(PrimId::kAdd, {acc, x}));
  }
  if (c.num_inputs() == 1) return std::vector<ImportedValue>{acc};
  KGRAD_ASSIGN_OR_RETURN(ImportedValue n, c.ScalarLike(acc, c.num_inputs()));
  return OneOutput(c.Emit(PrimId::kDiv, {acc, n}));
}

// Xor(a, b) on bools = a != b.
Outputs Xor(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue a, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue b, c.Input(1));
  for (const ImportedValue* v : {&a, &b}) {
    KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(*v));
    if (t->dtype() != DType::kBool) return c.Error(absl::StrCat("needs bool inputs, got ", t->ToString()));
  }
  return OneOutput(c.Emit(PrimId::kNotEqual, {a, b}));
}

// IsNaN(x) = x != x.
Outputs IsNaN(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, OnlyInput(c));
  return OneOutput(c.Emit(PrimId::kNotEqual, {x, x}));
}

// IsInf(x){detect_negative=1, detect_positive=1} = (x == inf) or (x == -inf), as
// selected; neither: x < -inf (false everywhere).
Outputs IsInf(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, OnlyInput(c));
  KGRAD_ASSIGN_OR_RETURN(int64_t neg, c.Int("detect_negative", 1));
  KGRAD_ASSIGN_OR_RETURN(int64_t pos, c.Int("detect_positive", 1));
  const double inf = std::numeric_limits<double>::infinity();
  if (neg == 0 && pos == 0) return OneOutput(Compare(c, PrimId::kLess, x, -inf));
  if (neg == 0) return OneOutput(Compare(c, PrimId::kEqual, x, inf));
  if (pos == 0) return OneOutput(Compare(c, PrimId::kEqual, x, -inf));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue a, c.Emit(PrimId::kAbs, {x}));
  return OneOutput(Compare(c, PrimId::kEqual, a, inf));
}

// Tan(x) = sin(x) / cos(x).
Outputs Tan(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, OnlyInput(c));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue s, c.Emit(PrimId::kSin, {x}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue co, c.Emit(PrimId::kCos, {x}));
  return OneOutput(c.Emit(PrimId::kDiv, {s, co}));
}

}  // namespace

void AddActivationOps(OpTable* t) {
  AddMappings(t, {{"Elu", Elu}, {"Selu", Selu}, {"Celu", Celu}, {"LeakyRelu", LeakyRelu},
                  {"PRelu", PRelu}, {"HardSigmoid", HardSigmoid}, {"HardSwish", HardSwish},
                  {"Softsign", Softsign}, {"Mish", Mish}, {"Shrink", Shrink}, {"Mean", Mean},
                  {"Xor", Xor}, {"IsNaN", IsNaN}, {"IsInf", IsInf}, {"Tan", Tan}});
}

}  // namespace onnx_import
}  // namespace kgrad
