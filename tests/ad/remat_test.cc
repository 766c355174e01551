// Rematerialisation (ad/remat.h): gradients under each policy equal those
// without (bit for bit: the recomputation runs the same kernels on the same
// values), pass the float64 finite-difference check to the second order, and the
// optimised gradient graph recomputes what the policy does not save.
#include "ad/remat.h"

#include <random>
#include <string>
#include <vector>

#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/passes/optimize.h"
#include "core/printer.h"
#include "core/status_macros.h"
#include "examples/programs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/grad_test_util.h"
#include "tests/testing/graph_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr RematPolicy kPolicies[] = {RematPolicy::kEverythingSaveable,
                                     RematPolicy::kNothingSaveable, RematPolicy::kDotsSaveable};

// block(x, k1, k2) = relu(conv(relu(conv(x, k1)), k2) + x), 3x3 "same" convolutions;
// f(x, k...) = sum(square(block_n(...block_1(x)...))).
FuncGraph* ConvNet(Module* m, int blocks, int channels, int size) {
  AttrMap same{{"padding", std::vector<int64_t>{1, 1}}};
  GraphBuilder bb(m, "block");
  AnfNode* x = bb.Param("x", DType::kFloat64, {1, channels, size, size});
  AnfNode* k1 = bb.Param("k1", DType::kFloat64, {channels, channels, 3, 3});
  AnfNode* k2 = bb.Param("k2", DType::kFloat64, {channels, channels, 3, 3});
  AnfNode* h = bb.Op(PrimId::kRelu, {bb.Op(PrimId::kConv2d, {x, k1}, same)});
  h = bb.Op(PrimId::kAdd, {bb.Op(PrimId::kConv2d, {h, k2}, same), x});
  FuncGraph* block = bb.Return(bb.Op(PrimId::kRelu, {h})).value();
  GraphBuilder b(m, "net");
  AnfNode* y = b.Param("x", DType::kFloat64, {1, channels, size, size});
  for (int i = 0; i < blocks; ++i) {
    AnfNode* a = b.Param(absl::StrCat("k", 2 * i), DType::kFloat64, {channels, channels, 3, 3});
    AnfNode* c = b.Param(absl::StrCat("k", 2 * i + 1), DType::kFloat64, {channels, channels, 3, 3});
    y = b.Call(block, {y, a, c});
  }
  return b.Return(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kSquare, {y})})).value();
}

std::vector<Value> RandomArgs(FuncGraph* f, uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::vector<Value> args;
  for (Parameter* p : f->parameters()) {
    args.push_back(RandomF64(AsTensor(p->declared())->shape(), rng, -scale, scale));
  }
  return args;
}

using Builder = FuncGraph* (*)(Module*);
FuncGraph* SmallMlp(Module* m) { return programs::LayeredTanhMlp(m, 3, 2, 4, DType::kFloat64); }
FuncGraph* SmallConvNet(Module* m) { return ConvNet(m, 2, 2, 5); }

// The gradient graph of `build`'s program with every called graph under `policy`,
// optimised when `optimize`.
struct GradProgram {
  Module m{DefaultRegistry()};
  FuncGraph* f = nullptr;
  FuncGraph* grad = nullptr;
};
void BuildGrad(Builder build, RematPolicy policy, bool optimize, GradProgram* p) {
  p->f = build(&p->m);
  ASSERT_TRUE(SetRematPolicy(p->m, p->f, policy).ok());
  absl::StatusOr<FuncGraph*> g = GradOperation(/*get_all=*/true)(p->m, p->f);
  ASSERT_TRUE(g.ok()) << g.status();
  p->grad = *g;
  if (optimize) {
    absl::StatusOr<std::string> o = Optimize(p->m, p->grad);
    ASSERT_TRUE(o.ok()) << o.status();
  }
}

// Every gradient element, flattened.
std::vector<double> Flat(const Value& grads) {
  std::vector<double> out;
  for (const Value& g : grads.tuple()) {
    const Tensor& t = g.tensor();
    for (int64_t i = 0; i < t.NumElements(); ++i) out.push_back(t.data<double>()[i]);
  }
  return out;
}

absl::StatusOr<std::vector<double>> Gradients(Builder build, RematPolicy policy, bool optimize,
                                              uint64_t seed, double scale) {
  GradProgram p;
  BuildGrad(build, policy, optimize, &p);
  if (p.grad == nullptr) return absl::InternalError("no gradient graph");
  KGRAD_ASSIGN_OR_RETURN(Value r, RunGraph(p.grad, RandomArgs(p.f, seed, scale)));
  return Flat(r);
}

