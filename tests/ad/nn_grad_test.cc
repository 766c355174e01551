// Gradient checks of the nn family (softmax, log_softmax, the cross-entropies,
// batch_norm, layer_norm, dropout, dynamic_dropout): reverse mode against central finite
// differences in float64, to second order (the rules' compositions are
// differentiated again), at three random points each.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/grad_test_util.h"

namespace kgrad {
namespace testing {
namespace {


// ----- softmax / log_softmax -----------------------------------------------------------
struct AxisCase {
  Shape shape;
  int64_t axis;
};

const std::vector<AxisCase>& AxisCases() {
  static const auto* cases = new std::vector<AxisCase>{
      {{5}, -1}, {{3, 4}, -1}, {{3, 4}, 0}, {{2, 3, 4}, 1}, {{2, 3, 4}, -3}, {{2, 3, 2}, 2}};
  return *cases;
}

// ExpectGradientsAtSeeds of `id`{axis} over AxisCases(), the arguments drawn by `make`.
void ExpectGradientsAlongAxes(
    PrimId id, const std::function<std::vector<Value>(const Shape&, std::mt19937_64&)>& make) {
  for (const AxisCase& a : AxisCases()) {
    SCOPED_TRACE(::testing::Message() << ShapeToString(a.shape) << " axis " << a.axis);
    ExpectGradientsAtSeeds(id, [&](std::mt19937_64& rng) { return make(a.shape, rng); },
                           {{"axis", a.axis}});
  }
}

// Logits over [-2, 2): the probabilities are far from saturation.
std::vector<Value> Logits(const Shape& s, std::mt19937_64& rng) {
  return {RandomF64(s, rng, -2, 2)};
}

TEST(NnGradTest, Softmax) { ExpectGradientsAlongAxes(PrimId::kSoftmax, Logits); }

TEST(NnGradTest, LogSoftmax) { ExpectGradientsAlongAxes(PrimId::kLogSoftmax, Logits); }

// ----- cross-entropies -------------------------------------------------------------------
// Both inputs are differentiated; the labels are arbitrary (not normalised), so the
// rule's sum(labels) factor is exercised.
TEST(NnGradTest, SoftmaxCrossEntropy) {
  ExpectGradientsAlongAxes(PrimId::kSoftmaxCrossEntropy, [](const Shape& s, std::mt19937_64& rng) {
    return std::vector<Value>{RandomF64(s, rng, -2, 2), RandomF64(s, rng, 0, 1)};
  });
}

template <typename L>
Value RandomLabels(int64_t n, int64_t classes, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> u(0, classes - 1);
  std::vector<L> v(n);
  for (L& x : v) x = static_cast<L>(u(rng));
  return Value(Tensor::FromVector<L>({n}, v));
}

// The integer labels get no gradient; the logits do. (The labels are constants of
// the checked graph: tools/grad_check differentiates every parameter.)
TEST(NnGradTest, SparseSoftmaxCrossEntropy) {
  for (const auto& size : std::vector<std::pair<int64_t, int64_t>>{{4, 5}, {1, 3}, {6, 2}}) {
    // (Named copies: C++17 lambdas cannot capture structured bindings.)
    const int64_t n = size.first, classes = size.second;
    SCOPED_TRACE(::testing::Message() << n << "x" << classes);
    ExpectGradientsAtSeeds(PrimId::kSparseSoftmaxCrossEntropy,
                           [&](std::mt19937_64& rng) {
                             return std::vector<Value>{RandomF64({n, classes}, rng, -2, 2),
                                                       RandomLabels<int64_t>(n, classes, rng)};
                           },
                           {});
    ExpectGradientsAtSeeds(PrimId::kSparseSoftmaxCrossEntropy,
                           [&](std::mt19937_64& rng) {
                             return std::vector<Value>{RandomF64({n, classes}, rng, -2, 2),
                                                       RandomLabels<int32_t>(n, classes, rng)};
                           },
                           {});
  }
}

// d loss / d logits = softmax(logits) - one_hot(label), checked by value.
TEST(NnGradTest, SparseSoftmaxCrossEntropyGradientValues) {
  Module m(DefaultRegistry());
  Value logits(Tensor::FromVector<double>({2, 3}, {0.0, 1.0, 2.0, 0.5, 0.5, 0.5}));
  Value labels(Tensor::FromVector<int64_t>({2}, {2, 0}));
  absl::StatusOr<FuncGraph*> f =
      testing::BuildPrimitiveGraph(m, PrimId::kSparseSoftmaxCrossEntropy, {logits, labels});
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<FuncGraph*> g = GradOperation()(m, *f);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Value> r = RunGraph(*g, {logits, labels});
  ASSERT_TRUE(r.ok()) << r.status();
  const Tensor& d = r->tensor();
  double z = std::exp(0.0) + std::exp(1.0) + std::exp(2.0);
  std::vector<double> want = {1 / z,       std::exp(1.0) / z, std::exp(2.0) / z - 1,
                              1.0 / 3 - 1, 1.0 / 3,           1.0 / 3};
  ASSERT_EQ(d.NumElements(), 6);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(d.ElementAsDouble(i), want[i], 1e-12) << i;
}

// The rule needs the number of classes for one_hot: unknown is a transform-time
// error naming the primitive and node.
TEST(NnGradTest, SparseSoftmaxCrossEntropyUnknownClassesIsAnError) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "loss");
  AnfNode* x = b.Param("x", MakeAbstractTensor(DType::kFloat64, {kUnknownDim, kUnknownDim}));
  AnfNode* y = b.Param("y", MakeAbstractTensor(DType::kInt64, {kUnknownDim}));
  CNode* l = b.Op(PrimId::kSparseSoftmaxCrossEntropy, {x, y});
  l->set_name("xent");
  ExpectGradError(
      m, b.Return(b.Op(PrimId::kReduceSum, {l})),
      {"cannot differentiate sparse_softmax_cross_entropy", "node 'xent'", "number of classes"});
}

// ----- normalisation ---------------------------------------------------------------------
// Scale away from 0 keeps the second-order terms well scaled; epsilon is the
// default 1e-5 and the batch variance of uniform inputs is ~1/3, far above it.
TEST(NnGradTest, BatchNorm) {
  struct Case {
    Shape x;
    int64_t axis;
  };
  for (const Case& c : std::vector<Case>{
           {{4, 3}, 1}, {{2, 3, 4}, 1}, {{3, 2, 2}, -1}, {{3, 2}, 0}, {{2, 2, 2, 2}, 1}}) {
    SCOPED_TRACE(::testing::Message() << ShapeToString(c.x) << " axis " << c.axis);
    int64_t channels = c.x[c.axis < 0 ? c.axis + c.x.size() : c.axis];
    ExpectGradientsAtSeeds(PrimId::kBatchNorm,
                           [&](std::mt19937_64& rng) {
                             return std::vector<Value>{RandomF64(c.x, rng),
                                                       RandomF64({channels}, rng, 0.5, 1.5),
                                                       RandomF64({channels}, rng)};
                           },
                           {{"axis", c.axis}});
  }
}

TEST(NnGradTest, BatchNormWithLargeEpsilon) {
  ExpectGradientsAtSeeds(PrimId::kBatchNorm, Uniform({{3, 2, 2}, {2}, {2}}),
                         {{"axis", int64_t{1}}, {"epsilon", 0.5}});
}

TEST(NnGradTest, LayerNorm) {
  struct Case {
    Shape x;
    int64_t begin;
  };
  for (const Case& c :
       std::vector<Case>{{{3, 4}, -1}, {{2, 3, 4}, 1}, {{2, 3}, 0}, {{2, 2, 3}, -2}, {{5}, 0}}) {
    SCOPED_TRACE(::testing::Message() << ShapeToString(c.x) << " begin_norm_axis " << c.begin);
    int begin = static_cast<int>(c.begin < 0 ? c.begin + c.x.size() : c.begin);
    Shape normalized(c.x.begin() + begin, c.x.end());
    ExpectGradientsAtSeeds(PrimId::kLayerNorm,
                           [&](std::mt19937_64& rng) {
                             return std::vector<Value>{RandomF64(c.x, rng),
                                                       RandomF64(normalized, rng, 0.5, 1.5),
                                                       RandomF64(normalized, rng)};
                           },
                           {{"begin_norm_axis", c.begin}});
  }
}

TEST(NnGradTest, LayerNormWithLargeEpsilon) {
  ExpectGradientsAtSeeds(PrimId::kLayerNorm, Uniform({{2, 4}, {4}, {4}}),
                         {{"begin_norm_axis", int64_t{-1}}, {"epsilon", 0.25}});
}

// The norms' gradients as primitives of their own (what the rules above emit):
// their rules, derived by hand, against central differences to second order.
TEST(NnGradTest, BatchNormGrad) {
  for (Shape x : {Shape{4, 3}, Shape{2, 3, 2}, Shape{2, 2, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << ShapeToString(x));
    ExpectGradientsAtSeeds(PrimId::kBatchNormGrad,
                           [&](std::mt19937_64& rng) {
                             return std::vector<Value>{RandomF64(x, rng), RandomF64({x[1]}, rng, 0.5, 1.5),
                                                       RandomF64(x, rng)};
                           },
                           {{"axis", int64_t{1}}, {"epsilon", 0.1}});
  }
}

TEST(NnGradTest, LayerNormGrad) {
  for (int64_t begin : {-1, 1, 0}) {
    SCOPED_TRACE(::testing::Message() << "begin_norm_axis " << begin);
    const Shape x = {2, 3, 4};
    const int b = static_cast<int>(begin < 0 ? begin + 3 : begin);
    Shape normalized(x.begin() + b, x.end());
    ExpectGradientsAtSeeds(PrimId::kLayerNormGrad,
                           [&](std::mt19937_64& rng) {
                             return std::vector<Value>{RandomF64(x, rng), RandomF64(normalized, rng, 0.5, 1.5),
                                                       RandomF64(x, rng)};
                           },
                           {{"begin_norm_axis", begin}, {"epsilon", 0.1}});
  }
}

// ----- unknown dims ------------------------------------------------------------------------
// The rules need only ranks (and, for the sparse loss, the class count): with
// every dim unknown they still build, and the result is checked to second order.
::testing::AssertionResult UnknownDimsGradientsOk(PrimId id, const std::vector<Value>& args,
                                                  const AttrMap& attrs, uint64_t seed) {
  OpGraphOptions unknown;
  for (const Value& a : args) unknown.declared.push_back(Shape(a.tensor().rank(), kU));
  return OpGradientOk(id, args, attrs, unknown, Order(2, seed));
}

TEST(NnGradTest, UnknownDims) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    Value x = RandomF64({3, 2, 2}, rng);
    Value labels = RandomF64({3, 2, 2}, rng, 0, 1);
    EXPECT_TRUE(UnknownDimsGradientsOk(PrimId::kSoftmax, {x}, {{"axis", int64_t{1}}}, seed));
    EXPECT_TRUE(UnknownDimsGradientsOk(PrimId::kLogSoftmax, {x}, {{"axis", int64_t{-1}}}, seed));
    EXPECT_TRUE(UnknownDimsGradientsOk(PrimId::kSoftmaxCrossEntropy, {x, labels},
                                       {{"axis", int64_t{1}}}, seed));
    Value scale = RandomF64({2}, rng, 0.5, 1.5), bias = RandomF64({2}, rng);
    EXPECT_TRUE(
        UnknownDimsGradientsOk(PrimId::kBatchNorm, {x, scale, bias}, {{"axis", int64_t{1}}}, seed));
    EXPECT_TRUE(UnknownDimsGradientsOk(PrimId::kLayerNorm, {x, scale, bias},
                                       {{"begin_norm_axis", int64_t{-1}}}, seed));
    EXPECT_TRUE(UnknownDimsGradientsOk(PrimId::kDropout, {x}, {{"rate", 0.5}}, seed));
  }
}

