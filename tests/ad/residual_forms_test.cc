// Per-op residual forms (ops/residual_form.h) chosen by a residual policy
// (ad/residual_policy.h): every op with forms passes the float64 gradient check
// to the second order under each form; the forms give the same gradients bit for
// bit (the same kernels on the same values), optimised or not; sin's two forms
// keep different residuals (the free variables of its bprop closure); and the
// policy's items, precedence and errors.
#include "ad/residual_policy.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ad/ad_context.h"
#include "ad/expand_differentiation.h"
#include "ad/grad_operation.h"
#include "ad/prepare.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/manager.h"
#include "core/passes/optimize.h"
#include "core/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/grad_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

struct FormOp {
  PrimId id;
  std::string name;
  AttrMap attrs;
};

// The ops whose rules have the three forms.
std::vector<FormOp> FormOps() {
  const AttrMap axis{{"axis", int64_t{1}}};
  return {{PrimId::kSin, "sin", {}},         {PrimId::kCos, "cos", {}},
          {PrimId::kTanh, "tanh", {}},       {PrimId::kSigmoid, "sigmoid", {}},
          {PrimId::kExp, "exp", {}},         {PrimId::kRelu, "relu", {}},
          {PrimId::kSoftmax, "softmax", axis}, {PrimId::kLogSoftmax, "log_softmax", axis}};
}

constexpr const char* kForms[] = {"save_inputs", "save_outputs", "recompute"};

std::vector<Value> Operand(uint64_t seed) {
  std::mt19937_64 rng(seed);
  return {RandomF64({3, 4}, rng, -1.5, 1.5)};
}

TEST(ResidualFormsTest, EveryFormPassesTheGradientCheckToOrderTwo) {
  for (const FormOp& op : FormOps()) {
    for (const char* form : kForms) {
      for (const std::string& spec : {op.name + "=" + form, std::string(form)}) {
        SCOPED_TRACE(spec);
        Module m(DefaultRegistry());
        const std::vector<Value> args = Operand(5);
        OpGraphOptions squared;
        squared.power = 2;
        absl::StatusOr<FuncGraph*> f = OpGraph(m, op.id, args, op.attrs, squared);
        ASSERT_TRUE(f.ok()) << f.status();
        GradCheckOptions o = Order(2, 5);
        o.residuals = spec;
        EXPECT_TRUE(GraphGradientOk(m, *f, FloatArgs(args), o, /*nonvacuous=*/true));
      }
    }
  }
}

// f(x) = sum(P(x) * w), w fixed: the gradient under `spec`, optimised or not.
absl::StatusOr<std::vector<double>> GradientUnder(const FormOp& op, const std::string& spec,
                                                  bool optimize) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {3, 4});
  std::mt19937_64 rng(9);
  AnfNode* w = b.Const(RandomF64({3, 4}, rng, -1, 1));
  AnfNode* y = b.Op(op.id, {x}, op.attrs);
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* f, b.Return(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {y, w})})));
  GradOptions go;
  go.residuals = spec;
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* g, Grad(m, f, go));
  if (optimize) KGRAD_RETURN_IF_ERROR(Optimize(m, g).status());
  KGRAD_ASSIGN_OR_RETURN(Value r, RunGraph(g, Operand(3)));
  const Tensor& t = r.tensor();
  return std::vector<double>(t.data<double>(), t.data<double>() + t.NumElements());
}

TEST(ResidualFormsTest, FormsGiveTheSameGradientBitForBit) {
  for (const FormOp& op : FormOps()) {
    for (bool optimize : {false, true}) {
      absl::StatusOr<std::vector<double>> base = GradientUnder(op, "", optimize);
      ASSERT_TRUE(base.ok()) << base.status();
      for (const char* form : kForms) {
        absl::StatusOr<std::vector<double>> got =
            GradientUnder(op, op.name + "=" + form, optimize);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(*got, *base) << op.name << " " << form << (optimize ? " optimised" : "");
      }
    }
  }
}

