// CPU kernels: linalg family (matmul, einsum). The checks and shapes are
// ops/linalg.h's, the einsum contraction order ops/einsum_spec.h's, shared with
// inference and the CUDA kernels. Matrix products go through one batched GEMM:
// the shared float GEMM (backends/cpu/gemm.h: oneDNN's sgemm for f32, Eigen's
// for f64, in tiles whose bits do not depend on the thread count), a plain loop
// for integers.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/eigen.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/parallel.h"
#include "backends/view_kernels.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/einsum_spec.h"
#include "ops/linalg.h"

namespace kgrad {
namespace cpu {
namespace {

// A thread gets at least this many multiply-adds of a batch of matrices.
inline constexpr int64_t kMinParallelGemm = int64_t{1} << 16;
// Matrices with at least this many multiply-adds are cut into fixed output tiles
// (below); smaller ones are computed whole, spread over threads by batch.
inline constexpr int64_t kBigGemm = int64_t{1} << 21;

// ----- GEMM -------------------------------------------------------------------------
// c[m, n] = op(a) * op(b); a is stored [m, k] ([k, m] when ta), b [k, n] ([n, k] when tb).
struct GemmDims {
  int64_t m, n, k;
  bool ta, tb;
};

// Row i of c = op(a) * op(b) for integers (wrapping, like all integer
// arithmetic), in i-k-j order so that the inner loop runs along contiguous rows
// of b and c when b is not transposed.
template <typename T>
void GemmLoopRow(const T* a, const T* b, T* c, const GemmDims& d, int64_t i) {
  int64_t a_si = d.ta ? 1 : d.k, a_sk = d.ta ? d.m : 1;
  int64_t b_sk = d.tb ? 1 : d.n, b_sj = d.tb ? d.k : 1;
  T* row = c + i * d.n;
  std::fill(row, row + d.n, T{0});
  for (int64_t kk = 0; kk < d.k; ++kk) {
    const T av = a[i * a_si + kk * a_sk];
    const T* brow = b + kk * b_sk;
    if (b_sj == 1) {  // the common case, kept apart so that it vectorises
      for (int64_t j = 0; j < d.n; ++j) row[j] = WrapAdd(row[j], WrapMul(av, brow[j]));
    } else {
      for (int64_t j = 0; j < d.n; ++j) row[j] = WrapAdd(row[j], WrapMul(av, brow[j * b_sj]));
    }
  }
}

GemmShape Dense(const GemmDims& d) { return GemmShape::Dense(d.m, d.n, d.k, d.ta, d.tb); }

// Where each batch's matrix starts in an operand: bi * stride, or table[bi] when
// broadcasting makes the pattern irregular.
struct BatchOffsets {
  int64_t stride = 0;
  std::vector<int64_t> table;
  int64_t operator[](int64_t bi) const { return table.empty() ? bi * stride : table[bi]; }
};

// a . b over k contiguous elements: Eigen's vectorised reduction for floats.
template <typename T>
T Dot(const T* a, const T* b, int64_t k) {
  if constexpr (std::is_floating_point_v<T>) {
    using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
    return Eigen::Map<const Vec>(a, k).dot(Eigen::Map<const Vec>(b, k));
  } else {
    T s{0};
    for (int64_t j = 0; j < k; ++j) s = WrapAdd(s, WrapMul(a[j], b[j]));
    return s;
  }
}

// c[bi] = a[bi] . b[bi] for 1 x k times k x 1 problems (batched dot products, and
// elementwise products when k == 1), without the per-call cost of a GEMM.
template <typename T>
void BatchedDot(const T* a, const T* b, T* c, int64_t k, int64_t batch, const BatchOffsets& a_off,
                const BatchOffsets& b_off) {
  ParallelFor(batch, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, k)),
              [&](int64_t begin, int64_t end) {
                for (int64_t bi = begin; bi < end; ++bi) {
                  c[bi] = Dot(a + a_off[bi], b + b_off[bi], k);
                }
              });
}

// c[bi] = op(a + a_off[bi]) * op(b + b_off[bi]) for every batch bi; c is dense.
template <typename T>
void BatchedGemm(const T* a, const T* b, T* c, const GemmDims& d, int64_t batch,
                 const BatchOffsets& a_off, const BatchOffsets& b_off) {
  int64_t mn = d.m * d.n;
  int64_t work = mn * std::max<int64_t>(d.k, 1);
  if (mn == 1) {
    BatchedDot(a, b, c, d.k, batch, a_off, b_off);  // a 1 x k row is contiguous either way
  } else if constexpr (!std::is_floating_point_v<T>) {
    // Rows of every batch are the work items.
    int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, d.n * d.k));
    ParallelFor(batch * d.m, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        int64_t bi = r / d.m;
        GemmLoopRow(a + a_off[bi], b + b_off[bi], c + bi * mn, d, r % d.m);
      }
    });
  } else if (work >= kBigGemm && d.k > 0) {
    // Fixed output tiles of every matrix, spread over the threads (gemm.h).
    const int64_t tm = (d.m + kGemmTileRows - 1) / kGemmTileRows;
    const int64_t tn = (d.n + kGemmTileCols - 1) / kGemmTileCols;
    ParallelForOneThreadEach(batch * tm * tn, 2, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t bi = t / (tm * tn), i = t % (tm * tn) / tn, j = t % tn;
        GemmTile(a + a_off[bi], b + b_off[bi], c + bi * mn, Dense(d), i * kGemmTileRows,
                 std::min(d.m, (i + 1) * kGemmTileRows), j * kGemmTileCols,
                 std::min(d.n, (j + 1) * kGemmTileCols));
      }
    });
  } else {
    // Small matrices whole, each on one thread (spread by batch).
    ParallelForOneThreadEach(batch, std::max<int64_t>(1, kMinParallelGemm / std::max<int64_t>(work, 1)),
                             [&](int64_t begin, int64_t end) {
                               for (int64_t bi = begin; bi < end; ++bi) {
                                 SerialGemm(a + a_off[bi], b + b_off[bi], c + bi * mn, Dense(d));
                               }
                             });
  }
}