// ----- composition -------------------------------------------------------------------------
// A layer: mean(softmax_cross_entropy(layer_norm(x @ w) , labels)), second order
// in x and w (the Hessian-vector products of a training loss).
TEST(NnGradTest, LayerOfMatMulLayerNormAndCrossEntropy) {
  for (uint64_t seed : kSeeds) {
    std::mt19937_64 rng(seed);
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "loss");
    AnfNode* x = b.Param("x", DType::kFloat64, {4, 3});
    AnfNode* w = b.Param("w", DType::kFloat64, {3, 5});
    AnfNode* scale = b.Const(RandomF64({5}, rng, 0.5, 1.5));
    AnfNode* bias = b.Const(RandomF64({5}, rng));
    AnfNode* labels = b.Const(RandomF64({4, 5}, rng, 0, 1));
    AnfNode* h = b.Op(PrimId::kLayerNorm, {b.Op(PrimId::kMatMul, {x, w}), scale, bias});
    AnfNode* l = b.Op(PrimId::kSoftmaxCrossEntropy, {h, labels});
    absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kReduceMean, {l}));
    ASSERT_TRUE(f.ok()) << f.status();
    absl::StatusOr<GradCheckReport> r =
        CheckGradients(m, *f, {RandomF64({4, 3}, rng), RandomF64({3, 5}, rng)}, Order(2, seed));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->passed()) << r->ToString();
  }
}

