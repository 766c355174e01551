// CPU kernels of the linalg family against naive float64 references.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/parallel.h"
#include "core/tensor.h"
#include "core/value.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

// A reference result: values and, per element, the sum of |terms| that produced
// it (the scale a rounding error is relative to).
struct Reference {
  Shape shape;
  std::vector<double> value, scale;
};

void ExpectMatches(const absl::StatusOr<Value>& got, const Reference& ref, DType dtype) {
  ExpectTensorNear(got, dtype, ref.shape, ref.value, [&](size_t i) {
    return IsInteger(dtype) ? 0.0 : KernelTolerance(dtype) * (ref.scale[i] + 1e-300);
  });
}

// ----- matmul -----------------------------------------------------------------------------
// Element [i, j] of the last two dims of `t` at batch offset `base`, read as op(t).
double MatrixAt(const std::vector<double>& v, const Shape& s, int64_t base, bool trans, int64_t i,
                int64_t j) {
  int64_t cols = s[s.size() - 1];
  return trans ? v[base + j * cols + i] : v[base + i * cols + j];
}

// The offset of the matrix that batch index `idx` (of the broadcast batch shape)
// selects in an operand of shape `s`.
int64_t MatrixBase(const Shape& s, const Shape& batch, const std::vector<int64_t>& idx) {
  int64_t base = 0, stride = s[s.size() - 1] * s[s.size() - 2];
  int lead = static_cast<int>(batch.size()) - (static_cast<int>(s.size()) - 2);
  for (int d = static_cast<int>(s.size()) - 3; d >= 0; --d) {
    int64_t k = s[d] == 1 ? 0 : idx[d + lead];
    base += k * stride;
    stride *= s[d];
  }
  return base;
}

Reference NaiveMatMul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  Shape sa = a.shape(), sb = b.shape();
  std::vector<double> va = ToDoubles(a), vb = ToDoubles(b);
  int64_t m = ta ? sa.back() : sa[sa.size() - 2], k = ta ? sa[sa.size() - 2] : sa.back();
  int64_t n = tb ? sb[sb.size() - 2] : sb.back();
  int rank = static_cast<int>(std::max(sa.size(), sb.size())) - 2;
  int lead_a = rank - (static_cast<int>(sa.size()) - 2);
  int lead_b = rank - (static_cast<int>(sb.size()) - 2);
  Reference r;
  for (int d = 0; d < rank; ++d) {  // broadcast batch dims, right-aligned
    int64_t da = d >= lead_a ? sa[d - lead_a] : 1;
    int64_t db = d >= lead_b ? sb[d - lead_b] : 1;
    r.shape.push_back(da == 1 ? db : da);
  }
  Shape batch = r.shape;
  r.shape.push_back(m);
  r.shape.push_back(n);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t bi = 0; bi < NumElementsOf(batch); ++bi) {
    int64_t rem = bi;
    for (int d = rank - 1; d >= 0; --d) {
      idx[d] = rem % batch[d];
      rem /= batch[d];
    }
    int64_t ba = MatrixBase(sa, batch, idx), bb = MatrixBase(sb, batch, idx);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0, s_abs = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          double p = MatrixAt(va, sa, ba, ta, i, kk) * MatrixAt(vb, sb, bb, tb, kk, j);
          s += p;
          s_abs += std::abs(p);
        }
        r.value.push_back(s);
        r.scale.push_back(s_abs);
      }
    }
  }
  return r;
}

absl::StatusOr<Value> RunMatMul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  return RunCpuKernel(PrimId::kMatMul, {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}});
}

struct MatMulCase {
  Shape a, b;
  bool ta, tb;
};