// ----- matmul -----------------------------------------------------------------------
// Offsets of each output batch's matrix inside an operand with batch dims `dims`
// (right-aligned against `out`, broadcasting dims of size 1) and `mat` elements
// per matrix.
BatchOffsets BroadcastOffsets(absl::Span<const int64_t> out, absl::Span<const int64_t> dims,
                              int64_t mat) {
  int rank = static_cast<int>(out.size());
  int lead = rank - static_cast<int>(dims.size());
  if (NumElementsOf(dims) == NumElementsOf(out)) return {mat, {}};  // no broadcasting
  Shape strides = RowMajorStrides(dims);
  std::vector<int64_t> step(rank, 0);
  for (int i = lead; i < rank; ++i) {
    step[i] = dims[i - lead] == 1 ? 0 : strides[i - lead] * mat;
  }
  BatchOffsets off;
  off.table.resize(NumElementsOf(out));
  std::vector<int64_t> idx(rank, 0);
  int64_t cur = 0;
  for (int64_t& o : off.table) {
    o = cur;
    for (int i = rank - 1; i >= 0; --i) {  // odometer
      cur += step[i];
      if (++idx[i] < out[i]) break;
      cur -= step[i] * idx[i];
      idx[i] = 0;
    }
  }
  return off;
}

template <typename T>
void MatMulTyped(const Tensor& a, const Tensor& b, const Shape& batch, GemmDims d, Tensor* out) {
  absl::Span<const int64_t> batch_a(a.shape().data(), a.rank() - 2);
  absl::Span<const int64_t> batch_b(b.shape().data(), b.rank() - 2);
  int64_t nb = NumElementsOf(batch);
  T* c = out->mutable_data<T>();
  if (NumElementsOf(batch_b) == 1 && !d.ta) {
    // b is shared by every batch and a's batches are stacked rows: one GEMM.
    d.m *= nb;
    BatchedGemm(a.data<T>(), b.data<T>(), c, d, 1, BatchOffsets{}, BatchOffsets{});
    return;
  }
  BatchedGemm(a.data<T>(), b.data<T>(), c, d, nb, BroadcastOffsets(batch, batch_a, d.m * d.k),
              BroadcastOffsets(batch, batch_b, d.k * d.n));
}

// matmul(a, b){transpose_a, transpose_b}: batched matrix product with broadcast
// batch dims.
absl::StatusOr<Value> MatMul(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* a, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* b, ctx.TensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(ops::MatMulDims m,
                         ops::ParseMatMul(ctx.prim(), *a, *b, ops::CheckedBy::kKernel));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(a->dtype(), m.out));
  if (out.NumElements() > 0) {
    DispatchDType(a->dtype(), [&](auto zero) {
      using T = decltype(zero);
      if constexpr (kIsNumericComputeType<T>) {
        MatMulTyped<T>(*a, *b, m.batch, GemmDims{m.m, m.n, m.k, m.ta, m.tb}, &out);
      }
    });
  }
  return Value(std::move(out));
}

