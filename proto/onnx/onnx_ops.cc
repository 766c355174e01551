// ONNX op mappings: the table, elementwise ops and reductions. Each mapping
// states the ONNX form it accepts and the kgrad primitives it becomes.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"
#include "proto/onnx/onnx_dynamic_shape_ops.h"
#include "proto/onnx/onnx_tensor.h"

namespace kgrad {
namespace onnx_import {

const OpTable& AllOpMappings() {
  static const OpTable* const table = [] {
    auto* t = new OpTable;
    AddElementwiseOps(t);
    AddShapeOps(t);
    AddNnOps(t);
    AddWindowOps(t);
    AddResizeOps(t);
    AddControlFlowOps(t);
    AddActivationOps(t);
    AddLossOps(t);
    AddNormOps(t);
    AddRnnOps(t);
    AddIndexOps(t);
    return t;
  }();
  return *table;
}

OpMapping FindOpMapping(const std::string& op_type) {
  const OpTable& table = AllOpMappings();
  auto it = table.find(op_type);
  return it == table.end() ? nullptr : it->second;
}

namespace {

// y = op(x).
template <PrimId id>
Outputs Unary(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  return OneOutput(c.Emit(id, {x}));
}

// Identity(x) = x.
Outputs Identity(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  return std::vector<ImportedValue>{x};
}

// Gives a constant operand the other operand's dtype (exporters write Pow(x, 2.0)
// with a double exponent next to a float x, or integer constants next to floats).
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

// z = op(x, y), NumPy broadcasting.
template <PrimId id>
Outputs Binary(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Input(1));
  KGRAD_RETURN_IF_ERROR(AlignConstantDType(c, x, y));
  return OneOutput(c.Emit(id, {x, y}));
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

// Where(cond, x, y) = select(cond, x, y).
Outputs Where(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(3, 3));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue cond, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Input(2));
  KGRAD_RETURN_IF_ERROR(AlignConstantDType(c, x, y));
  return OneOutput(c.Emit(PrimId::kSelect, {cond, x, y}));
}

// The reduction of a Reduce* node: axes from the input (ReduceSum from opset 13,
// the others from 18) or the attribute; empty means all, or nothing with
// noop_with_empty_axes=1 (`noop`).
struct ReduceSpec {
  AttrMap attrs;
  bool noop = false;
};

absl::StatusOr<ReduceSpec> ReadReduce(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 2));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  std::vector<int64_t> axes;
  if (c.HasInput(1)) {
    KGRAD_ASSIGN_OR_RETURN(axes, c.ConstInts(1));
  } else {
    KGRAD_ASSIGN_OR_RETURN(axes, c.Ints("axes", {}));
  }
  KGRAD_ASSIGN_OR_RETURN(int64_t keepdims, c.Int("keepdims", 1));
  KGRAD_ASSIGN_OR_RETURN(int64_t noop, c.Int("noop_with_empty_axes", 0));
  ReduceSpec r;
  r.noop = axes.empty() && noop != 0;
  r.attrs = {{"axes", axes}, {"keepdims", keepdims != 0}};
  return r;
}

// Reduce* whose axes input is computed at run time: the sums (ReduceSum and the
// L1, L2, SumSquare and LogSum built on it) become dynamic_reduce_sum, ReduceMean
// that sum over its count; max, min, prod and logsumexp have no run-time form.
absl::StatusOr<ImportedValue> RunTimeReduce(NodeContext& c, PrimId id, const ImportedValue& x) {
  if (id != PrimId::kReduceSum && id != PrimId::kReduceMean) {
    return c.Error("axes computed at run time (input 1 is not a constant) are supported by "
                   "ReduceSum, ReduceMean, ReduceL1, ReduceL2, ReduceSumSquare and ReduceLogSum "
                   "only");
  }
  KGRAD_ASSIGN_OR_RETURN(int64_t keepdims, c.Int("keepdims", 1));
  KGRAD_ASSIGN_OR_RETURN(int64_t noop, c.Int("noop_with_empty_axes", 0));
  return DynamicReduceSum(c, x, keepdims != 0, noop != 0, id == PrimId::kReduceMean);
}

// Reduce*(x[, axes]){axes, keepdims=1, noop_with_empty_axes=0} = `id` over the axes
// of `pre`(x), then `post` (kNeg as "none" for either).
template <PrimId id, PrimId pre = PrimId::kNeg, PrimId post = PrimId::kNeg>
Outputs Reduce(NodeContext& c) {
  const bool run_time = !IsConstantInput(c, 1);
  ReduceSpec r;
  if (run_time) {
    KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 2));
    KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  } else {
    KGRAD_ASSIGN_OR_RETURN(r, ReadReduce(c));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  if (pre != PrimId::kNeg) {
    KGRAD_ASSIGN_OR_RETURN(x, c.Emit(pre, {x}));
  }
  if (run_time) {
    KGRAD_ASSIGN_OR_RETURN(x, RunTimeReduce(c, id, x));
  } else if (!r.noop) {
    KGRAD_ASSIGN_OR_RETURN(x, c.Emit(id, {x}, r.attrs));
  }
  if (post != PrimId::kNeg) {
    KGRAD_ASSIGN_OR_RETURN(x, c.Emit(post, {x}));
  }
  return std::vector<ImportedValue>{x};
}

