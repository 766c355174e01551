// The einsum equation grammar, shared by inference (ops/linalg.cc), the CPU
// kernel (backends/cpu/linalg_kernels.cc) and the gradient rule:
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

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

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

}  // namespace kgrad

#endif  // KGRAD_OPS_EINSUM_SPEC_H_