// ----- einsum ----------------------------------------------------------------------
// The operands are checked and the equation parsed by ops/linalg.h's
// ParseEinsumCall; the contractions come from ops/einsum_spec.h's PlanEinsum.

// ----- einsum: strided reductions ---------------------------------------------------
// An operand during evaluation: a dense row-major tensor whose dims are named by
// `letters` (unique once reduced).
struct Operand {
  Tensor t;
  std::string letters;
};

bool Has(const std::string& s, char ch) { return s.find(ch) != std::string::npos; }

// dst[o] = sum over r of src[offset(o) + offset(r)]: o runs over `out` dims, r over
// `red` dims, each dim with its stride in src. Covers transposes (no red dims),
// diagonals (a letter's stride is the sum of its positions' strides) and sums.
struct StridedPlan {
  std::vector<int64_t> out, out_stride, red, red_stride;
};

// Sum of src over the reduction dims (the innermost one as a plain loop).
template <typename T>
double SumReduced(const T* src, const StridedPlan& p) {
  int rank = static_cast<int>(p.red.size());
  int64_t last = p.red[rank - 1], last_stride = p.red_stride[rank - 1];
  int64_t runs = NumElementsOf(p.red) / last;
  Shape idx(rank, 0);  // inline storage: no allocation per output element
  int64_t off = 0;
  double acc = 0;
  for (int64_t r = 0; r < runs; ++r) {
    for (int64_t j = 0; j < last; ++j) acc += static_cast<double>(src[off + j * last_stride]);
    for (int i = rank - 2; i >= 0; --i) {
      off += p.red_stride[i];
      if (++idx[i] < p.red[i]) break;
      off -= p.red_stride[i] * idx[i];
      idx[i] = 0;
    }
  }
  return acc;
}

template <typename T>
void RunStridedPlan(const T* src, StridedPlan p, T* dst) {
  // Rank-0 sides become one dim of size 1, so the loops below need no special case.
  if (p.out.empty()) {
    p.out = {1};
    p.out_stride = {0};
  }
  if (p.red.empty()) {
    p.red = {1};
    p.red_stride = {0};
  }
  int rank = static_cast<int>(p.out.size());
  int64_t last = p.out[rank - 1], last_stride = p.out_stride[rank - 1];
  int64_t rows = NumElementsOf(p.out) / std::max<int64_t>(last, 1);
  int64_t nred = NumElementsOf(p.red);
  bool copy = nred == 1;
  int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, last * nred));
  ParallelFor(last == 0 ? 0 : rows, grain, [&](int64_t begin, int64_t end) {
    Shape idx(rank, 0);
    int64_t off = 0;
    int64_t rest = begin;
    for (int i = rank - 2; i >= 0; --i) {
      idx[i] = rest % p.out[i];
      rest /= p.out[i];
      off += idx[i] * p.out_stride[i];
    }
    for (int64_t row = begin; row < end; ++row) {
      T* d = dst + row * last;
      for (int64_t j = 0; j < last; ++j) {
        const T* s = src + off + j * last_stride;
        d[j] = copy ? *s : nred == 0 ? T{0} : static_cast<T>(SumReduced(s, p));
      }
      for (int i = rank - 2; i >= 0; --i) {
        off += p.out_stride[i];
        if (++idx[i] < p.out[i]) break;
        off -= p.out_stride[i] * idx[i];
        idx[i] = 0;
      }
    }
  });
}

// `op` with its dims rearranged as `out` letters (each once), summing the letters
// of `op` not in `out` and taking diagonals of repeated letters.
template <typename T>
absl::StatusOr<Operand> Rearrange(const KernelContext& ctx, const Operand& op,
                                  const std::string& out, const EinsumSizes& size) {
  if (op.letters == out) return op;
  Shape strides = RowMajorStrides(op.t.shape());
  std::array<int64_t, 128> letter_stride{};
  for (size_t i = 0; i < op.letters.size(); ++i) {
    letter_stride[static_cast<unsigned char>(op.letters[i])] += strides[i];
  }
  StridedPlan p;
  Shape shape;
  for (char ch : out) {
    p.out.push_back(size[static_cast<unsigned char>(ch)]);
    p.out_stride.push_back(letter_stride[static_cast<unsigned char>(ch)]);
    shape.push_back(p.out.back());
  }
  std::string seen;
  for (char ch : op.letters) {
    if (Has(out, ch) || Has(seen, ch)) continue;
    seen.push_back(ch);
    p.red.push_back(size[static_cast<unsigned char>(ch)]);
    p.red_stride.push_back(letter_stride[static_cast<unsigned char>(ch)]);
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor t, ctx.Allocate(op.t.dtype(), shape));
  RunStridedPlan(op.t.data<T>(), std::move(p), t.mutable_data<T>());
  return Operand{std::move(t), out};
}