void ExpectSameGradients(Builder build, double scale) {
  for (bool optimize : {false, true}) {
    absl::StatusOr<std::vector<double>> base =
        Gradients(build, RematPolicy::kEverythingSaveable, optimize, 7, scale);
    ASSERT_TRUE(base.ok()) << base.status();
    for (RematPolicy policy : {RematPolicy::kNothingSaveable, RematPolicy::kDotsSaveable}) {
      absl::StatusOr<std::vector<double>> got = Gradients(build, policy, optimize, 7, scale);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), base->size());
      for (size_t i = 0; i < base->size(); ++i) {
        EXPECT_EQ((*got)[i], (*base)[i]) << RematPolicyName(policy) << " element " << i
                                         << (optimize ? " (optimised)" : "");
      }
    }
  }
}

TEST(RematTest, MlpGradientsEqualWithoutRemat) { ExpectSameGradients(SmallMlp, 1.0); }

TEST(RematTest, ConvNetGradientsEqualWithoutRemat) { ExpectSameGradients(SmallConvNet, 1.0); }

TEST(RematTest, FiniteDifferencesToSecondOrder) {
  for (RematPolicy policy : kPolicies) {
    for (Builder build : {SmallMlp, SmallConvNet}) {
      Module m(DefaultRegistry());
      FuncGraph* f = build(&m);
      ASSERT_TRUE(SetRematPolicy(m, f, policy).ok());
      std::vector<Value> args = RandomArgs(f, 3, 0.8);
      EXPECT_TRUE(GraphGradientOk(m, f, args, Order(1, 3), /*nonvacuous=*/true))
          << RematPolicyName(policy);
      EXPECT_TRUE(GraphGradientOk(m, f, args, Order(2, 3))) << RematPolicyName(policy);
    }
  }
}

// Grad of grad: d/dx of sum(df/dx) through a checkpointed layer, against the
// same without remat.
TEST(RematTest, GradOfGradThroughCheckpointedGraph) {
  std::vector<std::vector<double>> results;
  for (RematPolicy policy : kPolicies) {
    Module m(DefaultRegistry());
    FuncGraph* f = SmallMlp(&m);
    ASSERT_TRUE(SetRematPolicy(m, f, policy).ok());
    absl::StatusOr<FuncGraph*> g = GradOperation()(m, f);  // df/dx
    ASSERT_TRUE(g.ok()) << g.status();
    GraphBuilder b(&m, "sum_grad");
    std::vector<AnfNode*> ps;
    for (Parameter* p : f->parameters()) ps.push_back(b.Param(p->name(), p->declared()));
    FuncGraph* s = b.Return(b.Op(PrimId::kReduceSum, {b.Call(*g, ps)})).value();
    absl::StatusOr<FuncGraph*> gg = GradOperation(/*get_all=*/true)(m, s);
    ASSERT_TRUE(gg.ok()) << gg.status();
    ASSERT_TRUE(Optimize(m, *gg).ok());
    absl::StatusOr<Value> r = RunGraph(*gg, RandomArgs(f, 11, 1.0));
    ASSERT_TRUE(r.ok()) << r.status();
    results.push_back(Flat(*r));
  }
  for (size_t k = 1; k < results.size(); ++k) {
    ASSERT_EQ(results[k].size(), results[0].size());
    double nonzero = 0;
    for (size_t i = 0; i < results[0].size(); ++i) {
      EXPECT_NEAR(results[k][i], results[0][i], 1e-12) << RematPolicyName(kPolicies[k]);
      nonzero = std::max(nonzero, std::abs(results[0][i]));
    }
    EXPECT_GT(nonzero, 1e-3);  // the second derivative is not trivially zero
  }
}

