// The CPU kernel of `tc` against naive loops, in f32 and f64: the interpreter
// (reductions, guards, expressions) and the contraction path (GEMMs on the
// tensors in place, gathers for index algebra and guards), whose plans are
// checked structurally too.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "backends/cpu/cpu_device.h"
#include "backends/cpu/tc_contraction.h"
#include "backends/cpu/tc_interpreter.h"
#include "backends/kernel.h"
#include "backends/kernel_cache.h"
#include "core/tensor.h"
#include "core/value.h"
#include "gtest/gtest.h"
#include "ops/tc_analysis.h"
#include "ops/registry.h"
#include "ops/tc_block.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

// `def` written with float, in `dtype`.
std::string Def(const std::string& def, DType dtype) {
  return dtype == kF64 ? absl::StrReplaceAll(def, {{"float", "double"}}) : def;
}

AttrMap DefAttr(const std::string& def) { return {{"def", def}}; }

absl::StatusOr<Value> RunTc(const std::string& def, std::vector<Value> inputs) {
  return RunCpuKernel(PrimId::kTc, std::move(inputs), DefAttr(def));
}

// A reference: values and, per element, the sum of |terms| behind it (the scale
// of a rounding error).
struct Reference {
  Shape shape;
  std::vector<double> value, scale;
};

void ExpectMatches(const absl::StatusOr<Value>& got, const Reference& ref, DType dtype) {
  ExpectTensorNear(got, dtype, ref.shape, ref.value,
                   [&](size_t i) { return KernelTolerance(dtype) * (ref.scale[i] + 1e-300); });
}

// Exactly `want` (NaN where want is NaN).
void ExpectExactly(const Tensor& got, const std::vector<double>& want) {
  std::vector<double> v = ToDoubles(got);
  ASSERT_EQ(v.size(), want.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(v[i])) << "element " << i << ": " << v[i];
    } else {
      EXPECT_EQ(v[i], want[i]) << "element " << i;
    }
  }
}

// out(o) = coef * sum over the other letters of A(a) * B(b): einsum's loops.
Reference Contract(const std::string& la, const Tensor& a, const std::string& lb, const Tensor& b,
                   const std::string& lo, double coef = 1) {
  std::map<char, int64_t> size;
  for (size_t i = 0; i < la.size(); ++i) size[la[i]] = a.dim(i);
  for (size_t i = 0; i < lb.size(); ++i) size[lb[i]] = b.dim(i);
  std::string letters;
  for (const auto& [ch, n] : size) letters.push_back(ch);
  Reference r;
  for (char ch : lo) r.shape.push_back(size[ch]);
  r.value.assign(NumElementsOf(r.shape), 0);
  r.scale.assign(r.value.size(), 0);
  const std::vector<double> va = ToDoubles(a), vb = ToDoubles(b);
  std::map<char, int64_t> at;
  auto offset = [&](const std::string& l, const Shape& shape) {
    int64_t o = 0;
    for (size_t i = 0; i < l.size(); ++i) o = o * shape[i] + at[l[i]];
    return o;
  };
  int64_t total = 1;
  for (char ch : letters) total *= size[ch];
  for (int64_t p = 0; p < total; ++p) {
    int64_t rest = p;
    for (int i = static_cast<int>(letters.size()) - 1; i >= 0; --i) {
      at[letters[i]] = rest % size[letters[i]];
      rest /= size[letters[i]];
    }
    const double t = coef * va[offset(la, a.shape())] * vb[offset(lb, b.shape())];
    r.value[offset(lo, r.shape)] += t;
    r.scale[offset(lo, r.shape)] += std::abs(t);
  }
  return r;
}

class TcKernelTest : public ::testing::TestWithParam<DType> {
 protected:
  DType dtype() const { return GetParam(); }
  Tensor Rand(Shape shape, double lo = -1, double hi = 1) {
    return RandomTensor(dtype(), std::move(shape), rng_, lo, hi);
  }
  Tensor Make(Shape shape, const std::vector<double>& v) {
    return MakeTensor(dtype(), std::move(shape), v);
  }
  absl::StatusOr<Value> Run(const std::string& def, std::vector<Value> inputs) {
    return RunTc(Def(def, dtype()), std::move(inputs));
  }

  std::mt19937_64 rng_{20260712};
};

// ----- Contractions: the GEMM path ---------------------------------------------------------
TEST_P(TcKernelTest, MatrixVector) {
  Tensor a = Rand({7, 5}), b = Rand({5});
  ExpectMatches(Run("def mv(float(M,N) A, float(N) B) -> (C) { C(i) +=! A(i,j) * B(j) }", {a, b}),
                Contract("ij", a, "j", b, "i"), dtype());
}

TEST_P(TcKernelTest, VectorMatrixAndDot) {
  Tensor a = Rand({7, 5}), v = Rand({7}), w = Rand({7});
  ExpectMatches(Run("def vm(float(M,N) A, float(M) B) -> (C) { C(j) +=! B(i) * A(i,j) }", {a, v}),
                Contract("i", v, "ij", a, "j"), dtype());
  ExpectMatches(Run("def dot(float(M) A, float(M) B) -> (C) { C +=! A(i) * B(i) }", {v, w}),
                Contract("i", v, "i", w, ""), dtype());
}

struct LayoutCase {
  const char* statement;  // over A and B; the output is C
  const char* la;
  Shape sa;
  const char* lb;
  Shape sb;
  const char* lc;
};

TEST_P(TcKernelTest, MatMulLayouts) {
  const std::vector<LayoutCase> cases = {
      {"C(i,j) +=! A(i,k) * B(k,j)", "ik", {6, 4}, "kj", {4, 5}, "ij"},
      {"C(i,j) +=! A(k,i) * B(k,j)", "ki", {4, 6}, "kj", {4, 5}, "ij"},
      {"C(i,j) +=! A(i,k) * B(j,k)", "ik", {6, 4}, "jk", {5, 4}, "ij"},
      {"C(i,j) +=! A(k,i) * B(j,k)", "ki", {4, 6}, "jk", {5, 4}, "ij"},
      // C^T = B^T A^T.
      {"C(j,i) +=! A(i,k) * B(k,j)", "ik", {6, 4}, "kj", {4, 5}, "ji"},
      {"C(b,i,j) +=! A(b,i,k) * B(b,k,j)", "bik", {3, 6, 4}, "bkj", {3, 4, 5}, "bij"},
      {"C(b,i,j) +=! A(b,k,i) * B(b,j,k)", "bki", {3, 4, 6}, "bjk", {3, 5, 4}, "bij"},
      // The batch index last: through a temporary.
      {"C(i,j,b) +=! A(b,i,k) * B(b,k,j)", "bik", {3, 6, 4}, "bkj", {3, 4, 5}, "ijb"},
      // A repeated over b.
      {"C(i,b,j) +=! A(i,k) * B(b,k,j)", "ik", {6, 4}, "bkj", {3, 4, 5}, "ibj"},
      // r summed into A first.
      {"C(i,j) +=! A(i,k,r) * B(k,j)", "ikr", {6, 4, 3}, "kj", {4, 5}, "ij"},
      // Two column dims; no depth; two depth dims in different orders.
      {"C(i,j,l) +=! A(i,k) * B(j,l,k)", "ik", {6, 4}, "jlk", {5, 2, 4}, "ijl"},
      {"C(i,j) +=! A(i) * B(j)", "i", {6}, "j", {5}, "ij"},
      {"C(i,j) +=! A(k,i,k2) * B(k2,j,k)", "kiq", {4, 6, 3}, "qjk", {3, 5, 4}, "ij"},
  };
  for (const LayoutCase& c : cases) {
    SCOPED_TRACE(c.statement);
    Tensor a = Rand(c.sa), b = Rand(c.sb);
    auto decl = [](const Shape& s, const std::string& letters, const char* name) {
      std::string d = "float(";
      for (size_t i = 0; i < s.size(); ++i) {
        d += std::string(i ? "," : "") + "S" + letters[i];
      }
      return d + ") " + name;
    };
    const std::string def = "def f(" + decl(c.sa, c.la, "A") + ", " + decl(c.sb, c.lb, "B") +
                            ") -> (C) { " + c.statement + " }";
    ExpectMatches(Run(def, {a, b}), Contract(c.la, a, c.lb, b, c.lc), dtype());
  }
}

