// Gradient checks of the convolution and pooling family (ops/conv.cc): every
// primitive against central finite differences in float64, to second order (which
// differentiates the rules themselves: the family is closed under its rules), over
// stride, 2- and 4-value padding, dilation, groups and depthwise geometries, in
// 2-D and over 1-D and 3-D windows; plus
// value tests of what the numeric checks cannot see (tie routing, exact zeros) and
// of rules applied where inference left dims unknown.
#include <algorithm>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/grad_test_util.h"
#include "tests/testing/op_test_util.h"
#include "tools/grad_check.h"

namespace kgrad {
namespace testing {
namespace {

constexpr uint64_t kSeeds[] = {11, 22, 33};

// Entries -1 + 2k/n (k = 0..n-1) in random order: pairwise at least 2/n apart, so
// no pooling window has a tie and the finite-difference steps (1e-5) never move
// an argmax.
Value Distinct(const Shape& shape, std::mt19937_64& rng) {
  Tensor t = Tensor::Create(kF64, shape).value();
  int64_t n = t.NumElements();
  std::vector<double> v(n);
  for (int64_t k = 0; k < n; ++k) v[k] = -1.0 + 2.0 * static_cast<double>(k) / n;
  std::shuffle(v.begin(), v.end(), rng);
  std::copy(v.begin(), v.end(), t.mutable_data<double>());
  return Value(std::move(t));
}

Shape ShapeOf(const absl::StatusOr<AbstractPtr>& a) {
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? AsTensor(*a)->shape() : Shape{};
}

// ----- Convolution ----------------------------------------------------------------------
struct ConvCase {
  std::string name;
  Shape x, w;
  Ints stride, padding, dilation;
  int64_t groups;

