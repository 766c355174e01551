// The tc language: blocks parse and print back, the analysis infers TC's ranges
// and refuses malformed blocks naming the block and statement, and adjoint blocks
// are the comprehensions index algebra gives.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/tc_adjoint.h"
#include "ops/tc_analysis.h"
#include "ops/tc_block.h"

namespace kgrad {
namespace tc {
namespace {

using ::testing::HasSubstr;

struct Input {
  DType dtype;
  std::vector<int64_t> shape;
};

absl::StatusOr<Analysis> AnalyzeText(const std::string& def, const std::vector<Input>& inputs,
                                      Block* block = nullptr) {
  absl::StatusOr<Block> b = ParseBlock(def);
  if (!b.ok()) return b.status();
  std::vector<ops::TensorType> types;
  for (const Input& in : inputs) types.emplace_back(in.dtype, in.shape);
  absl::StatusOr<Analysis> a = Analyze(*b, types);
  if (block != nullptr) *block = *b;
  return a;
}

std::string AdjointText(const std::string& def, const std::vector<Input>& inputs) {
  Block b;
  absl::StatusOr<Analysis> a = AnalyzeText(def, inputs, &b);
  EXPECT_TRUE(a.ok()) << a.status();
  if (!a.ok()) return "";
  absl::StatusOr<AdjointBlock> adj = DeriveAdjoint(b, *a);
  EXPECT_TRUE(adj.ok()) << adj.status();
  if (!adj.ok()) return "";
  return PrintBlock(adj->block);
}

constexpr DType F = DType::kFloat32;

TEST(TcTest, PrintsWhatItParses) {
  for (const char* def : {
           "def mv(float(M,N) A, float(N) B) -> (C) {\n  C(i) +=! A(i, j) * B(j)\n}\n",
           "def pool(float(B,C,H,W) I) -> (O) {\n  O(b, c, i, j) max=! I(b, c, 2*i + kh, 2*j + kw) where kh in 0:2, kw in 0:2\n}\n",
           "def g(float(N) X, float(K) W) -> (O) {\n  O(h) +=! X((h - k)/2) * W(k) where k in 0:K, h in 0:N, (h - k)/2 in 0:N\n}\n",
           "def s(float(N,D) I) -> (M, E) {\n  M(n) max=! I(n, d)\n  E(n, d) = I(n, d) > 0 ? exp(I(n, d) - M(n)) : -(1 - fmax(I(n, d), 0.5)) / 2\n}\n",
       }) {
    absl::StatusOr<Block> b = ParseBlock(def);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(PrintBlock(*b), def);
  }
}

TEST(TcTest, AcceptsTheSeedsSpelling) {
  absl::StatusOr<Block> b = ParseBlock(
      "def mv(float(M,N) A, float(N) B) \xE2\x86\x92 (C) { C(i) +=! A(i,j) * B(j); }");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->statements.size(), 1u);
}

TEST(TcTest, InfersRangesAsTcDoes) {
  absl::StatusOr<Analysis> a = AnalyzeText(
      "def conv1d(float(N) I, float(K) W) -> (O) { O(i) +=! I(i + 2*k) * W(k) }", {{F, {10}}, {F, {3}}});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->shapes[2], (Shape{6}));  // i + 4 <= 9
  a = AnalyzeText("def pool(float(B,C,H,W) I) -> (O) { O(b,c,i,j) max=! I(b,c,2*i+kh,2*j+kw) where kh in 0:2, kw in 0:2 }",
                  {{F, {2, 3, 8, 7}}});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->shapes[1], (Shape{2, 3, 4, 3}));
  a = AnalyzeText("def mv(float(M,N) A, float(N) B) -> (C) { C(i) +=! A(i,j) * B(j) }", {{F, {-1, 4}}, {F, {4}}});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->shapes[2], (Shape{kUnknownDim}));
}