// ArgMax/ArgMin(x){axis=0, keepdims=1, select_last_index=0}. The last index among
// ties is (n - 1) - the first one along the reversed axis (a gather of the
// reversed positions; the axis must be static).
template <PrimId id>
Outputs ArgReduce(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t keepdims, c.Int("keepdims", 1));
  KGRAD_ASSIGN_OR_RETURN(int64_t last, c.Int("select_last_index", 0));
  AttrMap attrs = {{"axis", axis}, {"keepdims", keepdims != 0}};
  if (last == 0) return OneOutput(c.Emit(id, {x}, std::move(attrs)));
  KGRAD_ASSIGN_OR_RETURN(int64_t n, c.StaticDim(x, axis, "reduced dim"));
  std::vector<int64_t> reversed;
  for (int64_t i = n - 1; i >= 0; --i) reversed.push_back(i);
  ImportedValue idx = c.Const(Tensor::FromVector<int64_t>({n}, reversed));
  KGRAD_ASSIGN_OR_RETURN(x, c.Emit(PrimId::kGather, {x, idx}, {{"axis", axis}}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue first, c.Emit(id, {x}, std::move(attrs)));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue top, c.ScalarLike(first, static_cast<double>(n - 1)));
  return OneOutput(c.Emit(PrimId::kSub, {top, first}));
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
  (*t)["Identity"] = Identity;
  (*t)["Neg"] = Unary<PrimId::kNeg>;
  (*t)["Exp"] = Unary<PrimId::kExp>;
  (*t)["Log"] = Unary<PrimId::kLog>;
  (*t)["Sin"] = Unary<PrimId::kSin>;
  (*t)["Cos"] = Unary<PrimId::kCos>;
  (*t)["Tanh"] = Unary<PrimId::kTanh>;
  (*t)["Sigmoid"] = Unary<PrimId::kSigmoid>;
  (*t)["Relu"] = Unary<PrimId::kRelu>;
  (*t)["Softplus"] = Unary<PrimId::kSoftplus>;
  (*t)["Sqrt"] = Unary<PrimId::kSqrt>;
  (*t)["Abs"] = Unary<PrimId::kAbs>;
  (*t)["Sign"] = Unary<PrimId::kSign>;
  (*t)["Reciprocal"] = Unary<PrimId::kReciprocal>;
  (*t)["Erf"] = Unary<PrimId::kErf>;
  (*t)["Floor"] = Unary<PrimId::kFloor>;
  (*t)["Ceil"] = Unary<PrimId::kCeil>;
  (*t)["Round"] = Unary<PrimId::kRound>;  // halves to even
  (*t)["Asin"] = Unary<PrimId::kAsin>;
  (*t)["Acos"] = Unary<PrimId::kAcos>;
  (*t)["Atan"] = Unary<PrimId::kAtan>;
  (*t)["Sinh"] = Unary<PrimId::kSinh>;
  (*t)["Cosh"] = Unary<PrimId::kCosh>;
  (*t)["Asinh"] = Unary<PrimId::kAsinh>;
  (*t)["Acosh"] = Unary<PrimId::kAcosh>;
  (*t)["Atanh"] = Unary<PrimId::kAtanh>;
  (*t)["Not"] = Unary<PrimId::kLogicalNot>;
  (*t)["Gelu"] = Gelu;
  (*t)["Add"] = Binary<PrimId::kAdd>;
  (*t)["Sub"] = Binary<PrimId::kSub>;
  (*t)["Mul"] = Binary<PrimId::kMul>;
  (*t)["Div"] = Binary<PrimId::kDiv>;
  (*t)["Pow"] = Pow;
  (*t)["Equal"] = Binary<PrimId::kEqual>;
  (*t)["Less"] = Binary<PrimId::kLess>;
  (*t)["LessOrEqual"] = Binary<PrimId::kLessEqual>;
  (*t)["Greater"] = Binary<PrimId::kGreater>;
  (*t)["GreaterOrEqual"] = Binary<PrimId::kGreaterEqual>;
  (*t)["And"] = Binary<PrimId::kLogicalAnd>;
  (*t)["Or"] = Binary<PrimId::kLogicalOr>;
  (*t)["Max"] = Variadic<PrimId::kMaximum>;
  (*t)["Min"] = Variadic<PrimId::kMinimum>;
  (*t)["Sum"] = Variadic<PrimId::kAdd>;
  (*t)["Clip"] = Clip;
  (*t)["Where"] = Where;
  (*t)["Cast"] = Cast;
  (*t)["CastLike"] = CastLike;
  (*t)["ReduceSum"] = Reduce<PrimId::kReduceSum>;
  (*t)["ReduceMean"] = Reduce<PrimId::kReduceMean>;
  (*t)["ReduceMax"] = Reduce<PrimId::kReduceMax>;
  (*t)["ReduceMin"] = Reduce<PrimId::kReduceMin>;
  (*t)["ReduceProd"] = Reduce<PrimId::kReduceProd>;
  (*t)["ReduceLogSumExp"] = Reduce<PrimId::kLogsumexp>;
  // ReduceL1 = sum |x|, ReduceL2 = sqrt(sum x^2), ReduceSumSquare = sum x^2,
  // ReduceLogSum = log(sum x).
  (*t)["ReduceL1"] = Reduce<PrimId::kReduceSum, PrimId::kAbs>;
  (*t)["ReduceL2"] = Reduce<PrimId::kReduceSum, PrimId::kSquare, PrimId::kSqrt>;
  (*t)["ReduceSumSquare"] = Reduce<PrimId::kReduceSum, PrimId::kSquare>;
  (*t)["ReduceLogSum"] = Reduce<PrimId::kReduceSum, PrimId::kNeg, PrimId::kLog>;
  (*t)["ArgMax"] = ArgReduce<PrimId::kArgmax>;
  (*t)["ArgMin"] = ArgReduce<PrimId::kArgmin>;
}

}  // namespace onnx_import
}  // namespace kgrad
