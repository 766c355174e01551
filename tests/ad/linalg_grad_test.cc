// Gradient checks of the linalg family (matmul, einsum): reverse mode against
// central finite differences in float64, to second order (the rules' own nodes
// are differentiated again), at three random points each.
#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ad/grad_operation.h"
#include "core/builder.h"
#include "core/manager.h"
#include "core/passes/optimize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/grad_test_util.h"

namespace kgrad {
namespace testing {
namespace {


// ----- matmul ----------------------------------------------------------------------
AttrMap MatMulAttrs(bool ta, bool tb) { return {{"transpose_a", ta}, {"transpose_b", tb}}; }

// op(a) is [m, k] and op(b) is [k, n]; stored shapes follow the transposes.
Shape Stored(int64_t rows, int64_t cols, bool transposed, Shape batch = {}) {
  batch.push_back(transposed ? cols : rows);
  batch.push_back(transposed ? rows : cols);
  return batch;
}

TEST(LinalgGradTest, MatMulEveryTransposeCombination) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "transpose_a=" << ta << " transpose_b=" << tb);
      ExpectGradientsAtSeeds(PrimId::kMatMul, Uniform({Stored(2, 3, ta), Stored(3, 4, tb)}),
                             MatMulAttrs(ta, tb));
    }
  }
}

TEST(LinalgGradTest, MatMulBatchedWithTransposes) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "transpose_a=" << ta << " transpose_b=" << tb);
      ExpectGradientsAtSeeds(PrimId::kMatMul,
                             Uniform({Stored(2, 3, ta, {2}), Stored(3, 2, tb, {2})}),
                             MatMulAttrs(ta, tb));
    }
  }
}

// The batch sensitivity is summed back to each operand's batch shape.
TEST(LinalgGradTest, MatMulBroadcastBatchDims) {
  // [2,1] x [3] batches -> [2,3]: each side is summed over the other's batch dims.
  ExpectGradientsAtSeeds(PrimId::kMatMul, Uniform({{2, 1, 2, 3}, {3, 3, 2}}),
                         MatMulAttrs(false, false));
  // A plain matrix against a batch: da sums over the whole batch.
  ExpectGradientsAtSeeds(PrimId::kMatMul, Uniform({{2, 3}, {2, 2, 3, 2}}),
                         MatMulAttrs(false, false));
  ExpectGradientsAtSeeds(PrimId::kMatMul, Uniform({{2, 3, 2}, {4, 3}}), MatMulAttrs(true, true));
}

// A matrix against a batch on its left (x @ W, a linear layer): dW is one GEMM
// over the flattened rows of x and dy; either stored form of W, and with batch
// dims of unknown size.
TEST(LinalgGradTest, MatMulMatrixGradientOverFlattenedRows) {
  ExpectGradientsAtSeeds(PrimId::kMatMul, Uniform({{2, 3, 4}, {4, 5}}), MatMulAttrs(false, false));
  ExpectGradientsAtSeeds(PrimId::kMatMul, Uniform({{2, 2, 3, 4}, {5, 4}}), MatMulAttrs(false, true));
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", MakeAbstractTensor(DType::kFloat64, {kUnknownDim, kUnknownDim, 3}));
  AnfNode* w = b.Param("w", MakeAbstractTensor(DType::kFloat64, {3, 2}));
  absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kMatMul, {x, w}));
  ASSERT_TRUE(f.ok()) << f.status();
  for (uint64_t seed : kSeeds) {
    absl::StatusOr<GradCheckReport> r =
        CheckGradients(m, *f, RandomOperands({{2, 5, 3}, {3, 2}}, seed), Order(2, seed));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->passed()) << r->ToString();
  }
}

// ... and holds no per-example product: no value of the gradient is
// [batch..., k, m] (the batch of outer products summed afterwards, 96 MiB per
// in-projection of a transformer encoder at batch 8 x 128).
TEST(LinalgGradTest, MatMulMatrixGradientHoldsNoBatchOfProducts) {
  for (bool tb : {false, true}) {
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "f");
    AnfNode* x = b.Param("x", DType::kFloat64, {6, 5, 3});
    AnfNode* w = b.Param("w", DType::kFloat64, tb ? Shape{2, 3} : Shape{3, 2});
    FuncGraph* f =
        b.Return(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMatMul, {x, w}, MatMulAttrs(false, tb))})).value();
    GradOptions o;
    o.argnums = {1};
    absl::StatusOr<FuncGraph*> g = Grad(m, f, o);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(Optimize(m, *g).ok());
    for (const CNode* c : m.manager().Info(*g).order) {
      const AbstractTensor* t = AsTensor(c->abstract());
      if (t == nullptr || !t->shape_known()) continue;
      // x and dy are [6,5,*]; a product per batch element would be [6,3,2] or [6,2,3].
      EXPECT_FALSE(t->rank() == 3 && t->shape()[0] == 6 && t->shape()[1] != 5)
          << c->DebugName() << " " << t->ToString();
    }
  }
}

