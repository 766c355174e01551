#include "ops/linalg.h"

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/bprop_context.h"
#include "ops/op_def.h"
#include "ops/einsum_spec.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {
namespace {

// ----- Checks -----------------------------------------------------------------------
// Operand i of the dtype of operand 0. The message says it both ways that
// callers match on ("dtype of input 0", "same dtype, got f32 and f64").
absl::Status SameDTypeAsFirst(TensorType first, TensorType t, int i) {
  if (t.dtype == first.dtype) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "input ", i, " must have the dtype of input 0 (", DTypeName(first.dtype), "), got ",
      t.ToString(), "; the operands need the same dtype, got ", DTypeName(first.dtype), " and ",
      DTypeName(t.dtype)));
}

// Operand i of matmul: numeric, of rank >= 2 (a matrix or a batch of them). The
// kernels have always named the dtypes in the rank error too.
absl::Status CheckMatMulOperand(TensorType t, int i, CheckedBy by) {
  const bool bad_rank = t.rank() < 2;
  const bool bad_dtype = !Allows(kNumericTypes, t.dtype);
  if (!bad_dtype && !bad_rank) return absl::OkStatus();
  const char* expected = bad_dtype || by == CheckedBy::kKernel
                             ? "a f32, f64, i32 or i64 tensor of rank >= 2"
                             : "a tensor of rank >= 2 (a matrix or a batch)";
  return absl::InvalidArgumentError(
      absl::StrCat("input ", i, " must be ", expected, ", got ", t.ToString()));
}

// Two dims that must be equal: the known one when one is unknown; error when both
// are known and differ.
absl::StatusOr<int64_t> MergeDim(int64_t a, int64_t b, absl::string_view what) {
  if (std::optional<int64_t> d = UnifyDims(a, b)) return *d;
  return absl::InvalidArgumentError(absl::StrCat(what, " must agree, got ", a, " and ", b));
}

// The size of each letter over all operands (unknown where no operand knows it);
// error naming the letter when two known sizes differ.
absl::StatusOr<EinsumSizes> EinsumLetterSizes(const std::string& eq, const EinsumSpec& spec,
                                              absl::Span<const TensorType> operands) {
  EinsumSizes size;
  size.fill(kUnknownDim);
  std::array<int, 128> where{};
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const std::string& sub = spec.inputs[i];
    const TensorType t = operands[i];
    if (static_cast<int>(sub.size()) != t.rank()) {
      return EinsumError(eq, absl::StrCat("operand ", i, " has ", sub.size(), " subscripts '", sub,
                                          "' but is ", t.ToString()));
    }
    for (size_t d = 0; d < sub.size(); ++d) {
      int ch = static_cast<unsigned char>(sub[d]);
      int64_t n = t.shape[d];
      if (n < 0) continue;
      if (size[ch] == kUnknownDim) {
        size[ch] = n;
        where[ch] = static_cast<int>(i);
      } else if (size[ch] != n) {
        return EinsumError(
            eq, absl::StrCat("subscript '", std::string(1, sub[d]), "' has size ", size[ch],
                             " in operand ", where[ch], " but ", n, " in operand ", i));
      }
    }
  }
  return size;
}

}  // namespace

// ----- The checks and formulas of ops/linalg.h ------------------------------------------
absl::StatusOr<MatMulDims> ParseMatMul(const Primitive& p, TensorType a, TensorType b,
                                       CheckedBy by) {
  KGRAD_RETURN_IF_ERROR(CheckMatMulOperand(a, 0, by));
  KGRAD_RETURN_IF_ERROR(CheckMatMulOperand(b, 1, by));
  KGRAD_RETURN_IF_ERROR(SameDTypeAsFirst(a, b, 1));
  MatMulDims d;
  d.ta = p.GetBool("transpose_a");
  d.tb = p.GetBool("transpose_b");
  absl::Span<const int64_t> sa = a.shape, sb = b.shape;
  const int ra = a.rank(), rb = b.rank();
  d.m = d.ta ? sa[ra - 1] : sa[ra - 2];
  const int64_t ka = d.ta ? sa[ra - 2] : sa[ra - 1];
  const int64_t kb = d.tb ? sb[rb - 1] : sb[rb - 2];
  d.n = d.tb ? sb[rb - 2] : sb[rb - 1];
  absl::StatusOr<int64_t> k = MergeDim(ka, kb, "matmul inner dimensions");
  if (!k.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(k.status().message(), " (", a.ToString(), " x ",
                                                   b.ToString(), ", transpose_a=", d.ta,
                                                   ", transpose_b=", d.tb, ")"));
  }
  d.k = *k;
  absl::StatusOr<Shape> batch =
      BroadcastShapes(sa.first(ra - 2), sb.first(rb - 2));
  if (!batch.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("matmul batch dimensions: ", batch.status().message()));
  }
  d.batch = *std::move(batch);
  d.out = d.batch;
  d.out.push_back(d.m);
  d.out.push_back(d.n);
  return d;
}

