#include "backends/cuda/geometry.h"

#include <array>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "ops/reduce.h"

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

ElementsGeom MakeElementsGeom(const Shape& indices, const Shape& data, int axis) {
  ElementsGeom g;
  g.rank = static_cast<int>(indices.size());
  g.axis = axis;
  g.count = NumElementsOf(indices);
  g.axis_dim = data[axis];
  const Shape strides = RowMajorStrides(data);
  for (int d = 0; d < g.rank; ++d) {
    g.dims[d] = indices[d];
    g.data_strides[d] = strides[d];
  }
  return g;
}

ReduceGeom MakeReduceGeom(const Shape& in, const std::vector<bool>& reduced) {
  KGRAD_CHECK(in.size() <= static_cast<size_t>(kMaxDims) && reduced.size() == in.size());
  const ops::ReduceGroups groups = ops::GroupReduceDims(in, reduced);
  ReduceGeom g;
  g.out_count = groups.out_count;
  g.red_count = groups.red_count;
  const Shape strides = RowMajorStrides(groups.sizes);
  for (size_t k = 0; k < groups.sizes.size(); ++k) {
    if (groups.reduced[k]) {
      g.red_dims[g.red_rank] = groups.sizes[k];
      g.red_strides[g.red_rank++] = strides[k];
    } else {
      g.out_dims[g.out_rank] = groups.sizes[k];
      g.out_strides[g.out_rank++] = strides[k];
    }
  }
  return g;
}

ColumnMajorGemm ToColumnMajor(const RowMajorGemm& d) {
  ColumnMajorGemm c;
  c.trans_first = d.tb;
  c.trans_second = d.ta;
  c.m = d.n;
  c.n = d.m;
  c.k = d.k;
  c.ld_first = d.tb ? d.k : d.n;   // b's rows, as stored
  c.ld_second = d.ta ? d.m : d.k;  // a's rows, as stored
  c.ldc = d.n;
  c.stride_first = d.stride_b;
  c.stride_second = d.stride_a;
  c.stride_c = d.m * d.n;
  c.batch = d.batch;
  return c;
}

MatMulPlan PlanMatMul(const Shape& a, const Shape& b, bool ta, bool tb) {
  const size_t ra = a.size(), rb = b.size();
  MatMulPlan p;
  RowMajorGemm& d = p.gemm;
  d.ta = ta;
  d.tb = tb;
  d.m = ta ? a[ra - 1] : a[ra - 2];
  d.k = ta ? a[ra - 2] : a[ra - 1];
  d.n = tb ? b[rb - 2] : b[rb - 1];
  const absl::Span<const int64_t> batch_a(a.data(), ra - 2), batch_b(b.data(), rb - 2);
  Shape batch = BroadcastShapes(batch_a, batch_b).value();
  p.out = batch;
  p.out.push_back(d.m);
  p.out.push_back(d.n);
  const int64_t nb = NumElementsOf(batch);
  const int64_t na = NumElementsOf(batch_a), nbb = NumElementsOf(batch_b);
  if (nbb == 1 && !ta) {
    // b is shared by every batch and a's batches are stacked rows: one GEMM.
    d.m *= nb;
    return p;
  }
  d.batch = nb;
  d.stride_a = na == 1 ? 0 : a[ra - 2] * a[ra - 1];
  d.stride_b = nbb == 1 ? 0 : b[rb - 2] * b[rb - 1];
  p.expand_a = na != 1 && na != nb;
  p.expand_b = nbb != 1 && nbb != nb;
  return p;
}

CopyGeom ExpandBatch(const Shape& operand, const Shape& batch, Shape* expanded) {
  const int r = static_cast<int>(operand.size());
  *expanded = batch;
  expanded->push_back(operand[r - 2]);
  expanded->push_back(operand[r - 1]);
  Shape strides(expanded->size(), 0);
  const Shape in_strides = RowMajorStrides(operand);
  const int lead = static_cast<int>(expanded->size()) - r;
  for (int i = 0; i < r; ++i) strides[lead + i] = operand[i] == 1 ? 0 : in_strides[i];
  return DenseWrite(*expanded, strides);
}

absl::StatusOr<ReduceGeom> RearrangeGeom(const std::string& letters, const Shape& shape,
                                         const std::string& out, Shape* out_shape) {
  if (letters.size() != shape.size() || out.size() > static_cast<size_t>(kMaxDims)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot rearrange '", letters, "' (",
                                                   ShapeToString(shape), ") as '", out, "'"));
  }
  const Shape strides = RowMajorStrides(shape);
  std::array<int64_t, 128> stride{}, size{};
  std::array<bool, 128> known{};
  for (size_t i = 0; i < letters.size(); ++i) {
    const unsigned char ch = letters[i];
    stride[ch] += strides[i];
    size[ch] = shape[i];
    known[ch] = true;
  }
  ReduceGeom g;
  out_shape->clear();
  std::array<bool, 128> used{};
  for (char c : out) {
    const unsigned char ch = c;
    if (!known[ch] || used[ch]) {
      return absl::InvalidArgumentError(absl::StrCat("cannot rearrange '", letters, "' as '", out,
                                                     "': letter '", std::string(1, c), "'"));
    }
    used[ch] = true;
    out_shape->push_back(size[ch]);
    g.out_count *= size[ch];
    g.out_dims[g.out_rank] = size[ch];
    g.out_strides[g.out_rank++] = stride[ch];
  }
  for (char c : letters) {
    const unsigned char ch = c;
    if (used[ch]) continue;
    used[ch] = true;  // once per letter, even when repeated
    g.red_count *= size[ch];
    g.red_dims[g.red_rank] = size[ch];
    g.red_strides[g.red_rank++] = stride[ch];
  }
  return g;
}

}  // namespace cuda
}  // namespace kgrad
