#include "ops/linalg.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {
namespace {

// ----- matmul ---------------------------------------------------------------------
absl::StatusOr<const AbstractTensor*> MatMulOperand(const InferCall& c, int i) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorArg(c, i));
  if (t->dtype() == DType::kBool) return ArgError(c, i, "a f32, f64, i32 or i64 tensor");
  if (t->rank() < 2) return ArgError(c, i, "a tensor of rank >= 2 (a matrix or a batch)");
  return t;
}

// Two dims that must be equal: the known one when one is unknown; error when both
// are known and differ.
absl::StatusOr<int64_t> MergeDim(int64_t a, int64_t b, absl::string_view what) {
  if (a == kUnknownDim) return b;
  if (b == kUnknownDim || a == b) return a;
  return absl::InvalidArgumentError(absl::StrCat(what, " must agree, got ", a, " and ", b));
}

// matmul(a, b){transpose_a, transpose_b}: c[..., i, j] = sum_k op(a)[..., i, k] *
// op(b)[..., k, j], op the optional transpose of the last two dims; batch dims
// broadcast.
absl::StatusOr<AbstractPtr> InferMatMul(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* a, MatMulOperand(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* b, MatMulOperand(c, 1));
  KGRAD_RETURN_IF_ERROR(SameDType(c, {0, 1}));
  const Shape& sa = a->shape();
  const Shape& sb = b->shape();
  int ra = a->rank(), rb = b->rank();
  bool ta = c.prim.GetBool("transpose_a"), tb = c.prim.GetBool("transpose_b");
  int64_t m = ta ? sa[ra - 1] : sa[ra - 2];
  int64_t ka = ta ? sa[ra - 2] : sa[ra - 1];
  int64_t kb = tb ? sb[rb - 1] : sb[rb - 2];
  int64_t n = tb ? sb[rb - 2] : sb[rb - 1];
  absl::StatusOr<int64_t> k = MergeDim(ka, kb, "matmul inner dimensions");
  if (!k.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(k.status().message(), " (", a->ToString(), " x ",
                                                   b->ToString(), ", transpose_a=", ta,
                                                   ", transpose_b=", tb, ")"));
  }
  absl::Span<const int64_t> batch_a(sa.data(), ra - 2), batch_b(sb.data(), rb - 2);
  absl::StatusOr<Shape> batch = BroadcastShapes(batch_a, batch_b);
  if (!batch.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("matmul batch dimensions: ", batch.status().message()));
  }
  Shape out = *batch;
  out.push_back(m);
  out.push_back(n);
  return MakeAbstractTensor(a->dtype(), std::move(out));
}

// ----- einsum ---------------------------------------------------------------------
inline constexpr int kMaxEinsumOperands = 8;

bool IsLetter(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }

struct EinsumSpec {
  std::vector<std::string> inputs;  // subscripts of each operand
  std::string output;
};

absl::Status EinsumError(const std::string& eq, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("einsum equation '", eq, "': ", what));
}

// Letters appearing exactly once over all operands, in ASCII order (NumPy's
// implicit output).
std::string ImplicitOutput(const std::vector<std::string>& inputs) {
  std::array<int, 128> count{};
  for (const std::string& s : inputs) {
    for (char ch : s) ++count[static_cast<unsigned char>(ch)];
  }
  std::string out;
  for (int ch = 0; ch < 128; ++ch) {
    if (count[ch] == 1) out.push_back(static_cast<char>(ch));
  }
  return out;
}

absl::Status CheckEinsumOutput(const std::string& eq, const EinsumSpec& spec) {
  for (size_t i = 0; i < spec.output.size(); ++i) {
    char ch = spec.output[i];
    if (spec.output.find(ch, i + 1) != std::string::npos) {
      return EinsumError(eq,
                         absl::StrCat("output subscript '", std::string(1, ch), "' is repeated"));
    }
    bool found = std::any_of(spec.inputs.begin(), spec.inputs.end(), [ch](const std::string& s) {
      return s.find(ch) != std::string::npos;
    });
    if (!found) {
      return EinsumError(eq, absl::StrCat("output subscript '", std::string(1, ch),
                                          "' does not appear in any input"));
    }
  }
  return absl::OkStatus();
}