absl::StatusOr<EinsumCall> ParseEinsumCall(const Primitive& p,
                                           absl::Span<const TensorType> operands) {
  const int n = static_cast<int>(operands.size());
  if (n < 1 || n > kMaxEinsumOperands) {
    return absl::InvalidArgumentError(
        absl::StrCat("einsum takes 1 to ", kMaxEinsumOperands, " operands, got ", n));
  }
  for (int i = 0; i < n; ++i) {
    KGRAD_RETURN_IF_ERROR(CheckFloat(i, operands[i]));
    KGRAD_RETURN_IF_ERROR(SameDTypeAsFirst(operands[0], operands[i], i));
  }
  const std::string& eq = p.GetString("equation");
  EinsumCall call;
  KGRAD_ASSIGN_OR_RETURN(call.spec, ParseEinsum(eq, n));
  KGRAD_ASSIGN_OR_RETURN(call.size, EinsumLetterSizes(eq, call.spec, operands));
  call.out = LetterShape(call.spec.output, call.size);
  return call;
}

namespace {

// ----- Inference --------------------------------------------------------------------
// matmul(a, b){transpose_a, transpose_b}: see MatMulDims.
absl::StatusOr<AbstractPtr> InferMatMul(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* a, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* b, TensorArg(c, 1));
  KGRAD_ASSIGN_OR_RETURN(MatMulDims d, ParseMatMul(c.prim, *a, *b, CheckedBy::kInference));
  return MakeAbstractTensor(a->dtype(), std::move(d.out));
}

// einsum(x0, ..., xn){equation}: out[out letters] = sum over the other letters of
// the product of the operands, each indexed by its subscripts (a repeated letter
// in one operand reads the diagonal).
absl::StatusOr<AbstractPtr> InferEinsum(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<TensorType> operands, TensorArgs(c));
  KGRAD_ASSIGN_OR_RETURN(EinsumCall call, ParseEinsumCall(c.prim, operands));
  return MakeAbstractTensor(operands[0].dtype, std::move(call.out));
}

// ----- Gradient rules -------------------------------------------------------------
// `d`, the sensitivity of matmul operand i with the output's batch dims, summed
// back to the operand's own batch dims (nothing to do when they agree).
AnfNode* SumToOperandBatch(BpropContext& c, AnfNode* d, int i) {
  const AbstractTensor* in = AsTensor(c.IAbs(i));
  const AbstractTensor* out = AsTensor(c.OutAbs());
  if (in != nullptr && out != nullptr && in->rank() == out->rank()) {
    bool same = true;
    for (int k = 0; k + 2 < in->rank(); ++k) {
      same &= in->shape()[k] != kUnknownDim && in->shape()[k] == out->shape()[k];
    }
    if (same) return d;
  }
  return c.SumToInput(d, i);
}

AnfNode* MatMul(BpropContext& c, AnfNode* a, AnfNode* b, bool ta, bool tb) {
  return c.Op(PrimId::kMatMul, {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}});
}

// Forward: y = op(a) @ op(b), op the optional transpose of the last two dims,
// batch dims broadcast.
// Backward: d op(a) = dy @ op(b)^T, d op(b) = op(a)^T @ dy, transposed back where
// op transposes, then summed over the broadcast batch dims:
//   (ta, tb) = (0, 0): da = dy @ b^T,    db = a^T @ dy
//              (0, 1): da = dy @ b,      db = dy^T @ a
//              (1, 0): da = b @ dy^T,    db = a @ dy
//              (1, 1): da = b^T @ dy^T,  db = dy^T @ a^T
//
// A matrix b against a batched a (x @ W, the linear layers of a transformer):
// db sums a_i^T dy_i over the batch, which is one GEMM over the rows of every
// batch element, a and dy flattened to [rows, k] and [rows, m]:
//   db = A^T @ DY (tb = 0),  db = DY^T @ A (tb = 1).
// A batch of products summed afterwards held f32[128,256,768] (96 MiB) per
// in-projection of PyTorch's TransformerEncoder export at batch 8 x 128: the
// training step's peak.
AnfNode* FlatMatrixGrad(BpropContext& c, AnfNode* a, AnfNode* dy, bool ta, bool tb) {
  const AbstractTensor* at = AsTensor(c.IAbs(0));
  const AbstractTensor* bt = AsTensor(c.IAbs(1));
  const AbstractTensor* out = AsTensor(c.OutAbs());
  if (ta || at == nullptr || bt == nullptr || out == nullptr || bt->rank() != 2 ||
      at->rank() < 3 || out->rank() != at->rank()) {
    return nullptr;
  }
  const int64_t k = at->shape().back(), m = out->shape().back();
  if (k == kUnknownDim || m == kUnknownDim || k <= 0 || m <= 0) return nullptr;
  AnfNode* rows_a = c.Op(PrimId::kReshape, {a}, {{"shape", std::vector<int64_t>{-1, k}}});
  AnfNode* rows_dy = c.Op(PrimId::kReshape, {dy}, {{"shape", std::vector<int64_t>{-1, m}}});
  return tb ? MatMul(c, rows_dy, rows_a, true, false) : MatMul(c, rows_a, rows_dy, true, false);
}