std::vector<MatMulCase> MatMulCases() {
  return {
      {{3, 4}, {4, 5}, false, false},
      {{4, 3}, {4, 5}, true, false},
      {{3, 4}, {5, 4}, false, true},
      {{4, 3}, {5, 4}, true, true},
      {{1, 1}, {1, 1}, false, false},
      {{2, 1, 1, 3}, {5, 3, 1}, false, false},  // broadcast dot products
      {{4, 3, 1}, {4, 3, 1}, true, false},      // dot products, a transposed
      {{2, 3, 4}, {2, 4, 5}, false, false},     // batched
      {{2, 1, 3, 4}, {5, 4, 2}, false, false},  // broadcast both ways
      {{3, 4}, {6, 4, 5}, false, false},        // a broadcast over b's batch
      {{6, 3, 4}, {4, 5}, false, false},        // b shared: one stacked GEMM
      {{6, 4, 3}, {1, 4, 5}, true, false},      // b shared, a transposed
      {{2, 3, 4, 3}, {3, 5, 4}, true, true},
      {{70, 90}, {90, 60}, false, false},  // Eigen path
      {{90, 70}, {60, 90}, true, true},
      {{3, 50, 40}, {3, 50, 30}, true, false},      // Eigen, batched
      {{200, 6, 5}, {200, 5, 7}, false, false},     // many small matrices
      {{5, 130, 120}, {5, 140, 120}, false, true},  // batched, above kBigGemm
      // Output tiles (128 x 512) with ragged edges, every transpose.
      {{300, 70}, {70, 600}, false, false},
      {{70, 300}, {70, 600}, true, false},
      {{300, 70}, {600, 70}, false, true},
      {{70, 300}, {600, 70}, true, true},
      {{2, 130, 100}, {100, 520}, false, false},  // b shared: one stacked GEMM of 260 rows
      // Long sums (threaded GEMMs split k here).
      {{16, 4000}, {4000, 40}, false, false},
      {{2000, 64}, {64, 2000}, true, true},
  };
}

// A caller's thread count changes with the runs beside it; a product must not
// (big GEMMs are cut into output tiles fixed by the shapes): the same bits on 1,
// 2, 3 and 5 threads, for every case above.
TEST(MatMulKernelTest, ResultsDoNotDependOnTheThreadCount) {
  std::mt19937_64 rng(99);
  const int saved = cpu::MaxThreads();
  for (DType dtype : {kF32, kF64}) {
    for (const MatMulCase& c : MatMulCases()) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " " << ShapeToString(c.a) << " x "
                                        << ShapeToString(c.b) << " ta=" << c.ta << " tb=" << c.tb);
      Tensor a = RandomTensor(dtype, c.a, rng), b = RandomTensor(dtype, c.b, rng);
      std::vector<double> first;
      for (int threads : {1, 2, 3, 5}) {
        cpu::SetMaxThreads(threads);
        absl::StatusOr<Value> got = RunMatMul(a, b, c.ta, c.tb);
        ASSERT_TRUE(got.ok() && got->is_tensor()) << got.status();
        std::vector<double> values = ToDoubles(got->tensor());
        if (first.empty()) first = values;
        EXPECT_EQ(values, first) << "on " << threads << " threads";
      }
    }
  }
  cpu::SetMaxThreads(saved);
}

TEST(MatMulKernelTest, MatchesNaiveReferenceInEveryDType) {
  std::mt19937_64 rng(1234);
  for (DType dtype : {kF32, kF64, DType::kInt32, DType::kInt64}) {
    bool is_int = IsInteger(dtype);
    for (const MatMulCase& c : MatMulCases()) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " " << ShapeToString(c.a) << " x "
                                        << ShapeToString(c.b) << " ta=" << c.ta << " tb=" << c.tb);
      Tensor a = RandomTensor(dtype, c.a, rng, is_int ? -10 : -1, is_int ? 10 : 1);
      Tensor b = RandomTensor(dtype, c.b, rng, is_int ? -10 : -1, is_int ? 10 : 1);
      ExpectMatches(RunMatMul(a, b, c.ta, c.tb), NaiveMatMul(a, b, c.ta, c.tb), dtype);
    }
  }
}

