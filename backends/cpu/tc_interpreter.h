// The CPU's interpreter of one tc statement (ops/tc_block.h) over its checked
// domain (ops/tc_analysis.h), and the formulas of the expression ops, which the
// contraction path (tc_contraction.h) shares for its scalar coefficient.
//
// A statement is compiled once per shape (tc_program.h) into a node program that
// evaluates a CHUNK of up to kTcLanes points at once: the points that differ
// only in one chosen "vector index" (the innermost loop; the last left-side
// index when it is long enough, so that the output is contiguous, else a
// reduction index, whose lanes are then combined in a fixed tree); a short
// left-side vector index takes rows of another left-side index into the chunk
// (a 14 x 14 image's rows and columns), and may take the values of a short
// innermost reduction index too (2 * j + kw: each output's lanes in pairs, so
// that the read is contiguous; tc_program.h). Each node runs one loop over the
// chunk's lanes; a node that varies along neither index is one scalar. Every affine quantity (a read's flat offset, a
// guard's numerator, the output's offset) is a linear form in the point, kept
// current as the loops step, so a read's offsets within a chunk are base +
// lane * step: a pointer into the tensor when the step is 1, a strided gather
// otherwise. Guards cut a chunk to the lanes (and rows) that pass them, which
// (the guards being affine) form arithmetic progressions: evaluation runs over those
// lanes only, so a point guarded out is never read (no 0 * inf) and never added.
//
// Threading: the work is split over output elements only. Each output element
// is reduced by one thread in a fixed order (the reduction points in row-major
// order over the reduction indices; when the vector index is a reduction index,
// per lane and then across the lanes in a fixed tree), so the result's bits do
// not depend on the thread count.
#ifndef KGRAD_BACKENDS_CPU_TC_INTERPRETER_H_
#define KGRAD_BACKENDS_CPU_TC_INTERPRETER_H_

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/types/span.h"
#include "core/shape.h"
#include "ops/tc_analysis.h"
#include "ops/tc_block.h"

