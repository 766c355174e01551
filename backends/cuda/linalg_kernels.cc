// CUDA kernels: linalg family. matmul is one cuBLAS strided-batched GEMM (f32,
// f64; the 64-bit-index API, so no size limits): row-major C = op(A) op(B) is
// column-major C^T = op(B)^T op(A)^T, so the operands go in swapped. Broadcast
// batches use stride 0; irregular broadcasts (some batch dims broadcast, others
// not) are expanded by a strided copy first. Integer matmul falls back to the
// CPU. einsum contracts pairwise like the CPU kernel: rearrangements (transposes,
// diagonals, sums) are ReduceGeom launches, contractions strided-batched GEMMs.
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/kernel_util.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/einsum_spec.h"

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
absl::StatusOr<const Tensor*> MatMulInput(const KernelContext& ctx, int i) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.TensorAt(i));
  if (t->dtype() == DType::kBool || t->rank() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input ", i, " must be a f32, f64, i32 or i64 tensor of rank >= 2, got ", t->TypeString()));
  }
  return t;
}

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
  KGRAD_ASSIGN_OR_RETURN(const Tensor* a, MatMulInput(ctx, 0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* b, MatMulInput(ctx, 1));
  if (a->dtype() != b->dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("input 1 must have the dtype of input 0, got ",
                                                   a->TypeString(), " and ", b->TypeString()));
  }
  const bool ta = ctx.prim().GetBool("transpose_a");
  const bool tb = ctx.prim().GetBool("transpose_b");
  const int ra = a->rank(), rb = b->rank();
  const int64_t k = ta ? a->dim(ra - 2) : a->dim(ra - 1);
  const int64_t kb = tb ? b->dim(rb - 1) : b->dim(rb - 2);
  if (k != kb) {
    return absl::InvalidArgumentError(absl::StrCat(
        "matmul inner dimensions must agree, got ", k, " and ", kb, " (", a->TypeString(), " x ",
        b->TypeString(), ", transpose_a=", ta, ", transpose_b=", tb, ")"));
  }
  absl::StatusOr<Shape> batch = BroadcastShapes(absl::MakeConstSpan(a->shape()).first(ra - 2),
                                                absl::MakeConstSpan(b->shape()).first(rb - 2));
  if (!batch.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("matmul batch dimensions: ", batch.status().message()));
  }
  if (IsInteger(a->dtype())) return CpuFallback(ctx);  // cuBLAS has no integer GEMM
  const MatMulPlan plan = PlanMatMul(a->shape(), b->shape(), ta, tb);
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(a->dtype(), plan.out));
  if (out.NumElements() == 0) return Value(std::move(out));
  Tensor pa = *a, pb = *b;
  if (plan.expand_a) {
    KGRAD_ASSIGN_OR_RETURN(pa, Expanded(ctx, *a, *batch));
  }
  if (plan.expand_b) {
    KGRAD_ASSIGN_OR_RETURN(pb, Expanded(ctx, *b, *batch));
  }
  KGRAD_RETURN_IF_ERROR(RunGemm(ctx, plan.gemm, pa, pb, out));
  return Value(std::move(out));
}

// ----- einsum: checks (the equation is parsed by ops/einsum_spec, shared with
// inference, the CPU kernel and the gradient rule) ---------------------------------------------
bool Has(const std::string& s, char ch) { return s.find(ch) != std::string::npos; }

using LetterSizes = std::array<int64_t, 128>;

absl::StatusOr<LetterSizes> EinsumSizes(const KernelContext& ctx, const std::string& eq,
                                        const EinsumSpec& spec) {
  LetterSizes size;
  size.fill(-1);
  std::array<size_t, 128> where{};
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const std::string& sub = spec.inputs[i];
    const Tensor& t = ctx.input(i).tensor();
    if (static_cast<int>(sub.size()) != t.rank()) {
      return EinsumError(eq, absl::StrCat("operand ", i, " has ", sub.size(), " subscripts '", sub,
                                          "' but is ", t.TypeString()));
    }
    for (size_t d = 0; d < sub.size(); ++d) {
      unsigned char ch = sub[d];
      if (size[ch] < 0) {
        size[ch] = t.dim(d);
        where[ch] = i;
      } else if (size[ch] != t.dim(d)) {
        return EinsumError(
            eq, absl::StrCat("subscript '", std::string(1, sub[d]), "' has size ", size[ch],
                             " in operand ", where[ch], " but ", t.dim(d), " in operand ", i));
      }
    }
  }
  return size;
}

absl::Status EinsumInputs(const KernelContext& ctx) {
  const int n = static_cast<int>(ctx.num_inputs());
  if (n < 1 || n > kMaxEinsumOperands) {
    return absl::InvalidArgumentError(
        absl::StrCat("einsum takes 1 to ", kMaxEinsumOperands, " operands, got ", n));
  }
  KGRAD_ASSIGN_OR_RETURN(const Tensor* first, ctx.FloatTensorAt(0));
  for (int i = 1; i < n; ++i) {
    KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.TensorAt(i));
    if (t->dtype() != first->dtype()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input ", i, " must have the dtype of input 0 (", DTypeName(first->dtype()),
                       "), got ", t->TypeString()));
    }
  }
  return absl::OkStatus();
}

// ----- einsum: evaluation ----------------------------------------------------------------------
struct Operand {
  Tensor t;
  std::string letters;
};

