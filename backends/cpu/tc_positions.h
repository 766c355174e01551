// The loop positions of a compiled tc statement (tc_program.h), rewritten
// before the interpreter chooses its lanes so that chunks are long and
// guards few. Every rewrite keeps the value of every affine form (the output's
// offset, each read's, each guard's numerator) at every point, and keeps the
// set of output elements the left side's box reaches, one to one, so the
// interpreter runs the same arithmetic on the same points in a new loop nest:
//
// - Lattice substitution. A divisibility guard `(h - k + c) % d == 0` with h a
//   left-side index and k a reduction index of exactly d values picks one k for
//   each h: writing h = d * i + k - c makes k a left-side index beside the new
//   i, the guard always true, and the exact quotients `(h - k + c) / d` plain
//   reads of i. An adjoint's gather `Ix(h) +=! ... O((h - kh)/2)` becomes the
//   forward's lattice `Ix(2*i + kh) = ... O(i)`, with no reduction and no cut
//   lanes. Applied only where the new box maps onto h's range exactly.
// - Guards that hold on the whole box are dropped.
// - Adjacent left-side positions merge into one when every form steps the
//   outer one by the inner one's range times its step (b, c and the rows of a
//   pooled image are one run of rows), so chunks span several planes.
//
// Positions read as values (an index in the right side) are never substituted
// or merged.
#ifndef KGRAD_BACKENDS_CPU_TC_POSITIONS_H_
#define KGRAD_BACKENDS_CPU_TC_POSITIONS_H_

#include <cstdint>
#include <vector>

#include "backends/cpu/tc_program.h"

namespace kgrad {
namespace cpu {

// The affine forms of a statement: form f is
//   sum over positions q of coef[f][q] * idx[q] + constant[f].
// The output, each read and each divided argument and each guard has a form of
// its own (tc_program.cc), so a form a rewrite drops is read by no one else.
struct TcForms {
  std::vector<std::vector<int64_t>> coef;
  std::vector<int64_t> constant;
  int Add(std::vector<int64_t> c, int64_t k) {
    coef.push_back(std::move(c));
    constant.push_back(k);
    return static_cast<int>(coef.size()) - 1;
  }
};

// Rewrites `p`'s positions (num_pos, num_lhs, lo, hi, origin), reads and
// guards with `forms`, as above. `valued[q]`: domain position q is read as a
// value. p.origin must map each position to itself on entry.
void SimplifyTcPositions(const std::vector<bool>& valued, TcForms& forms, TcProgram& p);

}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_TC_POSITIONS_H_