TEST_P(TcKernelTest, LargeMatMulInTiles) {
  Tensor a = Rand({150, 70}), b = Rand({70, 600});  // more than one 128 x 512 tile
  ExpectMatches(
      Run("def mm(float(M,K) A, float(K,N) B) -> (C) { C(i,j) +=! A(i,k) * B(k,j) }", {a, b}),
      Contract("ik", a, "kj", b, "ij"), dtype());
}

TEST_P(TcKernelTest, ConstantFactorsAreOneCoefficient) {
  Tensor s = Make({}, {-1.5}), a = Rand({6, 4}), b = Rand({4, 5});
  ExpectMatches(
      Run("def f(float a, float(M,K) A, float(K,N) B) -> (O) { O(i,j) +=! a * A(i,k) * B(k,j) }",
          {s, a, b}),
      Contract("ik", a, "kj", b, "ij", -1.5), dtype());
  // -(A B) / (2 K): a negation, a size and a division.
  ExpectMatches(
      Run("def f(float(M,K) A, float(K,N) B) -> (O) { O(i,j) +=! -A(i,k) * B(k,j) / (2 * K) }",
          {a, b}),
      Contract("ik", a, "kj", b, "ij", -1.0 / 8), dtype());
}

TEST_P(TcKernelTest, UpdateForms) {
  Tensor s = Make({}, {0.5}), c = Rand({6, 5}), a = Rand({6, 4}), b = Rand({4, 5});
  Reference want = Contract("ik", a, "kj", b, "ij");
  const std::vector<double> vc = ToDoubles(c);
  for (size_t i = 0; i < want.value.size(); ++i) {
    want.value[i] += 0.5 * vc[i];
    want.scale[i] += std::abs(0.5 * vc[i]);
  }
  ExpectMatches(Run("def f(float b, float(M,N) C, float(M,K) A, float(K,N) B) -> (O) {\n"
                    "  O(i,j) = b * C(i,j)\n"
                    "  O(i,j) += A(i,k) * B(k,j)\n"
                    "}",
                    {s, c, a, b}),
                want, dtype());
  // A scaled update adds through a temporary.
  Reference scaled = Contract("ik", a, "kj", b, "ij", 3.0);
  for (size_t i = 0; i < scaled.value.size(); ++i) {
    scaled.value[i] += 0.5 * vc[i];
    scaled.scale[i] += std::abs(0.5 * vc[i]);
  }
  ExpectMatches(Run("def f(float b, float(M,N) C, float(M,K) A, float(K,N) B) -> (O) {\n"
                    "  O(i,j) = b * C(i,j); O(i,j) += 3 * A(i,k) * B(k,j)\n"
                    "}",
                    {s, c, a, b}),
                scaled, dtype());
}

// O[n,f,h,w] = sum_{c,kh,kw} I[n,c,s*h+kh-pad,s*w+kw-pad] * W[f,c,kh,kw] (zero outside).
Reference NaiveConv(const Tensor& x, const Tensor& w, int64_t stride, int64_t pad) {
  const std::vector<double> vx = ToDoubles(x), vw = ToDoubles(w);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t f = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  const int64_t oh = (h + 2 * pad - kh) / stride + 1, ow = (wd + 2 * pad - kw) / stride + 1;
  Reference r;
  r.shape = {n, f, oh, ow};
  for (int64_t a = 0; a < n; ++a)
    for (int64_t o = 0; o < f; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t z = 0; z < ow; ++z) {
          double s = 0, m = 0;
          for (int64_t i = 0; i < c; ++i)
            for (int64_t p = 0; p < kh; ++p)
              for (int64_t q = 0; q < kw; ++q) {
                const int64_t yy = stride * y + p - pad, zz = stride * z + q - pad;
                if (yy < 0 || yy >= h || zz < 0 || zz >= wd) continue;
                const double t =
                    vx[((a * c + i) * h + yy) * wd + zz] * vw[((o * c + i) * kh + p) * kw + q];
                s += t;
                m += std::abs(t);
              }
          r.value.push_back(s);
          r.scale.push_back(m);
        }
  return r;
}

// 3x3 convolution with zero padding 1 as guards on I's own indices (gathered
// with zeros on the GEMM path).
constexpr char kPaddedConv[] =
    "def conv(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
    "  O(n,f,h,w) +=! I(n,c,h+kh-1,w+kw-1) * W1(f,c,kh,kw)\n"
    "    where h in 0:H, w in 0:W, h+kh-1 in 0:H, w+kw-1 in 0:W\n"
    "}";

TEST_P(TcKernelTest, ConvolutionByIndexAlgebra) {
  Tensor x = Rand({2, 3, 7, 6}), w = Rand({4, 3, 3, 3});
  ExpectMatches(Run("def conv(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
                    "  O(n,f,h,w) +=! I(n,c,h+kh,w+kw) * W1(f,c,kh,kw)\n"
                    "}",
                    {x, w}),
                NaiveConv(x, w, 1, 0), dtype());
  ExpectMatches(Run("def conv(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
                    "  O(n,f,h,w) +=! I(n,c,2*h+kh,2*w+kw) * W1(f,c,kh,kw)\n"
                    "}",
                    {x, w}),
                NaiveConv(x, w, 2, 0), dtype());
  ExpectMatches(Run(kPaddedConv, {x, w}), NaiveConv(x, w, 1, 1), dtype());
}

// Big enough for im2col to go a few images at a time, several blocks at once.
TEST_P(TcKernelTest, ConvolutionInBlocks) {
  Tensor x = Rand({3, 16, 66, 66}), w = Rand({8, 16, 3, 3});
  ExpectMatches(Run(kPaddedConv, {x, w}), NaiveConv(x, w, 1, 1), dtype());
}