TEST(MatMulKernelTest, HandValues) {
  Tensor a = MakeTensor(kF64, {2, 2}, {1, 2, 3, 4});
  Tensor b = MakeTensor(kF64, {2, 2}, {5, 6, 7, 8});
  absl::StatusOr<Value> c = RunMatMul(a, b, false, false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(ToDoubles(c->tensor()), (std::vector<double>{19, 22, 43, 50}));
  c = RunMatMul(a, b, true, false);  // [[1,3],[2,4]] x b
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(ToDoubles(c->tensor()), (std::vector<double>{26, 30, 38, 44}));
}

TEST(MatMulKernelTest, EmptyDims) {
  std::mt19937_64 rng(7);
  for (DType dtype : {kF32, kF64, DType::kInt32}) {
    // K = 0: a sum of nothing is zero.
    absl::StatusOr<Value> c =
        RunMatMul(RandomTensor(dtype, {2, 0}, rng), RandomTensor(dtype, {0, 3}, rng), false, false);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->tensor().shape(), (Shape{2, 3}));
    EXPECT_EQ(ToDoubles(c->tensor()), std::vector<double>(6, 0.0));
    // Large K = 0 product takes the Eigen path for floats.
    c = RunMatMul(RandomTensor(dtype, {0, 70}, rng), RandomTensor(dtype, {80, 0}, rng), true, true);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(ToDoubles(c->tensor()), std::vector<double>(70 * 80, 0.0));
    c = RunMatMul(RandomTensor(dtype, {0, 3}, rng), RandomTensor(dtype, {3, 4}, rng), false, false);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->tensor().shape(), (Shape{0, 4}));
    c = RunMatMul(RandomTensor(dtype, {0, 2, 3}, rng), RandomTensor(dtype, {3, 4}, rng), false,
                  false);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->tensor().shape(), (Shape{0, 2, 4}));
  }
}

TEST(MatMulKernelTest, RejectsBadInputs) {
  std::mt19937_64 rng(3);
  auto run = [&](Tensor a, Tensor b) { return RunMatMul(a, b, false, false).status(); };
  absl::Status s = run(RandomTensor(kF32, {2, 3}, rng), RandomTensor(kF32, {4, 5}, rng));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("inner dimensions must agree, got 3 and 4"));
  s = run(RandomTensor(kF32, {3}, rng), RandomTensor(kF32, {3, 4}, rng));
  EXPECT_THAT(s.message(), HasSubstr("input 0 must be a f32, f64, i32 or i64 tensor of rank >= 2"));
  s = run(RandomTensor(DType::kBool, {2, 2}, rng), RandomTensor(DType::kBool, {2, 2}, rng));
  EXPECT_THAT(s.message(), HasSubstr("got bool[2,2]"));
  s = run(RandomTensor(kF32, {2, 3}, rng), RandomTensor(kF64, {3, 4}, rng));
  EXPECT_THAT(s.message(), HasSubstr("dtype of input 0"));
  s = run(RandomTensor(kF32, {2, 2, 3}, rng), RandomTensor(kF32, {3, 3, 4}, rng));
  EXPECT_THAT(s.message(), HasSubstr("do not broadcast"));
  s = RunCpuKernel(PrimId::kMatMul, {Value(Scalar::Float(1.0)), RandomTensor(kF32, {3, 4}, rng)})
          .status();
  EXPECT_THAT(s.message(), HasSubstr("input 0 must be a tensor"));
}

// ----- einsum -------------------------------------------------------------------------------
// The literal definition: every assignment of every letter, the product of the
// operands at it, added into the output at the output letters. Diagonals come
// for free (a repeated letter takes one index).
Reference NaiveEinsum(const std::vector<std::string>& subs, const std::string& out,
                      const std::vector<Tensor>& ops) {
  std::map<char, int64_t> size;
  for (size_t o = 0; o < ops.size(); ++o) {
    for (size_t d = 0; d < subs[o].size(); ++d) size[subs[o][d]] = ops[o].dim(d);
  }
  std::vector<char> letters;
  int64_t total = 1;
  for (const auto& [ch, n] : size) {
    letters.push_back(ch);
    total *= n;
  }
  Reference r;
  for (char ch : out) r.shape.push_back(size[ch]);
  r.value.assign(NumElementsOf(r.shape), 0.0);
  r.scale.assign(r.value.size(), 0.0);
  std::vector<std::vector<double>> vals;
  for (const Tensor& t : ops) vals.push_back(ToDoubles(t));
  std::map<char, int64_t> at;
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rem = flat;
    for (int i = static_cast<int>(letters.size()) - 1; i >= 0; --i) {
      at[letters[i]] = rem % size[letters[i]];
      rem /= size[letters[i]];
    }
    double p = 1;
    for (size_t o = 0; o < ops.size(); ++o) {
      int64_t off = 0;
      for (size_t d = 0; d < subs[o].size(); ++d) off = off * ops[o].dim(d) + at[subs[o][d]];
      p *= vals[o][off];
    }
    int64_t o_off = 0;
    for (char ch : out) o_off = o_off * size[ch] + at[ch];
    r.value[o_off] += p;
    r.scale[o_off] += std::abs(p);
  }
  return r;
}

