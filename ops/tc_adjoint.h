// The adjoint of a tc block is a tc block (Vermorel, "Automatic Differentiation
// for Tensor Comprehensions"). Statements are taken last to first; for each read
// X(f(i)) of a statement L(l) R= E(l, r) the adjoint gets
//
//   Xx(f(i)) += F(l, r) * dE/dX(f(i))
//
// with F the seed of the reducer: Lx(l) for = and +=!, Lx(l) * L(l) / E for *=!
// (undefined where a factor is 0), and for max=! / min=! the mask
// (lin(r) == L_arg(l) ? Lx(l) : 0), where L_arg(l) min=! (E == L(l) ? lin(r) : R)
// finds the first extreme point in the reduction indices' order (lin(r) is the
// point's row-major number over the reduction ranges, R their count): ties go to
// the first index, as PyTorch's max pooling does. The written index is then
// made plain by index algebra: each argument f_j of X that is a plain index
// becomes the adjoint's left index; any other is solved for one of its indices
// (the one with the widest range), which is replaced everywhere by the solution,
// e.g. y = 2*i + kh gives i = (y - kh)/2, and kept in its range by a `where`:
//
//   Ix(b,c,h,w) +=! ... Ox(b,c,(h - kh)/2,(w - kw)/2) ... where (h - kh)/2 in 0:H, ...
//
// (the exact division is the divisibility guard). Arguments left with nothing
// to solve become equality conditions. Every left index gets the written
// tensor's dim as its range, so the first contribution initialises (+=!) and the
// rest add (+=); an output's cotangent starts its total when later statements
// also read it.
#ifndef KGRAD_OPS_TC_ADJOINT_H_
#define KGRAD_OPS_TC_ADJOINT_H_

#include <vector>

#include "absl/status/statusor.h"
#include "ops/tc_analysis.h"
#include "ops/tc_block.h"

namespace kgrad {
namespace tc {

// Where each input of the adjoint block comes from.
struct AdjointSource {
  enum Kind { kInput, kOutput, kCotangent } kind;
  int index;  // forward input number, or output number (0 = the first output)
};

struct AdjointBlock {
  Block block;
  std::vector<AdjointSource> sources;  // one per input of `block`
  // Per forward input: the output of `block` holding its adjoint, or -1 when no
  // statement reads it differentiably (its adjoint is zero).
  std::vector<int> input_adjoint;
};

// `a`: Analyze(forward, ...) (unknown dims allowed). Errors name the block and
// statement: updates other than += of an output written by = or +=!, reads of an
// output between its writes, a range the block cannot state symbolically.
absl::StatusOr<AdjointBlock> DeriveAdjoint(const Block& forward, const Analysis& a);

}  // namespace tc
}  // namespace kgrad

#endif  // KGRAD_OPS_TC_ADJOINT_H_
