// Linalg primitives: definitions (attributes, inference, bprop rules), and the
// checks and shape formulas of matmul and einsum, written once for inference and
// the kernels of every backend. Operands come as TensorTypes (ops/op_util.h), as
// in ops/shape_checks.h: from inference's AbstractTensors (kUnknownDim allowed) or
// the kernels' Tensors; the callers check first that each input is a tensor.
#ifndef KGRAD_OPS_LINALG_H_
#define KGRAD_OPS_LINALG_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "ops/einsum_spec.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {

void RegisterLinalgOps(std::vector<PrimitiveDef>* defs);

// det(a) and matrix_inverse(a): `a` a float tensor of square matrices [..., n, n];
// returns the batch dims [...] (error naming the primitive otherwise).
absl::StatusOr<Shape> SquareMatrices(const Primitive& p, TensorType a);

// matmul(a, b){transpose_a, transpose_b}: c[..., i, j] = sum_k op(a)[..., i, k] *
// op(b)[..., k, j], op the optional transpose of the last two dims; batch dims
// broadcast. Operands: f32, f64, i32 or i64, rank >= 2, one dtype.
struct MatMulDims {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;  // op(a) is m x k, op(b) k x n
  Shape batch;                  // the broadcast batch dims
  Shape out;                    // batch + [m, n]
};
// `by`: a rank below 2 is reported as "input 0 must be a f32, f64, i32 or i64
// tensor of rank >= 2" to the kernels and as "input 0 must be a tensor of rank
// >= 2 (a matrix or a batch)" to inference; callers match on both.
absl::StatusOr<MatMulDims> ParseMatMul(const Primitive& p, TensorType a, TensorType b,
                                       CheckedBy by);

// einsum(x0, ..., xn){equation}: 1 to kMaxEinsumOperands floating operands of one
// dtype, each with a subscript per dim, a letter's size the same wherever it
// appears (size 1 does not broadcast).
struct EinsumCall {
  EinsumSpec spec;
  EinsumSizes size;  // per letter; kUnknownDim where no operand knows it
  Shape out;
};
absl::StatusOr<EinsumCall> ParseEinsumCall(const Primitive& p,
                                           absl::Span<const TensorType> operands);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_LINALG_H_
