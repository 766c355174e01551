// Floor and ceiling division of index arithmetic. C++'s `/` truncates toward
// zero, but the ranges a tc statement's affine forms reach and the points a
// divisibility guard keeps are floors and ceilings for either sign of the
// numerator; inference (ops/tc_analysis.cc) and the CPU kernels
// (backends/cpu/tc_*.cc) must round the same way, so the rule lives here once.
#ifndef KGRAD_OPS_TC_DIVISION_H_
#define KGRAD_OPS_TC_DIVISION_H_

#include <cstdint>

namespace kgrad {
namespace tc {

// floor(a / b) for b > 0. Offsets are bounded (ops/tc_analysis.cc) far from
// INT64_MIN, so -a cannot overflow.
inline constexpr int64_t FloorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// ceil(a / b) for b > 0.
inline constexpr int64_t CeilDiv(int64_t a, int64_t b) { return -FloorDiv(-a, b); }

}  // namespace tc
}  // namespace kgrad

#endif  // KGRAD_OPS_TC_DIVISION_H_