TEST(LinalgGradTest, MatMulVectorsAsMatrices) {
  // Row times column (a 1x1 result) and column times row (an outer product).
  ExpectGradientsAtSeeds(PrimId::kMatMul, Uniform({{1, 4}, {4, 1}}), MatMulAttrs(false, false));
  ExpectGradientsAtSeeds(PrimId::kMatMul, Uniform({{1, 4}, {1, 3}}), MatMulAttrs(true, false));
}

// Unknown batch dims: the batch sensitivity is summed back with sum_to_like.
TEST(LinalgGradTest, MatMulWithUnknownBatchDims) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", MakeAbstractTensor(DType::kFloat64, {kUnknownDim, kUnknownDim, 3}));
  AnfNode* w = b.Param("w", MakeAbstractTensor(DType::kFloat64, {kUnknownDim, 3, 2}));
  absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kMatMul, {x, w}));
  ASSERT_TRUE(f.ok()) << f.status();
  for (uint64_t seed : kSeeds) {
    GradCheckOptions options = Order(2, seed);
    absl::StatusOr<GradCheckReport> r =
        CheckGradients(m, *f, RandomOperands({{1, 4, 3}, {5, 3, 2}}, seed), options);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->passed()) << r->ToString();
  }
}

// ----- einsum -----------------------------------------------------------------------
struct EinsumCase {
  std::string equation;
  std::vector<Shape> shapes;
};

void ExpectEinsumGradients(const std::vector<EinsumCase>& cases) {
  for (const EinsumCase& e : cases) {
    SCOPED_TRACE(e.equation);
    // One operand: einsum is linear in it, and its second derivatives vanish.
    ExpectGradientsAtSeeds(PrimId::kEinsum, Uniform(e.shapes), {{"equation", e.equation}},
                           /*curved=*/e.shapes.size() > 1);
  }
}

TEST(LinalgGradTest, EinsumContractions) {
  ExpectEinsumGradients({
      {"ij,jk->ik", {{2, 3}, {3, 4}}},
      {"ij,kj->ki", {{2, 3}, {4, 3}}},
      {"bij,bjk->bik", {{2, 2, 3}, {2, 3, 2}}},
      {"i,i->", {{5}, {5}}},
      {"i,j->ij", {{3}, {4}}},
      {"ij,ij->ij", {{2, 3}, {2, 3}}},
      {"ij,jk", {{2, 3}, {3, 2}}},  // implicit output: ik
  });
}

TEST(LinalgGradTest, EinsumThreeOperands) {
  ExpectEinsumGradients({
      {"ijk,jl,lk->i", {{2, 3, 2}, {3, 2}, {2, 2}}},
      {"i,ij,j->", {{3}, {3, 4}, {4}}},
      {"ab,bc,cd->da", {{2, 3}, {3, 2}, {2, 3}}},
  });
}

// Letters of one operand only that the output drops: dy is broadcast along them.
TEST(LinalgGradTest, EinsumSummedLetters) {
  ExpectEinsumGradients({
      {"ij->i", {{3, 4}}},
      {"ij->", {{3, 4}}},
      {"ijk->kj", {{2, 3, 4}}},  // a sum and a transpose
      {"ij,k->i", {{2, 3}, {4}}},
      {"ij,jk->", {{2, 3}, {3, 2}}},
  });
}

TEST(LinalgGradTest, EinsumPermutations) {
  ExpectEinsumGradients({
      {"ij->ji", {{2, 3}}},
      {"ijk->kij", {{2, 3, 4}}},
      {"ij->ij", {{2, 3}}},
  });
}

// Repeated letters within an operand (diagonals): the adjoint places dy on them.
TEST(LinalgGradTest, EinsumDiagonals) {
  ExpectEinsumGradients({
      {"ii->", {{3, 3}}},          // trace
      {"ii->i", {{4, 4}}},         // diagonal
      {"iij->j", {{3, 3, 2}}},     // batched trace
      {"iji->ij", {{2, 3, 2}}},    // a diagonal kept with another letter
      {"iii->", {{2, 2, 2}}},      // a triple repeat: two identities
      {"ii,i->i", {{3, 3}, {3}}},  // a diagonal times a vector
      {"bii,bj->bj", {{2, 3, 3}, {2, 4}}},
  });
}

