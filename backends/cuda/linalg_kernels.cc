// CUDA kernels: linalg family. matmul is one cuBLAS strided-batched GEMM (f32,
// f64; the 64-bit-index API, so no size limits): row-major C = op(A) op(B) is
// column-major C^T = op(B)^T op(A)^T, so the operands go in swapped. Broadcast
// batches use stride 0; irregular broadcasts (some batch dims broadcast, others
// not) are expanded by a strided copy first. Integer matmul falls back to the
// CPU. einsum follows ops/einsum_spec.h's plan, like the CPU kernel:
// rearrangements (transposes, diagonals, sums) are ReduceGeom launches,
// contractions strided-batched GEMMs. The checks and shapes are ops/linalg.h's.
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/kernel_util.h"
#include "backends/view_kernels.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/einsum_spec.h"
#include "ops/linalg.h"

namespace kgrad {
namespace cuda {
namespace {

// Runs a row-major GEMM as cuBLAS's column-major one (geometry.h's ToColumnMajor).
absl::Status RunGemm(const KernelContext& ctx, const RowMajorGemm& d, const Tensor& a,
                     const Tensor& b, const Tensor& c) {
  if (d.m * d.n * d.batch == 0) return absl::OkStatus();
  if (d.k == 0) return FillTensor(ctx, c, 0.0);  // a sum of nothing
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(cublasHandle_t h, gpu.device->Cublas());
  const ColumnMajorGemm g = ToColumnMajor(d);
  const cublasOperation_t op1 = g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op2 = g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (a.dtype() == DType::kFloat32) {
    const float one = 1, zero = 0;
    KGRAD_CUBLAS_CALL(cublasSgemmStridedBatched_64(
        h, op1, op2, g.m, g.n, g.k, &one, b.data<float>(), g.ld_first, g.stride_first,
        a.data<float>(), g.ld_second, g.stride_second, &zero, c.mutable_data<float>(), g.ldc,
        g.stride_c, g.batch));
  } else {
    const double one = 1, zero = 0;
    KGRAD_CUBLAS_CALL(cublasDgemmStridedBatched_64(
        h, op1, op2, g.m, g.n, g.k, &one, b.data<double>(), g.ld_first, g.stride_first,
        a.data<double>(), g.ld_second, g.stride_second, &zero, c.mutable_data<double>(), g.ldc,
        g.stride_c, g.batch));
  }
  return absl::OkStatus();
}

// ----- matmul ----------------------------------------------------------------------------------
// `t` expanded to the output batch `batch` (broadcast batch dims repeated).
absl::StatusOr<Tensor> Expanded(const KernelContext& ctx, const Tensor& t, const Shape& batch) {
  Shape shape;
  const CopyGeom g = ExpandBatch(t.shape(), batch, &shape);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(t.dtype(), shape));
  KGRAD_RETURN_IF_ERROR(StridedCopy(g, t, out, gpu.stream));
  return out;
}

absl::StatusOr<Value> MatMul(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* a, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* b, ctx.TensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(ops::MatMulDims m,
                         ops::ParseMatMul(ctx.prim(), *a, *b, ops::CheckedBy::kKernel));
  if (IsInteger(a->dtype())) return CpuFallback(ctx);  // cuBLAS has no integer GEMM
  const MatMulPlan plan = PlanMatMul(a->shape(), b->shape(), m.ta, m.tb);
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(a->dtype(), m.out));
  if (out.NumElements() == 0) return Value(std::move(out));
  Tensor pa = *a, pb = *b;
  if (plan.expand_a) {
    KGRAD_ASSIGN_OR_RETURN(pa, Expanded(ctx, *a, m.batch));
  }
  if (plan.expand_b) {
    KGRAD_ASSIGN_OR_RETURN(pb, Expanded(ctx, *b, m.batch));
  }
  KGRAD_RETURN_IF_ERROR(RunGemm(ctx, plan.gemm, pa, pb, out));
  return Value(std::move(out));
}

// ----- einsum ----------------------------------------------------------------------------------
// The operands are checked and the equation parsed by ops/linalg.h's
// ParseEinsumCall; the contractions come from ops/einsum_spec.h's PlanEinsum.
struct Operand {
  Tensor t;
  std::string letters;
};

// `op` with its dims rearranged as `out` letters (each once), summing the letters
// of `op` not in `out` and taking diagonals of repeated letters: one reduction
// (geometry.h's RearrangeGeom).
absl::StatusOr<Operand> Rearrange(const KernelContext& ctx, const Operand& op,
                                  const std::string& out) {
  if (op.letters == out) return op;
  Shape shape;
  KGRAD_ASSIGN_OR_RETURN(ReduceGeom g, RearrangeGeom(op.letters, op.t.shape(), out, &shape));
  KGRAD_ASSIGN_OR_RETURN(Tensor t, ctx.Allocate(op.t.dtype(), shape));
  KGRAD_RETURN_IF_ERROR(RunReduce(ctx, ReduceOp::kSum, g, op.t, t));
  return Operand{std::move(t), out};
}

// One step of the plan: both sides rearranged as the GEMM reads them, then one
// strided-batched GEMM.
absl::StatusOr<Operand> Contract(const KernelContext& ctx, const Operand& a0, const Operand& b0,
                                 const EinsumContraction& c, const EinsumSizes& size) {
  KGRAD_ASSIGN_OR_RETURN(Operand a, Rearrange(ctx, a0, c.a));
  KGRAD_ASSIGN_OR_RETURN(Operand b, Rearrange(ctx, b0, c.b));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(a.t.dtype(), LetterShape(c.out, size)));
  const RowMajorGemm d{c.m, c.n, c.k, c.ta, c.tb, c.batch, /*stride_a=*/c.m * c.k,
                       /*stride_b=*/c.k * c.n};
  KGRAD_RETURN_IF_ERROR(RunGemm(ctx, d, a.t, b.t, out));
  return Operand{std::move(out), c.out};
}

absl::StatusOr<Value> Einsum(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<ops::TensorType> in, InputTypes<ops::TensorType>(ctx));
  KGRAD_ASSIGN_OR_RETURN(ops::EinsumCall call, ops::ParseEinsumCall(ctx.prim(), in));
  std::vector<Operand> operands;
  for (size_t i = 0; i < call.spec.inputs.size(); ++i) {
    operands.push_back(Operand{ctx.input(i).tensor(), call.spec.inputs[i]});
  }
  for (const EinsumContraction& c : PlanEinsum(call.spec, call.size)) {
    KGRAD_ASSIGN_OR_RETURN(Operand r, Contract(ctx, operands[c.i], operands[c.j], c, call.size));
    operands.erase(operands.begin() + c.j);
    operands[c.i] = std::move(r);
  }
  KGRAD_ASSIGN_OR_RETURN(Operand result, Rearrange(ctx, operands[0], call.spec.output));
  return Value(std::move(result.t));
}

}  // namespace

void RegisterLinalgKernels(KernelTable* t) {
  t->Set(PrimId::kMatMul, OnDevice<MatMul>);
  t->Set(PrimId::kEinsum, OnDevice<Einsum>);
}

}  // namespace cuda
}  // namespace kgrad
