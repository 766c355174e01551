// The conv family's CPU kernels over 1-D (N, C, L) and 3-D (N, C, D, H, W)
// windows against naive float64 loops written from the definitions over any
// number of spatial axes (conv_kernels_test covers 2-D in depth; a few 2-D cases
// here check the reference itself against the tuned 2-D paths).
//   conv:  y[n,o,s] = sum_{c,t} x[n, g*Cg + c, s*stride - pad_lo + t*dilation] * w[o,c,t]
//   pool:  y[n,c,s] = max / mean over the window's cells inside x.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "backends/cpu/dnnl_conv.h"
#include "core/primitive.h"
#include "core/tensor.h"
#include "core/value.h"
#include "gtest/gtest.h"
#include "ops/conv_window.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::Combine, ::testing::Values, ::testing::ValuesIn;

// ----- Windows ------------------------------------------------------------------------
// One application over x [N, C, spatial...]: per spatial axis the kernel, stride,
// dilation and (begin, end) padding.
struct WindowCase {
  std::string name;
  Shape x;
  Ints kernel;             // the filter's spatial dims (conv) or the pooling kernel
  Ints stride, dilation;   // empty: 1
  Ints padding;            // empty, one per axis, or (begin, end) per axis
  int64_t out_channels = 0, groups = 1;  // conv only

  int spatial() const { return static_cast<int>(x.size()) - 2; }
  int64_t S(const Ints& v, int i, int64_t d) const { return v.empty() ? d : v[i]; }
  int64_t Lo(int i) const {
    return padding.empty() ? 0 : padding.size() == x.size() - 2 ? padding[i] : padding[2 * i];
  }
  int64_t Hi(int i) const {
    return padding.empty() ? 0 : padding.size() == x.size() - 2 ? padding[i] : padding[2 * i + 1];
  }
  Shape w() const {
    Shape s = {out_channels, x[1] / groups};
    s.insert(s.end(), kernel.begin(), kernel.end());
    return s;
  }
  // Output shape; `channels` is O for conv, C for pooling.
  Shape y(int64_t channels, bool pool) const {
    Shape s = {x[0], channels};
    for (int i = 0; i < spatial(); ++i) {
      const int64_t st = pool ? S(stride, i, kernel[i]) : S(stride, i, 1);
      const int64_t eff = S(dilation, i, 1) * (kernel[i] - 1) + 1;
      s.push_back((x[2 + i] + Lo(i) + Hi(i) - eff) / st + 1);
    }
    return s;
  }
  AttrMap conv_attrs() const {
    return {{"stride", AttrValue(stride)},
            {"dilation", AttrValue(dilation)},
            {"padding", AttrValue(padding)},
            {"groups", AttrValue(groups)}};
  }
  AttrMap pool_attrs(bool avg, bool include_pad) const {
    AttrMap a = {{"kernel", AttrValue(kernel)},
                 {"stride", AttrValue(stride)},
                 {"padding", AttrValue(padding)}};
    if (avg) a["count_include_pad"] = AttrValue(include_pad);
    return a;
  }
};

std::ostream& operator<<(std::ostream& os, const WindowCase& c) { return os << c.name; }

std::string CaseName(const ::testing::TestParamInfo<std::tuple<WindowCase, DType>>& info) {
  return std::get<0>(info.param).name + "_" + DTypeName(std::get<1>(info.param));
}

// fn(out, taps): for each output position (flat index into `y`, over [N, ch,
// spatial...]) the window's taps inside x: (x index without channel, tap index
// in kernel order, row-major). `pool` selects pooling's default stride.
template <typename Fn>
void ForEachWindow(const WindowCase& k, const Shape& y, bool pool, Fn&& fn) {
  const int s = k.spatial();
  const int64_t taps = NumElementsOf(Shape(k.kernel.begin(), k.kernel.end()));
  for (int64_t out = 0; out < NumElementsOf(y); ++out) {
    const Shape at = Unravel(y, out);
    std::vector<std::pair<Shape, int64_t>> cells;  // (x coords but channel, tap)
    for (int64_t t = 0; t < taps; ++t) {
      const Shape tap = Unravel(Shape(k.kernel.begin(), k.kernel.end()), t);
      Shape xc = {at[0], 0};
      bool inside = true;
      for (int i = 0; i < s; ++i) {
        const int64_t st = pool ? k.S(k.stride, i, k.kernel[i]) : k.S(k.stride, i, 1);
        const int64_t v = at[2 + i] * st - k.Lo(i) + tap[i] * k.S(k.dilation, i, 1);
        inside = inside && v >= 0 && v < k.x[2 + i];
        xc.push_back(v);
      }
      if (inside) cells.push_back({xc, t});
    }
    fn(out, at, cells);
  }
}