// O(n,f,y,z) = sum over c, p, q of I(n,c,at(y,p),at(z,q)...) W1(f,c,p,q) where
// `row(y, p)` and `col(z, q)` give I's row and column, skipped when outside it.
Reference NaiveConvAt(const Tensor& x, const Tensor& w, int64_t oh, int64_t ow,
                      const std::function<int64_t(int64_t, int64_t)>& row,
                      const std::function<int64_t(int64_t, int64_t)>& col) {
  const std::vector<double> vx = ToDoubles(x), vw = ToDoubles(w);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t f = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  Reference r;
  r.shape = {n, f, oh, ow};
  for (int64_t a = 0; a < n; ++a)
    for (int64_t o = 0; o < f; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t z = 0; z < ow; ++z) {
          double s = 0, m = 0;
          for (int64_t i = 0; i < c; ++i)
            for (int64_t p = 0; p < kh; ++p)
              for (int64_t q = 0; q < kw; ++q) {
                const int64_t yy = row(y, p), zz = col(z, q);
                if (yy < 0 || yy >= h || zz < 0 || zz >= wd) continue;
                const double t =
                    vx[((a * c + i) * h + yy) * wd + zz] * vw[((o * c + i) * kh + p) * kw + q];
                s += t;
                m += std::abs(t);
              }
          r.value.push_back(s);
          r.scale.push_back(m);
        }
  return r;
}

// im2col's gathers for every kind of step: the read's innermost index with
// coefficients 2 and -1, dilation on the outer rows, and guards whose
// innermost coefficient is 2, -1 or 0.
TEST_P(TcKernelTest, ConvolutionGathersForAnyStep) {
  Tensor x = Rand({2, 3, 9, 8}), w = Rand({4, 3, 3, 3});
  ExpectMatches(Run("def conv(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
                    "  O(n,f,h,w) +=! I(n,c,2*h+2*kh-1,2*w+kw-2) * W1(f,c,kh,kw)\n"
                    "    where h in 0:4, w in 0:4, 2*h+2*kh-1 in 0:H, 2*w+kw-2 in 0:W\n"
                    "}",
                    {x, w}),
                NaiveConvAt(
                    x, w, 4, 4, [](int64_t y, int64_t p) { return 2 * y + 2 * p - 1; },
                    [](int64_t z, int64_t q) { return 2 * z + q - 2; }),
                dtype());
  ExpectMatches(Run("def conv(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
                    "  O(n,f,h,w) +=! I(n,c,h+kh,6-w+kw) * W1(f,c,kh,kw)\n"
                    "    where h in 0:7, w in 0:5, 6-w+kw in 0:W\n"
                    "}",
                    {x, w}),
                NaiveConvAt(
                    x, w, 7, 5, [](int64_t y, int64_t p) { return y + p; },
                    [](int64_t z, int64_t q) { return 6 - z + q; }),
                dtype());
}

// conv's two gradients as its adjoint block writes them: the input's (a
// gather with -1 steps per image) and the filter's, whose images are split off
// the depth (TcContractionPlan::split): six groups of two images, in parallel,
// summed in order; its update and scaled forms go through the temporary.
TEST_P(TcKernelTest, ConvolutionGradientsSplitTheImages) {
  const int64_t n = 12, c = 3, h = 10, wd = 10, f = 4;
  Tensor x = Rand({n, c, h, wd}), ox = Rand({n, f, h, wd}), w = Rand({f, c, 3, 3});
  const std::vector<double> vx = ToDoubles(x), vo = ToDoubles(ox);
  Reference wx;
  wx.shape = {f, c, 3, 3};
  for (int64_t o = 0; o < f; ++o)
    for (int64_t i = 0; i < c; ++i)
      for (int64_t p = 0; p < 3; ++p)
        for (int64_t q = 0; q < 3; ++q) {
          double s = 0, m = 0;
          for (int64_t a = 0; a < n; ++a)
            for (int64_t y = 0; y < h; ++y)
              for (int64_t z = 0; z < wd; ++z) {
                const int64_t yy = y + p - 1, zz = z + q - 1;
                if (yy < 0 || yy >= h || zz < 0 || zz >= wd) continue;
                const double t =
                    vo[((a * f + o) * h + y) * wd + z] * vx[((a * c + i) * h + yy) * wd + zz];
                s += t;
                m += std::abs(t);
              }
          wx.value.push_back(s);
          wx.scale.push_back(m);
        }
  const std::string filter =
      "def g(float(N,F,H,W) Ox, float(N,C,H,W) I) -> (Wx) {\n"
      "  Wx(f,c,kh,kw) +=! Ox(n,f,h,w) * I(n,c,h+kh-1,w+kw-1)\n"
      "    where kh in 0:3, kw in 0:3, h+kh-1 in 0:H, w+kw-1 in 0:W\n"
      "}";
  ExpectMatches(Run(filter, {ox, x}), wx, dtype());
  // 3 * the sum, then the sum added again (+=): 4 times the sum.
  Reference four = wx;
  for (size_t i = 0; i < four.value.size(); ++i) {
    four.value[i] *= 4;
    four.scale[i] *= 4;
  }
  ExpectMatches(Run("def g(float(N,F,H,W) Ox, float(N,C,H,W) I) -> (Wx) {\n"
                    "  Wx(f,c,kh,kw) +=! 3 * Ox(n,f,h,w) * I(n,c,h+kh-1,w+kw-1)\n"
                    "    where kh in 0:3, kw in 0:3, h+kh-1 in 0:H, w+kw-1 in 0:W\n"
                    "  Wx(f,c,kh,kw) += Ox(n,f,h,w) * I(n,c,h+kh-1,w+kw-1)\n"
                    "    where kh in 0:3, kw in 0:3, h+kh-1 in 0:H, w+kw-1 in 0:W\n"
                    "}",
                    {ox, x}),
                four, dtype());
  // The input's gradient: the flipped filter over the output's gradient.
  ExpectMatches(
      Run("def g(float(N,F,H,W) Ox, float(F,C,KH,KW) W1) -> (Ix) {\n"
          "  Ix(n,c,h,w) +=! Ox(n,f,h-kh+1,w-kw+1) * W1(f,c,kh,kw)\n"
          "    where h in 0:H, w in 0:W, h-kh+1 in 0:H, w-kw+1 in 0:W\n"
          "}",
          {ox, w}),
      [&] {
        // Ix(a,i,y,z) = sum Ox(a,o,y-p+1,z-q+1) W1(o,i,p,q): NaiveConvAt with
        // the filter's f and c swapped.
        Tensor wt = MakeTensor(dtype(), {c, f, 3, 3}, [&] {
          const std::vector<double> vw = ToDoubles(w);
          std::vector<double> t(vw.size());
          for (int64_t o = 0; o < f; ++o)
            for (int64_t i = 0; i < c; ++i)
              for (int64_t k = 0; k < 9; ++k) t[(i * f + o) * 9 + k] = vw[(o * c + i) * 9 + k];
          return t;
        }());
        return NaiveConvAt(
            ox, wt, h, wd, [](int64_t y, int64_t p) { return y - p + 1; },
            [](int64_t z, int64_t q) { return z - q + 1; });
      }(),
      dtype());
  ExpectSameOnAnyThreadCount(PrimId::kTc, {ox, x}, DefAttr(Def(filter, dtype())));
}

