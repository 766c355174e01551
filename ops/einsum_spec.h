// The einsum equation grammar, shared by inference (ops/linalg.cc), the kernels
// of every backend and the gradient rule, and the contraction plan the kernels
// follow. The grammar:
//
//   equation := operands ['->' output]     (spaces ignored, no ellipsis)
//   operands := subscripts (',' subscripts)*
//   subscripts, output := letter*          (a-z, A-Z)
//
// A letter repeated within one operand reads its diagonal; letters absent from the
// output are summed. Without '->' the output is every letter appearing exactly
// once, in ASCII order (NumPy's implicit form). Output letters are unique and each
// appears in some operand.
#ifndef KGRAD_OPS_EINSUM_SPEC_H_
#define KGRAD_OPS_EINSUM_SPEC_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/shape.h"

namespace kgrad {

inline constexpr int kMaxEinsumOperands = 8;

struct EinsumSpec {
  std::vector<std::string> inputs;  // subscripts of each operand
  std::string output;

  // The explicit form "ij,jk->ik".
  std::string ToString() const;
};

bool IsEinsumLetter(char ch);

// "einsum equation 'eq': what" as an InvalidArgument error.
absl::Status EinsumError(absl::string_view eq, absl::string_view what);

// Parses `eq` for `num_operands` operands (error when the counts differ).
absl::StatusOr<EinsumSpec> ParseEinsum(absl::string_view eq, int num_operands);

// The size of each letter, indexed by its code.
using EinsumSizes = std::array<int64_t, 128>;
// The dims of a tensor whose dims `letters` name.
Shape LetterShape(const std::string& letters, const EinsumSizes& size);

// One step of an einsum evaluation: operands i and j (i < j) contracted as one
// batched GEMM [batch, m, k] x [batch, k, n] -> [batch, m, n]; the result takes
// operand i's place and operand j is removed. Each side is first rearranged (a
// transpose, diagonal or sum) to the letters the GEMM reads, `a` and `b`: the
// batch letters (in both sides, still needed), then the free ones (in one side
// only) and the summed ones (in both, no longer needed), or summed before free
// when the operand is already in that order (the GEMM reads it transposed), so
// that no copy is made where none is needed.
struct EinsumContraction {
  size_t i = 0, j = 0;
  std::string a, b;    // operand i and j rearranged (letters, each once)
  bool ta = false;     // a is [batch, sum, free_a] (else [batch, free_a, sum])
  bool tb = false;     // b is [batch, free_b, sum] (else [batch, sum, free_b])
  std::string out;     // batch + free_a + free_b
  int64_t batch = 1, m = 1, n = 1, k = 1;
};
// The contractions that reduce spec's operands to one, cheapest pair first (the
// smallest result: a greedy order that avoids outer products when operands share
// letters). The one operand left is then rearranged to spec.output.
std::vector<EinsumContraction> PlanEinsum(const EinsumSpec& spec, const EinsumSizes& size);

}  // namespace kgrad

#endif  // KGRAD_OPS_EINSUM_SPEC_H_