// After optimisation: nothing_saveable recomputes each layer's tanh and matmul
// in the backward pass; dots_saveable recomputes tanh but reads the saved matmul.
TEST(RematTest, OptimisedGraphRecomputesWhatThePolicyDoesNotSave) {
  int tanh[3], matmul[3], barriers[3];
  for (int k = 0; k < 3; ++k) {
    GradProgram p;
    BuildGrad(SmallMlp, kPolicies[k], /*optimize=*/true, &p);
    ASSERT_NE(p.grad, nullptr);
    tanh[k] = CountPrim(p.grad, PrimId::kTanh);
    matmul[k] = CountPrim(p.grad, PrimId::kMatMul);
    barriers[k] = CountPrim(p.grad, PrimId::kRematBarrier);
  }
  // Without remat: 3 forward tanh; 3 forward matmuls and 2 per layer backward.
  EXPECT_EQ(tanh[0], 3);
  EXPECT_EQ(matmul[0], 9);
  EXPECT_EQ(barriers[0], 0);
  // nothing_saveable: the last layer's forward is dead (only its shape is read),
  // so tanh 2 forward + 3 recomputed, matmul 2 forward + 3 recomputed + 6.
  EXPECT_GT(tanh[1], tanh[0]);
  EXPECT_EQ(tanh[1], 5);
  EXPECT_GT(matmul[1], matmul[0]);
  EXPECT_EQ(matmul[1], 11);
  EXPECT_EQ(barriers[1], 9);  // x, w, c of each layer
  // dots_saveable: tanh recomputed from the saved matmul output and c.
  EXPECT_EQ(tanh[2], 5);
  EXPECT_EQ(matmul[2], 9);
  EXPECT_EQ(barriers[2], 6);
}

TEST(RematTest, BpropReadsBarriersBeforeOptimisation) {
  Module m(DefaultRegistry());
  FuncGraph* f = SmallMlp(&m);
  ASSERT_TRUE(SetRematPolicy(m, f, RematPolicy::kNothingSaveable).ok());
  FuncGraph* layer = m.FindGraph("layer");
  ASSERT_NE(layer, nullptr);
  EXPECT_EQ(layer->remat(), RematPolicy::kNothingSaveable);
  EXPECT_EQ(f->remat(), RematPolicy::kEverythingSaveable);  // the entry itself is not marked
  EXPECT_THAT(PrintGraph(layer), HasSubstr("remat=nothing_saveable"));
  absl::StatusOr<FuncGraph*> g = GradOperation(true)(m, f);
  ASSERT_TRUE(g.ok()) << g.status();
  FuncGraph* bprop = m.FindGraph("bprop_layer");
  ASSERT_NE(bprop, nullptr);
  EXPECT_EQ(CountPrim(bprop, PrimId::kRematBarrier), 3);
  EXPECT_EQ(CountPrim(bprop, PrimId::kTanh), 1);
  EXPECT_EQ(CountPrim(bprop, PrimId::kMatMul), 3);  // recomputed, dx, dw
}

// PrepareForAd copies the graphs when it lowers partial applications; the copies
// keep their policy (core/cloner.cc), so the transform still recomputes.
TEST(RematTest, PolicySurvivesTheCopiesOfPrepareForAd) {
  Module m(DefaultRegistry());
  FuncGraph* layer = TanhOfProduct(&m, "layer");
  GraphBuilder b(&m, "f");
  AnfNode* px = b.Param("x", DType::kFloat64, {3});
  AnfNode* pw = b.Param("w", DType::kFloat64, {3});
  AnfNode* bound = b.Partial(b.GraphRef(layer), {px});
  FuncGraph* f = b.Return(b.Op(PrimId::kReduceSum, {b.Call(bound, {pw})})).value();
  ASSERT_TRUE(SetRematPolicy(m, f, RematPolicy::kNothingSaveable).ok());
  absl::StatusOr<FuncGraph*> g = GradOperation(true)(m, f);
  ASSERT_TRUE(g.ok()) << g.status();
  FuncGraph* copy = m.FindGraph("layer_ad");
  ASSERT_NE(copy, nullptr) << PrintModule(m);
  EXPECT_EQ(copy->remat(), RematPolicy::kNothingSaveable);
  FuncGraph* bprop = m.FindGraph("bprop_layer_ad");
  ASSERT_NE(bprop, nullptr);
  EXPECT_EQ(CountPrim(bprop, PrimId::kRematBarrier), 2);
  std::mt19937_64 rng(2);
  EXPECT_TRUE(GraphGradientOk(m, f, {RandomF64({3}, rng), RandomF64({3}, rng)}, Order(2, 2)));
}

TEST(RematTest, SetRematPolicyRefusesAForeignGraph) {
  Module m(DefaultRegistry());
  Module other(DefaultRegistry());
  FuncGraph* f = SmallMlp(&other);
  absl::Status s = SetRematPolicy(m, f, RematPolicy::kNothingSaveable);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'mlp'"));
}

TEST(RematTest, PolicyNamesParseAndPrint) {
  for (RematPolicy p : kPolicies) EXPECT_EQ(*ParseRematPolicy(RematPolicyName(p)), p);
  absl::StatusOr<RematPolicy> bad = ParseRematPolicy("dots");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("dots_saveable"));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