// ----- einsum: contraction ----------------------------------------------------------
// One step of the plan: both sides rearranged as the GEMM reads them, then one
// batched GEMM.
template <typename T>
absl::StatusOr<Operand> Contract(const KernelContext& ctx, const Operand& a0, const Operand& b0,
                                 const EinsumContraction& c, const EinsumSizes& size) {
  KGRAD_ASSIGN_OR_RETURN(Operand a, Rearrange<T>(ctx, a0, c.a, size));
  KGRAD_ASSIGN_OR_RETURN(Operand b, Rearrange<T>(ctx, b0, c.b, size));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(a.t.dtype(), LetterShape(c.out, size)));
  if (out.NumElements() > 0) {
    BatchedGemm(a.t.data<T>(), b.t.data<T>(), out.mutable_data<T>(),
                GemmDims{c.m, c.n, c.k, c.ta, c.tb}, c.batch, BatchOffsets{c.m * c.k, {}},
                BatchOffsets{c.k * c.n, {}});
  }
  return Operand{std::move(out), c.out};
}

template <typename T>
absl::StatusOr<Tensor> EinsumTyped(const KernelContext& ctx, const ops::EinsumCall& call) {
  std::vector<Operand> operands;
  for (size_t i = 0; i < call.spec.inputs.size(); ++i) {
    operands.push_back(Operand{ctx.input(i).tensor(), call.spec.inputs[i]});
  }
  for (const EinsumContraction& c : PlanEinsum(call.spec, call.size)) {
    KGRAD_ASSIGN_OR_RETURN(Operand r, Contract<T>(ctx, operands[c.i], operands[c.j], c, call.size));
    operands.erase(operands.begin() + c.j);
    operands[c.i] = std::move(r);
  }
  KGRAD_ASSIGN_OR_RETURN(Operand result,
                         Rearrange<T>(ctx, operands[0], call.spec.output, call.size));
  return result.t;
}

// einsum(x0, ..., xn){equation}: contracted pairwise (cheapest pair first), each
// pair as one batched GEMM.
absl::StatusOr<Value> Einsum(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<ops::TensorType> in, InputTypes<ops::TensorType>(ctx));
  KGRAD_ASSIGN_OR_RETURN(ops::EinsumCall call, ops::ParseEinsumCall(ctx.prim(), in));
  absl::StatusOr<Tensor> out = in[0].dtype == DType::kFloat32 ? EinsumTyped<float>(ctx, call)
                                                                 : EinsumTyped<double>(ctx, call);
  KGRAD_RETURN_IF_ERROR(out.status());
  return Value(*std::move(out));
}

// ----- det, matrix_inverse ------------------------------------------------------------------
// Both eliminate one n x n matrix at a time in double (f32 inputs too, so that the
// pivots lose nothing), with partial pivoting: at column k the row of the largest
// |entry| at or below the diagonal is swapped up. The matrices run in parallel.

// The determinant of the row-major n x n matrix `m` (overwritten): the product of
// the pivots, negated once per row swap. An exact zero pivot column gives 0.
double Determinant(std::vector<double>& m, int64_t n) {
  double det = 1;
  for (int64_t k = 0; k < n; ++k) {
    int64_t p = k;
    for (int64_t i = k + 1; i < n; ++i) {
      if (std::abs(m[i * n + k]) > std::abs(m[p * n + k])) p = i;
    }
    const double pivot = m[p * n + k];
    if (pivot == 0) return 0.0 * det;  // keeps a NaN det NaN
    if (p != k) {
      for (int64_t j = 0; j < n; ++j) std::swap(m[k * n + j], m[p * n + j]);
      det = -det;
    }
    det *= pivot;
    for (int64_t i = k + 1; i < n; ++i) {
      const double f = m[i * n + k] / pivot;
      if (f == 0) continue;
      for (int64_t j = k + 1; j < n; ++j) m[i * n + j] -= f * m[k * n + j];
    }
  }
  return det;
}