// ----- dropout ---------------------------------------------------------------------------
TEST(NnGradTest, Dropout) {
  for (double rate : {0.0, 0.3, 0.5}) {
    for (int64_t seed : {0, 7}) {
      SCOPED_TRACE(::testing::Message() << "rate " << rate << " seed " << seed);
      ExpectGradientsAtSeeds(PrimId::kDropout, Uniform({{3, 4}}), {{"rate", rate}, {"seed", seed}},
                             /*curved=*/false);
    }
  }
}

// dynamic_dropout in x and in the rate (drawn in [0.1, 0.6): a finite-difference
// step in the rate flips no element of the mask but for a draw within the step).
TEST(NnGradTest, DynamicDropout) {
  for (int64_t seed : {0, 7}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    ExpectGradientsAtSeeds(
        PrimId::kDynamicDropout,
        [](std::mt19937_64& rng) {
          return std::vector<Value>{RandomF64({3, 4}, rng), RandomF64({}, rng, 0.1, 0.6)};
        },
        {{"seed", seed}});
  }
}

// The gradient of sum(dropout(x)) is the mask itself: 0 where dropped, 1/(1-rate)
// where kept, and it matches where the forward kept x.
TEST(NnGradTest, DropoutGradientIsTheForwardMask) {
  Module m(DefaultRegistry());
  AttrMap attrs = {{"rate", 0.25}, {"seed", int64_t{11}}};
  std::vector<double> ones(64, 1.0);
  Value x(Tensor::FromVector<double>({64}, ones));
  absl::StatusOr<FuncGraph*> f = testing::BuildPrimitiveGraph(m, PrimId::kDropout, {x}, attrs);
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<Value> y = RunGraph(*f, {x});
  ASSERT_TRUE(y.ok()) << y.status();
  absl::StatusOr<FuncGraph*> g = GradOperation()(m, *f);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Value> d = RunGraph(*g, {x});
  ASSERT_TRUE(d.ok()) << d.status();
  int kept = 0;
  for (int64_t i = 0; i < 64; ++i) {
    double yi = y->tensor().ElementAsDouble(i), di = d->tensor().ElementAsDouble(i);
    EXPECT_DOUBLE_EQ(di, yi) << i;  // x = 1: y is the mask too
    EXPECT_TRUE(di == 0.0 || std::abs(di - 1 / 0.75) < 1e-15) << i << ": " << di;
    kept += di != 0.0;
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 64);
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