absl::Status BpropMatMul(BpropContext& c) {
  bool ta = c.prim().GetBool("transpose_a"), tb = c.prim().GetBool("transpose_b");
  AnfNode* a = c.I(0);
  AnfNode* b = c.I(1);
  AnfNode* dy = c.Dout();
  AnfNode* da = ta ? MatMul(c, b, dy, tb, true) : MatMul(c, dy, b, false, !tb);
  c.SetGrad(0, SumToOperandBatch(c, da, 0));
  if (AnfNode* flat = FlatMatrixGrad(c, a, dy, ta, tb)) {
    c.SetGrad(1, flat);
  } else {
    AnfNode* db = tb ? MatMul(c, dy, a, true, ta) : MatMul(c, a, dy, !ta, false);
    c.SetGrad(1, SumToOperandBatch(c, db, 1));
  }
  return absl::OkStatus();
}

bool Has(const std::string& s, char ch) { return s.find(ch) != std::string::npos; }

// The adjoint of operand i of `in_0,...,in_n->out`, derived from the equation:
//   contract: g = einsum(out, in_j (j != i) -> kept), `kept` the letters of in_i
//             (once each, in order) that the output or another operand has;
//   place:    dx_i = einsum(kept [, in_i] [, c C]... -> in_i'), which broadcasts g
//             along the letters the forward only summed (through ones_like(x_i),
//             subscripted in_i) and puts it on the diagonal of each letter c
//             repeated in in_i: the repeat is renamed to a fresh letter C and an
//             identity eye[c, C] multiplies in.
// E.g. `ij,jk->ik`, i = 0: contract `ik,jk->ij`, no place. `ii->` (trace):
// contract `->` (dy itself), place `,iA->iA` (dy * eye).
struct EinsumAdjoint {
  std::string contract;  // empty: g is dy itself
  std::string place;     // empty: dx_i is g
  bool ones = false;
  std::vector<std::pair<char, char>> eyes;  // (c, C)
};

// The contraction for operand i: out, in_j (j != i) -> the letters of in_i (once
// each, in order) that the output or another operand has.
EinsumSpec EinsumContraction(const EinsumSpec& spec, int i) {
  EinsumSpec contract;
  contract.inputs.push_back(spec.output);
  std::string others = spec.output;
  for (size_t j = 0; j < spec.inputs.size(); ++j) {
    if (static_cast<int>(j) == i) continue;
    others += spec.inputs[j];
    contract.inputs.push_back(spec.inputs[j]);
  }
  for (char ch : spec.inputs[i]) {
    if (Has(others, ch) && !Has(contract.output, ch)) contract.output.push_back(ch);
  }
  return contract;
}

// Letters the equation does not use.
std::string FreshLetters(const EinsumSpec& spec) {
  std::string used = spec.output;
  for (const std::string& sub : spec.inputs) used += sub;
  std::string fresh;
  for (char ch = 'A'; ch <= 'z'; ++ch) {
    if (IsEinsumLetter(ch) && !Has(used, ch)) fresh.push_back(ch);
  }
  return fresh;
}