// The inverse of `m` (overwritten) into `inv` by Gauss-Jordan elimination of
// [m | I]; false when a pivot is exactly zero (singular).
bool Inverse(std::vector<double>& m, std::vector<double>& inv, int64_t n) {
  inv.assign(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i) inv[i * n + i] = 1;
  for (int64_t k = 0; k < n; ++k) {
    int64_t p = k;
    for (int64_t i = k + 1; i < n; ++i) {
      if (std::abs(m[i * n + k]) > std::abs(m[p * n + k])) p = i;
    }
    if (m[p * n + k] == 0) return false;
    if (p != k) {
      for (int64_t j = 0; j < n; ++j) {
        std::swap(m[k * n + j], m[p * n + j]);
        std::swap(inv[k * n + j], inv[p * n + j]);
      }
    }
    const double r = 1.0 / m[k * n + k];
    for (int64_t j = 0; j < n; ++j) {
      m[k * n + j] *= r;
      inv[k * n + j] *= r;
    }
    for (int64_t i = 0; i < n; ++i) {
      const double f = m[i * n + k];
      if (i == k || f == 0) continue;
      for (int64_t j = 0; j < n; ++j) {
        m[i * n + j] -= f * m[k * n + j];
        inv[i * n + j] -= f * inv[k * n + j];
      }
    }
  }
  return true;
}

// fn(b, m) for every matrix b of `a` as doubles in `m` (row-major n x n), the
// matrices split over the threads; the first error (lowest b) wins.
template <typename T, typename Fn>
absl::Status ForEachMatrix(const Tensor& a, int64_t n, Fn&& fn) {
  const int64_t count = a.NumElements() / (n * n);  // n > 0
  const int64_t per = std::max<int64_t>(1, n * n * n);
  std::vector<absl::Status> errors(count);
  ParallelFor(count, std::max<int64_t>(1, kParallelGrain / per), [&](int64_t b0, int64_t b1) {
    std::vector<double> m(n * n);
    for (int64_t b = b0; b < b1; ++b) {
      const T* src = a.data<T>() + b * n * n;
      for (int64_t i = 0; i < n * n; ++i) m[i] = static_cast<double>(src[i]);
      errors[b] = fn(b, m);
    }
  });
  for (const absl::Status& e : errors) KGRAD_RETURN_IF_ERROR(e);
  return absl::OkStatus();
}

// det(a [..., n, n]) -> [...].
absl::StatusOr<Value> Det(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* a, ctx.FloatTensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(Shape batch, ops::SquareMatrices(ctx.prim(), *a));
  const int64_t n = a->dim(a->rank() - 1);
  if (n == 0) {  // the empty product
    KGRAD_ASSIGN_OR_RETURN(Tensor ones, Tensor::Full(a->dtype(), batch, 1.0));
    return Value(std::move(ones));
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(a->dtype(), batch));
  auto run = [&](auto zero) {
    using T = decltype(zero);
    T* y = out.mutable_data<T>();
    return ForEachMatrix<T>(*a, n, [&](int64_t b, std::vector<double>& m) {
      y[b] = static_cast<T>(Determinant(m, n));
      return absl::OkStatus();
    });
  };
  KGRAD_RETURN_IF_ERROR(a->dtype() == DType::kFloat32 ? run(float{}) : run(double{}));
  return Value(std::move(out));
}

// matrix_inverse(a [..., n, n]) -> [..., n, n]; a singular matrix is an error.
absl::StatusOr<Value> MatrixInverse(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* a, ctx.FloatTensorAt(0));
  KGRAD_RETURN_IF_ERROR(ops::SquareMatrices(ctx.prim(), *a).status());
  const int64_t n = a->dim(a->rank() - 1);
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(a->dtype(), a->shape()));
  if (n == 0) return Value(std::move(out));
  auto run = [&](auto zero) {
    using T = decltype(zero);
    T* y = out.mutable_data<T>();
    return ForEachMatrix<T>(*a, n, [&](int64_t b, std::vector<double>& m) -> absl::Status {
      std::vector<double> inv;
      if (!Inverse(m, inv, n)) {
        return absl::InvalidArgumentError(
            absl::StrCat("matrix_inverse: matrix ", b, " of input 0, ", a->TypeString(), ", is singular"));
      }
      for (int64_t i = 0; i < n * n; ++i) y[b * n * n + i] = static_cast<T>(inv[i]);
      return absl::OkStatus();
    });
  };
  KGRAD_RETURN_IF_ERROR(a->dtype() == DType::kFloat32 ? run(float{}) : run(double{}));
  return Value(std::move(out));
}

}  // namespace

void RegisterLinalgKernels(KernelTable* table) {
  table->Set(PrimId::kMatMul, MatMul);
  table->Set(PrimId::kEinsum, Einsum);
  table->Set(PrimId::kDet, Det);
  table->Set(PrimId::kMatrixInverse, MatrixInverse);
}

}  // namespace cpu
}  // namespace kgrad
