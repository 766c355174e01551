// CPU kernels: linalg family (matmul, einsum). Matrix products go through one
// batched GEMM: Eigen's for floats (row-major maps, transposes as views, so no
// copies), a plain loop for integers.

// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsics
// (_mm512_undefined_ps) when Eigen inlines them: a known false positive that
// would bury real warnings.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/einsum_spec.h"

namespace kgrad {
namespace cpu {
namespace {

// A thread gets at least this many multiply-adds of a batch of matrices.
inline constexpr int64_t kMinParallelGemm = int64_t{1} << 16;
// Matrices with at least this many multiply-adds use Eigen's own threads, one
// matrix at a time, unless the batch alone has a matrix for every thread; smaller
// ones are spread over threads by batch.
inline constexpr int64_t kBigGemm = int64_t{1} << 21;

int MaxThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// ----- GEMM -------------------------------------------------------------------------
// c[m, n] = op(a) * op(b); a is stored [m, k] ([k, m] when ta), b [k, n] ([n, k] when tb).
struct GemmDims {
  int64_t m, n, k;
  bool ta, tb;
};

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Eigen picks its own algorithm by size: packed GEMM, or a coefficient-based
// product for tiny matrices (measured: its choice beats a lazy product forced on
// 8x8x8 and 12x12x12 batches).
template <typename T>
void EigenGemm(const T* a, const T* b, T* c, const GemmDims& d) {
  using ConstMap = Eigen::Map<const RowMatrix<T>>;
  Eigen::Map<RowMatrix<T>> out(c, d.m, d.n);
  ConstMap ma(a, d.ta ? d.k : d.m, d.ta ? d.m : d.k);
  ConstMap mb(b, d.tb ? d.n : d.k, d.tb ? d.k : d.n);
  if (!d.ta && !d.tb) {
    out.noalias() = ma * mb;
  } else if (d.ta && !d.tb) {
    out.noalias() = ma.transpose() * mb;
  } else if (!d.ta && d.tb) {
    out.noalias() = ma * mb.transpose();
  } else {
    out.noalias() = ma.transpose() * mb.transpose();
  }
}

// Integers accumulate in the unsigned type (wrap-around instead of undefined
// signed overflow); floats in their own type.
template <typename T, bool = std::is_integral_v<T>>
struct AccumType {
  using type = T;
};
template <typename T>
struct AccumType<T, true> {
  using type = std::make_unsigned_t<T>;
};

// Row i of c = op(a) * op(b), in i-k-j order so that the inner loop runs along
// contiguous rows of b and c when b is not transposed.
template <typename T>
void GemmLoopRow(const T* a, const T* b, T* c, const GemmDims& d, int64_t i) {
  using A = typename AccumType<T>::type;
  int64_t a_si = d.ta ? 1 : d.k, a_sk = d.ta ? d.m : 1;
  int64_t b_sk = d.tb ? 1 : d.n, b_sj = d.tb ? d.k : 1;
  A* row = reinterpret_cast<A*>(c + i * d.n);
  std::fill(row, row + d.n, A{0});
  for (int64_t kk = 0; kk < d.k; ++kk) {
    A av = static_cast<A>(a[i * a_si + kk * a_sk]);
    const T* brow = b + kk * b_sk;
    if (b_sj == 1) {  // the common case, kept apart so that it vectorises
      for (int64_t j = 0; j < d.n; ++j) row[j] += av * static_cast<A>(brow[j]);
    } else {
      for (int64_t j = 0; j < d.n; ++j) row[j] += av * static_cast<A>(brow[j * b_sj]);
    }
  }
}

template <typename T>
void SerialGemm(const T* a, const T* b, T* c, const GemmDims& d) {
  if (d.k == 0) {
    std::fill(c, c + d.m * d.n, T{0});  // a sum of nothing
  } else {
    EigenGemm(a, b, c, d);
  }
}

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
    using A = typename AccumType<T>::type;
    A s{0};
    for (int64_t j = 0; j < k; ++j) s += static_cast<A>(a[j]) * static_cast<A>(b[j]);
    return static_cast<T>(s);
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
  } else {
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t bi = begin; bi < end; ++bi) {
        SerialGemm(a + a_off[bi], b + b_off[bi], c + bi * mn, d);
      }
    };
    if (batch == 1 || (work >= kBigGemm && batch < MaxThreads())) {
      run(0, batch);  // outside a parallel region: Eigen uses all threads per matrix
    } else {
      // Inside ParallelFor's region Eigen sees nested parallelism and stays serial.
      ParallelFor(batch, std::max<int64_t>(1, kMinParallelGemm / work), run);
    }
  }
}