absl::StatusOr<EinsumAdjoint> DeriveEinsumAdjoint(const EinsumSpec& spec, int i) {
  const std::string& sub = spec.inputs[i];
  EinsumSpec contract = EinsumContraction(spec, i);
  EinsumAdjoint adj;
  if (contract.inputs.size() > 1 || contract.inputs[0] != contract.output) {
    adj.contract = contract.ToString();
  }
  // in_i' renames each repeat of a letter to a fresh one.
  std::string fresh = FreshLetters(spec);
  EinsumSpec place;
  place.inputs.push_back(contract.output);
  for (size_t p = 0; p < sub.size(); ++p) {
    char ch = sub[p];
    bool repeat = sub.find(ch) != p;
    bool repeated = repeat || sub.find(ch, p + 1) != std::string::npos;
    adj.ones |= !Has(contract.output, ch) && !repeated;
    if (!repeat) {
      place.output.push_back(ch);
    } else if (adj.eyes.size() < fresh.size()) {
      adj.eyes.emplace_back(ch, fresh[adj.eyes.size()]);
      place.output.push_back(adj.eyes.back().second);
    } else {
      return absl::InvalidArgumentError("no free letters left to place a diagonal");
    }
  }
  if (adj.ones) place.inputs.push_back(sub);
  for (const auto& [ch, renamed] : adj.eyes) place.inputs.push_back(std::string{ch, renamed});
  if (static_cast<int>(place.inputs.size()) > kMaxEinsumOperands) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placing the sensitivity on the diagonals of '", sub, "' needs ", place.inputs.size(),
        " einsum operands (at most ", kMaxEinsumOperands, ")"));
  }
  if (place.inputs.size() > 1 || place.inputs[0] != place.output) adj.place = place.ToString();
  return adj;
}

// The static size of einsum letter `ch`, from any operand or the output.
std::optional<int64_t> EinsumLetterSize(const BpropContext& c, const EinsumSpec& spec, char ch) {
  auto find = [ch](const std::string& sub, const AbstractPtr& a) -> std::optional<int64_t> {
    const AbstractTensor* t = AsTensor(a);
    if (t == nullptr || t->rank() != static_cast<int>(sub.size())) return std::nullopt;
    for (size_t d = 0; d < sub.size(); ++d) {
      if (sub[d] == ch && t->shape()[d] >= 0) return t->shape()[d];
    }
    return std::nullopt;
  };
  for (size_t j = 0; j < spec.inputs.size(); ++j) {
    if (std::optional<int64_t> n = find(spec.inputs[j], c.IAbs(static_cast<int>(j)))) return n;
  }
  return find(spec.output, c.OutAbs());
}

// eye[n, n] of input i's dtype: one_hot(0..n-1).
absl::StatusOr<AnfNode*> Identity(BpropContext& c, int64_t n, int i) {
  KGRAD_ASSIGN_OR_RETURN(DType t, c.InDType(i));
  std::vector<int64_t> range(n);
  for (int64_t k = 0; k < n; ++k) range[k] = k;
  AnfNode* indices = c.Const(Value(Tensor::FromVector<int64_t>({n}, range)));
  return c.Op(PrimId::kOneHot, {indices}, {{"depth", n}, {"dtype", t}});
}

// dx_i of einsum, following DeriveEinsumAdjoint.
absl::StatusOr<AnfNode*> EinsumOperandGrad(BpropContext& c, const EinsumSpec& spec, int i) {
  absl::StatusOr<EinsumAdjoint> adj = DeriveEinsumAdjoint(spec, i);
  if (!adj.ok()) return c.Error(std::string(adj.status().message()));
  AnfNode* g = c.Dout();
  if (!adj->contract.empty()) {
    std::vector<AnfNode*> args{c.Dout()};
    for (int j = 0; j < c.num_inputs(); ++j) {
      if (j != i) args.push_back(c.I(j));
    }
    g = c.Op(PrimId::kEinsum, std::move(args), {{"equation", adj->contract}});
  }
  if (adj->place.empty()) return g;
  std::vector<AnfNode*> args{g};
  if (adj->ones) args.push_back(c.OnesLike(c.I(i)));
  for (const auto& eye : adj->eyes) {
    std::optional<int64_t> n = EinsumLetterSize(c, spec, eye.first);
    if (!n.has_value()) {
      return c.Error(absl::StrCat("operand ", i, " repeats subscript '", std::string(1, eye.first),
                                  "' (a diagonal); placing the sensitivity on it needs the "
                                  "size of '", std::string(1, eye.first),
                                  "', which inference did not determine (declare the graph's "
                                  "parameter types)"));
    }
    KGRAD_ASSIGN_OR_RETURN(AnfNode* id, Identity(c, *n, i));
    args.push_back(id);
  }
  return c.Op(PrimId::kEinsum, std::move(args), {{"equation", adj->place}});
}