// O(h) = sum_k X((h - k) / 2) W(k) over the k with h - k even and in range: a
// transposed convolution.
TEST_P(TcKernelTest, GuardedStatement) {
  const int64_t n = 5;
  Tensor x = Rand({n}), w = Rand({3});
  const std::vector<double> vx = ToDoubles(x), vw = ToDoubles(w);
  Reference r;
  r.shape = {2 * n + 1};
  for (int64_t h = 0; h < 2 * n + 1; ++h) {
    double s = 0, m = 0;
    for (int64_t k = 0; k < 3; ++k) {
      if ((h - k) % 2 != 0 || (h - k) / 2 < 0 || (h - k) / 2 >= n) continue;
      s += vx[(h - k) / 2] * vw[k];
      m += std::abs(vx[(h - k) / 2] * vw[k]);
    }
    r.value.push_back(s);
    r.scale.push_back(m);
  }
  ExpectMatches(Run("def t(float(N) X, float(K) W) -> (O) {\n"
                    "  O(h) +=! X((h - k)/2) * W(k) where h in 0:11, k in 0:3, (h - k)/2 in 0:N\n"
                    "}",
                    {x, w}),
                r, dtype());
  // The same through the interpreter: a third factor that is not constant.
  for (int64_t h = 0; h < 2 * n + 1; ++h) {
    r.value[h] *= h;
    r.scale[h] *= h;
  }
  ExpectMatches(
      Run("def t(float(N) X, float(K) W) -> (O) {\n"
          "  O(h) +=! h * X((h - k)/2) * W(k) where h in 0:11, k in 0:3, (h - k)/2 in 0:N\n"
          "}",
          {x, w}),
      r, dtype());
}

// Points guarded out are never read: inf there does not leak as 0 * inf.
TEST_P(TcKernelTest, GuardedOutPointsAreSkipped) {
  const double inf = std::numeric_limits<double>::infinity();
  // X(i,k) with i + k >= 3 guarded out holds inf.
  std::vector<double> vx(4 * 4);
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 4; ++k) vx[i * 4 + k] = i + k < 3 ? i - k : inf;
  Tensor x = Make({4, 4}, vx), w = Make({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  // GEMM path (the guard is X's own: gathered as 0 there) and the interpreter.
  for (const char* rhs : {"X(i,k) * W(k,j)", "X(i,k) * W(k,j) * 1 + 0 * i"}) {
    SCOPED_TRACE(rhs);
    absl::StatusOr<Value> got = Run(std::string("def f(float(M,K) X, float(K,N) W) -> (O) {\n") +
                                        "  O(i,j) +=! " + rhs + " where i + k in 0:3\n}",
                                    {x, w});
    ASSERT_TRUE(got.ok()) << got.status();
    std::vector<double> want;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j) {
        double s = 0;
        for (int k = 0; k < 4; ++k) {
          if (i + k < 3) s += vx[i * 4 + k] * (2 * k + j + 1);
        }
        want.push_back(s);
      }
    ExpectExactly(got->tensor(), want);
  }
  // A guard coupling both reads keeps the interpreter.
  Tensor a = Rand({6, 4}), b = Rand({3});
  const std::vector<double> va = ToDoubles(a), vb = ToDoubles(b);
  Reference r;
  r.shape = {6};
  for (int i = 0; i < 6; ++i) {
    double s = 0, m = 0;
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 3; ++j) {
        if (k - j < 0 || k - j >= 2) continue;
        s += va[i * 4 + k] * vb[j];
        m += std::abs(va[i * 4 + k] * vb[j]);
      }
    r.value.push_back(s);
    r.scale.push_back(m);
  }
  ExpectMatches(
      Run("def f(float(M,K) A, float(J) B) -> (O) { O(i) +=! A(i,k) * B(j) where k - j in 0:2 }",
          {a, b}),
      r, dtype());
}

// ----- The interpreter ----------------------------------------------------------------------
TEST_P(TcKernelTest, MaxPool2x2Stride2) {
  Tensor x = Rand({2, 3, 6, 8});
  const std::vector<double> vx = ToDoubles(x);
  std::vector<double> want;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < 3; ++h)
        for (int w = 0; w < 4; ++w) {
          double m = -std::numeric_limits<double>::infinity();
          for (int p = 0; p < 2; ++p)
            for (int q = 0; q < 2; ++q)
              m = std::max(m, vx[((n * 3 + c) * 6 + 2 * h + p) * 8 + 2 * w + q]);
          want.push_back(m);
        }
  absl::StatusOr<Value> got =
      Run("def pool(float(N,C,H,W) X) -> (O) {\n"
          "  O(n,c,h,w) max=! X(n,c,2*h+kh,2*w+kw) where kh in 0:2, kw in 0:2\n"
          "}",
          {x});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->tensor().shape(), (Shape{2, 3, 3, 4}));
  ExpectExactly(got->tensor(), want);
}

// Max pooling and its adjoint's statements, on odd sizes (rows and lanes cut
// short): the window's kw fused into the lanes (a pair of lanes per output,
// combined in order: NaN and signed zeros as loops give them), the guards
// (h - kh)/2 cutting every other row and lane.
TEST_P(TcKernelTest, MaxPoolAndItsAdjointMatchLoops) {
  constexpr int N = 2, C = 3, H = 7, W = 10, I2 = 3, J = 5;
  std::vector<double> vx = ToDoubles(Rand({N, C, H, W}));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int e : {3, 40, 41, 77, 150}) vx[e] = nan;
  for (int e : {10, 90, 91, 200}) vx[e] = (e % 2 ? -0.0 : 0.0);
  vx[11] = vx[10] == 0 ? -0.0 : 0.0;  // a window of +0 and -0: the first stays
  std::vector<double> want;
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int i = 0; i < I2; ++i)
        for (int j = 0; j < J; ++j) {
          double m = -std::numeric_limits<double>::infinity();
          for (int p = 0; p < 2; ++p)
            for (int q = 0; q < 2; ++q) {
              const double v = vx[((n * C + c) * H + 2 * i + p) * W + 2 * j + q];
              if (v > m || std::isnan(v)) m = v;
            }
          want.push_back(m);
        }
  absl::StatusOr<Value> got =
      Run("def pool(float(N,C,H,W) X) -> (O) {\n"
          "  O(n,c,i,j) max=! X(n,c,2*i+kh,2*j+kw) where kh in 0:2, kw in 0:2\n}",
          {Make({N, C, H, W}, vx)});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectExactly(got->tensor(), want);
  const std::vector<double> o = ToDoubles(got->tensor());
  for (size_t e = 0; e < o.size(); ++e) {
    if (!std::isnan(want[e])) {
      EXPECT_EQ(std::signbit(o[e]), std::signbit(want[e])) << e;
    }
  }

  // The window's indices as values, and a read along the rows only, beside the pairs.
  {
    const std::vector<double> vy = ToDoubles(Rand({I2})), x2 = ToDoubles(Rand({2 * I2, W}));
    std::vector<double> want2;
    for (int i = 0; i < I2; ++i)
      for (int j = 0; j < J; ++j) {
        double m = -std::numeric_limits<double>::infinity();
        for (int p = 0; p < 2; ++p)
          for (int q = 0; q < 2; ++q) {
            const double x = x2[(2 * i + p) * W + 2 * j + q];
            const double v = x + q * 10 + j + vy[i];
            if (v > m || std::isnan(v)) m = v;
          }
        want2.push_back(m);
      }
    absl::StatusOr<Value> got2 =
        Run("def f(float(H,W) X, float(I2) Y) -> (O) {\n"
            "  O(i,j) max=! X(2*i+kh,2*j+kw) + kw*10 + j + Y(i) where kh in 0:2, kw in 0:2\n}",
            {Make({2 * I2, W}, x2), Make({I2}, vy)});
    ASSERT_TRUE(got2.ok()) << got2.status();
    ExpectMatches(got2, Reference{{I2, J}, want2, std::vector<double>(want2.size(), 40.0)},
                  dtype());
  }

  std::vector<double> arg(N * C * I2 * J), g = ToDoubles(Rand({N, C, I2, J}));
  for (size_t e = 0; e < arg.size(); ++e) arg[e] = static_cast<double>(e * 7 % 5);
  std::vector<double> ix;
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int h = 0; h < H; ++h)
        for (int w = 0; w < W; ++w) {
          double sum = 0;
          for (int p = 0; p < 2; ++p)
            for (int q = 0; q < 2; ++q) {
              if ((h - p) % 2 != 0 || (w - q) % 2 != 0 || h - p < 0 || w - q < 0) continue;
              if ((h - p) / 2 >= I2 || (w - q) / 2 >= J) continue;
              const int e = ((n * C + c) * I2 + (h - p) / 2) * J + (w - q) / 2;
              sum += p * 2 + q == arg[e] ? g[e] : 0;
            }
          ix.push_back(sum);
        }
  got = Run("def g(float(N,C,H,W) X, float(N,C,I2,J) A, float(N,C,I2,J) G) -> (Ix) {\n"
            "  Ix(n,c,h,w) +=! kh*2 + kw == A(n,c,(h - kh)/2,(w - kw)/2) ? "
            "G(n,c,(h - kh)/2,(w - kw)/2) : 0\n"
            "    where h in 0:H, w in 0:W, kh in 0:2, kw in 0:2, (h - kh)/2 in 0:I2,"
            " (w - kw)/2 in 0:J\n}",
            {Make({N, C, H, W}, vx), Make({N, C, I2, J}, arg), Make({N, C, I2, J}, g)});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectExactly(got->tensor(), ix);
}

