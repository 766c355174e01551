// The examples of examples/tc against the built-in primitives they spell, in
// float64: the value and every gradient of L = sum(R * out) (R random) agree, so
// the adjoint blocks route sensitivities as the hand-written rules do; and the
// single-output blocks pass the float64 finite-difference check to order 2 in
// both modes (examples' full checks: tests/tools:cli_tc_test).
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "ops/tc_block.h"
#include "tests/testing/grad_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

// The `def` of examples/tc/NAME.pbtxt, with its parameters made double.
std::string ExampleDef(const std::string& name) {
  std::ifstream in("examples/tc/" + name + ".pbtxt");
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  size_t at = s.find("value { s: \"");
  EXPECT_NE(at, std::string::npos) << name;
  if (at == std::string::npos) return "";
  std::string def;
  for (size_t k = at + 12; k < s.size() && s[k] != '"'; ++k) {
    if (s[k] == '\\' && k + 1 < s.size()) {
      ++k;
      def += s[k] == 'n' ? '\n' : s[k];
    } else {
      def += s[k];
    }
  }
  absl::StatusOr<tc::Block> b = tc::ParseBlock(def);
  EXPECT_TRUE(b.ok()) << b.status();
  if (!b.ok()) return "";
  for (tc::TensorDecl& t : b->tensors) t.dtype = DType::kFloat64;
  return tc::PrintBlock(*b);
}

using Spell = std::function<AnfNode*(GraphBuilder&, const std::vector<AnfNode*>&)>;

struct Result {
  double value = 0;
  std::vector<std::vector<double>> grads;
};

// L(x...) = sum(R * out(x...)), its value and gradients at `args`.
Result ValueAndGradients(const Spell& out, const std::vector<Value>& args, const Value& r) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "loss");
  std::vector<AnfNode*> xs;
  for (size_t i = 0; i < args.size(); ++i) {
    xs.push_back(b.Param(absl::StrCat("x", i), DType::kFloat64, args[i].tensor().shape()));
  }
  AnfNode* loss = b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {out(b, xs), b.Const(r)})});
  absl::StatusOr<FuncGraph*> f = b.Return(loss);
  Result res;
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return res;
  absl::StatusOr<Value> v = RunGraph(*f, args);
  EXPECT_TRUE(v.ok()) << v.status();
  if (!v.ok()) return res;
  res.value = ToDoubles(v->tensor())[0];
  absl::StatusOr<FuncGraph*> g = GradOperation(/*get_all=*/true)(m, *f);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return res;
  absl::StatusOr<Value> gv = RunGraph(*g, args);
  EXPECT_TRUE(gv.ok()) << gv.status();
  if (!gv.ok()) return res;
  if (gv->is_tuple()) {
    for (const Value& e : gv->tuple()) res.grads.push_back(ToDoubles(e.tensor()));
  } else {
    res.grads.push_back(ToDoubles(gv->tensor()));
  }
  return res;
}

struct Case {
  std::string name;
  std::vector<Shape> shapes;
  Shape out;
  Spell builtin;
  bool tuple = false;  // the block has temporaries: compare its first output
};

std::vector<Case> Cases() {
  AttrMap pool{{"kernel", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{2, 2}}};
  return {
      {"mv", {{3, 4}, {4}}, {3},
       [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
         return b.Op(PrimId::kEinsum, {x[0], x[1]}, {{"equation", std::string("ij,j->i")}});
       }},
      {"sgemm", {{}, {}, {3, 4}, {4, 2}, {3, 2}}, {3, 2},
       [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
         return b.Op(PrimId::kAdd, {b.Op(PrimId::kMul, {x[1], x[4]}),
                                    b.Op(PrimId::kMul, {x[0], b.Op(PrimId::kMatMul, {x[2], x[3]})})});
       }},
      {"maxmv", {{3, 4}, {4}}, {3},
       [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
         return b.Op(PrimId::kReduceMax, {b.Op(PrimId::kMul, {x[0], x[1]})},
                     {{"axes", std::vector<int64_t>{1}}, {"keepdims", false}});
       }},
      {"maxpool2x2", {{1, 2, 4, 4}}, {1, 2, 2, 2},
       [pool](GraphBuilder& b, const std::vector<AnfNode*>& x) { return b.Op(PrimId::kMaxPool2d, {x[0]}, pool); }},
      {"avgpool2x2", {{1, 2, 4, 4}}, {1, 2, 2, 2},
       [pool](GraphBuilder& b, const std::vector<AnfNode*>& x) { return b.Op(PrimId::kAvgPool2d, {x[0]}, pool); }},
      {"conv3x3", {{1, 2, 5, 5}, {2, 2, 3, 3}}, {1, 2, 3, 3},
       [](GraphBuilder& b, const std::vector<AnfNode*>& x) { return b.Op(PrimId::kConv2d, {x[0], x[1]}); }},
      // conv2d with dilation 2 on [1, 1, 9] and [1, 1, 3], reshaped.
      {"dilated_conv1d", {{9}, {3}}, {5},
       [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
         auto reshape = [&](AnfNode* v, std::vector<int64_t> shape) {
           return b.Op(PrimId::kReshape, {v}, {{"shape", std::move(shape)}});
         };
         AnfNode* o = b.Op(PrimId::kConv2d, {reshape(x[0], {1, 1, 1, 9}), reshape(x[1], {1, 1, 1, 3})},
                           {{"dilation", std::vector<int64_t>{1, 2}}});
         return reshape(o, {5});
       }},
      {"batch_matmul", {{2, 3, 4}, {2, 4, 2}}, {2, 3, 2},
       [](GraphBuilder& b, const std::vector<AnfNode*>& x) { return b.Op(PrimId::kMatMul, {x[0], x[1]}); }},
      {"softmax", {{2, 5}}, {2, 5},
       [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
         return b.Op(PrimId::kSoftmax, {x[0]}, {{"axis", int64_t{-1}}});
       },
       true},
      {"layernorm", {{2, 3, 4}}, {2, 3, 4},
       [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
         std::vector<double> ones(4, 1.0), zeros(4, 0.0);
         AnfNode* s = b.Const(Value(Tensor::FromVector<double>({4}, ones)));
         AnfNode* z = b.Const(Value(Tensor::FromVector<double>({4}, zeros)));
         return b.Op(PrimId::kLayerNorm, {x[0], s, z}, {{"begin_norm_axis", int64_t{-1}}, {"epsilon", 1e-5}});
       },
       true},
  };
}