namespace kgrad {
namespace cpu {

// Lanes of one chunk (a power of 2). 2048 amortises the per-chunk work over
// the rows of short images (max pooling's step 1.50 -> 1.26 ms against 512;
// 4096: 1.33 ms); 128 ran elementwise statements 2.2x slower than 512.
inline constexpr int kTcLanes = 2048;
static_assert((kTcLanes & (kTcLanes - 1)) == 0, "the lanes' tree needs a power of 2");

// One tensor a statement reads or writes: dense data with a stride per dim.
template <typename T>
struct TcTensor {
  T* data = nullptr;  // inputs are never written through it
  Shape strides;      // elements, per dim
  int64_t num_elements = 0;
};

// A statement to interpret:
//   tensors[out][point . out_strides + out_offset] (reducer) rhs
// over the points of `domain` (its ranges minus its guards).
struct TcStatement {
  const tc::ExprList* rhs = nullptr;
  const tc::Domain* domain = nullptr;
  tc::Reducer reducer = tc::Reducer::kAssign;
  bool init = true;
  int out = -1;
  std::vector<int64_t> out_strides;  // per domain position; 0 for the reductions
  int64_t out_offset = 0;
  // Every element of the output is a point of the left side's box (no identity
  // fill is needed before an initialising statement).
  bool covers_out = false;
  absl::Span<const int64_t> sizes;  // kSize values, by size id
};

// Statement `i` of a block as the interpreter runs it (its output's strides
// from `a`'s shape).
TcStatement MakeTcStatement(const tc::Block& b, const tc::Analysis& a, int i);

// Runs `s` on `tensors` (indexed by tensor id), in parallel over output elements:
// compiled for the tensors' strides (tc_program.h), then RunTcProgram.
template <typename T>
void RunTcStatement(const TcStatement& s, absl::Span<const TcTensor<T>> tensors);

// Runs `s` as `p`, its compilation for `tensors`' strides (kept by a caller that
// runs the same shapes again).
struct TcProgram;
template <typename T>
void RunTcProgram(const TcStatement& s, const TcProgram& p, absl::Span<const TcTensor<T>> tensors);

extern template void RunTcStatement<float>(const TcStatement&, absl::Span<const TcTensor<float>>);
extern template void RunTcStatement<double>(const TcStatement&, absl::Span<const TcTensor<double>>);
extern template void RunTcProgram<float>(const TcStatement&, const TcProgram&,
                                         absl::Span<const TcTensor<float>>);
extern template void RunTcProgram<double>(const TcStatement&, const TcProgram&,
                                          absl::Span<const TcTensor<double>>);

// ----- The ops' formulas, once for the scalar and the lane loops -----------------------
// exp, log, tanh and sigmoid of x as the elementwise kernels compute them
// (ops/elementwise_functors.h on SIMD packets, tc_interpreter.cc), so that tc's
// exp(x) has the bits of the exp primitive; `op` is one of those four.
bool IsTcPacketOp(tc::Op op);
template <typename T>
T TcPacketOp(tc::Op op, T x);
// y[j] = op(x[j]) for j < n, by packets.
template <typename T>
void TcPacketOpRow(tc::Op op, const T* x, T* y, int64_t n);
extern template float TcPacketOp<float>(tc::Op, float);
extern template double TcPacketOp<double>(tc::Op, double);
extern template void TcPacketOpRow<float>(tc::Op, const float*, float*, int64_t);
extern template void TcPacketOpRow<double>(tc::Op, const double*, double*, int64_t);

// fn(f) with f the op's formula as a callable of its arity's arguments.
template <typename T, typename Fn>
void VisitTcOp(tc::Op op, Fn&& fn) {
  using tc::Op;
  auto b = [](bool v) { return v ? T{1} : T{0}; };
  switch (op) {
    case Op::kNeg: return fn([](T x) { return -x; });
    case Op::kNot: return fn([b](T x) { return b(x == T{0}); });
    case Op::kExp: return fn([](T x) { return TcPacketOp(Op::kExp, x); });
    case Op::kLog: return fn([](T x) { return TcPacketOp(Op::kLog, x); });
    case Op::kTanh: return fn([](T x) { return TcPacketOp(Op::kTanh, x); });
    case Op::kSigmoid: return fn([](T x) { return TcPacketOp(Op::kSigmoid, x); });
    case Op::kSqrt: return fn([](T x) { return std::sqrt(x); });
    case Op::kAbs: return fn([](T x) { return std::abs(x); });
    case Op::kAdd: return fn([](T x, T y) { return x + y; });
    case Op::kSub: return fn([](T x, T y) { return x - y; });
    case Op::kMul: return fn([](T x, T y) { return x * y; });
    case Op::kDiv: return fn([](T x, T y) { return x / y; });
    case Op::kMax2: return fn([](T x, T y) { return std::fmax(x, y); });
    case Op::kMin2: return fn([](T x, T y) { return std::fmin(x, y); });
    case Op::kLt: return fn([b](T x, T y) { return b(x < y); });
    case Op::kLe: return fn([b](T x, T y) { return b(x <= y); });
    case Op::kGt: return fn([b](T x, T y) { return b(x > y); });
    case Op::kGe: return fn([b](T x, T y) { return b(x >= y); });
    case Op::kEq: return fn([b](T x, T y) { return b(x == y); });
    case Op::kNe: return fn([b](T x, T y) { return b(x != y); });
    case Op::kAnd: return fn([b](T x, T y) { return b(x != T{0} && y != T{0}); });
    case Op::kOr: return fn([b](T x, T y) { return b(x != T{0} || y != T{0}); });
    case Op::kSelect: return fn([](T c, T x, T y) { return c != T{0} ? x : y; });
    default: return;  // leaves: evaluated by their callers
  }
}

// One node of op `op` on scalars.
template <typename T>
T ApplyTcOp(tc::Op op, T a, T b, T c) {
  T r{0};
  VisitTcOp<T>(op, [&](auto f) {
    if constexpr (std::is_invocable_v<decltype(f), T>) {
      r = f(a);
    } else if constexpr (std::is_invocable_v<decltype(f), T, T>) {
      r = f(a, b);
    } else {
      r = f(a, b, c);
    }
  });
  return r;
}

}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_TC_INTERPRETER_H_
