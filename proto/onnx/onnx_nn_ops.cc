// ONNX op mappings: linear algebra and softmax (convolution and pooling are in
// onnx_window_ops.cc, the normalisations in onnx_norm_ops.cc).
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

// The equation with every '...' replaced by letters the equation does not use,
// one per dim it stands for (operand i's rank minus its letters), right-aligned
// across operands as NumPy broadcasts them, and the output made explicit (the
// ellipsis dims first, then the letters used once, sorted, as NumPy's implicit
// form). Equations without '...' are returned as they are.
absl::StatusOr<std::string> ExpandEllipsis(NodeContext& c, const std::string& eq, const std::vector<int>& ranks) {
  if (eq.find('.') == std::string::npos) return eq;
  const size_t arrow = eq.find("->");
  std::vector<std::string> terms = absl::StrSplit(eq.substr(0, arrow), ',');
  if (terms.size() != ranks.size()) {
    return c.Error(absl::StrCat("equation '", eq, "' names ", terms.size(), " operands, got ", ranks.size()));
  }
  std::string fresh;
  for (char ch = 'A'; ch <= 'z'; ++ch) {
    const bool letter = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z');
    if (letter && eq.find(ch) == std::string::npos) fresh.push_back(ch);
  }
  std::vector<int> dots(terms.size(), 0);
  int most = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const size_t at = terms[i].find("...");
    if (at == std::string::npos) continue;
    if (terms[i].find('.', at + 3) != std::string::npos) {
      return c.Error(absl::StrCat("equation '", eq, "': operand ", i, " has more than one '...'"));
    }
    dots[i] = ranks[i] - static_cast<int>(terms[i].size() - 3);
    if (dots[i] < 0) {
      return c.Error(absl::StrCat("equation '", eq, "': operand ", i, " has rank ", ranks[i], ", fewer than its ",
                                  terms[i].size() - 3, " letters"));
    }
    most = std::max(most, dots[i]);
  }
  if (most > static_cast<int>(fresh.size())) return c.Error(absl::StrCat("equation '", eq, "' has too many dims"));
  const std::string all = fresh.substr(0, most);
  std::string lhs;
  std::map<char, int> count;
  for (size_t i = 0; i < terms.size(); ++i) {
    std::string t = terms[i];
    const size_t at = t.find("...");
    if (at != std::string::npos) t.replace(at, 3, all.substr(most - dots[i]));
    for (char ch : terms[i]) {
      if (ch != '.') ++count[ch];
    }
    absl::StrAppend(&lhs, i > 0 ? "," : "", t);
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
    const size_t at = out.find("...");
    if (at != std::string::npos) out.replace(at, 3, all);
  } else {
    out = all;
    for (const auto& [ch, n] : count) {
      if (n == 1) out.push_back(ch);
    }
  }
  return absl::StrCat(lhs, "->", out);
}

// Det(X) = det(X): each square matrix's determinant.
Outputs Det(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  return OneOutput(c.Emit(PrimId::kDet, {x}));
}

// Einsum(inputs...){equation} = einsum, '...' expanded to letters at import.
Outputs Einsum(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 16));
  KGRAD_ASSIGN_OR_RETURN(std::string eq, c.String("equation", ""));
  std::vector<ImportedValue> xs;
  std::vector<int> ranks;
  for (int i = 0; i < c.num_inputs(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(i));
    KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
    xs.push_back(x);
    ranks.push_back(t->rank());
  }
  std::string compact;
  for (char ch : eq) {
    if (ch != ' ') compact.push_back(ch);
  }
  KGRAD_ASSIGN_OR_RETURN(compact, ExpandEllipsis(c, compact, ranks));
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
  AddMappings(t, {{"MatMul", MatMul}, {"Gemm", Gemm}, {"Einsum", Einsum}, {"Det", Det},
                  {"Softmax", Softmax<PrimId::kSoftmax>},
                  {"LogSoftmax", Softmax<PrimId::kLogSoftmax>}});
}

}  // namespace onnx_import
}  // namespace kgrad
