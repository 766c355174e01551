// Gradient rules of the elementwise family (ops/elementwise.cc), checked in
// float64 against central finite differences (tools/grad_check.h) to the second
// order (third for a selection), at several random points per primitive.
//
// A second-order check of P alone is vacuous where P'' vanishes (neg, add, sub,
// select, relu, abs, maximum, minimum: linear or piecewise linear), so every
// primitive is also checked through f(x...) = P(x...)^3, whose Hessian (and third
// derivative) does not vanish, not even for sqrt; those checks assert that the
// derivatives they compare at the last order are not all zero.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/shape.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/grad_test_util.h"
#include "tests/testing/op_test_util.h"
#include "tools/grad_check.h"

namespace kgrad {
namespace testing {
namespace {

// P at `args`: P alone to the second order, and P^3 to the second order with
// non-vacuous second derivatives.
void CheckOp(PrimId id, const std::vector<Value>& args, const AttrMap& attrs, uint64_t seed) {
  ExpectOpGradients(id, args, attrs, seed, {/*power=*/3});
}

// ----- Unary ---------------------------------------------------------------------------
struct UnaryCase {
  const char* name;
  PrimId id;
  AttrMap attrs;
  double lo, hi;               // the domain sampled
  std::vector<double> avoid;  // kinks and poles, kept at least 0.05 away
};

void PrintTo(const UnaryCase& k, std::ostream* os) { *os << k.name; }

std::vector<UnaryCase> UnaryCases() {
  return {
      {"neg", PrimId::kNeg, {}, -1, 1, {}},
      {"exp", PrimId::kExp, {}, -2, 2, {}},
      {"log", PrimId::kLog, {}, 0.2, 3, {}},
      {"log1p", PrimId::kLog1p, {}, -0.8, 3, {}},
      {"expm1", PrimId::kExpm1, {}, -2, 2, {}},
      {"sin", PrimId::kSin, {}, -3, 3, {}},
      {"cos", PrimId::kCos, {}, -3, 3, {}},
      {"tanh", PrimId::kTanh, {}, -2, 2, {}},
      {"sigmoid", PrimId::kSigmoid, {}, -4, 4, {}},
      {"relu", PrimId::kRelu, {}, -2, 2, {0.0}},
      {"gelu", PrimId::kGelu, {{"approximate", false}}, -3, 3, {}},
      {"gelu_tanh", PrimId::kGelu, {{"approximate", true}}, -3, 3, {}},
      {"softplus", PrimId::kSoftplus, {}, -4, 4, {}},
      {"sqrt", PrimId::kSqrt, {}, 0.2, 3, {}},
      {"rsqrt", PrimId::kRsqrt, {}, 0.2, 3, {}},
      {"abs", PrimId::kAbs, {}, -2, 2, {0.0}},
      {"square", PrimId::kSquare, {}, -2, 2, {}},
      {"reciprocal", PrimId::kReciprocal, {}, -2, 2, {0.0}},
      {"erf", PrimId::kErf, {}, -2, 2, {}},
      {"asin", PrimId::kAsin, {}, -0.8, 0.8, {}},
      {"acos", PrimId::kAcos, {}, -0.8, 0.8, {}},
      {"atan", PrimId::kAtan, {}, -2, 2, {}},
      {"sinh", PrimId::kSinh, {}, -2, 2, {}},
      {"cosh", PrimId::kCosh, {}, -2, 2, {}},
      {"asinh", PrimId::kAsinh, {}, -2, 2, {}},
      {"acosh", PrimId::kAcosh, {}, 1.2, 3, {}},
      {"atanh", PrimId::kAtanh, {}, -0.8, 0.8, {}},
      {"thresholded_relu", PrimId::kThresholdedRelu, {{"alpha", 0.5}}, -1, 3, {0.5}},
      {"thresholded_relu_negative_alpha", PrimId::kThresholdedRelu, {{"alpha", -1.0}}, -2, 2,
       {-1.0}},
  };
}

// One shape per seed: a matrix, a vector, a rank-0 tensor.
Shape UnaryShape(uint64_t seed) {
  switch (seed % 3) {
    case 1: return {2, 3};
    case 2: return {5};
    default: return {};
  }
}

Value UnaryArg(const UnaryCase& k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Shape shape = UnaryShape(seed);
  // reciprocal keeps away from its pole by more than the others from their kinks.
  double gap = k.id == PrimId::kReciprocal ? 0.3 : 0.05;
  return RandomF64Away(shape, rng, k.lo, k.hi, k.avoid, gap);
}

class UnaryGradTest : public ::testing::TestWithParam<UnaryCase> {};

TEST_P(UnaryGradTest, FirstAndSecondOrder) {
  const UnaryCase& k = GetParam();
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(absl::StrCat(k.name, " seed ", seed));
    CheckOp(k.id, {UnaryArg(k, seed)}, k.attrs, seed);
  }
}

TEST_P(UnaryGradTest, ThirdOrder) {
  const UnaryCase& k = GetParam();
  uint64_t seed = 11;
  std::mt19937_64 rng(seed);
  Value x = RandomF64Away({4}, rng, k.lo, k.hi, k.avoid, k.id == PrimId::kReciprocal ? 0.3 : 0.05);
  EXPECT_TRUE(OpGradientOk(k.id, {x}, k.attrs, {/*power=*/3}, Order(3, seed)));
}

// The rules build their constants in the input's dtype: in float32 they type-check
// and agree with float64 to float32 precision.
TEST_P(UnaryGradTest, Float32) {
  const UnaryCase& k = GetParam();
  Value x = UnaryArg(k, 1);
  std::vector<std::vector<double>> g64 = Gradients(k.id, {x}, k.attrs);
  Value x32(MakeTensor(DType::kFloat32, x.tensor().shape(), ToDoubles(x.tensor())));
  std::vector<std::vector<double>> g32 = Gradients(k.id, {x32}, k.attrs);
  ASSERT_EQ(g64.size(), 1u);
  ASSERT_EQ(g32.size(), 1u);
  ASSERT_EQ(g32[0].size(), g64[0].size());
  for (size_t i = 0; i < g64[0].size(); ++i) {
    EXPECT_NEAR(g32[0][i], g64[0][i], 1e-5 * (1 + std::abs(g64[0][i]))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Elementwise, UnaryGradTest, ::testing::ValuesIn(UnaryCases()),
                         [](const ::testing::TestParamInfo<UnaryCase>& info) {
                           return std::string(info.param.name);
                         });

// ----- Binary ----------------------------------------------------------------------------
// Shape pairs that exercise broadcasting both ways, a rank-0 operand and a rank
// difference; one pair per point.
struct ShapePair {
  Shape x, z;
};
const ShapePair kPairs[] = {
    {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{3, 1}, {1, 4}}, {{}, {2, 2}}, {{2, 1, 3}, {2, 1}},
};

using BinaryArgs = std::function<std::vector<Value>(const ShapePair&, std::mt19937_64&)>;

void CheckBinary(PrimId id, const BinaryArgs& make) {
  uint64_t seed = 1;
  for (const ShapePair& p : kPairs) {
    SCOPED_TRACE(absl::StrCat(PrimIdName(id), " ", ShapeToString(p.x), " with ",
                              ShapeToString(p.z), " seed ", seed));
    std::mt19937_64 rng(seed);
    CheckOp(id, make(p, rng), {}, seed);
    ++seed;
  }
}

std::vector<Value> Uniform(const ShapePair& p, std::mt19937_64& rng) {
  Value x = RandomF64(p.x, rng);
  return {x, RandomF64(p.z, rng)};
}

// z at least 0.02 away from every element of x: no ties, and no kink within the
// finite-difference step. Drawn again until each input is the larger somewhere,
// so that both receive a gradient.
std::vector<Value> Separated(const ShapePair& p, std::mt19937_64& rng) {
  for (;;) {
    Value x = RandomF64(p.x, rng);
    Value z = RandomF64Away(p.z, rng, -1, 1, ToDoubles(x.tensor()), 0.02);
    absl::StatusOr<Value> wins = RunCpuKernel(PrimId::kGreater, {x, z});
    EXPECT_TRUE(wins.ok()) << wins.status();
    if (!wins.ok()) return {x, z};
    std::vector<double> w = ToDoubles(wins->tensor());
    bool some_x = std::count(w.begin(), w.end(), 1.0) > 0;
    bool some_z = std::count(w.begin(), w.end(), 0.0) > 0;
    if (some_x && some_z) return {x, z};
  }
}

TEST(ElementwiseGradTest, Add) { CheckBinary(PrimId::kAdd, Uniform); }
TEST(ElementwiseGradTest, Sub) { CheckBinary(PrimId::kSub, Uniform); }
TEST(ElementwiseGradTest, Mul) { CheckBinary(PrimId::kMul, Uniform); }
// The fused backward maps of tanh and sigmoid, with broadcasting.
TEST(ElementwiseGradTest, TanhGrad) { CheckBinary(PrimId::kTanhGrad, Uniform); }
TEST(ElementwiseGradTest, SigmoidGrad) { CheckBinary(PrimId::kSigmoidGrad, Uniform); }
TEST(ElementwiseGradTest, SinGrad) { CheckBinary(PrimId::kSinGrad, Uniform); }
TEST(ElementwiseGradTest, CosGrad) { CheckBinary(PrimId::kCosGrad, Uniform); }
// relu_grad(x, d): x kept 0.05 away from the kink, so only d receives a gradient.
// x's derivatives are zero, so the cubed graph's second order is asserted for d.
TEST(ElementwiseGradTest, ReluGrad) {
  uint64_t seed = 1;
  for (const ShapePair& p : kPairs) {
    SCOPED_TRACE(absl::StrCat("relu_grad ", ShapeToString(p.x), " with ", ShapeToString(p.z)));
    std::mt19937_64 rng(seed);
    Value x = RandomF64Away(p.x, rng, -1, 1, {0.0}, 0.05);
    ExpectOpGradients(PrimId::kReluGrad, {x, RandomF64(p.z, rng)}, {}, seed, {/*power=*/3}, "x1");
    ++seed;
  }
}

TEST(ElementwiseGradTest, Div) {
  CheckBinary(PrimId::kDiv, [](const ShapePair& p, std::mt19937_64& rng) {
    Value x = RandomF64(p.x, rng);
    return std::vector<Value>{x, RandomF64Away(p.z, rng, -2, 2, {0.0}, 0.4)};
  });
}

// Both inputs differentiated: the base stays positive (ln x in dz).
TEST(ElementwiseGradTest, Pow) {
  CheckBinary(PrimId::kPow, [](const ShapePair& p, std::mt19937_64& rng) {
    Value x = RandomF64(p.x, rng, 0.3, 2.0);
    return std::vector<Value>{x, RandomF64(p.z, rng, -2.0, 2.0)};
  });
}

TEST(ElementwiseGradTest, Maximum) { CheckBinary(PrimId::kMaximum, Separated); }
TEST(ElementwiseGradTest, Minimum) { CheckBinary(PrimId::kMinimum, Separated); }

// mod is piecewise linear in (x, z): the points keep x / z at least 0.1 from an
// integer (its jumps) and |z| >= 0.4, so that no finite-difference step crosses
// a jump; and some |x / z| > 1, else trunc(x / z) = 0 and dz vanishes.
std::vector<Value> AwayFromJumps(const ShapePair& p, std::mt19937_64& rng) {
  for (;;) {
    Value x = RandomF64(p.x, rng, -5, 5);
    Value z = RandomF64Away(p.z, rng, -2, 2, {0.0}, 0.4);
    absl::StatusOr<Value> q = RunCpuKernel(PrimId::kDiv, {x, z});
    EXPECT_TRUE(q.ok()) << q.status();
    if (!q.ok()) return {x, z};
    std::vector<double> v = ToDoubles(q->tensor());
    const bool off_jumps = std::all_of(v.begin(), v.end(), [](double r) {
      double f = r - std::floor(r);
      return f > 0.1 && f < 0.9;
    });
    if (off_jumps && std::any_of(v.begin(), v.end(), [](double r) { return std::abs(r) > 1; })) {
      return {x, z};
    }
  }
}

TEST(ElementwiseGradTest, Mod) {
  for (bool fmod : {false, true}) {
    uint64_t seed = 1;
    for (const ShapePair& p : kPairs) {
      SCOPED_TRACE(absl::StrCat("mod fmod=", fmod, " ", ShapeToString(p.x), " with ",
                                ShapeToString(p.z), " seed ", seed));
      std::mt19937_64 rng(seed);
      CheckOp(PrimId::kMod, AwayFromJumps(p, rng), {{"fmod", fmod}}, seed);
      ++seed;
    }
  }
}

// d/dx = 1, d/dz = -floor(x / z) (fmod: -trunc(x / z)), by hand.
TEST(ElementwiseGradTest, ModByHand) {
  Value x = F64({3}, {7.5, -7.5, 7.5});
  Value z = F64({3}, {2.0, 2.0, -2.0});
  auto g = Gradients(PrimId::kMod, {x, z});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_THAT(g[0], ::testing::ElementsAre(1.0, 1.0, 1.0));
  EXPECT_THAT(g[1], ::testing::ElementsAre(-3.0, 4.0, 4.0));
  g = Gradients(PrimId::kMod, {x, z}, {{"fmod", true}});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_THAT(g[0], ::testing::ElementsAre(1.0, 1.0, 1.0));
  EXPECT_THAT(g[1], ::testing::ElementsAre(-3.0, 3.0, 3.0));
}

// floor, ceil and round are piecewise constant: zero gradients, no rule.
TEST(ElementwiseGradTest, RoundingHasZeroGradient) {
  for (PrimId id : {PrimId::kFloor, PrimId::kCeil, PrimId::kRound}) {
    SCOPED_TRACE(PrimIdName(id));
    auto g = Gradients(id, {F64({3}, {-1.3, 0.2, 2.7})});
    ASSERT_EQ(g.size(), 1u);
    EXPECT_THAT(g[0], ::testing::ElementsAre(0.0, 0.0, 0.0));
  }
}

TEST(ElementwiseGradTest, Select) {
  struct Triple {
    Shape cond, a, b;
  };
  const Triple triples[] = {
      {{2, 3}, {2, 3}, {2, 3}}, {{2, 3}, {3}, {2, 1}}, {{3}, {2, 3}, {}}, {{2, 1}, {1, 3}, {3}}};
  uint64_t seed = 1;
  for (const Triple& t : triples) {
    SCOPED_TRACE(absl::StrCat("select ", ShapeToString(t.cond), " seed ", seed));
    std::mt19937_64 rng(seed);
    Tensor cond = Tensor::Create(DType::kBool, t.cond).value();
    std::bernoulli_distribution coin(0.5);
    for (int64_t i = 0; i < cond.NumElements(); ++i) cond.mutable_data<uint8_t>()[i] = coin(rng);
    Value a = RandomF64(t.a, rng);
    CheckOp(PrimId::kSelect, {Value(cond), a, RandomF64(t.b, rng)}, {}, seed);
    ++seed;
  }
}

// Third order of the binary rules (their rules' rules' rules), broadcasting.
TEST(ElementwiseGradTest, BinaryThirdOrder) {
  const PrimId ids[] = {PrimId::kAdd, PrimId::kSub,      PrimId::kMul,
                        PrimId::kDiv, PrimId::kPow,      PrimId::kTanhGrad,
                        PrimId::kSigmoidGrad, PrimId::kSinGrad, PrimId::kCosGrad};
  for (PrimId id : ids) {
    SCOPED_TRACE(PrimIdName(id));
    std::mt19937_64 rng(5);
    std::vector<Value> args = {RandomF64({2, 3}, rng, 0.5, 1.5), RandomF64({3}, rng, 0.5, 1.5)};
    EXPECT_TRUE(OpGradientOk(id, args, {}, {/*power=*/3}, Order(3, 5), /*nonvacuous=*/true));
  }
}

// Binary rules in float32 (broadcasting): they type-check and agree with float64.
TEST(ElementwiseGradTest, BinaryFloat32) {
  const PrimId ids[] = {PrimId::kAdd,     PrimId::kSub,     PrimId::kMul,      PrimId::kDiv,
                        PrimId::kPow,     PrimId::kMaximum, PrimId::kMinimum,  PrimId::kTanhGrad,
                        PrimId::kSigmoidGrad, PrimId::kSinGrad, PrimId::kCosGrad};
  for (PrimId id : ids) {
    SCOPED_TRACE(PrimIdName(id));
    std::mt19937_64 rng(3);
    std::vector<Value> args = Separated({{2, 3}, {3}}, rng);
    if (id == PrimId::kPow) args[0] = RandomF64({2, 3}, rng, 0.3, 2.0);
    if (id == PrimId::kDiv) args[1] = RandomF64Away({3}, rng, -2, 2, {0.0}, 0.4);
    std::vector<Value> args32;
    for (const Value& v : args) {
      args32.push_back(MakeTensor(DType::kFloat32, v.tensor().shape(), ToDoubles(v.tensor())));
    }
    std::vector<std::vector<double>> g64 = Gradients(id, args);
    std::vector<std::vector<double>> g32 = Gradients(id, args32);
    ASSERT_EQ(g64.size(), 2u);
    ASSERT_EQ(g32.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      ASSERT_EQ(g32[k].size(), g64[k].size());
      for (size_t i = 0; i < g64[k].size(); ++i) {
        EXPECT_NEAR(g32[k][i], g64[k][i], 1e-5 * (1 + std::abs(g64[k][i]))) << k << " " << i;
      }
    }
  }
}

// ----- Unknown dims ----------------------------------------------------------------------------
// Parameters declared with unknown dims: SumToInput falls back to sum_to_like.
TEST(ElementwiseGradTest, BroadcastingWithUnknownDims) {
  const PrimId ids[] = {PrimId::kAdd, PrimId::kSub, PrimId::kMul, PrimId::kDiv, PrimId::kMaximum};
  for (PrimId id : ids) {
    for (uint64_t seed : kSeeds) {
      SCOPED_TRACE(absl::StrCat(PrimIdName(id), " seed ", seed));
      std::mt19937_64 rng(seed);
      std::vector<Value> args = Separated({{3, 1}, {4}}, rng);
      if (id == PrimId::kDiv) args[1] = RandomF64Away({4}, rng, -2, 2, {0.0}, 0.4);
      EXPECT_TRUE(OpGradientOk(id, args, {}, {/*power=*/3, 0, {{kU, 1}, {kU}}}, Order(2, seed),
                               /*nonvacuous=*/true));
    }
  }
}

// ----- Values at kinks and ties ----------------------------------------------------------------
// The gradients of P(args...) are exactly `want`, one list per input.
void ExpectGradients(PrimId id, const std::vector<Value>& args,
                     const std::vector<std::vector<double>>& want) {
  SCOPED_TRACE(PrimIdName(id));
  std::vector<std::vector<double>> g = Gradients(id, args);
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_THAT(g[i], ::testing::ElementsAreArray(want[i])) << "input " << i;
  }
}

TEST(ElementwiseGradTest, ReluAndAbsHaveZeroSlopeAtZero) {
  Value x = F64({3}, {-1.0, 0.0, 2.0});
  ExpectGradients(PrimId::kRelu, {x}, {{0.0, 0.0, 1.0}});
  ExpectGradients(PrimId::kAbs, {x}, {{-1.0, 0.0, 1.0}});
  // relu_grad passes d where x > 0 only; nothing flows back to x.
  Value d = F64({3}, {5.0, 6.0, 7.0});
  ExpectGradients(PrimId::kReluGrad, {x, d}, {{0.0, 0.0, 0.0}, {0.0, 0.0, 1.0}});
}

// A tie sends the whole gradient to z, the input the kernels return on a tie.
TEST(ElementwiseGradTest, MaximumAndMinimumSendTiesToTheSecondInput) {
  Value x = F64({3}, {1.0, 2.0, 3.0});
  Value z = F64({3}, {2.0, 2.0, 2.0});
  ExpectGradients(PrimId::kMaximum, {x, z}, {{0.0, 0.0, 1.0}, {1.0, 1.0, 0.0}});
  ExpectGradients(PrimId::kMinimum, {x, z}, {{1.0, 0.0, 0.0}, {0.0, 1.0, 1.0}});
}

// Broadcast z: its gradient sums the contributions of every position it wins.
TEST(ElementwiseGradTest, MaximumSumsBackToABroadcastInput) {
  Value x = F64({2, 2}, {1.0, 5.0, 4.0, -1.0});
  Value z = F64({2}, {3.0, 0.0});
  ExpectGradients(PrimId::kMaximum, {x, z}, {{0.0, 1.0, 1.0, 0.0}, {1.0, 1.0}});
}

// x^0 is constant (dx = 0, also at x = 0); d/dz 0^z = 0 for z > 0 (the limit of
// y ln x); elsewhere the plain formulas.
TEST(ElementwiseGradTest, PowAtZero) {
  Value x = F64({3}, {0.0, 0.0, 2.0});
  Value z = F64({3}, {0.0, 2.0, 3.0});
  auto g = Gradients(PrimId::kPow, {x, z});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_THAT(g[0], ::testing::ElementsAre(0.0, 0.0, 12.0));
  ASSERT_EQ(g[1].size(), 3u);
  EXPECT_EQ(g[1][0], 0.0);  // 0^0 = 1: y ln x with ln 0 replaced by 0
  EXPECT_EQ(g[1][1], 0.0);
  EXPECT_NEAR(g[1][2], 8.0 * std::log(2.0), 1e-12);
}

TEST(ElementwiseGradTest, SelectGivesTheConditionNothing) {
  Tensor cond = Tensor::Create(DType::kBool, {3}).value();
  cond.mutable_data<uint8_t>()[0] = 1;
  cond.mutable_data<uint8_t>()[1] = 0;
  cond.mutable_data<uint8_t>()[2] = 1;
  Value a = F64({3}, {1.0, 2.0, 3.0});
  Value b = F64({}, {7.0});
  ExpectGradients(PrimId::kSelect, {Value(cond), a, b}, {{1.0, 0.0, 1.0}, {1.0}});
}

// sign, comparisons and logical ops need no rule: a graph through them gives
// its input a zero gradient.
TEST(ElementwiseGradTest, ZeroGradientPrimitives) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  AnfNode* zero = b.Const(F64({}, {0.0}));
  AnfNode* pos = b.Op(PrimId::kGreater, {x, zero});
  AnfNode* mask = b.Op(PrimId::kLogicalOr, {b.Op(PrimId::kLogicalNot, {pos}),
                                            b.Op(PrimId::kEqual, {x, zero})});
  AnfNode* y = b.Op(PrimId::kSelect, {mask, b.Op(PrimId::kSign, {x}), x});
  absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kReduceSum, {y}));
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<FuncGraph*> g = GradOperation()(m, *f);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Value> r = RunGraph(*g, {F64({3}, {-2.0, 0.5, 3.0})});
  ASSERT_TRUE(r.ok()) << r.status();
  // sign(x) where x <= 0 (no gradient), x itself elsewhere.
  EXPECT_THAT(ToDoubles(r->tensor()), ::testing::ElementsAre(0.0, 1.0, 1.0));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