// ----- matmul -----------------------------------------------------------------------
absl::StatusOr<const Tensor*> MatMulInput(const KernelContext& ctx, int i) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.TensorAt(i));
  if (t->dtype() == DType::kBool || t->rank() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input ", i, " must be a f32, f64, i32 or i64 tensor of rank >= 2, got ", t->TypeString()));
  }
  return t;
}

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
  KGRAD_ASSIGN_OR_RETURN(const Tensor* a, MatMulInput(ctx, 0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* b, MatMulInput(ctx, 1));
  if (a->dtype() != b->dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("input 1 must have the dtype of input 0, got ",
                                                   a->TypeString(), " and ", b->TypeString()));
  }
  GemmDims d;
  d.ta = ctx.prim().GetBool("transpose_a");
  d.tb = ctx.prim().GetBool("transpose_b");
  int ra = a->rank(), rb = b->rank();
  d.m = d.ta ? a->dim(ra - 1) : a->dim(ra - 2);
  d.k = d.ta ? a->dim(ra - 2) : a->dim(ra - 1);
  int64_t kb = d.tb ? b->dim(rb - 1) : b->dim(rb - 2);
  d.n = d.tb ? b->dim(rb - 2) : b->dim(rb - 1);
  if (d.k != kb) {
    return absl::InvalidArgumentError(absl::StrCat(
        "matmul inner dimensions must agree, got ", d.k, " and ", kb, " (", a->TypeString(), " x ",
        b->TypeString(), ", transpose_a=", d.ta, ", transpose_b=", d.tb, ")"));
  }
  absl::StatusOr<Shape> batch = BroadcastShapes(absl::MakeConstSpan(a->shape()).first(ra - 2),
                                                absl::MakeConstSpan(b->shape()).first(rb - 2));
  if (!batch.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("matmul batch dimensions: ", batch.status().message()));
  }
  Shape shape = *batch;
  shape.push_back(d.m);
  shape.push_back(d.n);
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(a->dtype(), shape));
  if (out.NumElements() > 0) {
    DispatchDType(a->dtype(), [&](auto zero) {
      using T = decltype(zero);
      if constexpr (!std::is_same_v<T, bool>) MatMulTyped<T>(*a, *b, *batch, d, &out);
    });
  }
  return Value(std::move(out));
}

// ----- einsum ----------------------------------------------------------------------
// The equation is parsed (and checked: kernels check their inputs themselves) by
// ops/einsum_spec, the parser inference and the gradient rule use too.

// ----- einsum: strided reductions ---------------------------------------------------
// An operand during evaluation: a dense row-major tensor whose dims are named by
// `letters` (unique once reduced).
struct Operand {
  Tensor t;
  std::string letters;
};