// ----- The adjoint's structure ------------------------------------------------------
// The equations of the einsums (other than the primal's) in the gradient graph of f(x, y) =
// einsum{equation}(x, y...).
std::set<std::string> AdjointEquations(const std::string& equation,
                                       const std::vector<Shape>& shapes) {
  Module m(DefaultRegistry());
  absl::StatusOr<FuncGraph*> f = testing::BuildPrimitiveGraph(
      m, PrimId::kEinsum, RandomOperands(shapes, 1), {{"equation", equation}});
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return {};
  absl::StatusOr<FuncGraph*> g = GradOperation(/*get_all=*/true)(m, *f);
  EXPECT_TRUE(g.ok()) << g.status();
  std::set<std::string> eqs;
  for (const auto& graph : m.graphs()) {
    for (const auto& node : graph->owned_nodes()) {
      const CNode* c = node->AsCNode();
      const Primitive* p = c != nullptr ? c->primitive() : nullptr;
      if (p == nullptr || p->id() != PrimId::kEinsum) continue;
      if (p->GetString("equation") != equation) eqs.insert(p->GetString("equation"));
    }
  }
  return eqs;
}

TEST(LinalgGradTest, EinsumAdjointIsTheEinsumOfTheTransposedEquation) {
  EXPECT_THAT(AdjointEquations("ij,jk->ik", {{2, 3}, {3, 4}}),
              ::testing::UnorderedElementsAre("ik,jk->ij", "ik,ij->jk"));
  // Summed letters: contract, then broadcast through ones_like(x).
  EXPECT_THAT(AdjointEquations("ij->i", {{2, 3}}), ::testing::ElementsAre("i,ij->ij"));
  // A trace: dy (rank 0) placed on the diagonal with an identity.
  std::set<std::string> trace = AdjointEquations("ii->", {{3, 3}});
  ASSERT_EQ(trace.size(), 1u);
  EXPECT_THAT(*trace.begin(), ::testing::MatchesRegex(",i[A-Z]->i[A-Z]"));
}

// A diagonal needs the letter's size for its identity; unknown sizes are an error
// at transform time naming the primitive and node.
TEST(LinalgGradTest, EinsumDiagonalOfUnknownSizeIsAnError) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "trace");
  AnfNode* x = b.Param("x", MakeAbstractTensor(DType::kFloat64, {kUnknownDim, kUnknownDim}));
  CNode* y = b.Op(PrimId::kEinsum, {x}, {{"equation", std::string("ii->")}});
  y->set_name("tr");
  ExpectGradError(m, b.Return(y),
                  {"cannot differentiate einsum", "node 'tr'", "repeats subscript 'i'"});
}

// Unknown sizes are fine without diagonals: the adjoint is shape-generic.
TEST(LinalgGradTest, EinsumWithUnknownSizesRunsOnConcreteOperands) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AbstractPtr any = MakeAbstractTensor(DType::kFloat64, {kUnknownDim, kUnknownDim});
  AnfNode* x = b.Param("x", any);
  AnfNode* w = b.Param("w", any);
  absl::StatusOr<FuncGraph*> f =
      b.Return(b.Op(PrimId::kEinsum, {x, w}, {{"equation", std::string("ij,jk->")}}));
  ASSERT_TRUE(f.ok()) << f.status();
  GradCheckOptions options = Order(2);
  absl::StatusOr<GradCheckReport> r =
      CheckGradients(m, *f, RandomOperands({{2, 3}, {3, 2}}, 7), options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed()) << r->ToString();
}

// det and matrix_inverse to second order (the rules use each other and matmul),
// reverse and forward mode, at well-conditioned points (the diagonal lifted).
std::vector<Value> WellConditioned(const Shape& shape, std::mt19937_64& rng) {
  Tensor t = Tensor::Create(kF64, shape).value();
  std::uniform_real_distribution<double> u(-1, 1);
  const int64_t n = shape.back();
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    const int64_t r = (i / n) % n, c = i % n;
    t.mutable_data<double>()[i] = u(rng) + (r == c ? 3.0 : 0.0);
  }
  return {Value(std::move(t))};
}

TEST(LinalgGradTest, DetAndInverse) {
  for (PrimId id : {PrimId::kDet, PrimId::kMatrixInverse}) {
    for (const Shape& shape : {Shape{1, 1}, Shape{3, 3}, Shape{2, 4, 4}}) {
      SCOPED_TRACE(::testing::Message() << PrimIdName(id) << " " << ShapeToString(shape));
      // det of a 1x1 matrix is its entry: linear, no curvature to check.
      const bool curved = !(id == PrimId::kDet && shape == Shape{1, 1});
      ExpectGradientsAtSeeds(id, [shape](std::mt19937_64& rng) { return WellConditioned(shape, rng); }, {},
                             curved);
    }
  }
}

// d det / dA = det * A^-T: for A = diag(2, 3), [[3, 0], [0, 2]].
TEST(LinalgGradTest, DetGradientValue) {
  std::vector<std::vector<double>> g = Gradients(PrimId::kDet, {F64({2, 2}, {2, 0, 0, 3})});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0], (std::vector<double>{3, 0, 0, 2}));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