// The adjoint's gather of k x k pools whose windows tile the image: the lattice
// substitution makes kh and kw left-side indices, and where j is the vector
// index (J >= 8) the kw items of a chunk are stored together as whole rows
// (StatementRunner::Group): f32 pairs 8 at a time with an overlapping last
// block (J = 9, 13, 17) or none (J = 16), 4 at a time under 8 (J = 6), triples
// (k = 3), f64 element by element; short rows (J = 5) take kw as the vector
// index instead. Each against loops, bit for bit.
TEST_P(TcKernelTest, PoolAdjointsStoreTheirWindowsInterleaved) {
  struct Case {
    int k, i2, j;
  };
  for (const Case& cs : {Case{2, 4, 5}, Case{2, 3, 9}, Case{2, 9, 12}, Case{3, 2, 8},
                        Case{2, 2, 13}, Case{2, 3, 6}, Case{2, 3, 16}, Case{2, 5, 17}}) {
    SCOPED_TRACE(::testing::Message() << cs.k << " " << cs.i2 << " " << cs.j);
    const int N = 2, C = 3, K = cs.k, I2 = cs.i2, J = cs.j, H = K * I2, W = K * J;
    std::vector<double> arg(N * C * I2 * J), g = ToDoubles(Rand({N, C, I2, J}));
    for (size_t e = 0; e < arg.size(); ++e) arg[e] = static_cast<double>(e * 7 % (K * K + 1));
    std::vector<double> ix;
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c)
        for (int h = 0; h < H; ++h)
          for (int w = 0; w < W; ++w) {
            const int e = ((n * C + c) * I2 + h / K) * J + w / K;
            ix.push_back((h % K) * K + w % K == arg[e] ? g[e] : 0);
          }
    const std::string k = std::to_string(K);
    absl::StatusOr<Value> got = Run(
        "def g(float(N,C,I2,J) A, float(N,C,I2,J) G) -> (Ix) {\n"
        "  Ix(n,c,h,w) +=! kh*" + k + " + kw == A(n,c,(h - kh)/" + k + ",(w - kw)/" + k +
            ") ? G(n,c,(h - kh)/" + k + ",(w - kw)/" + k + ") : 0\n"
            "    where h in 0:" + std::to_string(H) + ", w in 0:" + std::to_string(W) +
            ", kh in 0:" + k + ", kw in 0:" + k + ", (h - kh)/" + k + " in 0:I2, (w - kw)/" + k +
            " in 0:J\n}",
        {Make({N, C, I2, J}, arg), Make({N, C, I2, J}, g)});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectExactly(got->tensor(), ix);
  }
}

// 2x2 windows over pooled rows of every length the row loops treat apart: the
// pair reads in place two image rows apart (tc_rows' CombinePairBlocks: a
// scalar loop under 8 outputs, one block, overlapping blocks, the plain loop
// from 32), a sum over the same pairs (the overlap stored, not added, twice),
// and the adjoint's arg statement, whose reads step by 2 (EveryOther's
// overlapping last block past 8). Each against loops, bit for bit.
TEST_P(TcKernelTest, PooledRowsOfAnyLength) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int J : {5, 8, 9, 14, 16, 17, 24, 31, 32, 40}) {
    SCOPED_TRACE(J);
    const int N = 2, C = 3, I2 = 5, H = 2 * I2 + 1, W = 2 * J + 1;
    std::vector<double> vx = ToDoubles(Rand({N, C, H, W}));
    for (int e : {0, 2 * W + 3, 3 * W + 4 * (J / 2) + 1}) vx[e] = nan;
    for (int e = 5 * W; e < 5 * W + 2 * J; e += 3) vx[e + 1] = vx[e];  // ties within a window
    std::vector<double> max, sum, arg;
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c)
        for (int i = 0; i < I2; ++i)
          for (int j = 0; j < J; ++j) {
            double m = -std::numeric_limits<double>::infinity(), t = 0;
            auto at = [&](int p, int q) {
              return vx[((n * C + c) * H + 2 * i + p) * W + 2 * j + q];
            };
            for (int p = 0; p < 2; ++p)
              for (int q = 0; q < 2; ++q) {
                const double v = at(p, q);
                if (v > m || std::isnan(v)) m = v;
                t = dtype() == kF64 ? t + v : static_cast<float>(static_cast<float>(t) + v);
              }
            double a = 4;
            for (int k = 3; k >= 0; --k) {
              if (at(k / 2, k % 2) == m) a = k;
            }
            max.push_back(m);
            sum.push_back(t);
            arg.push_back(a);
          }
    absl::StatusOr<Value> got =
        Run("def pool(float(N,C,H,W) X) -> (O, S, A) {\n"
            "  O(n,c,i,j) max=! X(n,c,2*i+kh,2*j+kw) where i in 0:" + std::to_string(I2) +
                ", j in 0:" + std::to_string(J) + ", kh in 0:2, kw in 0:2\n"
                "  S(n,c,i,j) +=! X(n,c,2*i+kh,2*j+kw) where i in 0:" + std::to_string(I2) +
                ", j in 0:" + std::to_string(J) + ", kh in 0:2, kw in 0:2\n"
                "  A(n,c,i,j) min=! X(n,c,2*i+kh,2*j+kw) == O(n,c,i,j) ? kh*2 + kw : 4"
                " where kh in 0:2, kw in 0:2\n}",
            {Make({N, C, H, W}, vx)});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(got->is_tuple());
    ExpectExactly(got->elements()[0].tensor(), max);
    ExpectExactly(got->elements()[1].tensor(), sum);
    ExpectExactly(got->elements()[2].tensor(), arg);
  }
}