using LetterSizes = std::array<int64_t, 128>;

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
                                  const std::string& out, const LetterSizes& size) {
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

// The letters of `s` (first occurrences, in order) for which keep(ch) holds.
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

// ----- einsum: contraction ----------------------------------------------------------
// The letters of a pairwise contraction that keeps `keep`: batch (in both, kept),
// sum (in both, not kept), and free letters (in one side only).
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

// a * b as one batched GEMM [batch, M, K] x [batch, K, N], keeping the letters in
// `keep`. Letters of one side only that are not kept are summed first. Each side
// is rearranged to [batch, free, sum] or [batch, sum, free], whichever needs no
// copy (the GEMM reads the other order as a transpose).
template <typename T>
absl::StatusOr<Operand> Contract(const KernelContext& ctx, const Operand& a0, const Operand& b0,
                                 const std::string& keep, const LetterSizes& size) {
  std::string keep_a = keep + b0.letters, keep_b = keep + a0.letters;
  std::string a_letters = Select(a0.letters, [&](char ch) { return Has(keep_a, ch); });
  std::string b_letters = Select(b0.letters, [&](char ch) { return Has(keep_b, ch); });
  LetterGroups g = Classify(a_letters, b_letters, keep);
  GemmDims d{SizeOf(g.free_a, size), SizeOf(g.free_b, size), SizeOf(g.sum, size), false, false};
  std::string a_plain = g.batch + g.free_a + g.sum, a_trans = g.batch + g.sum + g.free_a;
  std::string b_plain = g.batch + g.sum + g.free_b, b_trans = g.batch + g.free_b + g.sum;
  d.ta = a0.letters == a_trans && a_trans != a_plain;
  d.tb = b0.letters == b_trans && b_trans != b_plain;
  KGRAD_ASSIGN_OR_RETURN(Operand a, Rearrange<T>(ctx, a0, d.ta ? a_trans : a_plain, size));
  KGRAD_ASSIGN_OR_RETURN(Operand b, Rearrange<T>(ctx, b0, d.tb ? b_trans : b_plain, size));
  Operand c{Tensor(), g.batch + g.free_a + g.free_b};
  Shape shape;
  for (char ch : c.letters) shape.push_back(size[static_cast<unsigned char>(ch)]);
  KGRAD_ASSIGN_OR_RETURN(c.t, ctx.Allocate(a.t.dtype(), shape));
  int64_t nb = SizeOf(g.batch, size);
  if (c.t.NumElements() > 0) {
    BatchedGemm(a.t.data<T>(), b.t.data<T>(), c.t.mutable_data<T>(), d, nb,
                BatchOffsets{d.m * d.k, {}}, BatchOffsets{d.k * d.n, {}});
  }
  return c;
}

// The letters still needed after contracting operands i and j: those of the output
// and of every other operand.
std::string NeededLetters(const std::vector<Operand>& ops, size_t i, size_t j,
                          const std::string& output) {
  std::string keep = output;
  for (size_t o = 0; o < ops.size(); ++o) {
    if (o != i && o != j) keep += ops[o].letters;
  }
  return keep;
}

// The pair whose contraction gives the smallest result (a greedy order that avoids
// outer products when operands share letters).
std::pair<size_t, size_t> CheapestPair(const std::vector<Operand>& ops, const std::string& output,
                                       const LetterSizes& size) {
  std::pair<size_t, size_t> best{0, 1};
  int64_t best_size = -1;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (size_t j = i + 1; j < ops.size(); ++j) {
      std::string keep = NeededLetters(ops, i, j, output);
      auto kept = [&keep](char ch) { return Has(keep, ch); };
      int64_t n = SizeOf(Select(ops[i].letters + ops[j].letters, kept), size);
      if (best_size < 0 || n < best_size) best = {i, j}, best_size = n;
    }
  }
  return best;
}

template <typename T>
absl::StatusOr<Tensor> EinsumTyped(const KernelContext& ctx, const EinsumSpec& spec,
                                   const LetterSizes& size) {
  std::vector<Operand> ops;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    ops.push_back(Operand{ctx.input(i).tensor(), spec.inputs[i]});
  }
  while (ops.size() > 1) {
    auto [i, j] = CheapestPair(ops, spec.output, size);
    std::string keep = NeededLetters(ops, i, j, spec.output);
    KGRAD_ASSIGN_OR_RETURN(Operand c, Contract<T>(ctx, ops[i], ops[j], keep, size));
    ops.erase(ops.begin() + j);
    ops[i] = std::move(c);
  }
  KGRAD_ASSIGN_OR_RETURN(Operand result, Rearrange<T>(ctx, ops[0], spec.output, size));
  return result.t;
}

// The size of every letter; error naming the letter when operands disagree.
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
  int n = static_cast<int>(ctx.num_inputs());
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

// einsum(x0, ..., xn){equation}: contracted pairwise (cheapest pair first), each
// pair as one batched GEMM.
absl::StatusOr<Value> Einsum(KernelContext& ctx) {
  KGRAD_RETURN_IF_ERROR(EinsumInputs(ctx));
  const std::string& eq = ctx.prim().GetString("equation");
  KGRAD_ASSIGN_OR_RETURN(EinsumSpec spec, ParseEinsum(eq, static_cast<int>(ctx.num_inputs())));
  KGRAD_ASSIGN_OR_RETURN(LetterSizes size, EinsumSizes(ctx, eq, spec));
  absl::StatusOr<Tensor> out;
  if (ctx.input(0).tensor().dtype() == DType::kFloat32) {
    out = EinsumTyped<float>(ctx, spec, size);
  } else {
    out = EinsumTyped<double>(ctx, spec, size);
  }
  KGRAD_RETURN_IF_ERROR(out.status());
  return Value(*std::move(out));
}

}  // namespace

void RegisterLinalgKernels(KernelTable* table) {
  table->Set(PrimId::kMatMul, MatMul);
  table->Set(PrimId::kEinsum, Einsum);
}

}  // namespace cpu
}  // namespace kgrad
