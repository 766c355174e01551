// Tc statements that are contractions, as GEMMs (backends/cpu/gemm.h). A sum
// (+=! or +=) whose right side is a product of two reads of rank >= 1, times
// any factors that do not depend on the point (rank-0 reads, numbers, sizes:
// one coefficient), is
//
//   out[prefix, rows, cols] (+)= coef * sum_depth a[prefix, rows, depth] * b[prefix, depth, cols]
//
// with each index classified by who names it: both reads and the left side
// (batch: in the prefix), one read and the left side (a row or column index, or
// a prefix index the other operand repeats), both reads only (depth), one read
// only (summed into that operand first). The left side's trailing run of one
// read's indices becomes the columns and the run before it, of the other's, the
// rows, so that the output is written in place (C(i,j) +=! A(i,k) * B(k,j) runs
// as one GEMM on the tensors themselves). An operand is used where it lies when
// its reads are plain indices whose dims nest as [rows, depth] or its
// transpose; otherwise it is gathered into a dense tensor by the interpreter
// (tc_interpreter.h): index algebra such as conv's I(n,c,h+kh,w+kw) (im2col),
// sums over its own indices, and the guards on its own indices (guarded-out
// points are 0 there, so the product with the other factor is 0 too; a guard
// naming both reads' indices keeps the statement in the interpreter).
#ifndef KGRAD_BACKENDS_CPU_TC_CONTRACTION_H_
#define KGRAD_BACKENDS_CPU_TC_CONTRACTION_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "backends/cpu/tc_interpreter.h"
#include "backends/kernel.h"
#include "core/shape.h"

namespace kgrad {
namespace cpu {

// How one statement runs as GEMMs; positions are the statement's domain positions.
struct TcContractionPlan {
  // An operand as the GEMM reads it: element (prefix, rows or cols, depth) at
  // base + sum over the positions of (idx - lo) * strides.
  struct Operand {
    int node = -1;                 // the read in the right side
    bool gathered = false;         // copied into a dense tensor first
    std::vector<int> layout;       // gathered: its dims' positions, row-major
    std::vector<int> summed;       // gathered: positions summed into it
    std::vector<int> guards;       // gathered: the domain's guards it applies
    std::vector<int64_t> strides;  // per position (0: not an index of it)
    int64_t base = 0;              // direct: offset of the box's first point
    bool trans = false;            // stored [depth, rows] (a) or [cols, depth] (b)
    int64_t ld = 0;
  };
  Operand a, b;
  std::vector<int> prefix, rows, cols, depth;
  // A depth index taken out of the GEMMs (-1: none): with no prefix and few
  // output tiles (conv's filter gradient, Wx(f,c,kh,kw) +=! Ox(n,f,h,w) *
  // I(n,c,h+kh-1,w+kw-1): one 64 x 288 tile, depth 12544), one GEMM per point
  // of it, summed in fixed groups of its points that run in parallel (the
  // groups' partial products then added in order, so the bits depend on the
  // shapes only). Its operands are addressed per point, so one gathered per
  // block of its points stays in cache, and one whose depth nests only without
  // it (Ox as [f, (h, w)] per n) is used in place. The product goes to a
  // temporary.
  int split = -1;
  // The product goes to a dense [prefix, rows, cols] tensor, then into the
  // output (the output's layout is not [prefix, rows, cols], or an update
  // scales it).
  bool temp_out = false;
  std::vector<int64_t>
      out_strides;  // per position: the product's (the output's or the temporary's)
  int64_t ldc = 0;
  // The coefficient: the product of `times` over the product of `over`, negated
  // when `negate`; `constants`: the nodes that do not depend on the point, in order.
  std::vector<int> times, over, constants;
  bool negate = false;
  int64_t m = 1, n = 1, k = 1;  // the points of rows, cols and depth
};

// The plan of `s`, or nullopt when it is no such contraction (or no GEMM helps:
// an empty range). `strides`: every tensor's strides, by tensor id.
std::optional<TcContractionPlan> PlanTcContraction(const TcStatement& s,
                                                   absl::Span<const Shape> strides);

// Runs `s` by `plan`; temporaries come from ctx.
template <typename T>
absl::Status RunTcContraction(const KernelContext& ctx, const TcStatement& s,
                              const TcContractionPlan& plan, absl::Span<const TcTensor<T>> tensors);

extern template absl::Status RunTcContraction<float>(const KernelContext&, const TcStatement&,
                                                     const TcContractionPlan&,
                                                     absl::Span<const TcTensor<float>>);
extern template absl::Status RunTcContraction<double>(const KernelContext&, const TcStatement&,
                                                      const TcContractionPlan&,
                                                      absl::Span<const TcTensor<double>>);

}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_TC_CONTRACTION_H_