// conv products: fn(x index, w index, y index) for every x*w that conv sums.
template <typename Fn>
void ForEachProduct(const WindowCase& k, Fn&& fn) {
  const Shape y = k.y(k.out_channels, false), w = k.w();
  const int64_t cg = w[1], og = k.out_channels / k.groups, taps = NumElementsOf(w) / (w[0] * cg);
  ForEachWindow(k, y, false, [&](int64_t out, const Shape& at, const auto& cells) {
    const int64_t o = at[1];
    for (int64_t c = 0; c < cg; ++c) {
      for (const auto& [xc, t] : cells) {
        Shape xi = xc;
        xi[1] = (o / og) * cg + c;
        fn(Ravel(k.x, xi), (o * cg + c) * taps + t, out);
      }
    }
  });
}

// ----- Kernel tests ---------------------------------------------------------------------
class WindowKernelTest : public ::testing::TestWithParam<std::tuple<WindowCase, DType>> {
 protected:
  void SetUp() override {
    std::tie(k_, dtype_) = GetParam();
    rng_.seed(std::hash<std::string>()(k_.name) + static_cast<int>(dtype_));
  }
  double Tol(double scale) const { return (dtype_ == kF64 ? 1e-12 : 3e-5) * (1 + scale); }
  void ExpectNear(const Tensor& got, const Shape& shape, const std::vector<double>& want) {
    ASSERT_EQ(got.shape(), shape) << got.TypeString();
    EXPECT_EQ(got.dtype(), dtype_);
    EXPECT_LE(MaxAbsDiff(got, want), Tol(MaxAbs(want)));
  }

  WindowCase k_;
  DType dtype_;
  std::mt19937_64 rng_;
};

class ConvNdTest : public WindowKernelTest {};

TEST_P(ConvNdTest, ThreeDirectionsMatchNaiveLoops) {
  const Shape ys = k_.y(k_.out_channels, false);
  Tensor x = RandomTensor(dtype_, k_.x, rng_), w = RandomTensor(dtype_, k_.w(), rng_);
  Tensor dy = RandomTensor(dtype_, ys, rng_);
  const std::vector<double> xd = ToDoubles(x), wd = ToDoubles(w), dyd = ToDoubles(dy);
  std::vector<double> y(NumElementsOf(ys)), dx(xd.size()), dw(wd.size());
  ForEachProduct(k_, [&](int64_t xi, int64_t wi, int64_t yi) {
    y[yi] += xd[xi] * wd[wi];
    dx[xi] += dyd[yi] * wd[wi];
    dw[wi] += dyd[yi] * xd[xi];
  });
  ExpectNear(RunOk(PrimId::kConv2d, {x, w}, k_.conv_attrs()), ys, y);
  ExpectNear(RunOk(PrimId::kConv2dBackpropInput, {dy, w, x}, k_.conv_attrs()), k_.x, dx);
  ExpectNear(RunOk(PrimId::kConv2dBackpropFilter, {x, dy, w}, k_.conv_attrs()), k_.w(), dw);
}

// f32 convolutions go to oneDNN (3-D as NCDHW; 1-D as 2-D of height 1): checked
// to apply, so that the test above exercises it and not only the im2col loops.
TEST_P(ConvNdTest, OneDnnTakesF32) {
  absl::StatusOr<PrimitivePtr> p = DefaultRegistry().Make(PrimId::kConv2d, k_.conv_attrs());
  ASSERT_TRUE(p.ok()) << p.status();
  Tensor x = RandomTensor(dtype_, k_.x, rng_), w = RandomTensor(dtype_, k_.w(), rng_);
  absl::StatusOr<ops::ConvGeom> g = ops::ConvKernelGeom(**p, {&x, &w});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->y_shape(), k_.y(k_.out_channels, false));
#ifndef KGRAD_NO_DNNL
  EXPECT_EQ(cpu::conv_internal::DnnlConvApplies(*g, dtype_), dtype_ == kF32);
#endif
}