TEST(TcTest, MalformedBlocksNameBlockAndStatement) {
  struct Case {
    std::string def;
    std::vector<Input> inputs;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"def f(float(N) A) -> (O) { O(i) +=! A(i) * k }", {{F, {3}}},
            "tc block 'f': statement 1 (`O(i) +=! A(i) * k`): index k has no range: add `where k in a:b`"},
           {"def f(float(N) A) -> (O) { O(i) = A(i * i) }", {{F, {3}}}, "non-affine index in the read of A"},
           {"def f(float(N) A) -> (O, P) { O(i) = P(i)\n P(i) = A(i) }", {{F, {3}}},
            "statement 1 (`O(i) = P(i)`): reads output 'P' before any statement writes it"},
           {"def f(double(N) A) -> (O) { O(i) = A(i) }", {{F, {3}}}, "input 0 (double A) must be f64, got f32[3]"},
           {"def f(float(N) A) -> (O) { O(i) = A(i + 1) where i in 0:N }", {{F, {3}}},
            "reaches 3 in dim 0, of size 3"},
           {"def f(float(N) A) -> (O) { O(i) += A(i) }", {{F, {3}}}, "updates 'O' before any statement writes it"},
           {"def f(float(N) A) -> (O) { O(i) = A(i, j) }", {{F, {3}}}, "reads 'A' with 2 indices; it has rank 1"},
           {"def f(float(N) A) -> (O) { O(i) = A(j) }", {{F, {3}}}, "'=' does not reduce"},
           {"def f(float(N) A) -> (O) { O(i) = A(i) $ 2 }", {{F, {3}}}, "unexpected character '$'"},
           {"def f(float(N) A, float(N) B) -> (O) { O(i) = A(i) }", {{F, {3}}, {F, {4}}}, "size N is 3"},
           {"def f(float(N) A) -> (O) { O(i) = A(20000000 * i) where i in 0:1 }", {{F, {3}}},
            "index expression in the read of A beyond 64 terms or constants of magnitude 16777216"},
           {"def f(float(N) A) -> (O) { O(i) = A(i) where i in 0:9999999999 }", {{F, {3}}},
            "expected an integer below 2^31"},
       }) {
    absl::StatusOr<Analysis> a = AnalyzeText(c.def, c.inputs);
    ASSERT_FALSE(a.ok()) << c.def;
    EXPECT_THAT(std::string(a.status().message()), HasSubstr(c.message)) << c.def;
  }
}

TEST(TcTest, BoundsTheExpressionDepth) {
  std::string deep = "def f(float(N) A) -> (O) { O(i) = " + std::string(300, '(') + "A(i)" +
                     std::string(300, ')') + " }";
  absl::StatusOr<Block> b = ParseBlock(deep);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("nested deeper than"));
}

TEST(TcTest, AdjointOfMatrixVectorProduct) {
  EXPECT_EQ(AdjointText("def mv(float(M,N) A, float(N) B) -> (C) { C(i) +=! A(i,j) * B(j) }", {{F, {3, 4}}, {F, {4}}}),
            "def mv_grad(float(M,N) A, float(N) B, float(M) Cx) -> (Ax, Bx) {\n"
            "  Ax(i, j) +=! Cx(i) * B(j)\n"
            "  Bx(j) +=! Cx(i) * A(i, j)\n"
            "}\n");
}

TEST(TcTest, AdjointOfMaxPoolingMovesTheIndexLogicRight) {
  EXPECT_EQ(
      AdjointText("def pool(float(B,C,H,W) I) -> (O) { O(b,c,i,j) max=! I(b,c,2*i+kh,2*j+kw) where kh in 0:2, kw in 0:2 }",
                  {{F, {1, 1, 4, 4}}}),
      "def pool_grad(float(B,C,H,W) I, float(B,C,I2,J) Ox, float(B,C,I2,J) O) -> (O_arg, Ix) {\n"
      "  O_arg(b, c, i, j) min=! I(b, c, 2*i + kh, 2*j + kw) == O(b, c, i, j) ? kh * 2 + kw : 4 "
      "where i in 0:I2, j in 0:J, kh in 0:2, kw in 0:2\n"
      "  Ix(b, c, h, w) +=! kh * 2 + kw == O_arg(b, c, (h - kh)/2, (w - kw)/2) ? Ox(b, c, (h - kh)/2, (w - kw)/2) : 0 "
      "where h in 0:H, w in 0:W, kh in 0:2, kw in 0:2, (h - kh)/2 in 0:I2, (w - kw)/2 in 0:J\n"
      "}\n");
}

TEST(TcTest, AdjointOfSgemmReducesIntoTheScalars) {
  EXPECT_EQ(AdjointText("def sgemm(float a, float b, float(M,K) A, float(K,N) B, float(M,N) C) -> (O) {\n"
                        "  O(i,j) = b * C(i,j)\n  O(i,j) += a * A(i,k) * B(k,j)\n}",
                        {{F, {}}, {F, {}}, {F, {3, 4}}, {F, {4, 5}}, {F, {3, 5}}}),
            "def sgemm_grad(float a, float b, float(M,K) A, float(K,N) B, float(M,N) C, float(M,N) Ox) -> "
            "(ax, Ax, Bx, bx, Cx) {\n"
            "  ax +=! Ox(i, j) * (A(i, k) * B(k, j))\n"
            "  Ax(i, k) +=! Ox(i, j) * (a * B(k, j))\n"
            "  Bx(k, j) +=! Ox(i, j) * (a * A(i, k))\n"
            "  bx +=! Ox(i, j) * C(i, j)\n"
            "  Cx(i, j) +=! Ox(i, j) * b\n"
            "}\n");
}

