// ONNX op mappings: linear algebra and softmax (convolution and pooling are in
// onnx_window_ops.cc, the normalisations in onnx_norm_ops.cc).
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"

namespace kgrad {
namespace onnx_import {
namespace {

// MatMul(a, b), NumPy semantics: a 1-D operand gains a dim that is dropped after.
Outputs MatMul(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue a, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue b, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ta, c.TensorType(a));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tb, c.TensorType(b));
  bool a1 = ta->rank() == 1, b1 = tb->rank() == 1;
  if (a1) {
    KGRAD_ASSIGN_OR_RETURN(a, c.Emit(PrimId::kExpandDims, {a}, {{"axis", int64_t{0}}}));
  }
  if (b1) {
    KGRAD_ASSIGN_OR_RETURN(b, c.Emit(PrimId::kExpandDims, {b}, {{"axis", int64_t{1}}}));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Emit(PrimId::kMatMul, {a, b}));
  if (b1) {
    KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kSqueeze, {y}, {{"axes", std::vector<int64_t>{-1}}}));
  }
  if (a1) {
    KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kSqueeze, {y}, {{"axes", std::vector<int64_t>{-2}}}));
  }
  return std::vector<ImportedValue>{y};
}

// Gemm(A, B[, C]){alpha, beta, transA, transB} = alpha * op(A) op(B) + beta * C.
Outputs Gemm(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 3));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue a, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue b, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(double alpha, c.Float("alpha", 1));
  KGRAD_ASSIGN_OR_RETURN(double beta, c.Float("beta", 1));
  KGRAD_ASSIGN_OR_RETURN(int64_t ta, c.Int("transA", 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t tb, c.Int("transB", 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(a));
  if (t->rank() != 2) return c.Error(absl::StrCat("A must be 2-D, got ", t->ToString()));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Emit(PrimId::kMatMul, {a, b},
                                                 {{"transpose_a", ta != 0}, {"transpose_b", tb != 0}}));
  if (alpha != 1) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue k, c.Scalar(t->dtype(), alpha));
    KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kMul, {y, k}));
  }
  if (c.HasInput(2) && beta != 0) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue bias, c.Input(2));
    if (beta != 1) {
      KGRAD_ASSIGN_OR_RETURN(ImportedValue k, c.Scalar(t->dtype(), beta));
      KGRAD_ASSIGN_OR_RETURN(bias, c.Emit(PrimId::kMul, {bias, k}));
    }
    KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kAdd, {y, bias}));
  }
  return std::vector<ImportedValue>{y};
}

Outputs Einsum(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 16));
  KGRAD_ASSIGN_OR_RETURN(std::string eq, c.String("equation", ""));
  std::vector<ImportedValue> xs;
  for (int i = 0; i < c.num_inputs(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(i));
    xs.push_back(x);
  }
  std::string compact;
  for (char ch : eq) {
    if (ch != ' ') compact.push_back(ch);
  }
  return OneOutput(c.Emit(PrimId::kEinsum, xs, {{"equation", compact}}));
}

// Softmax/LogSoftmax(x){axis}: opset 13 normalises along axis (default -1); older
// opsets flatten at axis (default 1), which is the same only for the last axis.
template <PrimId id>
Outputs Softmax(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", c.opset() >= 13 ? -1 : 1));
  if (c.opset() < 13) {
    absl::StatusOr<int> a = NormalizeAxis(axis, t->rank());
    if (!a.ok() || *a != t->rank() - 1) {
      return c.Error("before opset 13 only the last axis is supported (flattening semantics)");
    }
  }
  return OneOutput(c.Emit(id, {x}, {{"axis", axis}}));
}

}  // namespace

void AddNnOps(OpTable* t) {
  AddMappings(t, {{"MatMul", MatMul}, {"Gemm", Gemm}, {"Einsum", Einsum},
                  {"Softmax", Softmax<PrimId::kSoftmax>},
                  {"LogSoftmax", Softmax<PrimId::kLogSoftmax>}});
}

}  // namespace onnx_import
}  // namespace kgrad
