// How N operands of an elementwise op map onto their broadcast output on the CPU,
// and a parallel walk over the output's rows (the elementwise kernels' loops).
#ifndef KGRAD_BACKENDS_CPU_BROADCAST_PLAN_H_
#define KGRAD_BACKENDS_CPU_BROADCAST_PLAN_H_

#include <algorithm>
#include <array>
#include <cstdint>

#include "backends/cpu/parallel.h"
#include "core/shape.h"

namespace kgrad {
namespace cpu {

// How N operands map onto a broadcast output. Dims of size 1 are dropped and
// neighbouring dims merged wherever every operand walks them as one, so that
// same-shape operands become one flat row and a scalar operand a row of stride 0.
// The innermost merged dim is contiguous or broadcast in every operand (stride 1
// or 0); the others are walked with per-operand strides (0 on broadcast dims).
template <size_t N>
struct BroadcastPlan {
  int64_t count = 0;  // output elements
  int64_t inner = 1;  // length of the innermost merged dim: one "row"
  Shape outer;        // the other merged dims, outermost first
  std::array<Shape, N> outer_strides;
  std::array<int64_t, N> inner_strides{};
};

// Operand `in`'s element strides over the dims of `out` (0 where broadcast).
inline Shape AlignedStrides(const Shape& in, const Shape& out) {
  Shape strides(out.size(), 0);
  Shape row_major = RowMajorStrides(in);
  size_t offset = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    strides[offset + d] = in[d] == 1 ? 0 : row_major[d];
  }
  return strides;
}

template <size_t N>
BroadcastPlan<N> MakeBroadcastPlan(const Shape& out, const std::array<const Shape*, N>& ins) {
  BroadcastPlan<N> plan;
  plan.count = NumElementsOf(out);
  bool same = true;
  for (size_t k = 0; k < N; ++k) same &= *ins[k] == out;
  if (same) {
    // No broadcasting (the common case, and every tangent's): one flat row.
    plan.inner = std::max<int64_t>(plan.count, 1);
    plan.inner_strides.fill(1);
    return plan;
  }
  std::array<Shape, N> aligned;
  for (size_t k = 0; k < N; ++k) aligned[k] = AlignedStrides(*ins[k], out);
  Shape dims;
  std::array<Shape, N> strides;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    // Merge into the outer neighbour when, for every operand, stepping the
    // neighbour once equals stepping this dim out[d] times.
    bool merge = !dims.empty();
    for (size_t k = 0; k < N && merge; ++k) {
      merge = strides[k].back() == aligned[k][d] * out[d];
    }
    if (merge) {
      dims.back() *= out[d];
      for (size_t k = 0; k < N; ++k) strides[k].back() = aligned[k][d];
    } else {
      dims.push_back(out[d]);
      for (size_t k = 0; k < N; ++k) strides[k].push_back(aligned[k][d]);
    }
  }
  if (dims.empty()) return plan;  // one element: a row of length 1
  plan.inner = dims.back();
  dims.pop_back();
  for (size_t k = 0; k < N; ++k) {
    plan.inner_strides[k] = strides[k].back();
    strides[k].pop_back();
  }
  plan.outer = std::move(dims);
  plan.outer_strides = std::move(strides);
  return plan;
}

// Operand offsets of the first element of row `r` (row-major over plan.outer).
template <size_t N>
void SeekRow(const BroadcastPlan<N>& p, int64_t r, Shape* idx, std::array<int64_t, N>* off) {
  off->fill(0);
  for (int d = static_cast<int>(p.outer.size()) - 1; d >= 0; --d) {
    (*idx)[d] = r % p.outer[d];
    r /= p.outer[d];
    for (size_t k = 0; k < N; ++k) (*off)[k] += (*idx)[d] * p.outer_strides[k][d];
  }
}

// Calls row(offsets, out_offset, length) over the whole output, in parallel;
// offsets[k] is operand k's offset of the first element. Short rows are handed
// out in runs (an odometer steps from one to the next); rows long enough to fill
// several threads alone are cut into pieces, so a flat array parallelises too.
template <size_t N, typename RowFn>
void ForEachRow(const BroadcastPlan<N>& p, int64_t grain, RowFn&& row) {
  if (p.count == 0) return;
  const int64_t rows = p.count / p.inner;
  const int rank = static_cast<int>(p.outer.size());
  if (p.inner >= 2 * grain) {
    const int64_t pieces = p.inner / grain;
    const int64_t len = (p.inner + pieces - 1) / pieces;
    ParallelFor(rows * pieces, 1, [&](int64_t tb, int64_t te) {
      Shape idx(rank);
      std::array<int64_t, N> off;
      for (int64_t t = tb; t < te; ++t) {
        const int64_t r = t / pieces, b = (t % pieces) * len;
        SeekRow(p, r, &idx, &off);
        for (size_t k = 0; k < N; ++k) off[k] += b * p.inner_strides[k];
        row(off, r * p.inner + b, std::min(p.inner, b + len) - b);
      }
    });
    return;
  }
  ParallelFor(rows, std::max<int64_t>(1, grain / p.inner), [&](int64_t rb, int64_t re) {
    Shape idx(rank);
    std::array<int64_t, N> off;
    SeekRow(p, rb, &idx, &off);
    for (int64_t r = rb; r < re; ++r) {
      row(off, r * p.inner, p.inner);
      for (int d = rank - 1; d >= 0; --d) {
        for (size_t k = 0; k < N; ++k) off[k] += p.outer_strides[k][d];
        if (++idx[d] < p.outer[d]) break;
        for (size_t k = 0; k < N; ++k) off[k] -= p.outer_strides[k][d] * p.outer[d];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_BROADCAST_PLAN_H_