// Parses "ij,jk->ik" (spaces ignored) for `num_operands` operands.
absl::StatusOr<EinsumSpec> ParseEinsum(const std::string& eq, int num_operands) {
  std::string s;
  for (char ch : eq) {
    if (ch != ' ') s.push_back(ch);
  }
  if (s.find('.') != std::string::npos) {
    return EinsumError(eq, "ellipsis '...' is unsupported");
  }
  size_t arrow = s.find("->");
  std::string lhs = s.substr(0, arrow);
  EinsumSpec spec;
  spec.inputs.emplace_back();
  for (char ch : lhs) {
    if (ch == ',') {
      spec.inputs.emplace_back();
    } else if (IsLetter(ch)) {
      spec.inputs.back().push_back(ch);
    } else {
      return EinsumError(eq,
                         absl::StrCat("'", std::string(1, ch), "' is not a letter, ',' or '->'"));
    }
  }
  if (arrow == std::string::npos) {
    spec.output = ImplicitOutput(spec.inputs);
  } else {
    spec.output = s.substr(arrow + 2);
    for (char ch : spec.output) {
      if (!IsLetter(ch)) {
        return EinsumError(eq,
                           absl::StrCat("output '", spec.output, "' must contain letters only"));
      }
    }
  }
  if (static_cast<int>(spec.inputs.size()) != num_operands) {
    return EinsumError(
        eq, absl::StrCat("names ", spec.inputs.size(), " operands, got ", num_operands, " inputs"));
  }
  KGRAD_RETURN_IF_ERROR(CheckEinsumOutput(eq, spec));
  return spec;
}

// The size of each letter over all operands (unknown where no operand knows it);
// error naming the letter when two known sizes differ.
absl::StatusOr<std::array<int64_t, 128>> EinsumLetterSizes(const InferCall& c,
                                                           const std::string& eq,
                                                           const EinsumSpec& spec) {
  std::array<int64_t, 128> size;
  size.fill(kUnknownDim);
  std::array<int, 128> where{};
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const std::string& sub = spec.inputs[i];
    const AbstractTensor* t = AsTensor(c.args[i]);
    if (static_cast<int>(sub.size()) != t->rank()) {
      return EinsumError(eq, absl::StrCat("operand ", i, " has ", sub.size(), " subscripts '", sub,
                                          "' but is ", t->ToString()));
    }
    for (size_t d = 0; d < sub.size(); ++d) {
      int ch = sub[d];
      int64_t n = t->shape()[d];
      if (n == kUnknownDim) continue;
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

// einsum(x0, ..., xn){equation}: out[out letters] = sum over the other letters of
// the product of the operands, each indexed by its subscripts (a repeated letter
// in one operand reads the diagonal).
absl::StatusOr<AbstractPtr> InferEinsum(const InferCall& c) {
  int n = static_cast<int>(c.args.size());
  if (n < 1 || n > kMaxEinsumOperands) {
    return absl::InvalidArgumentError(
        absl::StrCat("einsum takes 1 to ", kMaxEinsumOperands, " operands, got ", n));
  }
  for (int i = 0; i < n; ++i) KGRAD_RETURN_IF_ERROR(FloatTensorArg(c, i).status());
  for (int i = 1; i < n; ++i) KGRAD_RETURN_IF_ERROR(SameDType(c, {0, i}));
  const std::string& eq = c.prim.GetString("equation");
  KGRAD_ASSIGN_OR_RETURN(EinsumSpec spec, ParseEinsum(eq, n));
  KGRAD_ASSIGN_OR_RETURN(auto size, EinsumLetterSizes(c, eq, spec));
  Shape out;
  for (char ch : spec.output) out.push_back(size[static_cast<unsigned char>(ch)]);
  return MakeAbstractTensor(AsTensor(c.args[0])->dtype(), std::move(out));
}

}  // namespace

void RegisterLinalgOps(std::vector<PrimitiveDef>* defs) {
  // Bilinear, not linear: neither flag is set.
  defs->push_back(MakeDef(PrimId::kMatMul, 2, 2, InferMatMul,
                          {BoolAttr("transpose_a", false), BoolAttr("transpose_b", false)}));
  defs->push_back(MakeDef(PrimId::kEinsum, 1, kMaxEinsumOperands, InferEinsum,
                          {RequiredAttr("equation", AttrType::kString)}));
}

}  // namespace ops
}  // namespace kgrad