std::vector<WindowCase> ConvCases() {
  return {
      {"c3d_basic", {2, 3, 4, 5, 6}, {3, 3, 3}, {}, {}, {1, 1, 1}, 4},
      {"c3d_strided_asym_pad", {2, 2, 5, 6, 7}, {2, 3, 2}, {2, 1, 3}, {}, {1, 0, 0, 2, 1, 1}, 3},
      {"c3d_dilated_grouped", {3, 4, 6, 5, 5}, {2, 2, 3}, {1, 2, 1}, {2, 1, 1}, {1, 1, 1}, 6, 2},
      {"c3d_depthwise", {2, 4, 4, 4, 5}, {3, 1, 3}, {}, {}, {1, 0, 1}, 4, 4},
      {"c3d_pointwise", {2, 5, 3, 4, 4}, {1, 1, 1}, {}, {}, {}, 6},
      // r(2+1)d's factorised blocks: a (1, k, k) spatial then a (k, 1, 1) temporal conv.
      {"c3d_spatial_1kk", {2, 3, 4, 8, 8}, {1, 3, 3}, {1, 2, 2}, {}, {0, 1, 1}, 5},
      {"c3d_temporal_k11", {2, 5, 6, 4, 4}, {3, 1, 1}, {2, 1, 1}, {}, {1, 0, 0}, 4},
      {"c3d_tiled_batch8", {8, 16, 6, 10, 10}, {3, 3, 3}, {}, {}, {1, 1, 1}, 8},
      {"c1d_native", {2, 3, 9}, {3}, {2}, {2}, {2, 1}, 4},
      {"c2d_reference_check", {2, 3, 6, 5}, {3, 2}, {2, 1}, {1, 2}, {1, 0, 2, 1}, 4},
  };
}

INSTANTIATE_TEST_SUITE_P(Cases, ConvNdTest, Combine(ValuesIn(ConvCases()), Values(kF32, kF64)),
                         CaseName);

class PoolNdTest : public WindowKernelTest {};

TEST_P(PoolNdTest, MaxAvgAndGradientsMatchNaiveLoops) {
  const Shape ys = k_.y(k_.x[1], true);
  Tensor x = RandomTensor(dtype_, k_.x, rng_), dy = RandomTensor(dtype_, ys, rng_);
  Tensor ddx = RandomTensor(dtype_, k_.x, rng_);
  const std::vector<double> xd = ToDoubles(x), dyd = ToDoubles(dy), ddxd = ToDoubles(ddx);
  const int64_t cells = NumElementsOf(Shape(k_.kernel.begin(), k_.kernel.end()));
  std::vector<double> ymax(NumElementsOf(ys)), gmax(xd.size()), ggmax(ymax.size());
  std::vector<double> yavg[2], gavg[2];
  for (int inc = 0; inc < 2; ++inc) {
    yavg[inc].assign(ymax.size(), 0.0);
    gavg[inc].assign(xd.size(), 0.0);
  }
  ForEachWindow(k_, ys, true, [&](int64_t out, const Shape& at, const auto& win) {
    ASSERT_FALSE(win.empty());
    int64_t best = -1;
    for (const auto& [xc, t] : win) {
      Shape xi = xc;
      xi[1] = at[1];
      const int64_t i = Ravel(k_.x, xi);
      if (best < 0 || xd[i] > xd[best]) best = i;  // the first max, row-major
      for (int inc = 0; inc < 2; ++inc) yavg[inc][out] += xd[i];
    }
    ymax[out] = xd[best];
    gmax[best] += dyd[out];
    ggmax[out] = ddxd[best];
    for (int inc = 0; inc < 2; ++inc) {
      const double div = inc ? static_cast<double>(cells) : static_cast<double>(win.size());
      yavg[inc][out] /= div;
      for (const auto& [xc, t] : win) {
        Shape xi = xc;
        xi[1] = at[1];
        gavg[inc][Ravel(k_.x, xi)] += dyd[out] / div;
      }
    }
  });
  const AttrMap max = k_.pool_attrs(false, false);
  ExpectNear(RunOk(PrimId::kMaxPool2d, {x}, max), ys, ymax);
  ExpectNear(RunOk(PrimId::kMaxPool2dGrad, {x, dy}, max), k_.x, gmax);
  ExpectNear(RunOk(PrimId::kMaxPool2dGradGrad, {x, ddx}, max), ys, ggmax);
  for (int inc = 0; inc < 2; ++inc) {
    SCOPED_TRACE(inc ? "count_include_pad" : "count real cells");
    const AttrMap avg = k_.pool_attrs(true, inc != 0);
    ExpectNear(RunOk(PrimId::kAvgPool2d, {x}, avg), ys, yavg[inc]);
    ExpectNear(RunOk(PrimId::kAvgPool2dGrad, {dy, x}, avg), k_.x, gavg[inc]);
  }
}

