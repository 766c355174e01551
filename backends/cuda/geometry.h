// Internal to backends/cuda: the builders that turn shapes into launch.h's
// geometry structs. Host code with no CUDA dependency, so that the kernels'
// emulation test (tests/cuda/emulated_kernels_test.cc) runs it on any machine.
#ifndef KGRAD_BACKENDS_CUDA_GEOMETRY_H_
#define KGRAD_BACKENDS_CUDA_GEOMETRY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/cuda/kernels/launch.h"
#include "core/shape.h"

namespace kgrad {
namespace cuda {

// The broadcast walk of `out` over up to three operand shapes (right-aligned;
// size-1 dims broadcast), with dims of size 1 dropped and neighbours merged
// wherever every operand walks them as one.
BroadcastGeom MakeBroadcastGeom(const Shape& out, absl::Span<const Shape* const> ins);

// A copy over `dims` reading `src_strides` from src_offset and writing
// `dst_strides` from dst_offset; size-1 dims dropped and contiguous neighbours
// merged.
CopyGeom MakeCopyGeom(const Shape& dims, const Shape& src_strides, const Shape& dst_strides,
                      int64_t src_offset = 0, int64_t dst_offset = 0);
// Dense destination / dense source variants.
CopyGeom DenseWrite(const Shape& dims, const Shape& src_strides, int64_t src_offset = 0);
CopyGeom DenseRead(const Shape& dims, const Shape& dst_strides, int64_t dst_offset = 0);

// The reduction of `in` over the dims marked in `reduced`: kept dims (the output,
// dense) and reduced dims, each run of neighbours of one kind merged.
ReduceGeom MakeReduceGeom(const Shape& in, const std::vector<bool>& reduced);

// gather_elements / scatter_elements: `indices` naming elements of `data` along
// `axis` (equal ranks, at most kMaxDims).
ElementsGeom MakeElementsGeom(const Shape& indices, const Shape& data, int axis);

// ----- GEMM ---------------------------------------------------------------------------------
// c[i] = op(a[i]) * op(b[i]) for i < batch, row-major; a stored [m, k] ([k, m]
// when ta), b [k, n] ([n, k] when tb); operand matrices `stride_*` elements
// apart (0: one matrix shared by every batch); c dense, m * n apart.
struct RowMajorGemm {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0;
};

// The same product as a column-major (cuBLAS) strided-batched GEMM: row-major C
// is column-major C^T = op(b)^T op(a)^T, so the first operand is b, the second a.
struct ColumnMajorGemm {
  bool trans_first = false, trans_second = false;
  int64_t m = 0, n = 0, k = 0;  // C is m x n column-major
  int64_t ld_first = 1, ld_second = 1, ldc = 1;
  int64_t stride_first = 0, stride_second = 0, stride_c = 0;
  int64_t batch = 1;
};
ColumnMajorGemm ToColumnMajor(const RowMajorGemm& d);

// matmul(a, b){transpose_a, transpose_b} on valid shapes (inner dims agree, batch
// dims broadcast): the output shape and one GEMM over the broadcast batch. An
// operand whose batch is neither a single matrix nor the output's batch is first
// expanded to the output's batch (expand_a / expand_b: see ExpandBatch).
struct MatMulPlan {
  Shape out;
  RowMajorGemm gemm;
  bool expand_a = false, expand_b = false;
};
MatMulPlan PlanMatMul(const Shape& a, const Shape& b, bool ta, bool tb);
// The copy that expands a matmul operand of shape `operand` to the batch dims
// `batch` (broadcast dims repeated); `expanded` gets the new shape.
CopyGeom ExpandBatch(const Shape& operand, const Shape& batch, Shape* expanded);

// einsum's rearrangement of a row-major operand whose dims are named by
// `letters` into the dims named by `out` (distinct letters of the operand), as a
// sum over the operand's other letters: a letter's stride is the sum of its
// positions' strides, which reads the diagonal of a repeated letter. `out_shape`
// gets the result's shape.
absl::StatusOr<ReduceGeom> RearrangeGeom(const std::string& letters, const Shape& shape,
                                         const std::string& out, Shape* out_shape);

}  // namespace cuda
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CUDA_GEOMETRY_H_