TEST(TcGradTest, ExamplesMatchTheBuiltInPrimitivesInFloat64) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::string def = ExampleDef(c.name);
    ASSERT_FALSE(def.empty());
    for (uint64_t seed : kSeeds) {
      std::mt19937_64 rng(seed);
      std::vector<Value> args;
      for (const Shape& s : c.shapes) args.push_back(RandomF64(s, rng));
      Value r = RandomF64(c.out, rng);
      Spell tc = [&](GraphBuilder& b, const std::vector<AnfNode*>& x) -> AnfNode* {
        AnfNode* y = b.Op(PrimId::kTc, x, {{"def", def}});
        return c.tuple ? b.GetItem(y, 0) : y;
      };
      Result want = ValueAndGradients(c.builtin, args, r);
      Result got = ValueAndGradients(tc, args, r);
      EXPECT_NEAR(got.value, want.value, 1e-12 * (1 + std::abs(want.value))) << "seed " << seed;
      ASSERT_EQ(got.grads.size(), want.grads.size());
      for (size_t i = 0; i < want.grads.size(); ++i) {
        ASSERT_EQ(got.grads[i].size(), want.grads[i].size()) << "input " << i;
        for (size_t k = 0; k < want.grads[i].size(); ++k) {
          EXPECT_NEAR(got.grads[i][k], want.grads[i][k], 1e-11) << "seed " << seed << " input " << i << " [" << k << "]";
        }
      }
    }
  }
}

TEST(TcGradTest, SingleOutputExamplesPassTheSecondOrderCheck) {
  for (const Case& c : Cases()) {
    if (c.tuple) continue;
    SCOPED_TRACE(c.name);
    for (uint64_t seed : kSeeds) {
      EXPECT_TRUE(PrimitiveGradientOk(PrimId::kTc, RandomOperands(c.shapes, seed), {{"def", ExampleDef(c.name)}},
                                      Order(2, seed)));
    }
  }
}

// Ties in max=! go to the first point in the reduction indices' order, as
// max_pool2d's do.
TEST(TcGradTest, MaxTiesGoToTheFirstIndexAsMaxPooling) {
  std::vector<double> flat(16, 0.5);
  Value x(Tensor::FromVector<double>({1, 1, 4, 4}, flat));
  Value r(Tensor::FromVector<double>({1, 1, 2, 2}, {1, 2, 3, 4}));
  AttrMap pool{{"kernel", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{2, 2}}};
  std::string def = ExampleDef("maxpool2x2");
  Result got = ValueAndGradients(
      [&](GraphBuilder& b, const std::vector<AnfNode*>& in) { return b.Op(PrimId::kTc, in, {{"def", def}}); }, {x}, r);
  Result want = ValueAndGradients(
      [&](GraphBuilder& b, const std::vector<AnfNode*>& in) { return b.Op(PrimId::kMaxPool2d, in, pool); }, {x}, r);
  ASSERT_EQ(got.grads.size(), 1u);
  EXPECT_EQ(got.grads[0], want.grads[0]);
  EXPECT_EQ(got.grads[0], (std::vector<double>{1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0}));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