// Applications of `prim` in the optimised value_and_grad of sum(P(x) * w)
// under `spec` (the value keeps the forward pass alive).
int CountInOptimisedGradient(PrimId id, const std::string& spec, absl::string_view prim) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {3, 4});
  AnfNode* w = b.Param("w", DType::kFloat64, {3, 4});
  FuncGraph* f =
      b.Return(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {b.Op(id, {x}), w})})).value();
  ValueAndGradOptions vo;
  vo.residuals = spec;
  absl::StatusOr<FuncGraph*> g = ValueAndGrad(m, f, vo);
  EXPECT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(Optimize(m, *g).ok());
  const std::string text = PrintGraph(*g);
  int n = 0;
  for (size_t at = text.find(absl::StrCat(" ", prim, "(")); at != std::string::npos;
       at = text.find(absl::StrCat(" ", prim, "("), at + 1)) {
    ++n;
  }
  return n;
}

// The forms survive the optimiser: the recomputed y is not merged back into the
// forward's (the barrier), and sin's companion stays in the forward.
TEST(ResidualFormsTest, OptimisedGradientsKeepTheForms) {
  EXPECT_EQ(CountInOptimisedGradient(PrimId::kTanh, "", "tanh"), 1);
  EXPECT_EQ(CountInOptimisedGradient(PrimId::kTanh, "tanh=save_inputs", "tanh"), 2);
  EXPECT_EQ(CountInOptimisedGradient(PrimId::kTanh, "tanh=save_inputs", "remat_barrier"), 1);
  EXPECT_EQ(CountInOptimisedGradient(PrimId::kSin, "", "sin_grad"), 1);
  EXPECT_EQ(CountInOptimisedGradient(PrimId::kSin, "", "cos"), 0);
  EXPECT_EQ(CountInOptimisedGradient(PrimId::kSin, "sin=save_outputs", "sin_grad"), 0);
  EXPECT_EQ(CountInOptimisedGradient(PrimId::kSin, "sin=save_outputs", "cos"), 1);
}

// The nodes of K(f) that the bprop closure of f(x) = sin(x) reads (its
// residuals), as the primitive names of the applications and "param" for
// parameters.
std::vector<std::string> ResidualsOfSin(const std::string& spec) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {4});
  FuncGraph* f = b.Return(b.Op(PrimId::kSin, {x})).value();
  absl::StatusOr<FuncGraph*> prepared = PrepareForAd(f, {});
  EXPECT_TRUE(prepared.ok()) << prepared.status();
  absl::StatusOr<ResidualPolicy> policy = ResidualPolicy::Parse(spec, m.registry());
  EXPECT_TRUE(policy.ok()) << policy.status();
  AdContext ctx(&m, *prepared);
  ctx.SetResidualPolicy(&*policy);
  absl::StatusOr<FuncGraph*> k = ctx.K(*prepared);
  EXPECT_TRUE(k.ok()) << k.status();
  std::vector<std::string> out;
  Manager manager(&m);
  for (FuncGraph* g : manager.Reachable({*k})) {
    if (g->parent() != *k) continue;  // the bprop: nested in K(f)
    for (AnfNode* fv : manager.Info(g).fvs) {
      const CNode* c = fv->AsCNode();
      out.push_back(c != nullptr && c->primitive() != nullptr ? c->primitive()->name() : "param");
    }
  }
  return out;
}

TEST(ResidualFormsTest, SinsTwoFormsKeepDifferentResiduals) {
  // save_inputs (the default): x, and cos x computed in the backward.
  EXPECT_EQ(ResidualsOfSin(""), std::vector<std::string>{"param"});
  EXPECT_EQ(ResidualsOfSin("sin=save_inputs"), std::vector<std::string>{"param"});
  // save_outputs: cos x computed in the forward pass, and nothing else.
  EXPECT_EQ(ResidualsOfSin("sin=save_outputs"), std::vector<std::string>{"cos"});
  EXPECT_EQ(ResidualsOfSin("save_outputs"), std::vector<std::string>{"cos"});
}