template <typename Pred>
std::string Select(const std::string& s, Pred keep) {
  std::string out;
  for (char ch : s) {
    if (!Has(out, ch) && keep(ch)) out.push_back(ch);
  }
  return out;
}

int64_t SizeOf(const std::string& letters, const LetterSizes& size) {
  int64_t n = 1;
  for (char ch : letters) n *= size[static_cast<unsigned char>(ch)];
  return n;
}

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

struct LetterGroups {
  std::string batch, sum, free_a, free_b;
};

LetterGroups Classify(const std::string& a, const std::string& b, const std::string& keep) {
  LetterGroups g;
  g.batch = Select(a, [&](char ch) { return Has(b, ch) && Has(keep, ch); });
  g.sum = Select(a, [&](char ch) { return Has(b, ch) && !Has(keep, ch); });
  g.free_a = Select(a, [&](char ch) { return !Has(b, ch); });
  g.free_b = Select(b, [&](char ch) { return !Has(a, ch); });
  return g;
}

// a * b as one batched GEMM [batch, M, K] x [batch, K, N] keeping `keep`; each
// side rearranged to whichever of [batch, free, sum] / [batch, sum, free] needs
// no copy.
absl::StatusOr<Operand> Contract(const KernelContext& ctx, const Operand& a0, const Operand& b0,
                                 const std::string& keep, const LetterSizes& size) {
  const std::string keep_a = keep + b0.letters, keep_b = keep + a0.letters;
  const std::string a_letters = Select(a0.letters, [&](char ch) { return Has(keep_a, ch); });
  const std::string b_letters = Select(b0.letters, [&](char ch) { return Has(keep_b, ch); });
  const LetterGroups g = Classify(a_letters, b_letters, keep);
  RowMajorGemm d;
  d.m = SizeOf(g.free_a, size);
  d.n = SizeOf(g.free_b, size);
  d.k = SizeOf(g.sum, size);
  const std::string a_plain = g.batch + g.free_a + g.sum, a_trans = g.batch + g.sum + g.free_a;
  const std::string b_plain = g.batch + g.sum + g.free_b, b_trans = g.batch + g.free_b + g.sum;
  d.ta = a0.letters == a_trans && a_trans != a_plain;
  d.tb = b0.letters == b_trans && b_trans != b_plain;
  KGRAD_ASSIGN_OR_RETURN(Operand a, Rearrange(ctx, a0, d.ta ? a_trans : a_plain));
  KGRAD_ASSIGN_OR_RETURN(Operand b, Rearrange(ctx, b0, d.tb ? b_trans : b_plain));
  Operand c{Tensor(), g.batch + g.free_a + g.free_b};
  Shape shape;
  for (char ch : c.letters) shape.push_back(size[static_cast<unsigned char>(ch)]);
  KGRAD_ASSIGN_OR_RETURN(c.t, ctx.Allocate(a.t.dtype(), shape));
  d.batch = SizeOf(g.batch, size);
  d.stride_a = d.m * d.k;
  d.stride_b = d.k * d.n;
  KGRAD_RETURN_IF_ERROR(RunGemm(ctx, d, a.t, b.t, c.t));
  return c;
}

std::string NeededLetters(const std::vector<Operand>& ops, size_t i, size_t j,
                          const std::string& output) {
  std::string keep = output;
  for (size_t o = 0; o < ops.size(); ++o) {
    if (o != i && o != j) keep += ops[o].letters;
  }
  return keep;
}

std::pair<size_t, size_t> CheapestPair(const std::vector<Operand>& ops, const std::string& output,
                                       const LetterSizes& size) {
  std::pair<size_t, size_t> best{0, 1};
  int64_t best_size = -1;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (size_t j = i + 1; j < ops.size(); ++j) {
      const std::string keep = NeededLetters(ops, i, j, output);
      auto kept = [&keep](char ch) { return Has(keep, ch); };
      const int64_t n = SizeOf(Select(ops[i].letters + ops[j].letters, kept), size);
      if (best_size < 0 || n < best_size) best = {i, j}, best_size = n;
    }
  }
  return best;
}

absl::StatusOr<Value> Einsum(KernelContext& ctx) {
  KGRAD_RETURN_IF_ERROR(EinsumInputs(ctx));
  const std::string& eq = ctx.prim().GetString("equation");
  KGRAD_ASSIGN_OR_RETURN(EinsumSpec spec, ParseEinsum(eq, static_cast<int>(ctx.num_inputs())));
  KGRAD_ASSIGN_OR_RETURN(LetterSizes size, EinsumSizes(ctx, eq, spec));
  std::vector<Operand> ops;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    ops.push_back(Operand{ctx.input(i).tensor(), spec.inputs[i]});
  }
  while (ops.size() > 1) {
    auto [i, j] = CheapestPair(ops, spec.output, size);
    const std::string keep = NeededLetters(ops, i, j, spec.output);
    KGRAD_ASSIGN_OR_RETURN(Operand c, Contract(ctx, ops[i], ops[j], keep, size));
    ops.erase(ops.begin() + j);
    ops[i] = std::move(c);
  }
  KGRAD_ASSIGN_OR_RETURN(Operand result, Rearrange(ctx, ops[0], spec.output));
  return Value(std::move(result.t));
}

}  // namespace

void RegisterLinalgKernels(KernelTable* t) {
  t->Set(PrimId::kMatMul, OnDevice<MatMul>);
  t->Set(PrimId::kEinsum, OnDevice<Einsum>);
}

}  // namespace cuda
}  // namespace kgrad
