// CUDA matmul (cuBLAS) and einsum against the CPU kernels: transposes, batches,
// broadcast batches (shared, strided and irregular), empty and k = 0 products,
// integer matmul (CPU fallback), and einsum's contractions, diagonals and sums.
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

class LinalgTest : public CudaDTypeTest {
 protected:
  LinalgTest() : CudaDTypeTest(31) {}
};
INSTANTIATE_TEST_SUITE_P(Dtypes, LinalgTest, FloatDTypes(), DTypeParamName);

TEST_P(LinalgTest, MatMulMatchesCpu) {
  struct Case {
    Shape a, b;  // before transposes: a [.., m, k], b [.., k, n]
  };
  const std::vector<Case> cases = {
      {{5, 7}, {7, 3}},          {{1, 1}, {1, 1}},           {{2, 3, 5, 7}, {7, 4}},
      {{4, 5, 7}, {4, 7, 3}},    {{1, 5, 7}, {4, 7, 3}},     {{2, 1, 5, 7}, {3, 7, 4}},
      {{3, 1, 2, 6}, {1, 4, 6, 2}}, {{0, 5, 7}, {7, 3}},     {{5, 0}, {0, 3}},
      {{130, 257}, {257, 65}},   {{8, 64, 64}, {8, 64, 64}},
  };
  for (const Case& c : cases) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        Shape a = c.a, b = c.b;
        if (ta) std::swap(a[a.size() - 1], a[a.size() - 2]);
        if (tb) std::swap(b[b.size() - 1], b[b.size() - 2]);
        Tolerance tol = DefaultTolerance(GetParam());
        tol.atol *= 10;  // sums of up to 257 products
        EXPECT_TRUE(MatchesCpu(dev, PrimId::kMatMul, {R(a), R(b)},
                               {{"transpose_a", ta}, {"transpose_b", tb}}, &tol))
            << ShapeToString(a) << " x " << ShapeToString(b) << " ta=" << ta << " tb=" << tb;
      }
    }
  }
}

TEST_P(LinalgTest, MatMulErrorsMatchCpu) {
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kMatMul, {R({2, 3}), R({4, 5})}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kMatMul, {R({2, 2, 3}), R({3, 3, 5})}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kMatMul, {R({3}), R({3, 5})}));
}

TEST_P(LinalgTest, EinsumMatchesCpu) {
  struct Case {
    std::string eq;
    std::vector<Shape> shapes;
  };
  const std::vector<Case> cases = {
      {"ij,jk->ik", {{4, 5}, {5, 3}}},
      {"bij,bjk->bik", {{2, 4, 5}, {2, 5, 3}}},
      {"ij,kj->ik", {{4, 5}, {3, 5}}},
      {"ji,jk->ik", {{5, 4}, {5, 3}}},
      {"ii->i", {{4, 4}}},
      {"ii", {{4, 4}}},
      {"ij->ji", {{3, 6}}},
      {"ijk->", {{2, 3, 4}}},
      {"ijk->kj", {{2, 3, 4}}},
      {"ij,ij->ij", {{3, 4}, {3, 4}}},
      {"i,j->ij", {{3}, {4}}},
      {"i,i->", {{7}, {7}}},
      {"abc,cd,de->abe", {{2, 3, 4}, {4, 5}, {5, 6}}},
      {"ij,jk,kl->il", {{3, 4}, {4, 5}, {5, 2}}},
      {"bhqd,bhkd->bhqk", {{2, 3, 4, 8}, {2, 3, 5, 8}}},
      {"iij->j", {{3, 3, 2}}},
      {"ij,jk", {{2, 3}, {3, 4}}},
  };
  for (const Case& c : cases) {
    std::vector<Value> inputs;
    for (const Shape& s : c.shapes) inputs.push_back(R(s));
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kEinsum, inputs, {{"equation", c.eq}})) << c.eq;
  }
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kEinsum, {R({2, 3}), R({4, 4})},
                           {{"equation", std::string("ij,jk->ik")}}));  // j has two sizes
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kEinsum, {R({2, 3})}, {{"equation", std::string("i...->i")}}));
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kEinsum, {R({2, 3}), R({3, 4})},
                           {{"equation", std::string("ij->i")}}));  // one operand named, two given
}

TEST(LinalgIntTest, IntegerMatMulFallsBackToTheCpu) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  std::mt19937_64 rng(32);
  for (DType t : {DType::kInt32, DType::kInt64}) {
    EXPECT_TRUE(MatchesCpu(dev, PrimId::kMatMul, {Rand(t, {2, 3, 4}, rng, -9, 9),
                                                  Rand(t, {4, 5}, rng, -9, 9)}));
  }
  EXPECT_TRUE(FailsLikeCpu(dev, PrimId::kEinsum, {Rand(DType::kInt32, {2, 2}, rng)},
                           {{"equation", std::string("ii")}}));  // floats only
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