// Two tanh layers named h1 and h2: what each item of a policy asks of them.
TEST(ResidualFormsTest, MostSpecificItemWins) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {2});
  CNode* h1 = b.Op(PrimId::kTanh, {x});
  h1->set_name("h1");
  CNode* h2 = b.Op(PrimId::kTanh, {h1});
  h2->set_name("h2");
  const Primitive& tanh = *h1->primitive();
  auto ask = [&](const std::string& spec, const CNode* c) {
    absl::StatusOr<ResidualPolicy> p = ResidualPolicy::Parse(spec, m.registry());
    EXPECT_TRUE(p.ok()) << p.status();
    ResidualPolicy::Ask a = p->For(*c, tanh);
    return std::string(ResidualFormName(a.form)) + (a.named ? "!" : "");
  };
  EXPECT_EQ(ask("", h1), "default");
  EXPECT_EQ(ask("save_inputs", h1), "save_inputs");
  EXPECT_EQ(ask("save_inputs, tanh=recompute", h1), "recompute!");
  EXPECT_EQ(ask("tanh=recompute,@h2=save_outputs", h1), "recompute!");
  EXPECT_EQ(ask("tanh=recompute,@h2=save_outputs", h2), "save_outputs!");
  EXPECT_EQ(ask("save_only_these_names=h2", h1), "recompute");
  EXPECT_EQ(ask("save_only_these_names=h2", h2), "save_outputs");
  EXPECT_EQ(ask("save_only_these_names=h2|h1, @h1=save_inputs", h1), "save_inputs!");
}

TEST(ResidualFormsTest, BadPoliciesNameTheItem) {
  const PrimitiveRegistry& r = DefaultRegistry();
  auto error = [&](const std::string& spec) {
    absl::StatusOr<ResidualPolicy> p = ResidualPolicy::Parse(spec, r);
    EXPECT_FALSE(p.ok()) << spec;
    return p.ok() ? std::string() : std::string(p.status().message());
  };
  EXPECT_THAT(error("save_everything"), HasSubstr("unknown form 'save_everything'"));
  EXPECT_THAT(error("sine=save_inputs"), HasSubstr("unknown primitive 'sine'"));
  EXPECT_THAT(error("sin=keep"), HasSubstr("unknown form 'keep'"));
  EXPECT_THAT(error("@=recompute"), HasSubstr("an empty node name"));
  EXPECT_THAT(error("save_only_these_names=a||b"), HasSubstr("an empty node name"));
  EXPECT_THAT(error("sin=recompute,sin=save_outputs"), HasSubstr("the op given twice"));
  EXPECT_THAT(error("save_inputs,recompute"), HasSubstr("a second default form"));
  EXPECT_THAT(error("recompute,save_only_these_names=a"), HasSubstr("save_only_these_names"));
}

// Asked by op or by name for a form when the rule has none, or naming no node:
// errors naming the node; asked by default, the rule keeps its own.
TEST(ResidualFormsTest, FormsOfARuleWithoutThemAreErrorsWhenAskedByName) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  CNode* sq = b.Op(PrimId::kSquare, {x});
  sq->set_name("sq");
  FuncGraph* f = b.Return(b.Op(PrimId::kReduceSum, {sq})).value();
  GradOptions go;
  go.residuals = "square=save_outputs";
  absl::StatusOr<FuncGraph*> g = Grad(m, f, go);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("'sq'"));
  EXPECT_THAT(std::string(g.status().message()),
              HasSubstr("asks for save_outputs, but its rule has no residual forms"));
  go.residuals = "@sq=save_outputs";
  g = Grad(m, f, go);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("'sq'"));
  go.residuals = "save_outputs";  // a default: square keeps its rule
  EXPECT_TRUE(Grad(m, f, go).ok());
  go.residuals = "@sqr=recompute";
  g = Grad(m, f, go);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("names sqr, but no differentiated"));
}

// The policy travels with the grad operator (its `residuals` attribute).
TEST(ResidualFormsTest, TheOperatorCarriesThePolicy) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  FuncGraph* f = b.Return(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kSin, {x})})).value();
  GradOptions go;
  go.as_operator = true;
  go.residuals = "sin=remember";
  absl::StatusOr<FuncGraph*> op = Grad(m, f, go);
  ASSERT_TRUE(op.ok()) << op.status();
  absl::Status s = ExpandDifferentiation(m).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("unknown form 'remember'"));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