struct EinsumCase {
  std::string equation;
  std::vector<std::string> subs;  // operand subscripts, for shapes and the reference
  std::string out;
};

const std::map<char, int64_t>& LetterSizes() {
  static const auto* sizes = new std::map<char, int64_t>{
      {'i', 3}, {'j', 4}, {'k', 5}, {'l', 2},  {'b', 3},  {'a', 2}, {'c', 3},
      {'d', 2}, {'e', 4}, {'A', 2}, {'m', 20}, {'n', 30}, {'p', 25}};
  return *sizes;
}

std::vector<EinsumCase> EinsumCases() {
  return {
      {"ij,jk->ik", {"ij", "jk"}, "ik"},
      {"ij,kj->ik", {"ij", "kj"}, "ik"},  // b read transposed
      {"ji,jk->ik", {"ji", "jk"}, "ik"},  // a read transposed
      {"ji,kj->ki", {"ji", "kj"}, "ki"},  // output permuted
      {"bij,bjk->bik", {"bij", "bjk"}, "bik"},
      {"bij,bkj->bik", {"bij", "bkj"}, "bik"},
      {"ibj,jbk->bik", {"ibj", "jbk"}, "bik"},  // both need copies
      {"ij,ij->ij", {"ij", "ij"}, "ij"},        // elementwise
      {"ij,ij->", {"ij", "ij"}, ""},
      {"ij,ij->ji", {"ij", "ij"}, "ji"},
      {"i,j->ij", {"i", "j"}, "ij"},  // outer product
      {"ij,k->kji", {"ij", "k"}, "kji"},
      {"ijk,jl->il", {"ijk", "jl"}, "il"},  // k summed before the GEMM
      {"ij,kl->", {"ij", "kl"}, ""},        // no shared letters
      {"ii->i", {"ii"}, "i"},
      {"ii", {"ii"}, ""},  // trace, implicit
      {"iij->j", {"iij"}, "j"},
      {"iji->ij", {"iji"}, "ij"},
      {"ij->ji", {"ij"}, "ji"},
      {"ij->", {"ij"}, ""},
      {"ij->j", {"ij"}, "j"},
      {"ijk->kji", {"ijk"}, "kji"},
      {"ij->ij", {"ij"}, "ij"},           // identity
      {"ij,jk", {"ij", "jk"}, "ik"},      // implicit
      {"kj,ji", {"kj", "ji"}, "ik"},      // implicit output is sorted
      {"bii,bi->b", {"bii", "bi"}, "b"},  // a diagonal inside a contraction
      {"Ab,bA->", {"Ab", "bA"}, ""},
      {"bA", {"bA"}, "Ab"},       // uppercase sorts first
      {"i,->i", {"i", ""}, "i"},  // a rank-0 operand
      {",->", {"", ""}, ""},
      {"ij,jk,kl->il", {"ij", "jk", "kl"}, "il"},
      {"ab,bc,cd,de->ae", {"ab", "bc", "cd", "de"}, "ae"},
      {"i,i,i->i", {"i", "i", "i"}, "i"},
      {"ij,jk,ki->", {"ij", "jk", "ki"}, ""},
      {"ij,kl,jk->il", {"ij", "kl", "jk"}, "il"},  // greedy order skips the outer product
      {"bi,bj,bk->bijk", {"bi", "bj", "bk"}, "bijk"},
      {"mn,np->mp", {"mn", "np"}, "mp"},        // Eigen path
      {"bmn,bpn->bmp", {"bmn", "bpn"}, "bmp"},  // Eigen path, batched, b transposed
      {" ij , jk -> ik ", {"ij", "jk"}, "ik"},
  };
}

Tensor EinsumOperand(DType dtype, const std::string& sub, std::mt19937_64& rng) {
  Shape s;
  for (char ch : sub) s.push_back(LetterSizes().at(ch));
  return RandomTensor(dtype, s, rng);
}

