#include "backends/cuda/geometry.h"

#include <array>

#include "core/status_macros.h"

namespace kgrad {
namespace cuda {

BroadcastGeom MakeBroadcastGeom(const Shape& out, absl::Span<const Shape* const> ins) {
  const size_t n = ins.size();
  KGRAD_CHECK(n <= 3 && out.size() <= static_cast<size_t>(kMaxDims));
  // Each operand's element strides over the dims of `out` (0 where broadcast).
  std::array<Shape, 3> aligned;
  for (size_t k = 0; k < n; ++k) {
    const Shape& in = *ins[k];
    aligned[k].assign(out.size(), 0);
    Shape row_major = RowMajorStrides(in);
    size_t offset = out.size() - in.size();
    for (size_t d = 0; d < in.size(); ++d) aligned[k][offset + d] = in[d] == 1 ? 0 : row_major[d];
  }
  BroadcastGeom g;
  g.count = NumElementsOf(out);
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    // Merge into the outer neighbour when, for every operand, stepping the
    // neighbour once equals stepping this dim out[d] times.
    bool merge = g.rank > 0;
    for (size_t k = 0; k < n && merge; ++k) {
      merge = g.strides[k][g.rank - 1] == aligned[k][d] * out[d];
    }
    if (merge) {
      g.dims[g.rank - 1] *= out[d];
      for (size_t k = 0; k < n; ++k) g.strides[k][g.rank - 1] = aligned[k][d];
    } else {
      g.dims[g.rank] = out[d];
      for (size_t k = 0; k < n; ++k) g.strides[k][g.rank] = aligned[k][d];
      ++g.rank;
    }
  }
  return g;
}

CopyGeom MakeCopyGeom(const Shape& dims, const Shape& src_strides, const Shape& dst_strides,
                      int64_t src_offset, int64_t dst_offset) {
  KGRAD_CHECK(dims.size() <= static_cast<size_t>(kMaxDims));
  CopyGeom g;
  g.count = NumElementsOf(dims);
  g.src_offset = src_offset;
  g.dst_offset = dst_offset;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t n = dims[i];
    if (n == 1) continue;
    if (g.rank > 0 && g.src_strides[g.rank - 1] == src_strides[i] * n &&
        g.dst_strides[g.rank - 1] == dst_strides[i] * n) {
      g.dims[g.rank - 1] *= n;
      g.src_strides[g.rank - 1] = src_strides[i];
      g.dst_strides[g.rank - 1] = dst_strides[i];
    } else {
      g.dims[g.rank] = n;
      g.src_strides[g.rank] = src_strides[i];
      g.dst_strides[g.rank] = dst_strides[i];
      ++g.rank;
    }
  }
  return g;
}

CopyGeom DenseWrite(const Shape& dims, const Shape& src_strides, int64_t src_offset) {
  return MakeCopyGeom(dims, src_strides, RowMajorStrides(dims), src_offset, 0);
}

CopyGeom DenseRead(const Shape& dims, const Shape& dst_strides, int64_t dst_offset) {
  return MakeCopyGeom(dims, RowMajorStrides(dims), dst_strides, 0, dst_offset);
}

ReduceGeom MakeReduceGeom(const Shape& in, const std::vector<bool>& reduced) {
  KGRAD_CHECK(in.size() <= static_cast<size_t>(kMaxDims) && reduced.size() == in.size());
  ReduceGeom g;
  Shape sizes;
  std::vector<bool> is_red;
  for (size_t d = 0; d < in.size(); ++d) {
    (reduced[d] ? g.red_count : g.out_count) *= in[d];
    if (in[d] == 1) continue;
    if (!sizes.empty() && is_red.back() == reduced[d]) {
      sizes.back() *= in[d];  // row-major neighbours of one kind walk as one
    } else {
      sizes.push_back(in[d]);
      is_red.push_back(reduced[d]);
    }
  }
  Shape strides = RowMajorStrides(sizes);
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (is_red[k]) {
      g.red_dims[g.red_rank] = sizes[k];
      g.red_strides[g.red_rank++] = strides[k];
    } else {
      g.out_dims[g.out_rank] = sizes[k];
      g.out_strides[g.out_rank++] = strides[k];
    }
  }
  return g;
}

}  // namespace cuda
}  // namespace kgrad