// With a step's memo (as the executor gives every kernel step) the block is
// parsed and compiled once per signature: runs of a shape seen before add no
// plan, a new shape adds one, and every result equals a run without a memo.
TEST_P(TcKernelTest, ABlockCompilesOncePerSignature) {
  const std::string def = Def(
      "def pool(float(N,C,H,W) X) -> (O, A) {\n"
      "  O(n,c,i,j) max=! X(n,c,2*i+kh,2*j+kw) where kh in 0:2, kw in 0:2\n"
      "  A(n,c,i,j) min=! X(n,c,2*i+kh,2*j+kw) == O(n,c,i,j) ? kh*2 + kw : 4"
      " where kh in 0:2, kw in 0:2\n}",
      dtype());
  absl::StatusOr<PrimitivePtr> prim = DefaultRegistry().Make(PrimId::kTc, DefAttr(def));
  ASSERT_TRUE(prim.ok()) << prim.status();
  const KernelFn fn = CpuKernels().Get(PrimId::kTc);
  KernelCache cache;
  struct Case {
    Shape shape;
    size_t plans;  // held after the run
  };
  for (const Case& c : {Case{{2, 3, 6, 8}, 1}, Case{{2, 3, 6, 8}, 1}, Case{{1, 2, 4, 30}, 2},
                        Case{{2, 3, 6, 8}, 2}}) {
    SCOPED_TRACE(ShapeToString(c.shape));
    const Tensor x = Rand(c.shape);
    std::vector<Value> in{Value(x)};
    KernelContext ctx(**prim, absl::MakeSpan(in), CpuDevice());
    ctx.set_cache(&cache, 0);
    absl::StatusOr<Value> got = fn(ctx);
    absl::StatusOr<Value> want = RunTc(def, {x});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ(cache.num_plans(), c.plans);
    ASSERT_TRUE(got->is_tuple());
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(got->elements()[k].tensor().shape(), want->elements()[k].tensor().shape());
      ExpectExactly(got->elements()[k].tensor(), ToDoubles(want->elements()[k].tensor()));
    }
  }
  // A block that does not check against the inputs stores nothing.
  std::vector<Value> bad{Value(Rand({2, 3}))};
  KernelContext ctx(**prim, absl::MakeSpan(bad), CpuDevice());
  ctx.set_cache(&cache, 0);
  EXPECT_FALSE(fn(ctx).ok());
  EXPECT_EQ(cache.num_plans(), 2u);
}

TEST_P(TcKernelTest, MinProdAndLongReductions) {
  for (int64_t m : {5, 300}) {  // lanes along the left side, then along the reduction
    SCOPED_TRACE(m);
    Tensor x = Rand({7, m}, 0.9, 1.1);
    const std::vector<double> vx = ToDoubles(x);
    std::vector<double> mins, maxs;
    Reference prod{{7}, {}, {}}, sum{{7}, {}, {}};
    for (int i = 0; i < 7; ++i) {
      double lo = vx[i * m], hi = vx[i * m], p = 1, s = 0;
      for (int j = 0; j < m; ++j) {
        lo = std::min(lo, vx[i * m + j]);
        hi = std::max(hi, vx[i * m + j]);
        p *= vx[i * m + j];
        s += vx[i * m + j];
      }
      mins.push_back(lo);
      maxs.push_back(hi);
      prod.value.push_back(p);
      prod.scale.push_back(p * m);  // relative error grows with the factors
      sum.value.push_back(s);
      sum.scale.push_back(s);
    }
    absl::StatusOr<Value> got = Run("def f(float(M,N) X) -> (O) { O(i) min=! X(i,j) }", {x});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectExactly(got->tensor(), mins);
    got = Run("def f(float(M,N) X) -> (O) { O(i) max=! X(i,j) }", {x});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectExactly(got->tensor(), maxs);
    ExpectMatches(Run("def f(float(M,N) X) -> (O) { O(i) *=! X(i,j) }", {x}), prod, dtype());
    ExpectMatches(Run("def f(float(M,N) X) -> (O) { O(i) +=! X(i,j) }", {x}), sum, dtype());
    // Updates of each kind after an initialisation to 1.
    auto update = [&](const std::string& op) {
      return Run("def f(float(M,N) X) -> (O) { O(i) = 1 where i in 0:M; O(i) " + op + " X(i,j) }",
                 {x});
    };
    std::vector<double> low, high;
    for (int i = 0; i < 7; ++i) {
      low.push_back(std::min(mins[i], 1.0));
      high.push_back(std::max(maxs[i], 1.0));
      sum.value[i] += 1;
      sum.scale[i] += 1;
    }
    got = update("min=");
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectExactly(got->tensor(), low);
    got = update("max=");
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectExactly(got->tensor(), high);
    ExpectMatches(update("*="), prod, dtype());
    ExpectMatches(update("+="), sum, dtype());
  }
}

TEST_P(TcKernelTest, Softmax) {
  Tensor x = Rand({5, 37}, -3, 3);
  const std::vector<double> vx = ToDoubles(x);
  absl::StatusOr<Value> got =
      Run("def softmax(float(N,M) X) -> (mx, e, s, O) {\n"
          "  mx(i) max=! X(i,j)\n"
          "  e(i,j) = exp(X(i,j) - mx(i))\n"
          "  s(i) +=! e(i,j)\n"
          "  O(i,j) = e(i,j) / s(i)\n"
          "}",
          {x});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->is_tuple());
  ASSERT_EQ(got->elements().size(), 4u);
  Reference r{{5, 37}, {}, {}};
  for (int i = 0; i < 5; ++i) {
    double m = *std::max_element(vx.begin() + i * 37, vx.begin() + (i + 1) * 37), s = 0;
    for (int j = 0; j < 37; ++j) s += std::exp(vx[i * 37 + j] - m);
    for (int j = 0; j < 37; ++j) {
      r.value.push_back(std::exp(vx[i * 37 + j] - m) / s);
      r.scale.push_back(10 * r.value.back());  // exp and the division round in the dtype
    }
  }
  ExpectMatches(got->elements()[3], r, dtype());
}

TEST_P(TcKernelTest, MaxTiesAndNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = Make({4, 4}, {1, 3, 3, 2,            //
                           -0.0, 0.0, -0.0, 0.0,  //
                           5, nan, 7, 1,          //
                           nan, nan, 1, 2});
  absl::StatusOr<Value> got = Run("def f(float(M,N) X) -> (O) { O(i) max=! X(i,j) }", {x});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectExactly(got->tensor(), {3, 0, nan, nan});
  got = Run("def f(float(M,N) X) -> (O) { O(i) min=! X(i,j) }", {x});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectExactly(got->tensor(), {1, 0, nan, nan});
  // fmax and fmin skip NaN, as std::fmax.
  got = Run("def f(float(M,N) X) -> (O) { O(i,j) = fmax(X(i,j), 2) + fmin(X(i,j), 2) }", {x});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectExactly(got->tensor(), {3, 5, 5, 4, 2, 2, 2, 2, 7, 4, 9, 3, 4, 4, 3, 4});
  // Along the reduction (more lanes than left-side points).
  std::vector<double> row(200, 1.0);
  row[137] = 4;
  row[20] = 4;
  got = Run("def f(float(N) X) -> (O) { O max=! X(i) }", {Make({200}, row)});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectExactly(got->tensor(), {4});
  row[150] = nan;
  got = Run("def f(float(N) X) -> (O) { O max=! X(i) }", {Make({200}, row)});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectExactly(got->tensor(), {nan});
}