std::vector<WindowCase> PoolCases() {
  return {
      {"p3d_k2", {2, 3, 4, 6, 6}, {2, 2, 2}},
      {"p3d_k3_s2_pad1", {2, 2, 5, 7, 6}, {3, 3, 3}, {2, 2, 2}, {}, {1, 1, 1}},
      // r3d's stem pool keeps the time axis: kernel (1, 3, 3).
      {"p3d_k133_s122", {1, 4, 3, 9, 8}, {1, 3, 3}, {1, 2, 2}, {}, {0, 1, 1}},
      {"p3d_asym_pad", {2, 2, 6, 5, 7}, {2, 3, 2}, {1, 2, 3}, {}, {0, 1, 1, 0, 1, 1}},
      {"p3d_odd_sizes_k2", {1, 3, 5, 5, 5}, {2, 2, 2}},
      {"p1d_native", {2, 3, 11}, {3}, {2}, {}, {1}},
      {"p2d_reference_check", {2, 2, 7, 6}, {3, 2}, {2, 1}, {}, {1, 1, 0, 1}},
  };
}

INSTANTIATE_TEST_SUITE_P(Cases, PoolNdTest, Combine(ValuesIn(PoolCases()), Values(kF32, kF64)),
                         CaseName);

// Ties go to the first maximum in row-major (depth, height, width) order, as in
// 2-D: a window of equal values routes its gradient to its front-top-left cell.
TEST(PoolNdEdgeTest, TiesGoToTheFirstCellInRowMajorOrder) {
  Tensor x = MakeTensor(kF64, {1, 1, 2, 2, 2}, std::vector<double>(8, 1.0));
  Tensor dy = MakeTensor(kF64, {1, 1, 1, 1, 1}, {5.0});
  const AttrMap a = {{"kernel", AttrValue(Ints{2, 2, 2})}};
  EXPECT_EQ(ToDoubles(RunOk(PrimId::kMaxPool2dGrad, {x, dy}, a)),
            (std::vector<double>{5, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(WindowNdErrorTest, RanksAndAttributeLengths) {
  std::mt19937_64 rng(1);
  Tensor x5 = RandomTensor(kF32, {1, 2, 3, 4, 4}, rng);
  ExpectRunError(PrimId::kConv2d, {x5, RandomTensor(kF32, {3, 2, 2, 2}, rng)}, {},
                 "input 1 must be a rank-5 (O, C/groups, kernel...) filter tensor like input 0");
  ExpectRunError(PrimId::kConv2d, {x5, RandomTensor(kF32, {3, 2, 2, 2, 2}, rng)},
                 {{"stride", AttrValue(Ints{1, 1})}},
                 "attribute 'stride' must be 3 values (one per spatial axis), each >= 1, got [1, 1]");
  ExpectRunError(PrimId::kConv2d, {x5, RandomTensor(kF32, {3, 2, 2, 2, 2}, rng)},
                 {{"padding", AttrValue(Ints{1, 1, 1, 1})}},
                 "attribute 'padding' must be 3 values (symmetric) or 6 (begin, end per spatial axis)");
  ExpectRunError(PrimId::kConv2d, {x5, RandomTensor(kF32, {3, 2, 4, 2, 2}, rng)}, {},
                 "the padded input depth 3 (3 + 0 + 0) is smaller than the kernel depth 4");
  ExpectRunError(PrimId::kMaxPool2d, {x5}, {{"kernel", AttrValue(Ints{2, 2, 2})},
                                            {"padding", AttrValue(Ints{2, 0, 0})}},
                 "the first pooling window along the depth lies entirely in the padding");
  ExpectRunError(PrimId::kMaxPool2d, {RandomTensor(kF32, {1, 2, 5}, rng)},
                 {{"kernel", AttrValue(Ints{7})}},
                 "the padded input length 5 (5 + 0 + 0) is smaller than the kernel length 7");
  ExpectRunError(PrimId::kAvgPool2dGrad,
                 {RandomTensor(kF32, {1, 2, 1, 2, 2}, rng), RandomTensor(kF32, {1, 2, 4, 4}, rng)},
                 {{"kernel", AttrValue(Ints{2, 2, 2})}},
                 "input 1 must be a rank-5 (N, C, spatial...) input-shape tensor like input 0");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
