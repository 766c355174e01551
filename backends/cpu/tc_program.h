// A tc statement compiled for the chunked interpreter (tc_interpreter.h). Every
// affine quantity of the statement (the output's flat offset, each read's, each
// guard's numerator) is a linear form
//
//   sum over positions q of coef[q] * idx[q] + constant
//
// in the point idx (one index per domain position), which the interpreter's
// loops keep current by adding coef[q] * step as position q steps. Reads with a
// divided argument, X((h - k)/2), keep that argument's numerator as a form of
// its own (the division is exact where the guards hold). The nodes of the
// right side are marked by whether they vary across a chunk's lanes: the
// consecutive values of the vector index, in rows of the row index's values
// when the vector index alone is too short to fill a chunk (a 14 x 14 image's
// rows and columns; guards may cut those rows, as they cut the lanes, to a
// progression), and, where a pooling window reads in pairs, the values of a
// short reduction index within each lane (`pair`).
#ifndef KGRAD_BACKENDS_CPU_TC_PROGRAM_H_
#define KGRAD_BACKENDS_CPU_TC_PROGRAM_H_

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "backends/cpu/tc_interpreter.h"
#include "core/shape.h"
#include "ops/tc_block.h"

namespace kgrad {
namespace cpu {

// A read: its flat offset is form + sum over the divided dims of
// stride * (form_d / divisor_d).
struct TcReadPlan {
  int tensor = -1;
  int form = -1;  // the dims with divisor 1, times their strides
  struct Divided {
    int form;
    int64_t divisor;  // > 0
    int64_t stride;
    int shift;  // log2(divisor) when a power of 2 (the exact quotient a shift), else -1
  };
  std::vector<Divided> divided;
};

// A guard: its form divisible by `divisor` and lo <= form < hi (the bounds of
// the numerator; the lowest and highest int64 when open).
struct TcGuardPlan {
  int form = -1;
  int64_t divisor = 1;  // > 0
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  // The period of its divisibility along the index that cuts it (the vector or
  // the row index): divisor / gcd(coefficient, divisor).
  int64_t period = 1;
};

// x / d for x a multiple of d, by a shift when `shift` >= 0 (d = 2^shift).
inline int64_t ExactDiv(int64_t x, int64_t d, int shift) {
  return shift >= 0 ? x >> shift : x / d;  // arithmetic shift: exact for negatives too
}

struct TcNodePlan {
  tc::Op op = tc::Op::kNumber;
  bool vec = false;  // varies along the vector index
  int a = -1, b = -1, c = -1;
  double value = 0;  // kNumber, kSize
  int read = -1;     // kRead: its TcReadPlan
  int pos = -1;      // kIndex: its position
  // A comparison read only by a select's condition is evaluated by that select
  // in the same loop (`fused`; the select's `cmp` names it): a mask's value
  // never goes through a buffer of its own.
  bool fused = false;
  int cmp = -1;
};

// The root of a pair select: `cmp(A, B) ? X : Y` over pair lanes, A a read in
// pairs (contiguous along the pair index, the vector index stepping it by the
// pair size), B a read with one value per output lane (or none varying), X and
// Y reading no tensor and varying along the pair index at most (max pooling's
// arg statement: I(b,c,2*i + kh,2*j + kw) == O(b,c,i,j) ? kh*2 + kw : 4). The
// runner reads A and B in place and combines each output's pairs in one loop:
// no node is evaluated into a buffer (tc_rows.h's PairSelectRow).
struct TcPairSelect {
  int a = -1, b = -1;  // node ids; a < 0: not a pair select
  tc::Op op = tc::Op::kEq;  // cmp(A, B), mirrored when A was the right operand
  int x = -1, y = -1;  // node ids
};

struct TcProgram {
  // The loop positions (tc_positions.h: the domain's, rewritten): the left
  // side's first.
  int num_pos = 0;
  int num_lhs = 0;
  // Per domain position: the program's position that is it, or -1 where it was
  // substituted or merged (never one read as a value).
  std::vector<int> origin;
  int vp = -1;  // the vector index's position; -1: none (one lane)
  // When the vector index is a short left-side index: another left-side index
  // whose `rows` consecutive values share a chunk (rows of the vector index's
  // lanes; no guard and no divided argument names both), or -1.
  int vo = -1;
  int64_t rows = 1;
  // A short reduction index, the innermost, fused into the lanes when a read
  // steps by 1 along it and by its range along the vector index (a pooling
  // window's kw beside 2 * j): lane x of a row is the vector index's lane
  // x / pair_size with the pair index at lo + x % pair_size, so that read is
  // contiguous, and each output combines its pair_size lanes in order. -1: none.
  int pair = -1;
  int64_t pair_size = 1;
  TcPairSelect pair_select;
  std::vector<int64_t> lo, hi;
  int num_forms = 0;
  std::vector<int64_t> constant;  // per form
  std::vector<int64_t> vcoef;     // per form: its coefficient of the vector index
  std::vector<int64_t> ocoef;     // per form: its coefficient of the row index
  std::vector<int64_t> pcoef;     // per form: its coefficient of the pair index
  // Per position, the forms it moves: (form, coefficient != 0).
  std::vector<std::vector<std::pair<int, int64_t>>> moves;
  int out_form = -1;
  std::vector<TcReadPlan> reads;    // in node order
  // Those constant over a chunk first, then those of the row index only (they
  // cut a chunk's rows), then those of the vector index.
  std::vector<TcGuardPlan> guards;
  int num_uniform_guards = 0, num_row_guards = 0;
  std::vector<TcNodePlan> nodes;

  int64_t VectorRange() const { return vp < 0 ? 1 : hi[vp] - lo[vp]; }
};

// `s` compiled; `strides`: every tensor's strides, by tensor id.
TcProgram CompileTcStatement(const TcStatement& s, absl::Span<const Shape> strides);

}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_TC_PROGRAM_H_