TEST_P(TcKernelTest, Expressions) {
  Tensor x = Make({6}, {-2, -0.5, 0, 0.5, 1, 3});
  const std::vector<double> vx = ToDoubles(x);
  absl::StatusOr<Value> got = Run(
      "def f(float(N) X) -> (O) {\n"
      "  O(i) = ((X(i) > 0 && i != 5 ? X(i) : 0.25 * X(i)) + i * N + sigmoid(X(i)) - tanh(X(i))\n"
      "          + abs(X(i)) * sqrt(abs(X(i))) + (!(X(i) <= 0) || X(i) == -2) + log(1 + "
      "exp(X(i))))\n"
      "}",
      {x});
  std::vector<double> want;
  for (int i = 0; i < 6; ++i) {
    const double v = vx[i];
    want.push_back(((v > 0 && i != 5) ? v : 0.25 * v) + i * 6.0 + 1 / (1 + std::exp(-v)) -
                   std::tanh(v) + std::abs(v) * std::sqrt(std::abs(v)) +
                   ((!(v <= 0) || v == -2) ? 1 : 0) + std::log(1 + std::exp(v)));
  }
  ExpectTensorNear(got, dtype(), {6}, want, [&](size_t) { return 1e-5 * 40; });
}

TEST_P(TcKernelTest, TransposesScalarsAndPartialRanges) {
  Tensor x = Rand({37, 5});
  const std::vector<double> vx = ToDoubles(x);
  std::vector<double> t;
  for (int j = 0; j < 5; ++j)
    for (int i = 0; i < 37; ++i) t.push_back(vx[i * 5 + j]);
  absl::StatusOr<Value> got = Run("def f(float(M,N) X) -> (O) { O(j,i) = X(i,j) }", {x});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectExactly(got->tensor(), t);
  // A rank-0 output, and two outputs as a tuple.
  got = Run("def f(float(M,N) X) -> (S, P) { S +=! X(i,j); P = S * 2 }", {x});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->is_tuple());
  double s = 0, m = 0;
  for (double v : vx) s += v, m += std::abs(v);
  ExpectMatches(got->elements()[0], Reference{{}, {s}, {m}}, dtype());
  ExpectMatches(got->elements()[1], Reference{{}, {2 * s}, {2 * m}}, dtype());
  // Left-side points before the range keep the identity.
  got =
      Run("def f(float(N) X) -> (O) { O(i) = X(i) + 1 where i in 2:N }", {Make({4}, {1, 2, 3, 4})});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectExactly(got->tensor(), {0, 0, 4, 5});
}

// Short rows share chunks (rows of the vector index's lanes): indices, updates
// and reads that vary along either index.
TEST_P(TcKernelTest, ShortRowsShareChunks) {
  Tensor x = Rand({5, 7}), y = Rand({5, 7, 3});
  const std::vector<double> vx = ToDoubles(x), vy = ToDoubles(y);
  std::vector<double> want, best;
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j) {
      want.push_back(i * 100 + j + vx[i * 7 + j]);
      double m = vx[i * 7 + j];
      for (int k = 0; k < 3; ++k) m = std::max(m, vy[(i * 7 + j) * 3 + k]);
      best.push_back(m);
    }
  absl::StatusOr<Value> got =
      Run("def f(float(M,N) X) -> (O) { O(i,j) = i * 100 + j + X(i,j) }", {x});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectTensorNear(got, dtype(), {5, 7}, want, [](size_t) { return 1e-4; });
  got = Run("def f(float(M,N) X, float(M,N,K) Y) -> (O) { O(i,j) = X(i,j); O(i,j) max= Y(i,j,k) }",
            {x, y});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectExactly(got->tensor(), best);
}

TEST_P(TcKernelTest, ErrorsComeFromTheAnalysis) {
  ExpectError(Run("def f(float(M,N) X) -> (O) { O(i) +=! X(i,j) }", {Rand({3})}), "rank");
  ExpectError(Run("def f(float(M) X) -> (O) { O(i) +=! X(i,j) }", {Rand({3})}), "tc block");
  ExpectError(RunTc("def f(float(M) X) -> (O) { O(i) = X(i) + }", {Rand({3})}), "tc block");
}

// The stress tests compare whole programs bit for bit on any thread count.
TEST_P(TcKernelTest, ResultsDoNotDependOnTheThreadCount) {
  const std::vector<std::pair<const char*, std::vector<Value>>> cases = {
      {"def f(float(M,N) X) -> (O) { O(i) +=! X(i,j) * X(i,j) }", {Rand({300, 400})}},
      {"def f(float(M,N) X) -> (O) { O(j) +=! X(i,j) }", {Rand({300, 400})}},
      {"def f(float(M,N) X) -> (O) { O +=! X(i,j) }", {Rand({300, 400})}},
      {"def mm(float(M,K) A, float(K,N) B) -> (C) { C(i,j) +=! A(i,k) * B(k,j) }",
       {Rand({300, 200}), Rand({200, 700})}},
      {"def f(float(M,K) A, float(K,N) B) -> (C) { C(i,j) max=! A(i,k) + B(k,j) }",
       {Rand({100, 50}), Rand({50, 300})}},
      {"def conv(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
       "  O(n,f,h,w) +=! I(n,c,h+kh,w+kw) * W1(f,c,kh,kw)\n}",
       {Rand({4, 8, 20, 20}), Rand({16, 8, 3, 3})}},
      // Four blocks of one image: in turn on 1 and 5 threads, at once on 2 and 3.
      {"def conv(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
       "  O(n,f,h,w) +=! I(n,c,h+kh-1,w+kw-1) * W1(f,c,kh,kw)\n"
       "    where h in 0:H, w in 0:W, h+kh-1 in 0:H, w+kw-1 in 0:W\n}",
       {Rand({4, 16, 66, 66}), Rand({8, 16, 3, 3})}},
      {"def pool(float(N,C,H,W) X) -> (O) {\n"
       "  O(n,c,h,w) max=! X(n,c,2*h+kh,2*w+kw) where kh in 0:2, kw in 0:2\n}",
       {Rand({4, 16, 40, 40})}},
  };
  for (const auto& [def, inputs] : cases) {
    SCOPED_TRACE(def);
    ExpectSameOnAnyThreadCount(PrimId::kTc, inputs, DefAttr(Def(def, dtype())));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TcKernelTest, ::testing::Values(kF32, kF64),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

// ----- The contraction plans -------------------------------------------------------------------
// Statement 0 of `def` (f32 inputs of `shapes`) as PlanTcContraction plans it.
std::optional<cpu::TcContractionPlan> PlanOf(const std::string& def,
                                             const std::vector<Shape>& shapes) {
  absl::StatusOr<tc::Block> b = tc::ParseBlock(def);
  EXPECT_TRUE(b.ok()) << b.status();
  if (!b.ok()) return std::nullopt;
  std::vector<ops::TensorType> in;
  for (const Shape& s : shapes) in.push_back(ops::TensorType(kF32, s));
  absl::StatusOr<tc::Analysis> a = tc::Analyze(*b, in);
  EXPECT_TRUE(a.ok()) << a.status();
  if (!a.ok()) return std::nullopt;
  std::vector<Shape> strides;
  for (const Shape& s : a->shapes) strides.push_back(RowMajorStrides(s));
  return cpu::PlanTcContraction(cpu::MakeTcStatement(*b, *a, 0), strides);
}

TEST(TcContractionPlanTest, MatMulRunsOnTheTensorsInPlace) {
  std::optional<cpu::TcContractionPlan> p = PlanOf(
      "def mm(float(M,K) A, float(K,N) B) -> (C) { C(i,j) +=! A(i,k) * B(k,j) }", {{6, 4}, {4, 5}});
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->a.gathered || p->b.gathered || p->temp_out);
  EXPECT_TRUE(p->prefix.empty());
  EXPECT_FALSE(p->a.trans || p->b.trans);
  EXPECT_EQ(p->a.ld, 4);
  EXPECT_EQ(p->b.ld, 5);
  EXPECT_EQ(p->ldc, 5);
  // Transposed operands are read transposed, not copied.
  p = PlanOf("def mm(float(K,M) A, float(N,K) B) -> (C) { C(i,j) +=! A(k,i) * B(j,k) }",
             {{4, 6}, {5, 4}});
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->a.gathered || p->b.gathered || p->temp_out);
  EXPECT_TRUE(p->a.trans && p->b.trans);
  // C(j,i): the product is B^T A^T, B's rows first.
  p = PlanOf("def mm(float(M,K) A, float(K,N) B) -> (C) { C(j,i) +=! A(i,k) * B(k,j) }",
             {{6, 4}, {4, 5}});
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->a.gathered || p->b.gathered || p->temp_out);
  EXPECT_EQ(p->a.node, 1);  // B(k,j), the second read
}