TEST(EinsumKernelTest, MatchesNaiveReference) {
  std::mt19937_64 rng(99);
  for (DType dtype : {kF32, kF64}) {
    for (const EinsumCase& c : EinsumCases()) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " '" << c.equation << "'");
      std::vector<Tensor> ops;
      std::vector<Value> inputs;
      for (const std::string& sub : c.subs) {
        ops.push_back(EinsumOperand(dtype, sub, rng));
        inputs.push_back(ops.back());
      }
      absl::StatusOr<Value> got = RunCpuKernel(PrimId::kEinsum, inputs, {{"equation", c.equation}});
      ExpectMatches(got, NaiveEinsum(c.subs, c.out, ops), dtype);
    }
  }
}

TEST(EinsumKernelTest, HandValues) {
  Tensor a = MakeTensor(kF64, {2, 2}, {1, 2, 3, 4});
  absl::StatusOr<Value> r = RunCpuKernel(PrimId::kEinsum, {a}, {{"equation", std::string("ii")}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(ToDoubles(r->tensor()), std::vector<double>{5});
  r = RunCpuKernel(PrimId::kEinsum, {a, a}, {{"equation", std::string("ij,jk->ik")}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(ToDoubles(r->tensor()), (std::vector<double>{7, 10, 15, 22}));
}

TEST(EinsumKernelTest, ZeroSizedLetters) {
  std::mt19937_64 rng(5);
  Tensor a = RandomTensor(kF32, {2, 0}, rng), b = RandomTensor(kF32, {0, 3}, rng);
  absl::StatusOr<Value> r =
      RunCpuKernel(PrimId::kEinsum, {a, b}, {{"equation", std::string("ij,jk->ik")}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tensor().shape(), (Shape{2, 3}));
  EXPECT_EQ(ToDoubles(r->tensor()), std::vector<double>(6, 0.0));
  r = RunCpuKernel(PrimId::kEinsum, {a}, {{"equation", std::string("ij->i")}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(ToDoubles(r->tensor()), std::vector<double>(2, 0.0));
  r = RunCpuKernel(PrimId::kEinsum, {b}, {{"equation", std::string("jk->kj")}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tensor().shape(), (Shape{3, 0}));
}

TEST(EinsumKernelTest, RejectsBadInputs) {
  std::mt19937_64 rng(11);
  Tensor a = RandomTensor(kF32, {2, 3}, rng), b = RandomTensor(kF32, {4, 5}, rng);
  auto run = [](std::vector<Value> in, const std::string& eq) {
    return RunCpuKernel(PrimId::kEinsum, std::move(in), {{"equation", eq}}).status();
  };
  absl::Status s = run({a, b}, "ij,jk->ik");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("subscript 'j' has size 3 in operand 0 but 4 in operand 1"));
  s = run({a, RandomTensor(kF32, {1, 3}, rng)}, "ij,ij->ij");  // 1 does not broadcast
  EXPECT_THAT(s.message(), HasSubstr("subscript 'i' has size 2"));
  s = run({a}, "ijk->i");
  EXPECT_THAT(s.message(), HasSubstr("operand 0 has 3 subscripts"));
  s = run({a}, "...j->j");
  EXPECT_THAT(s.message(), HasSubstr("ellipsis"));
  s = run({a}, "ij->ii");
  EXPECT_THAT(s.message(), HasSubstr("'i' is repeated"));
  s = run({a}, "ij->k");
  EXPECT_THAT(s.message(), HasSubstr("'k' does not appear"));
  s = run({a, a}, "ij->ij");
  EXPECT_THAT(s.message(), HasSubstr("names 1 operands, got 2 inputs"));
  s = run({a, RandomTensor(kF64, {3}, rng)}, "ij,j->i");
  EXPECT_THAT(s.message(), HasSubstr("input 1 must have the dtype of input 0 (f32), got f64[3]"));
  s = run({RandomTensor(DType::kInt32, {3}, rng)}, "i->i");
  EXPECT_THAT(s.message(), HasSubstr("floating-point"));
  s = run({}, "->");
  EXPECT_THAT(s.message(), HasSubstr("1 to 8 operands, got 0"));
  s = run(std::vector<Value>(9, RandomTensor(kF32, {2}, rng)), "i,i,i,i,i,i,i,i,i->i");
  EXPECT_THAT(s.message(), HasSubstr("1 to 8 operands, got 9"));
  s = run({Value(Scalar::Float(2.0))}, "->");
  EXPECT_THAT(s.message(), HasSubstr("must be a tensor"));
}

// ----- det, matrix_inverse -----------------------------------------------------------------
// The determinant by Leibniz's formula (a sum over permutations; n <= 5 here).
double LeibnizDet(const std::vector<double>& a, int64_t n) {
  std::vector<int64_t> perm(n);
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  double det = 0;
  do {
    int64_t inversions = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = i + 1; j < n; ++j) inversions += perm[i] > perm[j];
    }
    double term = inversions % 2 ? -1 : 1;
    for (int64_t i = 0; i < n; ++i) term *= a[i * n + perm[i]];
    det += term;
  } while (std::next_permutation(perm.begin(), perm.end()));
  return det;
}

TEST(DetKernelTest, MatchesLeibnizOverABatch) {
  std::mt19937_64 rng(71);
  for (DType t : {kF32, kF64}) {
    for (int64_t n : {1, 2, 3, 5}) {
      Tensor a = RandomTensor(t, {2, 3, n, n}, rng, -2, 2);
      Tensor d = RunOk(PrimId::kDet, {a});
      ASSERT_EQ(d.shape(), (Shape{2, 3}));
      std::vector<double> av = ToDoubles(a), want;
      for (int64_t b = 0; b < 6; ++b) {
        want.push_back(LeibnizDet(std::vector<double>(av.begin() + b * n * n, av.begin() + (b + 1) * n * n), n));
      }
      EXPECT_LE(MaxAbsDiff(d, want), (t == kF64 ? 1e-12 : 1e-4) * (1 + MaxAbs(want))) << "n=" << n;
    }
  }
}

TEST(DetKernelTest, SingularEmptyAndPivotedMatrices) {
  // A zero leading entry needs a row swap (det of [[0, 1], [1, 0]] is -1).
  EXPECT_EQ(ToDoubles(RunOk(PrimId::kDet, {MakeTensor(kF64, {2, 2}, {0, 1, 1, 0})})), (std::vector<double>{-1}));
  EXPECT_EQ(ToDoubles(RunOk(PrimId::kDet, {MakeTensor(kF64, {2, 2}, {1, 2, 2, 4})})), (std::vector<double>{0}));
  EXPECT_EQ(ToDoubles(RunOk(PrimId::kDet, {Tensor::Zeros(kF64, {3, 0, 0}).value()})),
            (std::vector<double>{1, 1, 1}));  // the empty product
  ExpectRunError(PrimId::kDet, {MakeTensor(kF64, {2, 3}, {1, 2, 3, 4, 5, 6})}, {},
                 "det: input 0 must be square matrices [..., n, n], got f64[2,3]");
  ExpectRunError(PrimId::kDet, {MakeTensor(DType::kInt64, {1, 1}, {1})}, {}, "floating-point");
}

TEST(MatrixInverseKernelTest, TimesTheMatrixIsTheIdentity) {
  std::mt19937_64 rng(72);
  for (DType t : {kF32, kF64}) {
    for (int64_t n : {1, 3, 6}) {
      Tensor a = RandomTensor(t, {4, n, n}, rng, -1, 1);
      std::vector<double> av = ToDoubles(a);
      for (int64_t b = 0; b < 4; ++b) {
        for (int64_t i = 0; i < n; ++i) av[(b * n + i) * n + i] += 2.0;  // well conditioned
      }
      Tensor aw = MakeTensor(t, {4, n, n}, av);
      std::vector<double> inv = ToDoubles(RunOk(PrimId::kMatrixInverse, {aw}));
      av = ToDoubles(aw);  // as rounded to t
      double worst = 0;
      for (int64_t b = 0; b < 4; ++b) {
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (int64_t k = 0; k < n; ++k) s += av[(b * n + i) * n + k] * inv[(b * n + k) * n + j];
            worst = std::max(worst, std::abs(s - (i == j ? 1.0 : 0.0)));
          }
        }
      }
      EXPECT_LE(worst, t == kF64 ? 1e-12 : 1e-5) << "n=" << n;
    }
  }
}

TEST(MatrixInverseKernelTest, SingularIsAnError) {
  ExpectRunError(PrimId::kMatrixInverse, {MakeTensor(kF64, {2, 2, 2}, {1, 0, 0, 1, 1, 2, 2, 4})}, {},
                 "matrix_inverse: matrix 1 of input 0, f64[2,2,2], is singular");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