TEST(TcTest, AdjointOfConvolutionIsTheTransposedConvolution) {
  EXPECT_EQ(AdjointText("def conv(float(N,C,H,W) I, float(F,C,KH,KW) Wt) -> (O) {\n"
                        "  O(n,f,h,w) +=! I(n,c,h+kh,w+kw) * Wt(f,c,kh,kw)\n}",
                        {{F, {1, 2, 5, 5}}, {F, {3, 2, 3, 3}}}),
            "def conv_grad(float(N,C,H,W) I, float(F,C,KH,KW) Wt, float(N,F,H2,W2) Ox) -> (Ix, Wtx) {\n"
            "  Ix(n, c, h, w) +=! Ox(n, f, h - kh, w - kw) * Wt(f, c, kh, kw) "
            "where h in 0:H, w in 0:W, h - kh in 0:H2, w - kw in 0:W2\n"
            "  Wtx(f, c, kh, kw) +=! Ox(n, f, h, w) * I(n, c, h + kh, w + kw) "
            "where kh in 0:KH, kw in 0:KW, h in 0:H2, w in 0:W2\n"
            "}\n");
}

// The written index solved for the widest index (i, not k), the dilation in
// the guard.
TEST(TcTest, AdjointOfDilatedConvolutionSolvesForTheWidestIndex) {
  EXPECT_EQ(AdjointText("def dil(float(N) I, float(K) W) -> (O) { O(i) +=! I(i + 2*k) * W(k) }", {{F, {10}}, {F, {3}}}),
            "def dil_grad(float(N) I, float(K) W, float(I2) Ox) -> (Ix, Wx) {\n"
            "  Ix(n) +=! Ox(n - 2*k) * W(k) where n in 0:N, n - 2*k in 0:I2\n"
            "  Wx(k) +=! Ox(i) * I(i + 2*k) where k in 0:K, i in 0:I2\n"
            "}\n");
}

// A temporary read by a later statement: its total starts from its cotangent;
// max=!'s first-index mask follows.
TEST(TcTest, AdjointOfSoftmaxTotalsTheTemporaries) {
  std::string text = AdjointText("def softmax(float(N,D) I) -> (O, M, E, S) {\n  M(n) max=! I(n,d)\n"
                                 "  E(n,d) = exp(I(n,d) - M(n))\n  S(n) +=! E(n,d)\n  O(n,d) = E(n,d) / S(n)\n}",
                                 {{F, {2, 3}}});
  EXPECT_THAT(text, HasSubstr("  Ex_total(n, d) = Ex(n, d)\n  Ex_total(n, d) += Ox(n, d) * (1 / S(n))\n"));
  EXPECT_THAT(text, HasSubstr("  Ex_total(n, d) += Sx_total(n)\n  Ix(n, d) +=! Ex_total(n, d) * exp(I(n, d) - M(n))\n"));
  EXPECT_THAT(text, HasSubstr("  M_arg(n) min=! I(n, d) == M(n) ? d : D\n  Ix(n, d) += d == M_arg(n) ? Mx_total(n) : 0\n"));
}

// A diagonal read: the second index becomes an equality condition; an index
// the forward ranged over less than the written dim keeps its range.
TEST(TcTest, AdjointOfDiagonalAndShortRanges) {
  EXPECT_EQ(AdjointText("def tr(float(N,N) A) -> (T) { T +=! A(i, i) }", {{F, {3, 3}}}),
            "def tr_grad(float(N,N) A, float Tx) -> (Ax) {\n"
            "  Ax(i, n) +=! Tx where i in 0:N, n in 0:N, i - n in 0:1\n"
            "}\n");
  EXPECT_EQ(AdjointText("def head(float(N) A) -> (O) { O(i) = A(i) where i in 0:2 }", {{F, {5}}}),
            "def head_grad(float(N) A, float(I) Ox) -> (Ax) {\n"
            "  Ax(i) +=! Ox(i) where i in 0:N, i in 0:2\n"
            "}\n");
}

TEST(TcTest, AdjointRefusesWhatItCannotDifferentiate) {
  struct Case {
    std::string def, message;
  };
  for (const Case& c : std::vector<Case>{
           {"def f(float(N) A, float(N) B) -> (O) { O(i) = A(i); O(i) max= B(i) }",
            "statement 2 (`O(i) max= B(i)`): differentiating the update max= is not supported"},
           {"def f(float(N) A, float(N) B) -> (O, P) { O(i) = A(i); P(i) = O(i); O(i) += B(i) }",
            "statement 2 (`P(i) = O(i)`): reads 'O' between its writes"},
           {"def f(float(N) A) -> (O) { O(i) = A(i) > 0 ? 1 : 0 }", "no input is differentiable"},
       }) {
    Block b;
    absl::StatusOr<Analysis> a = AnalyzeText(c.def, {{F, {3}}, {F, {3}}}, &b);
    if (b.num_inputs == 1) a = AnalyzeText(c.def, {{F, {3}}}, &b);
    ASSERT_TRUE(a.ok()) << a.status();
    absl::StatusOr<AdjointBlock> adj = DeriveAdjoint(b, *a);
    ASSERT_FALSE(adj.ok()) << c.def;
    EXPECT_THAT(std::string(adj.status().message()), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace tc
}  // namespace kgrad