// Forward: y = einsum(in_0,...,in_n->out)(x_0, ..., x_n).
// Backward: dx_i = einsum(out,in_0,..(skip i)..,in_n->in_i)(dy, x_j...), with dy
// broadcast along letters only in_i has and placed on in_i's diagonals (see
// DeriveEinsumAdjoint).
absl::Status BpropEinsum(BpropContext& c) {
  const std::string& eq = c.prim().GetString("equation");
  absl::StatusOr<EinsumSpec> spec = ParseEinsum(eq, c.num_inputs());
  if (!spec.ok()) return c.Error(std::string(spec.status().message()));
  for (int i = 0; i < c.num_inputs(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(AnfNode* d, EinsumOperandGrad(c, *spec, i));
    c.SetGrad(i, d);
  }
  return absl::OkStatus();
}

// ----- Determinant and inverse ------------------------------------------------------------
// det(a [..., n, n]) -> [...]: each matrix's determinant (LU with partial pivoting).
absl::StatusOr<AbstractPtr> InferDet(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* a, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(Shape batch, SquareMatrices(c.prim, *a));
  return MakeAbstractTensor(a->dtype(), std::move(batch));
}

// matrix_inverse(a [..., n, n]) -> [..., n, n]: each matrix's inverse (Gauss-Jordan
// with partial pivoting; a singular matrix is an error at run time).
absl::StatusOr<AbstractPtr> InferMatrixInverse(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* a, TensorArg(c, 0));
  KGRAD_RETURN_IF_ERROR(SquareMatrices(c.prim, *a).status());
  return c.args[0];
}

// Forward: y = det(A) per matrix.  Backward (Jacobi's formula, d det = det *
// tr(A^-1 dA)): dA = (dy * y)[..., None, None] * (A^-1)^T. Undefined where A is
// singular (its inverse fails there).
absl::Status BpropDet(BpropContext& c) {
  KGRAD_ASSIGN_OR_RETURN(int rank, c.InRank(0));
  AnfNode* s = c.Mul(c.Dout(), c.Out());
  for (int k = 0; k < 2; ++k) s = c.Op(PrimId::kExpandDims, {s}, {{"axis", int64_t{rank - 2}}});
  std::vector<int64_t> perm(rank);
  for (int i = 0; i < rank; ++i) perm[i] = i;
  std::swap(perm[rank - 1], perm[rank - 2]);
  AnfNode* inv_t = c.Transpose(c.Op(PrimId::kMatrixInverse, {c.I(0)}), perm);
  c.SetGrad(0, c.Mul(s, inv_t));
  return absl::OkStatus();
}

// Forward: B = A^-1.  Backward (d(A^-1) = -A^-1 dA A^-1): dA = -B^T dB B^T.
absl::Status BpropMatrixInverse(BpropContext& c) {
  AnfNode* bt_g = c.Op(PrimId::kMatMul, {c.Out(), c.Dout()}, {{"transpose_a", true}, {"transpose_b", false}});
  AnfNode* g = c.Op(PrimId::kMatMul, {bt_g, c.Out()}, {{"transpose_a", false}, {"transpose_b", true}});
  c.SetGrad(0, c.Neg(g));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Shape> SquareMatrices(const Primitive& p, TensorType a) {
  KGRAD_RETURN_IF_ERROR(CheckFloat(0, a));
  const int r = a.rank();
  if (r < 2 || (a.shape[r - 1] >= 0 && a.shape[r - 2] >= 0 && a.shape[r - 1] != a.shape[r - 2])) {
    return absl::InvalidArgumentError(absl::StrCat(PrimIdName(p.id()), ": input 0 must be square matrices [..., n, n], got ",
                                                   a.ToString()));
  }
  return Shape(a.shape.begin(), a.shape.end() - 2);
}

void RegisterLinalgOps(std::vector<PrimitiveDef>* defs) {
  // Multilinear in the entries (no zero rule: det of zeros is 0 only for n > 0).
  defs->push_back(OpDef(PrimId::kDet, 1, 1, InferDet).Bprop(BpropDet));
  defs->push_back(OpDef(PrimId::kMatrixInverse, 1, 1, InferMatrixInverse).Bprop(BpropMatrixInverse));
  // Bilinear: zero if either operand is.
  defs->push_back(OpDef(PrimId::kMatMul, 2, 2, InferMatMul,
                        {BoolAttr("transpose_a", false), BoolAttr("transpose_b", false)})
                      .Bprop(BpropMatMul)
                      .ZeroIfAny({0, 1})
                      .Dot());
  defs->push_back(OpDef(PrimId::kEinsum, 1, kMaxEinsumOperands, InferEinsum,
                        {RequiredAttr("equation", AttrType::kString)})
                      .Bprop(BpropEinsum)
                      .Dot());
}

}  // namespace ops
}  // namespace kgrad