  AttrMap attrs() const {
    return {{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}};
  }
  Shape y() const { return ShapeOf(InferOp(PrimId::kConv2d, {T(kF64, x), T(kF64, w)}, attrs())); }
};

void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

const ConvCase kConvCases[] = {
    {"plain", {2, 3, 6, 6}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1},
    // (7 + 2 - 3) / 2 + 1 = 4 windows per axis.
    {"stride2_pad2", {2, 3, 7, 7}, {4, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1},
    // The floor leaves the last row and column unread (their gradient is zero).
    {"stride2_floor", {2, 3, 6, 6}, {2, 3, 3, 3}, {2, 2}, {0, 0}, {1, 1}, 1},
    // [top, bottom, left, right] and a non-square kernel and stride.
    {"pad4_asymmetric", {2, 3, 6, 5}, {2, 3, 3, 2}, {2, 1}, {1, 0, 2, 1}, {1, 1}, 1},
    {"dilation2", {2, 3, 7, 7}, {4, 3, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1},
    {"dilation2_stride2", {2, 2, 7, 6}, {3, 2, 2, 3}, {2, 1}, {1, 1}, {2, 2}, 1},
    {"groups2", {2, 4, 6, 6}, {6, 2, 3, 3}, {1, 2}, {1, 1}, {1, 1}, 2},
    // groups = C: one filter pair per channel (channel multiplier 2).
    {"depthwise", {2, 3, 6, 6}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 3},
    {"depthwise_stride2_dilation2", {2, 4, 7, 7}, {4, 1, 3, 3}, {2, 2}, {2, 1, 1, 2}, {2, 2}, 4},
    // 3-D windows (N, C, D, H, W): (begin, end) padding per axis, grouped, dilated.
    {"c3d_strided_asym_pad", {2, 2, 4, 5, 4}, {3, 2, 2, 3, 2}, {2, 1, 2}, {1, 0, 0, 1, 1, 1},
     {1, 1, 1}, 1},
    {"c3d_dilated_groups2", {1, 4, 5, 4, 4}, {4, 2, 2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {2, 1, 2}, 2},
    // 1-D windows (N, C, L) natively (the ONNX importer lifts them to 2-D).
    {"c1d", {2, 3, 9}, {4, 3, 3}, {2}, {2, 1}, {2}, 1},
};

class ConvGradTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvGradTest, Conv2d) {
  const ConvCase& c = GetParam();
  std::mt19937_64 rng(1);
  for (uint64_t seed : kSeeds) {
    Value x = RandomF64(c.x, rng), w = RandomF64(c.w, rng);
    EXPECT_TRUE(PrimitiveGradientOk(PrimId::kConv2d, {x, w}, c.attrs(), Order(2, seed)));
  }
}

TEST_P(ConvGradTest, Conv2dBackpropInput) {
  const ConvCase& c = GetParam();
  std::mt19937_64 rng(2);
  for (uint64_t seed : kSeeds) {
    Value dy = RandomF64(c.y(), rng), w = RandomF64(c.w, rng), x_ref = RandomF64(c.x, rng);
    EXPECT_TRUE(PrimitiveGradientOk(PrimId::kConv2dBackpropInput, {dy, w, x_ref}, c.attrs(),
                                    Order(2, seed)));
  }
}

TEST_P(ConvGradTest, Conv2dBackpropFilter) {
  const ConvCase& c = GetParam();
  std::mt19937_64 rng(3);
  for (uint64_t seed : kSeeds) {
    Value x = RandomF64(c.x, rng), dy = RandomF64(c.y(), rng), w_ref = RandomF64(c.w, rng);
    EXPECT_TRUE(PrimitiveGradientOk(PrimId::kConv2dBackpropFilter, {x, dy, w_ref}, c.attrs(),
                                    Order(2, seed)));
  }
}

INSTANTIATE_TEST_SUITE_P(Geometries, ConvGradTest, ::testing::ValuesIn(kConvCases),
                         [](const auto& info) { return info.param.name; });

// Third order goes once more around the closed set conv2d -> backprop ops -> conv2d.
TEST(ConvGradTest, Conv2dThirdOrder) {
  const ConvCase& c = kConvCases[7];  // depthwise, padded
  std::mt19937_64 rng(4);
  Value x = RandomF64(c.x, rng), w = RandomF64(c.w, rng);
  EXPECT_TRUE(PrimitiveGradientOk(PrimId::kConv2d, {x, w}, c.attrs(), Order(3, 5)));
}

// ----- Pooling ------------------------------------------------------------------------------
struct PoolCase {
  std::string name;
  Shape x;
  Ints kernel, stride, padding;

  AttrMap max_attrs() const {
    return {{"kernel", kernel}, {"stride", stride}, {"padding", padding}};
  }
  AttrMap avg_attrs(bool count_include_pad) const {
    AttrMap a = max_attrs();
    a["count_include_pad"] = count_include_pad;
    return a;
  }
  Shape y() const { return ShapeOf(InferOp(PrimId::kMaxPool2d, {T(kF64, x)}, max_attrs())); }
};

void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

const PoolCase kPoolCases[] = {
    // stride [] = the kernel: non-overlapping windows.
    {"k2_default_stride", {2, 3, 6, 6}, {2, 2}, {}, {0, 0}},
    {"k3_stride2_pad2", {2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1}},
    {"k3x2_pad4_asymmetric", {2, 3, 5, 6}, {3, 2}, {1, 2}, {1, 0, 0, 1}},
    // Overlapping windows: one cell can be the max of several windows.
    {"k3_stride1_overlap", {2, 4, 5, 5}, {3, 3}, {1, 1}, {0, 0}},
    // The floor leaves the last row and column outside every window.
    {"k2x3_stride2_floor", {2, 3, 7, 6}, {2, 3}, {2, 2}, {0, 0}},
    // 3-D windows: r3d's (1, 3, 3) stem pool, and a cube with (begin, end) padding.
    {"p3d_k133_s122", {2, 2, 3, 5, 5}, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}},
    {"p3d_k2_asym_pad", {1, 2, 4, 4, 5}, {2, 2, 3}, {2, 1, 2}, {1, 0, 0, 1, 1, 1}},
    {"p1d", {2, 3, 8}, {3}, {2}, {1}},
};

class PoolGradTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolGradTest, MaxPool2d) {
  const PoolCase& c = GetParam();
  std::mt19937_64 rng(1);
  for (uint64_t seed : kSeeds) {
    Value x = Distinct(c.x, rng);
    EXPECT_TRUE(PrimitiveGradientOk(PrimId::kMaxPool2d, {x}, c.max_attrs(), Order(2, seed)));
  }
}

// x gets zero (it only picks the argmaxes; no tie within a step); dy the gather.
TEST_P(PoolGradTest, MaxPool2dGrad) {
  const PoolCase& c = GetParam();
  std::mt19937_64 rng(2);
  for (uint64_t seed : kSeeds) {
    Value x = Distinct(c.x, rng), dy = RandomF64(c.y(), rng);
    EXPECT_TRUE(
        PrimitiveGradientOk(PrimId::kMaxPool2dGrad, {x, dy}, c.max_attrs(), Order(2, seed)));
  }
}

TEST_P(PoolGradTest, MaxPool2dGradGrad) {
  const PoolCase& c = GetParam();
  std::mt19937_64 rng(3);
  for (uint64_t seed : kSeeds) {
    Value x = Distinct(c.x, rng), ddx = RandomF64(c.x, rng);
    EXPECT_TRUE(
        PrimitiveGradientOk(PrimId::kMaxPool2dGradGrad, {x, ddx}, c.max_attrs(), Order(2, seed)));
  }
}

TEST_P(PoolGradTest, AvgPool2d) {
  const PoolCase& c = GetParam();
  std::mt19937_64 rng(4);
  for (bool count_include_pad : {true, false}) {
    for (uint64_t seed : kSeeds) {
      Value x = RandomF64(c.x, rng);
      EXPECT_TRUE(PrimitiveGradientOk(PrimId::kAvgPool2d, {x}, c.avg_attrs(count_include_pad),
                                      Order(2, seed)))
          << "count_include_pad=" << count_include_pad;
    }
  }
}

TEST_P(PoolGradTest, AvgPool2dGrad) {
  const PoolCase& c = GetParam();
  std::mt19937_64 rng(5);
  for (bool count_include_pad : {true, false}) {
    for (uint64_t seed : kSeeds) {
      Value dy = RandomF64(c.y(), rng), x_ref = RandomF64(c.x, rng);
      EXPECT_TRUE(PrimitiveGradientOk(PrimId::kAvgPool2dGrad, {dy, x_ref},
                                      c.avg_attrs(count_include_pad), Order(2, seed)))
          << "count_include_pad=" << count_include_pad;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Geometries, PoolGradTest, ::testing::ValuesIn(kPoolCases),
                         [](const auto& info) { return info.param.name; });

// ----- Values the numeric checks cannot see --------------------------------------------------
// The gradient of f at `args` with the output sensitivity `sens` (all inputs).
absl::StatusOr<Value> VjpOf(Module& m, FuncGraph* f, std::vector<Value> args, Value sens) {
  absl::StatusOr<FuncGraph*> g =
      GradOperation(/*get_all=*/true, false, /*sens_param=*/true)(m, f, {}, {});
  if (!g.ok()) return g.status();
  args.push_back(std::move(sens));
  return RunGraph(*g, std::move(args));
}

Value Full(const Shape& shape, double v) { return Value(Tensor::Full(kF64, shape, v).value()); }

// On ties the gradient goes to the first max in row-major window order (the kernel's
// rule), not divided among the tied cells.
TEST(ConvPoolValueTest, MaxPoolTiesRouteToTheFirstMax) {
  Module m(DefaultRegistry());
  AttrMap attrs = {{"kernel", Ints{2, 2}}, {"stride", Ints{1, 1}}, {"padding", Ints{0, 0}}};
  Value x = Full({1, 1, 3, 3}, 0.5);
  absl::StatusOr<FuncGraph*> f = testing::BuildPrimitiveGraph(m, PrimId::kMaxPool2d, {x}, attrs);
  ASSERT_TRUE(f.ok()) << f.status();
  // Windows (i, j) of the constant plane all pick their top-left cell (i, j).
  absl::StatusOr<Value> dx =
      VjpOf(m, *f, {x}, Value(testing::MakeTensor(kF64, {1, 1, 2, 2}, {1, 2, 3, 4})));
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_EQ(ToDoubles(dx->tuple()[0].tensor()), (std::vector<double>{1, 2, 0, 3, 4, 0, 0, 0, 0}));
}

// max_pool2d_grad's x only selects positions: its gradient is exactly zero, and the
// *_ref inputs of the backprop ops give only a shape.
TEST(ConvPoolValueTest, SelectorsAndShapeReferencesGetExactZeros) {
  std::mt19937_64 rng(7);
  struct Case {
    PrimId id;
    std::vector<Value> args;
    AttrMap attrs;
    int zero_input;
  };
  AttrMap pool = {{"kernel", Ints{2, 2}}, {"stride", Ints{}}, {"padding", Ints{0, 0}}};
  AttrMap conv = {{"stride", Ints{1, 1}},
                  {"padding", Ints{1, 1}},
                  {"dilation", Ints{1, 1}},
                  {"groups", int64_t{1}}};
  Value x = Distinct({1, 2, 4, 4}, rng), y = RandomF64({1, 2, 2, 2}, rng);
  Value w = RandomF64({3, 2, 3, 3}, rng), cy = RandomF64({1, 3, 4, 4}, rng);
  const Case cases[] = {
      {PrimId::kMaxPool2dGrad, {x, y}, pool, 0},
      {PrimId::kMaxPool2dGradGrad, {x, RandomF64({1, 2, 4, 4}, rng)}, pool, 0},
      {PrimId::kAvgPool2dGrad, {y, x}, pool, 1},
      {PrimId::kConv2dBackpropInput, {cy, w, x}, conv, 2},
      {PrimId::kConv2dBackpropFilter, {x, cy, w}, conv, 2},
  };
  for (const Case& c : cases) {
    Module m(DefaultRegistry());
    absl::StatusOr<FuncGraph*> f = testing::BuildPrimitiveGraph(m, c.id, c.args, c.attrs);
    ASSERT_TRUE(f.ok()) << f.status();
    absl::StatusOr<Value> out = RunGraph(*f, c.args);
    ASSERT_TRUE(out.ok()) << out.status();
    absl::StatusOr<Value> d = VjpOf(m, *f, c.args, RandomF64(out->tensor().shape(), rng));
    ASSERT_TRUE(d.ok()) << PrimIdName(c.id) << ": " << d.status();
    std::vector<double> dz = ToDoubles(d->tuple()[c.zero_input].tensor());
    EXPECT_EQ(dz, std::vector<double>(dz.size(), 0.0)) << PrimIdName(c.id);
    for (size_t i = 0; i < c.args.size(); ++i) {  // the other inputs are not all zero
      if (static_cast<int>(i) == c.zero_input) continue;
      std::vector<double> di = ToDoubles(d->tuple()[i].tensor());
      EXPECT_NE(di, std::vector<double>(di.size(), 0.0)) << PrimIdName(c.id) << " input " << i;
    }
  }
}

// ----- Unknown dims ------------------------------------------------------------------------------
// No rule needs a static shape: with batch and spatial dims unknown to inference,
// first and second derivatives of conv2d -> max_pool2d -> avg_pool2d match those
// of the same graph with every dim known.
FuncGraph* ConvPoolNet(Module* m, const Shape& x_shape) {
  GraphBuilder b(m, "conv_pool");
  AnfNode* x = b.Param("x", kF64, x_shape);
  AnfNode* w = b.Param("w", kF64, {4, 2, 3, 3});
  AnfNode* y = b.Op(PrimId::kConv2d, {x, w},
                    {{"stride", Ints{1, 1}},
                     {"padding", Ints{1, 2, 0, 1}},
                     {"dilation", Ints{1, 1}},
                     {"groups", int64_t{2}}});
  y = b.Op(PrimId::kMaxPool2d, {y}, {{"kernel", Ints{2, 2}}, {"stride", Ints{1, 1}}});
  y = b.Op(PrimId::kAvgPool2d, {y},
           {{"kernel", Ints{2, 2}}, {"padding", Ints{1, 1}}, {"count_include_pad", false}});
  return b.Return(y).value();
}

// (x, w) -> (dx, dw) and its own gradient, both with sensitivity ones.
absl::StatusOr<std::vector<Value>> FirstAndSecond(const Shape& x_shape,
                                                  const std::vector<Value>& args) {
  Module m(DefaultRegistry());
  FuncGraph* f = ConvPoolNet(&m, x_shape);
  absl::StatusOr<FuncGraph*> g1 = GradOperation(/*get_all=*/true)(m, f);
  if (!g1.ok()) return g1.status();
  absl::StatusOr<FuncGraph*> g2 = GradOperation(/*get_all=*/true)(m, *g1);
  if (!g2.ok()) return g2.status();
  std::vector<Value> out;
  for (FuncGraph* g : {*g1, *g2}) {
    absl::StatusOr<Value> r = RunGraph(g, args);
    if (!r.ok()) return r.status();
    for (const Value& v : r->tuple()) out.push_back(v);
  }
  return out;
}

TEST(ConvPoolUnknownDimsTest, RulesNeedNoStaticShapes) {
  std::mt19937_64 rng(9);
  std::vector<Value> args = {RandomF64({2, 4, 5, 6}, rng), RandomF64({4, 2, 3, 3}, rng)};
  absl::StatusOr<std::vector<Value>> known = FirstAndSecond({2, 4, 5, 6}, args);
  ASSERT_TRUE(known.ok()) << known.status();
  absl::StatusOr<std::vector<Value>> unknown = FirstAndSecond({kU, 4, kU, kU}, args);
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  ASSERT_EQ(known->size(), 4u);
  ASSERT_EQ(unknown->size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    std::vector<double> a = ToDoubles((*known)[i].tensor()), b = ToDoubles((*unknown)[i].tensor());
    EXPECT_EQ(a, b) << "output " << i;
    // Not trivially zero: dx and dw, then d/dx sum(dw) and d/dw sum(dx) (bilinear).
    EXPECT_NE(a, std::vector<double>(a.size(), 0.0)) << "output " << i;
  }
}

// The finite-difference check of the same network (known shapes), to second order.
TEST(ConvPoolNetworkTest, GradientsMatchFiniteDifferencesToSecondOrder) {
  Module m(DefaultRegistry());
  FuncGraph* f = ConvPoolNet(&m, {2, 4, 5, 6});
  std::mt19937_64 rng(10);
  std::vector<Value> args = {RandomF64({2, 4, 5, 6}, rng), RandomF64({4, 2, 3, 3}, rng)};
  absl::StatusOr<GradCheckReport> r = CheckGradients(m, f, args, Order(2, 3));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed()) << r->ToString();
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