TEST(TcContractionPlanTest, ConvolutionGathersItsInput) {
  std::optional<cpu::TcContractionPlan> p = PlanOf(
      "def conv(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
      "  O(n,f,h,w) +=! I(n,c,h+kh,w+kw) * W1(f,c,kh,kw)\n}",
      {{2, 3, 7, 6}, {4, 3, 3, 3}});
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->a.gathered);  // W1 as [f, (c, kh, kw)]
  EXPECT_TRUE(p->b.gathered);   // I as [n, (c, kh, kw), (h, w)]: im2col
  EXPECT_FALSE(p->temp_out);
  EXPECT_EQ(p->prefix, std::vector<int>({0}));
  EXPECT_EQ(p->rows, std::vector<int>({1}));
  EXPECT_EQ(p->cols, std::vector<int>({2, 3}));
  EXPECT_EQ(p->b.layout, std::vector<int>({0, 4, 5, 6, 2, 3}));
  // Zero padding: the same GEMMs, the guards applied by the gather.
  p = PlanOf(
      "def conv(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
      "  O(n,f,h,w) +=! I(n,c,h+kh-1,w+kw-1) * W1(f,c,kh,kw)\n"
      "    where h in 0:H, w in 0:W, h+kh-1 in 0:H, w+kw-1 in 0:W\n}",
      {{2, 3, 7, 6}, {4, 3, 3, 3}});
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->a.gathered || p->temp_out);
  EXPECT_TRUE(p->b.gathered);
  EXPECT_EQ(p->b.guards, std::vector<int>({0, 1}));
  EXPECT_EQ(p->prefix, std::vector<int>({0}));
  EXPECT_EQ(p->b.layout, std::vector<int>({0, 4, 5, 6, 2, 3}));
}

TEST(TcContractionPlanTest, TheFilterGradientSplitsTheImagesOff) {
  const char* def =
      "def g(float(N,F,H,W) Ox, float(N,C,H,W) I) -> (Wx) {\n"
      "  Wx(f,c,kh,kw) +=! Ox(n,f,h,w) * I(n,c,h+kh-1,w+kw-1)\n"
      "    where kh in 0:3, kw in 0:3, h+kh-1 in 0:H, w+kw-1 in 0:W\n}";
  std::optional<cpu::TcContractionPlan> p = PlanOf(def, {{12, 4, 10, 10}, {12, 3, 10, 10}});
  ASSERT_TRUE(p.has_value());
  // Positions: f c kh kw (the left side), then n h w.
  EXPECT_EQ(p->split, 4);
  EXPECT_EQ(p->depth, std::vector<int>({5, 6}));
  EXPECT_FALSE(p->a.gathered);  // Ox as [f, (h, w)] per image, in place
  EXPECT_EQ(p->a.ld, 100);
  EXPECT_TRUE(p->b.gathered);  // I per image: im2col, transposed
  EXPECT_EQ(p->b.layout.front(), 4);
  EXPECT_TRUE(p->temp_out);
  // Too little depth left per image (4 x 4 images): one GEMM over all of it.
  p = PlanOf(def, {{12, 4, 4, 4}, {12, 3, 4, 4}});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->split, -1);
  EXPECT_TRUE(p->a.gathered);
  // A prefix (the images kept apart) or one depth index: nothing to split.
  p = PlanOf("def mm(float(M,K) A, float(K,N) B) -> (C) { C(i,j) +=! A(i,k) * B(k,j) }",
             {{6, 400}, {400, 5}});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->split, -1);
  p = PlanOf("def f(float(B,M,K,L) A, float(B,K,L,N) B1) -> (C) {\n"
             "  C(b,i,j) +=! A(b,i,k,l) * B1(b,k,l,j)\n}",
             {{3, 6, 20, 20}, {3, 20, 20, 5}});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->split, -1);
}

TEST(TcContractionPlanTest, WhatStaysInTheInterpreter) {
  // A guard naming both reads' indices.
  EXPECT_FALSE(
      PlanOf("def f(float(M,K) A, float(J) B) -> (O) { O(i) +=! A(i,k) * B(j) where k - j in 0:2 }",
             {{6, 4}, {3}})
          .has_value());
  // Not a product of two reads; not a sum.
  EXPECT_FALSE(
      PlanOf("def f(float(M,K) A, float(K) B) -> (O) { O(i) +=! A(i,k) + B(k) }", {{6, 4}, {4}})
          .has_value());
  EXPECT_FALSE(
      PlanOf("def f(float(M,K) A, float(K) B) -> (O) { O(i) max=! A(i,k) * B(k) }", {{6, 4}, {4}})
          .has_value());
  EXPECT_FALSE(PlanOf("def f(float(M,K) A, float(K) B) -> (O) { O(i) +=! A(i,k) * B(k) * A(i,k) }",
                      {{6, 4}, {4}})
                   .has_value());
}

TEST(TcContractionPlanTest, ABatchIndexLastGoesThroughATemporary) {
  std::optional<cpu::TcContractionPlan> p =
      PlanOf("def f(float(B,M,K) A, float(B,K,N) B1) -> (C) { C(i,j,b) +=! A(b,i,k) * B1(b,k,j) }",
             {{3, 6, 4}, {3, 4, 5}});
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->temp_out);
  EXPECT_FALSE(p->a.gathered || p->b.gathered);
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
