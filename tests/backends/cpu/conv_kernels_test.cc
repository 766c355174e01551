// CPU kernels of the convolution and pooling family against naive float64 loops
// written straight from the definitions, plus adjoint identities:
//   <conv2d(x, w), dy> == <x, backprop_input(dy, w)> == <w, backprop_filter(x, dy)>.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "backends/cpu/dnnl_conv.h"
#include "backends/cpu/parallel.h"
#include "backends/kernel_cache.h"
#include "absl/strings/match.h"
#include "core/primitive.h"
#include "core/scalar.h"
#include "core/tensor.h"
#include "core/value.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/conv_window.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::Combine, ::testing::Values, ::testing::ValuesIn;

// "<case>_<dtype>": the name of a test over (case, dtype).
template <typename Case>
std::string CaseName(const ::testing::TestParamInfo<std::tuple<Case, DType>>& info) {
  return std::get<0>(info.param).name + "_" + DTypeName(std::get<1>(info.param));
}

// ----- Helpers -------------------------------------------------------------------------
// Padding as [top, bottom, left, right].
Ints Pads4(const Ints& p) { return p.size() == 2 ? Ints{p[0], p[0], p[1], p[1]} : p; }

// Index of (a, b, c, d) in a row-major rank-4 shape.
int64_t At(const Shape& s, int64_t a, int64_t b, int64_t c, int64_t d) {
  return ((a * s[1] + b) * s[2] + c) * s[3] + d;
}

// A stable seed per test case (FNV-1a of its name and dtype), printed on failure.
uint64_t Seed(const std::string& name, DType dtype) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name + DTypeName(dtype)) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Tolerance for a result of magnitude up to `scale`: ~1e-12 relative in f64 (sums
// of a few hundred products), ~1e-5 in f32.
double Tol(DType t, double scale) { return (t == kF64 ? 1e-12 : 2e-5) * (1 + scale); }

// Checks dtype, shape and values of `got` against a float64 reference.
void ExpectClose(const Tensor& got, DType dtype, const Shape& shape,
                 const std::vector<double>& want) {
  ASSERT_TRUE(got.defined());
  EXPECT_EQ(got.dtype(), dtype);
  ASSERT_EQ(got.shape(), shape) << got.TypeString();
  EXPECT_LE(MaxAbsDiff(got, want), Tol(dtype, MaxAbs(want))) << got.DebugString();
}

// ----- Naive convolution ------------------------------------------------------------------
struct ConvCase {
  std::string name;
  Shape x, w;  // [N, C, H, W], [O, C/groups, KH, KW]
  Ints stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;

  AttrMap attrs() const {
    return {{"stride", AttrValue(stride)},
            {"padding", AttrValue(padding)},
            {"dilation", AttrValue(dilation)},
            {"groups", AttrValue(groups)}};
  }
  Shape y() const {
    Ints p = Pads4(padding);
    int64_t oh = (x[2] + p[0] + p[1] - dilation[0] * (w[2] - 1) - 1) / stride[0] + 1;
    int64_t ow = (x[3] + p[2] + p[3] - dilation[1] * (w[3] - 1) - 1) / stride[1] + 1;
    return {x[0], w[0], oh, ow};
  }
};

std::ostream& operator<<(std::ostream& os, const ConvCase& c) { return os << c.name; }

// Calls fn(x_index, w_index, y_index) for every product x*w that conv2d sums:
// y[n,o,i,j] += x[n, g*Cg + c, i*sh - top + p*dh, j*sw - left + q*dw] * w[o,c,p,q].
template <typename Fn>
void ForEachTap(const ConvCase& k, Fn&& fn) {
  Shape y = k.y();
  Ints pad = Pads4(k.padding);
  int64_t cg = k.w[1], og = k.w[0] / k.groups;
  for (int64_t n = 0; n < y[0]; ++n)
    for (int64_t o = 0; o < y[1]; ++o)
      for (int64_t i = 0; i < y[2]; ++i)
        for (int64_t j = 0; j < y[3]; ++j)
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t p = 0; p < k.w[2]; ++p)
              for (int64_t q = 0; q < k.w[3]; ++q) {
                int64_t h = i * k.stride[0] - pad[0] + p * k.dilation[0];
                int64_t v = j * k.stride[1] - pad[2] + q * k.dilation[1];
                if (h < 0 || h >= k.x[2] || v < 0 || v >= k.x[3]) continue;
                fn(At(k.x, n, (o / og) * cg + c, h, v), At(k.w, o, c, p, q), At(y, n, o, i, j));
              }
}

std::vector<double> NaiveConv(const ConvCase& k, const std::vector<double>& x,
                              const std::vector<double>& w) {
  std::vector<double> y(NumElementsOf(k.y()), 0.0);
  ForEachTap(k, [&](int64_t xi, int64_t wi, int64_t yi) { y[yi] += x[xi] * w[wi]; });
  return y;
}

std::vector<double> NaiveBackpropInput(const ConvCase& k, const std::vector<double>& dy,
                                       const std::vector<double>& w) {
  std::vector<double> dx(NumElementsOf(k.x), 0.0);
  ForEachTap(k, [&](int64_t xi, int64_t wi, int64_t yi) { dx[xi] += dy[yi] * w[wi]; });
  return dx;
}

std::vector<double> NaiveBackpropFilter(const ConvCase& k, const std::vector<double>& x,
                                        const std::vector<double>& dy) {
  std::vector<double> dw(NumElementsOf(k.w), 0.0);
  ForEachTap(k, [&](int64_t xi, int64_t wi, int64_t yi) { dw[wi] += dy[yi] * x[xi]; });
  return dw;
}

std::vector<ConvCase> ConvCases() {
  return {
      {"basic_3x3_pad1", {2, 3, 6, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1}},
      {"stride2_asym_pad", {2, 3, 9, 8}, {5, 3, 3, 2}, {2, 2}, {1, 2, 0, 1}},
      {"dilation2", {2, 2, 9, 10}, {3, 2, 3, 3}, {1, 1}, {2, 1}, {2, 2}},
      {"groups2", {3, 4, 7, 6}, {6, 2, 3, 3}, {1, 2}, {1, 0}, {1, 1}, 2},
      {"depthwise", {2, 5, 6, 7}, {5, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 5},
      {"depthwise_multiplier2", {2, 3, 6, 6}, {6, 1, 2, 3}, {2, 1}, {0, 1, 1, 0}, {1, 1}, 3},
      // The direct depthwise loops: strides, dilations, padding wider than the
      // kernel (rows and columns of padding only), 1x1 taps, threads.
      {"depthwise_stride2_dilated", {2, 4, 11, 9}, {4, 1, 3, 3}, {2, 2}, {2, 0, 1, 3}, {2, 2}, 4},
      {"depthwise_multiplier3_stride3", {1, 2, 10, 13}, {6, 1, 3, 2}, {3, 3}, {1, 1}, {1, 3}, 2},
      {"depthwise_wide_padding", {1, 3, 4, 4}, {3, 1, 2, 2}, {1, 1}, {4, 4}, {1, 1}, 3},
      {"depthwise_1x1", {2, 4, 5, 6}, {4, 1, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 4},
      {"depthwise_parallel", {4, 16, 40, 36}, {32, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 16},
      {"pointwise_1x1", {3, 6, 5, 4}, {7, 6, 1, 1}},
      // Pointwise convolutions run on NCHW through oneDNN's GEMM kernel: one big
      // enough for its threads.
      {"pointwise_1x1_large", {8, 32, 14, 14}, {64, 32, 1, 1}},
      {"pointwise_groups3", {2, 6, 4, 5}, {9, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 3},
      {"1x1_stride2_pad", {2, 3, 7, 6}, {4, 3, 1, 1}, {2, 2}, {1, 0, 0, 1}},
      {"mixed_everything", {2, 6, 11, 9}, {3, 2, 3, 2}, {2, 3}, {2, 0, 1, 3}, {1, 2}, 3},
      {"kernel_equals_input", {2, 3, 4, 5}, {2, 3, 4, 5}},
      {"stride_larger_than_kernel", {1, 2, 10, 10}, {2, 2, 2, 2}, {4, 3}, {1, 1}},
      {"batch8_parallel", {8, 8, 12, 12}, {16, 8, 3, 3}, {1, 1}, {1, 1}},
      // Uneven batch chunks (5 samples in 4) with groups, strides, dilation.
      {"batch5_groups_strided", {5, 4, 9, 8}, {6, 2, 3, 2}, {2, 1}, {1, 0, 2, 1}, {1, 2}, 2},
      {"batch1_large_gemm", {1, 32, 24, 24}, {64, 32, 3, 3}, {1, 1}, {1, 1}},
      // One group, 16+ input channels: the forward runs on NHWC in oneDNN.
      {"nhwc_forward_strided_asym", {2, 16, 15, 13}, {24, 16, 3, 2}, {2, 1}, {1, 0, 2, 1}},
      {"nhwc_forward_dilated_batch5", {5, 20, 9, 11}, {8, 20, 2, 3}, {1, 2}, {1, 1}, {2, 1}},
      // Column matrices over the kernels' scratch budget (4M elements): im2col tiles.
      {"tiled_im2col", {1, 64, 92, 90}, {2, 64, 3, 3}, {1, 1}, {1, 1}},
      {"tiled_im2col_dilated_batch2", {2, 32, 130, 128}, {3, 32, 3, 3}, {1, 1}, {2, 2}, {2, 2}},
      // Whole bands of output rows that read padding only.
      {"padding_only_row_bands", {1, 2, 3, 3}, {3, 2, 1, 1}, {1, 1}, {4, 4}},
      {"padding_only_row_bands_batch2", {2, 3, 4, 5}, {2, 3, 2, 2}, {2, 1}, {5, 0, 1, 1}},
      {"empty_batch", {0, 3, 5, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1}},
      {"zero_input_channels", {2, 0, 5, 5}, {4, 0, 3, 3}},
      {"zero_output_channels", {2, 3, 5, 5}, {0, 3, 3, 3}},
      {"zero_height_padding_only", {2, 3, 0, 4}, {2, 3, 1, 3}, {1, 1}, {1, 1}},
  };
}

// A test over (case, dtype): the case k_ and dtype_, and a generator seeded per
// test case (the seed is printed on failure).
template <typename Case>
class CaseTest : public ::testing::TestWithParam<std::tuple<Case, DType>> {
 protected:
  void SetUp() override {
    std::tie(k_, dtype_) = this->GetParam();
    seed_ = Seed(k_.name, dtype_);
    rng_.seed(seed_);
  }
  // The kernel of `id` on `in` against the float64 reference `want` of `shape`.
  void ExpectKernel(PrimId id, std::vector<Value> in, const AttrMap& attrs, const Shape& shape,
                    const std::vector<double>& want) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed_);
    ExpectClose(RunOk(id, std::move(in), attrs), dtype_, shape, want);
  }

  Case k_;
  DType dtype_;
  uint64_t seed_;
  std::mt19937_64 rng_;
};

class ConvKernelTest : public CaseTest<ConvCase> {
 protected:
  void SetUp() override {
    CaseTest::SetUp();
    x_ = RandomTensor(dtype_, k_.x, rng_);
    w_ = RandomTensor(dtype_, k_.w, rng_);
    dy_ = RandomTensor(dtype_, k_.y(), rng_);
  }

  Tensor x_, w_, dy_;
};

TEST_P(ConvKernelTest, Conv2dMatchesNaiveLoops) {
  ExpectKernel(PrimId::kConv2d, {x_, w_}, k_.attrs(), k_.y(),
               NaiveConv(k_, ToDoubles(x_), ToDoubles(w_)));
}

TEST_P(ConvKernelTest, BackpropInputMatchesNaiveLoops) {
  ExpectKernel(PrimId::kConv2dBackpropInput, {dy_, w_, x_}, k_.attrs(), k_.x,
               NaiveBackpropInput(k_, ToDoubles(dy_), ToDoubles(w_)));
}

TEST_P(ConvKernelTest, BackpropFilterMatchesNaiveLoops) {
  ExpectKernel(PrimId::kConv2dBackpropFilter, {x_, dy_, w_}, k_.attrs(), k_.w,
               NaiveBackpropFilter(k_, ToDoubles(x_), ToDoubles(dy_)));
}

// oneDNN's forward and backward data either run, or are declined for one of the
// two reasons dnnl_conv.cc gives (a pointwise window: kgrad's per-sample GEMM;
// a GEMM-based oneDNN kernel, whose sums depend on the thread count).
void ExpectTakenOrDeclined(const absl::Status& s) {
  if (s.ok()) return;
  ASSERT_TRUE(absl::IsUnimplemented(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "pointwise") ||
              absl::StrContains(s.message(), "sums by the thread count"))
      << s;
}

// The f32 kernels above go through oneDNN where it applies; this checks that it
// does apply (a silent fallback to the im2col loops would pass those tests) and
// runs oneDNN's three convolutions directly against the naive loops. Empty
// cases are the own loops' (nothing to compute).
TEST_P(ConvKernelTest, OneDnnTakesEveryNonEmptyF32Case) {
  absl::StatusOr<PrimitivePtr> p = DefaultRegistry().Make(PrimId::kConv2d, k_.attrs());
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<ops::ConvGeom> g = ops::ConvKernelGeom(**p, {&x_, &w_});
  ASSERT_TRUE(g.ok()) << g.status();
  if (dtype_ != kF32) {
    EXPECT_FALSE(cpu::conv_internal::DnnlConvApplies(*g, dtype_));  // f64: the own loops
    return;
  }
  bool empty = NumElementsOf(k_.x) == 0 || NumElementsOf(k_.w) == 0 || NumElementsOf(k_.y()) == 0;
#ifdef KGRAD_NO_DNNL
  EXPECT_FALSE(cpu::conv_internal::DnnlConvApplies(*g, kF32));
#else
  ASSERT_EQ(cpu::conv_internal::DnnlConvApplies(*g, kF32), !empty);
  if (empty) return;
  std::vector<Value> none;
  KernelContext ctx(**p, absl::MakeSpan(none), CpuDevice());
  using cpu::conv_internal::DnnlConv, cpu::conv_internal::DnnlConvKind;
  Tensor y = MakeTensor(kF32, k_.y(), std::vector<double>(NumElementsOf(k_.y()), 7.0));
  Tensor dx = MakeTensor(kF32, k_.x, std::vector<double>(NumElementsOf(k_.x), 7.0));
  Tensor dw = MakeTensor(kF32, k_.w, std::vector<double>(NumElementsOf(k_.w), 7.0));
  const auto f = [](const Tensor& t) { return t.mutable_data<float>(); };
  absl::Status fw = DnnlConv(ctx, *g, DnnlConvKind::kForward, f(x_), f(w_), f(y));
  ExpectTakenOrDeclined(fw);
  if (fw.ok()) ExpectClose(y, kF32, k_.y(), NaiveConv(k_, ToDoubles(x_), ToDoubles(w_)));
  absl::Status bd = DnnlConv(ctx, *g, DnnlConvKind::kBackwardData, f(dx), f(w_), f(dy_));
  ExpectTakenOrDeclined(bd);
  if (bd.ok()) ExpectClose(dx, kF32, k_.x, NaiveBackpropInput(k_, ToDoubles(dy_), ToDoubles(w_)));
  absl::Status bw = DnnlConv(ctx, *g, DnnlConvKind::kBackwardWeights, f(x_), f(dw), f(dy_));
  if (k_.x[0] < cpu::conv_internal::kWeightChunks) {
    // Few samples: the im2col kernel's output-channel blocks take it.
    EXPECT_TRUE(absl::IsUnimplemented(bw)) << bw;
    return;
  }
  ASSERT_TRUE(bw.ok()) << bw;
  ExpectClose(dw, kF32, k_.w, NaiveBackpropFilter(k_, ToDoubles(x_), ToDoubles(dy_)));
#endif
}

// A weight the step keeps (KernelContext::persistent) is reordered once and its
// blocked copy reused: the second call gives the same result, a different weight
// tensor (another buffer) its own result, never the kept one's.
TEST_P(ConvKernelTest, KeptWeightLayoutsGiveTheResultsOfFreshOnes) {
  if (dtype_ != kF32) return;
  absl::StatusOr<PrimitivePtr> p = DefaultRegistry().Make(PrimId::kConv2d, k_.attrs());
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<ops::ConvGeom> g = ops::ConvKernelGeom(**p, {&x_, &w_});
  ASSERT_TRUE(g.ok()) << g.status();
  if (!cpu::conv_internal::DnnlConvApplies(*g, kF32)) return;
  std::vector<Value> none;
  KernelContext ctx(**p, absl::MakeSpan(none), CpuDevice());
  KernelCache cache;
  ctx.set_cache(&cache, 0b10);
  using cpu::conv_internal::DnnlConv, cpu::conv_internal::DnnlConvKind;
  const auto f = [](const Tensor& t) { return t.mutable_data<float>(); };
  std::mt19937_64 rng(Seed("kept_weights", kF32));
  Tensor w2 = RandomTensor(kF32, k_.w, rng);
  for (const Tensor* w : {&w_, &w_, &w2, &w_}) {
    Tensor y = MakeTensor(kF32, k_.y(), std::vector<double>(NumElementsOf(k_.y()), 7.0));
    absl::Status fw = DnnlConv(ctx, *g, DnnlConvKind::kForward, f(x_), f(*w), f(y), w);
    ExpectTakenOrDeclined(fw);
    if (fw.ok()) ExpectClose(y, kF32, k_.y(), NaiveConv(k_, ToDoubles(x_), ToDoubles(*w)));
    Tensor dx = MakeTensor(kF32, k_.x, std::vector<double>(NumElementsOf(k_.x), 7.0));
    absl::Status bd = DnnlConv(ctx, *g, DnnlConvKind::kBackwardData, f(dx), f(*w), f(dy_), w);
    ExpectTakenOrDeclined(bd);
    if (bd.ok()) ExpectClose(dx, kF32, k_.x, NaiveBackpropInput(k_, ToDoubles(dy_), ToDoubles(*w)));
  }
  EXPECT_LE(cache.size(), 2u);  // one layout per direction at most, w2 replaced w_'s
}

// A caller's thread count changes with how many runs share the cores, and a
// result must not change with it (tests/stress/concurrency_test checks whole
// programs bit for bit): every kernel gives the same bits on 1, 2, 3 and 5
// threads.
TEST_P(ConvKernelTest, ResultsDoNotDependOnTheThreadCount) {
  const int saved = cpu::MaxThreads();
  std::vector<Tensor> first;
  for (int threads : {1, 2, 3, 5}) {
    cpu::SetMaxThreads(threads);
    std::vector<Tensor> got = {
        RunOk(PrimId::kConv2d, {x_, w_}, k_.attrs()),
        RunOk(PrimId::kConv2dBackpropInput, {dy_, w_, x_}, k_.attrs()),
        RunOk(PrimId::kConv2dBackpropFilter, {x_, dy_, w_}, k_.attrs()),
    };
    if (first.empty()) {
      first = got;
      continue;
    }
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(got[i].defined() && first[i].defined());
      EXPECT_EQ(MaxAbsDiff(got[i], ToDoubles(first[i])), 0.0)
          << "op " << i << " on " << threads << " threads";
    }
  }
  cpu::SetMaxThreads(saved);
}

// The adjoint identities, checked in f64 only (f32 rounding hides nothing there).
class ConvAdjointTest : public ConvKernelTest {};

// <conv2d(x, w), dy> == <x, backprop_input(dy, w)> == <w, backprop_filter(x, dy)>.
TEST_P(ConvAdjointTest, BackpropOpsAreExactAdjoints) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  Tensor y = RunOk(PrimId::kConv2d, {x_, w_}, k_.attrs());
  Tensor dx = RunOk(PrimId::kConv2dBackpropInput, {dy_, w_, x_}, k_.attrs());
  Tensor dw = RunOk(PrimId::kConv2dBackpropFilter, {x_, dy_, w_}, k_.attrs());
  ASSERT_TRUE(y.defined() && dx.defined() && dw.defined());
  double a = Dot(ToDoubles(y), ToDoubles(dy_));
  double b = Dot(ToDoubles(x_), ToDoubles(dx));
  double c = Dot(ToDoubles(w_), ToDoubles(dw));
  double tol = 1e-10 * (1 + std::abs(a));
  EXPECT_NEAR(a, b, tol);
  EXPECT_NEAR(a, c, tol);
}

INSTANTIATE_TEST_SUITE_P(Cases, ConvKernelTest, Combine(ValuesIn(ConvCases()), Values(kF32, kF64)),
                         CaseName<ConvCase>);
INSTANTIATE_TEST_SUITE_P(Cases, ConvAdjointTest, Combine(ValuesIn(ConvCases()), Values(kF64)),
                         CaseName<ConvCase>);

// The declines above must stay the exception: a 3x3 convolution of 16 channels
// has a direct oneDNN kernel on every x86-64 machine kgrad builds for (AVX2 and
// AVX-512), and its forward and backward data run there.
TEST(ConvKernelEdgeTest, OneDnnRunsAnOrdinaryConvolution) {
#ifndef KGRAD_NO_DNNL
  ConvCase k{"ordinary", {2, 16, 12, 12}, {16, 16, 3, 3}, {1, 1}, {1, 1}};
  absl::StatusOr<PrimitivePtr> p = DefaultRegistry().Make(PrimId::kConv2d, k.attrs());
  ASSERT_TRUE(p.ok()) << p.status();
  std::mt19937_64 rng(Seed(k.name, kF32));
  Tensor x = RandomTensor(kF32, k.x, rng), w = RandomTensor(kF32, k.w, rng);
  Tensor dy = RandomTensor(kF32, k.y(), rng);
  absl::StatusOr<ops::ConvGeom> g = ops::ConvKernelGeom(**p, {&x, &w});
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<Value> none;
  KernelContext ctx(**p, absl::MakeSpan(none), CpuDevice());
  using cpu::conv_internal::DnnlConv, cpu::conv_internal::DnnlConvKind;
  const auto f = [](const Tensor& t) { return t.mutable_data<float>(); };
  Tensor y = MakeTensor(kF32, k.y(), std::vector<double>(NumElementsOf(k.y()), 7.0));
  ASSERT_TRUE(DnnlConv(ctx, *g, DnnlConvKind::kForward, f(x), f(w), f(y)).ok());
  ExpectClose(y, kF32, k.y(), NaiveConv(k, ToDoubles(x), ToDoubles(w)));
  Tensor dx = MakeTensor(kF32, k.x, std::vector<double>(NumElementsOf(k.x), 7.0));
  ASSERT_TRUE(DnnlConv(ctx, *g, DnnlConvKind::kBackwardData, f(dx), f(w), f(dy)).ok());
  ExpectClose(dx, kF32, k.x, NaiveBackpropInput(k, ToDoubles(dy), ToDoubles(w)));
#endif
}

TEST(ConvKernelEdgeTest, EmptyReductionsGiveZeros) {
  // No input channels: y is all zeros. No samples: dw is all zeros.
  Tensor x = MakeTensor(kF64, {2, 0, 3, 3}, {});
  Tensor w = MakeTensor(kF64, {4, 0, 2, 2}, {});
  Tensor y = RunOk(PrimId::kConv2d, {x, w}, {});
  ExpectClose(y, kF64, {2, 4, 2, 2}, std::vector<double>(32, 0.0));
  Tensor x0 = MakeTensor(kF32, {0, 2, 3, 3}, {});
  Tensor dy0 = MakeTensor(kF32, {0, 3, 2, 2}, {});
  Tensor w0 = MakeTensor(kF32, {3, 2, 2, 2}, std::vector<double>(24, 7.0));
  Tensor dw = RunOk(PrimId::kConv2dBackpropFilter, {x0, dy0, w0}, {});
  ExpectClose(dw, kF32, {3, 2, 2, 2}, std::vector<double>(24, 0.0));
}

TEST(ConvKernelEdgeTest, HandComputedExample) {
  // x = 1..9 in a 3x3 plane, w = [[1, 0], [0, -1]]: y[i,j] = x[i,j] - x[i+1,j+1] = -4.
  Tensor x = MakeTensor(kF32, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor w = MakeTensor(kF32, {1, 1, 2, 2}, {1, 0, 0, -1});
  ExpectClose(RunOk(PrimId::kConv2d, {x, w}, {}), kF32, {1, 1, 2, 2}, {-4, -4, -4, -4});
  // No kernel flip: a filter that picks its top-left tap returns the top-left window cells.
  Tensor pick = MakeTensor(kF64, {1, 1, 2, 2}, {1, 0, 0, 0});
  Tensor xd = MakeTensor(kF64, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  ExpectClose(RunOk(PrimId::kConv2d, {xd, pick}, {}), kF64, {1, 1, 2, 2}, {1, 2, 4, 5});
}

TEST(ConvKernelEdgeTest, RunTimeErrors) {
  std::mt19937_64 rng(7);
  Tensor x = RandomTensor(kF32, {1, 3, 5, 5}, rng);
  Tensor w = RandomTensor(kF32, {4, 3, 3, 3}, rng);
  ExpectRunError(PrimId::kConv2d, {x, RandomTensor(kF32, {4, 2, 3, 3}, rng)}, {},
                 "must have C/groups = 3 input channels");
  ExpectRunError(PrimId::kConv2d, {x, RandomTensor(kF64, {4, 3, 3, 3}, rng)}, {},
                 "input 1 must be f32 like input 0, got f64[4,3,3,3]");
  ExpectRunError(PrimId::kConv2d, {RandomTensor(kF32, {3, 5, 5}, rng), w}, {},
                 "input 1 must be a rank-3 (O, C/groups, kernel...) filter tensor like input 0");
  ExpectRunError(PrimId::kConv2d, {Tensor::FromScalar<float>(1.0f), w}, {},
                 "input 0 must be a rank-3, 4 or 5 (N, C, spatial...) input tensor, got f32[]");
  ExpectRunError(PrimId::kConv2d, {RandomTensor(DType::kInt32, {1, 3, 5, 5}, rng), w}, {},
                 "floating-point");
  ExpectRunError(PrimId::kConv2d, {Value(Scalar::Float(1.0, kF32)), w}, {}, "must be a tensor");
  ExpectRunError(PrimId::kConv2d, {RandomTensor(kF32, {1, 3, 2, 5}, rng), w}, {},
                 "padded input height 2 (2 + 0 + 0) is smaller than the kernel height 3");
  ExpectRunError(PrimId::kConv2d, {x, w}, {{"stride", AttrValue(Ints{0, 1})}},
                 "attribute 'stride'");
  ExpectRunError(PrimId::kConv2d, {x, w}, {{"padding", AttrValue(Ints{1, 1, 1})}},
                 "attribute 'padding'");
  ExpectRunError(PrimId::kConv2d, {x, w}, {{"dilation", AttrValue(Ints{-1, 1})}},
                 "attribute 'dilation'");
  ExpectRunError(PrimId::kConv2d, {x, w}, {{"groups", AttrValue(int64_t{2})}},
                 "not divisible by groups=2");
  ExpectRunError(PrimId::kConv2d, {x, RandomTensor(kF32, {4, 3, 0, 3}, rng)}, {},
                 "kernel is at least 1 along every spatial axis");
  ExpectRunError(PrimId::kConv2dBackpropInput, {RandomTensor(kF32, {1, 4, 3, 2}, rng), w, x}, {},
                 "input 0 must be shaped [1,4,3,3] (the conv2d output of inputs 2 and 1)");
  ExpectRunError(PrimId::kConv2dBackpropFilter, {x, RandomTensor(kF32, {1, 4, 3, 4}, rng), w}, {},
                 "input 1 must be shaped [1,4,3,3] (the conv2d output of inputs 0 and 2)");
  ExpectRunError(PrimId::kConv2dBackpropFilter,
                 {x, RandomTensor(kF32, {1, 4, 3, 3}, rng), RandomTensor(kF64, {4, 3, 3, 3}, rng)},
                 {}, "input 2 must be f32 like input 0");
}

// ----- Naive pooling -------------------------------------------------------------------------
struct PoolCase {
  std::string name;
  Shape x;
  Ints kernel, stride{}, padding{0, 0};

  AttrMap attrs(bool include_pad = true, bool avg = false) const {
    AttrMap a = {{"kernel", AttrValue(kernel)},
                 {"stride", AttrValue(stride)},
                 {"padding", AttrValue(padding)}};
    if (avg) a["count_include_pad"] = AttrValue(include_pad);
    return a;
  }
  Ints strides() const { return stride.empty() ? kernel : stride; }
  Shape y() const {
    Ints p = Pads4(padding), s = strides();
    return {x[0], x[1], (x[2] + p[0] + p[1] - kernel[0]) / s[0] + 1,
            (x[3] + p[2] + p[3] - kernel[1]) / s[1] + 1};
  }
};

std::ostream& operator<<(std::ostream& os, const PoolCase& c) { return os << c.name; }

// fn(y_index, cells) with the x indices of the non-padding cells of each window in
// row-major window order.
template <typename Fn>
void ForEachWindow(const PoolCase& k, Fn&& fn) {
  Shape y = k.y();
  Ints p = Pads4(k.padding), s = k.strides();
  for (int64_t n = 0; n < y[0]; ++n)
    for (int64_t c = 0; c < y[1]; ++c)
      for (int64_t i = 0; i < y[2]; ++i)
        for (int64_t j = 0; j < y[3]; ++j) {
          std::vector<int64_t> cells;
          for (int64_t a = 0; a < k.kernel[0]; ++a)
            for (int64_t b = 0; b < k.kernel[1]; ++b) {
              int64_t h = i * s[0] - p[0] + a, v = j * s[1] - p[2] + b;
              if (h >= 0 && h < k.x[2] && v >= 0 && v < k.x[3]) {
                cells.push_back(At(k.x, n, c, h, v));
              }
            }
          fn(At(y, n, c, i, j), cells);
        }
}

// The first maximum of the window in row-major order.
int64_t NaiveArgmax(const std::vector<double>& x, const std::vector<int64_t>& cells) {
  int64_t best = cells[0];
  for (int64_t c : cells) {
    if (x[c] > x[best]) best = c;
  }
  return best;
}

std::vector<double> NaiveMaxPool(const PoolCase& k, const std::vector<double>& x) {
  std::vector<double> y(NumElementsOf(k.y()));
  ForEachWindow(
      k, [&](int64_t o, const std::vector<int64_t>& cells) { y[o] = x[NaiveArgmax(x, cells)]; });
  return y;
}

std::vector<double> NaiveMaxPoolGrad(const PoolCase& k, const std::vector<double>& x,
                                     const std::vector<double>& dy) {
  std::vector<double> dx(x.size(), 0.0);
  ForEachWindow(
      k, [&](int64_t o, const std::vector<int64_t>& cells) { dx[NaiveArgmax(x, cells)] += dy[o]; });
  return dx;
}

std::vector<double> NaiveMaxPoolGradGrad(const PoolCase& k, const std::vector<double>& x,
                                         const std::vector<double>& ddx) {
  std::vector<double> y(NumElementsOf(k.y()));
  ForEachWindow(
      k, [&](int64_t o, const std::vector<int64_t>& cells) { y[o] = ddx[NaiveArgmax(x, cells)]; });
  return y;
}

double Divisor(const PoolCase& k, bool include_pad, const std::vector<int64_t>& cells) {
  return include_pad ? static_cast<double>(k.kernel[0] * k.kernel[1])
                     : static_cast<double>(cells.size());
}

std::vector<double> NaiveAvgPool(const PoolCase& k, bool include_pad,
                                 const std::vector<double>& x) {
  std::vector<double> y(NumElementsOf(k.y()));
  ForEachWindow(k, [&](int64_t o, const std::vector<int64_t>& cells) {
    double s = 0;
    for (int64_t c : cells) s += x[c];
    y[o] = s / Divisor(k, include_pad, cells);
  });
  return y;
}

std::vector<double> NaiveAvgPoolGrad(const PoolCase& k, bool include_pad,
                                     const std::vector<double>& dy) {
  std::vector<double> dx(NumElementsOf(k.x), 0.0);
  ForEachWindow(k, [&](int64_t o, const std::vector<int64_t>& cells) {
    for (int64_t c : cells) dx[c] += dy[o] / Divisor(k, include_pad, cells);
  });
  return dx;
}

std::vector<PoolCase> PoolCases() {
  return {
      {"k2_default_stride", {2, 3, 6, 8}, {2, 2}},
      {"k2_default_stride_odd_input", {1, 2, 7, 5}, {2, 2}},
      // 2x2 at stride 2 has its own loops: many planes over the threads, long rows.
      {"k2_many_planes", {4, 8, 28, 30}, {2, 2}},
      {"k2_explicit_stride2_pad0", {2, 3, 9, 6}, {2, 2}, {2, 2}, {0, 0}},
      {"k2_stride2_pad1_general", {2, 3, 8, 6}, {2, 2}, {2, 2}, {1, 1}},
      {"k3_s2_pad1_overlap", {2, 3, 9, 8}, {3, 3}, {2, 2}, {1, 1}},
      {"k3x2_asym_pad", {2, 2, 7, 9}, {3, 2}, {1, 2}, {2, 0, 1, 1}},
      {"k1", {2, 3, 4, 5}, {1, 1}},
      {"global", {3, 4, 5, 6}, {5, 6}},
      {"stride1_overlap", {1, 3, 6, 6}, {3, 3}, {1, 1}, {1, 1}},
      {"many_planes_parallel", {8, 16, 20, 20}, {3, 3}, {2, 2}, {1, 1}},
      {"empty_batch", {0, 3, 6, 6}, {2, 2}},
      {"zero_channels", {2, 0, 6, 6}, {3, 3}, {1, 1}, {1, 1}},
  };
}

class PoolKernelTest : public CaseTest<PoolCase> {
 protected:
  void SetUp() override {
    CaseTest::SetUp();
    // Small integers make ties common, which exercises the first-max rule.
    x_ = RandomTensor(dtype_, k_.x, rng_, -3.0, 3.0);
    x_ = MakeTensor(dtype_, k_.x, Rounded(ToDoubles(x_)));
    dy_ = RandomTensor(dtype_, k_.y(), rng_);
    ddx_ = RandomTensor(dtype_, k_.x, rng_);
  }
  static std::vector<double> Rounded(std::vector<double> v) {
    for (double& e : v) e = std::floor(e);
    return v;
  }

  Tensor x_, dy_, ddx_;
};

TEST_P(PoolKernelTest, MaxPoolMatchesNaiveLoops) {
  ExpectKernel(PrimId::kMaxPool2d, {x_}, k_.attrs(), k_.y(), NaiveMaxPool(k_, ToDoubles(x_)));
}

TEST_P(PoolKernelTest, MaxPoolGradRoutesToFirstMax) {
  ExpectKernel(PrimId::kMaxPool2dGrad, {x_, dy_}, k_.attrs(), k_.x,
               NaiveMaxPoolGrad(k_, ToDoubles(x_), ToDoubles(dy_)));
}

TEST_P(PoolKernelTest, MaxPoolGradGradGathersAtFirstMax) {
  ExpectKernel(PrimId::kMaxPool2dGradGrad, {x_, ddx_}, k_.attrs(), k_.y(),
               NaiveMaxPoolGradGrad(k_, ToDoubles(x_), ToDoubles(ddx_)));
}

TEST_P(PoolKernelTest, AvgPoolMatchesNaiveLoops) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  for (bool include_pad : {true, false}) {
    SCOPED_TRACE(include_pad ? "count_include_pad" : "exclude pad");
    Tensor y = RunOk(PrimId::kAvgPool2d, {x_}, k_.attrs(include_pad, true));
    ExpectClose(y, dtype_, k_.y(), NaiveAvgPool(k_, include_pad, ToDoubles(x_)));
    Tensor dx = RunOk(PrimId::kAvgPool2dGrad, {dy_, x_}, k_.attrs(include_pad, true));
    ExpectClose(dx, dtype_, k_.x, NaiveAvgPoolGrad(k_, include_pad, ToDoubles(dy_)));
  }
}

class PoolAdjointTest : public PoolKernelTest {};

// <max_pool2d_grad(x, dy), ddx> == <dy, max_pool2d_grad_grad(x, ddx)> and
// <avg_pool2d(x), dy> == <x, avg_pool2d_grad(dy)>, in f64.
TEST_P(PoolAdjointTest, GradOpsAreExactAdjoints) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  Tensor dx = RunOk(PrimId::kMaxPool2dGrad, {x_, dy_}, k_.attrs());
  Tensor gg = RunOk(PrimId::kMaxPool2dGradGrad, {x_, ddx_}, k_.attrs());
  ASSERT_TRUE(dx.defined() && gg.defined());
  double a = Dot(ToDoubles(dx), ToDoubles(ddx_)), b = Dot(ToDoubles(dy_), ToDoubles(gg));
  EXPECT_NEAR(a, b, 1e-10 * (1 + std::abs(a)));
  for (bool include_pad : {true, false}) {
    Tensor y = RunOk(PrimId::kAvgPool2d, {ddx_}, k_.attrs(include_pad, true));
    Tensor g = RunOk(PrimId::kAvgPool2dGrad, {dy_, ddx_}, k_.attrs(include_pad, true));
    ASSERT_TRUE(y.defined() && g.defined());
    double c = Dot(ToDoubles(y), ToDoubles(dy_)), d = Dot(ToDoubles(ddx_), ToDoubles(g));
    EXPECT_NEAR(c, d, 1e-10 * (1 + std::abs(c)));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, PoolKernelTest, Combine(ValuesIn(PoolCases()), Values(kF32, kF64)),
                         CaseName<PoolCase>);
INSTANTIATE_TEST_SUITE_P(Cases, PoolAdjointTest, Combine(ValuesIn(PoolCases()), Values(kF64)),
                         CaseName<PoolCase>);

TEST(PoolKernelEdgeTest, TiesGoToTheFirstMaxInRowMajorOrder) {
  // One 2x2 window of equal values, then a window whose max appears twice.
  Tensor x = MakeTensor(kF64, {1, 1, 2, 4}, {5, 5, 1, 7, 5, 5, 7, 2});
  Tensor dy = MakeTensor(kF64, {1, 1, 1, 2}, {10, 20});
  AttrMap a = {{"kernel", AttrValue(Ints{2, 2})}};
  ExpectClose(RunOk(PrimId::kMaxPool2d, {x}, a), kF64, {1, 1, 1, 2}, {5, 7});
  ExpectClose(RunOk(PrimId::kMaxPool2dGrad, {x, dy}, a), kF64, {1, 1, 2, 4},
              {10, 0, 0, 20, 0, 0, 0, 0});
  Tensor ddx = MakeTensor(kF64, {1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  ExpectClose(RunOk(PrimId::kMaxPool2dGradGrad, {x, ddx}, a), kF64, {1, 1, 1, 2}, {1, 4});
}

TEST(PoolKernelEdgeTest, PaddingIsNeverChosenAndOverlapsAccumulate) {
  // All-negative input with padding 1: a zero-padded max would return 0.
  Tensor x = MakeTensor(kF32, {1, 1, 2, 2}, {-4, -3, -2, -1});
  AttrMap a = {{"kernel", AttrValue(Ints{2, 2})},
               {"stride", AttrValue(Ints{1, 1})},
               {"padding", AttrValue(Ints{1, 1})}};
  ExpectClose(RunOk(PrimId::kMaxPool2d, {x}, a), kF32, {1, 1, 3, 3},
              {-4, -3, -3, -2, -1, -1, -2, -1, -1});
  // Every window routes to a real cell; -1 wins four windows.
  Tensor dy = MakeTensor(kF32, {1, 1, 3, 3}, std::vector<double>(9, 1.0));
  ExpectClose(RunOk(PrimId::kMaxPool2dGrad, {x, dy}, a), kF32, {1, 1, 2, 2}, {1, 2, 2, 4});
  // Averages: the corner window holds one real cell.
  a["count_include_pad"] = AttrValue(false);
  Tensor avg = RunOk(PrimId::kAvgPool2d, {x}, a);
  ExpectClose(avg, kF32, {1, 1, 3, 3}, {-4, -3.5, -3, -3, -2.5, -2, -2, -1.5, -1});
  a["count_include_pad"] = AttrValue(true);
  ExpectClose(RunOk(PrimId::kAvgPool2d, {x}, a), kF32, {1, 1, 3, 3},
              {-1, -1.75, -0.75, -1.5, -2.5, -1, -0.5, -0.75, -0.25});
}

TEST(PoolKernelEdgeTest, NaNPropagatesAndReceivesTheGradient) {
  Tensor x = MakeTensor(kF64, {1, 1, 2, 2}, {1, kNaN, 3, 2});
  AttrMap a = {{"kernel", AttrValue(Ints{2, 2})}};
  Tensor y = RunOk(PrimId::kMaxPool2d, {x}, a);
  ASSERT_TRUE(y.defined());
  EXPECT_TRUE(std::isnan(ToDoubles(y)[0]));
  Tensor dx = RunOk(PrimId::kMaxPool2dGrad, {x, MakeTensor(kF64, {1, 1, 1, 1}, {5})}, a);
  ExpectClose(dx, kF64, {1, 1, 2, 2}, {0, 5, 0, 0});
}

// 2x2 windows at stride 2 run their own loops; a right padding of one column on
// an even width gives the same windows through the general loops. Both must
// agree on NaNs (the first NaN of a window takes the gradient) and ties. Output
// rows of 20, 16, 9 and 7 columns: blocks of 8 with an overlapping last block,
// whole blocks only, a last block overlapping all but one column, and no block.
TEST(PoolKernelEdgeTest, TwoByTwoLoopsMatchTheGeneralOnes) {
  std::mt19937_64 rng(Seed("2x2_vs_general", kF32));
  for (auto [dtype, width] : std::vector<std::pair<DType, int64_t>>{
           {kF32, 40}, {kF64, 40}, {kF32, 32}, {kF32, 18}, {kF64, 18}, {kF32, 14}}) {
    SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " width " << width);
    std::vector<double> xv = ToDoubles(RandomTensor(dtype, {2, 3, 6, width}, rng, -2.0, 2.0));
    for (size_t i = 0; i < xv.size(); ++i) {
      xv[i] = std::floor(xv[i]);                   // ties
      if (rng() % 9 == 0) xv[i] = kNaN;            // some windows hold one NaN, some two
    }
    Tensor x = MakeTensor(dtype, {2, 3, 6, width}, xv);
    Tensor dy = RandomTensor(dtype, {2, 3, 3, width / 2}, rng);
    Tensor ddx = RandomTensor(dtype, {2, 3, 6, width}, rng);
    AttrMap fast = {{"kernel", AttrValue(Ints{2, 2})}};
    AttrMap general = {{"kernel", AttrValue(Ints{2, 2})},
                       {"stride", AttrValue(Ints{2, 2})},
                       {"padding", AttrValue(Ints{0, 0, 0, 1})}};
    for (auto [id, in] : std::vector<std::pair<PrimId, std::vector<Value>>>{
             {PrimId::kMaxPool2d, {x}}, {PrimId::kMaxPool2dGrad, {x, dy}}, {PrimId::kMaxPool2dGradGrad, {x, ddx}}}) {
      std::vector<double> a = ToDoubles(RunOk(id, in, fast)), b = ToDoubles(RunOk(id, in, general));
      ASSERT_EQ(a.size(), b.size());
      int nans = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        nans += std::isnan(b[i]) ? 1 : 0;
        if (std::isnan(b[i])) {
          EXPECT_TRUE(std::isnan(a[i])) << i;
        } else {
          EXPECT_EQ(a[i], b[i]) << i;
        }
      }
      if (id == PrimId::kMaxPool2d) {
        EXPECT_GT(nans, 10);  // the NaN paths ran
      }
    }
  }
}

// A window far wider than the padded input costs time in the input's size only.
TEST(PoolKernelEdgeTest, HugeKernelAttributeRunsQuickly) {
  const int64_t k = int64_t{1} << 40;
  Tensor x = MakeTensor(kF64, {1, 2, 1, 2}, {3, -5, 0.5, 2});
  AttrMap a = {{"kernel", AttrValue(Ints{1, k})},
               {"stride", AttrValue(Ints{1, 1})},
               {"padding", AttrValue(Ints{0, 0, k - 1, 0})}};
  // Two windows per row: [-(k-1), 0] holds column 0, [-(k-2), 1] both columns.
  ExpectClose(RunOk(PrimId::kMaxPool2d, {x}, a), kF64, {1, 2, 1, 2}, {3, 3, 0.5, 2});
  const double kd = static_cast<double>(k);
  a["count_include_pad"] = AttrValue(true);
  ExpectClose(RunOk(PrimId::kAvgPool2d, {x}, a), kF64, {1, 2, 1, 2},
              {3 / kd, -2 / kd, 0.5 / kd, 2.5 / kd});
  a["count_include_pad"] = AttrValue(false);
  ExpectClose(RunOk(PrimId::kAvgPool2d, {x}, a), kF64, {1, 2, 1, 2}, {3, -1, 0.5, 1.25});
  Tensor dx = RunOk(PrimId::kMaxPool2dGrad, {x, MakeTensor(kF64, {1, 2, 1, 2}, {1, 2, 3, 4})},
                    {{"kernel", AttrValue(Ints{1, k})},
                     {"stride", AttrValue(Ints{1, 1})},
                     {"padding", AttrValue(Ints{0, 0, k - 1, 0})}});
  ExpectClose(dx, kF64, {1, 2, 1, 2}, {3, 0, 3, 4});
}

TEST(PoolKernelEdgeTest, RunTimeErrors) {
  std::mt19937_64 rng(11);
  Tensor x = RandomTensor(kF32, {1, 2, 6, 6}, rng);
  AttrMap a = {{"kernel", AttrValue(Ints{2, 2})}};
  ExpectRunError(PrimId::kMaxPool2d, {x},
                 {{"kernel", AttrValue(Ints{2, 2})}, {"padding", AttrValue(Ints{2, 0})}},
                 "entirely in the padding");
  ExpectRunError(PrimId::kAvgPool2d, {x},
                 {{"kernel", AttrValue(Ints{1, 1})}, {"padding", AttrValue(Ints{0, 1, 0, 0})}},
                 "last pooling window along the height starts at 6");
  ExpectRunError(PrimId::kMaxPool2d, {x}, {{"kernel", AttrValue(Ints{7, 2})}},
                 "smaller than the kernel height 7");
  ExpectRunError(PrimId::kMaxPool2d, {x}, {{"kernel", AttrValue(Ints{2, 0})}},
                 "attribute 'kernel'");
  ExpectRunError(PrimId::kMaxPool2d, {x},
                 {{"kernel", AttrValue(Ints{2, 2})}, {"stride", AttrValue(Ints{2})}},
                 "attribute 'stride'");
  ExpectRunError(PrimId::kMaxPool2d, {RandomTensor(kF32, {6, 6}, rng)}, a, "rank-3, 4 or 5");
  ExpectRunError(PrimId::kMaxPool2d, {RandomTensor(kF32, {2, 6, 6}, rng)}, a,
                 "attribute 'kernel' must be 1 value (one per spatial axis)");
  ExpectRunError(PrimId::kMaxPool2d, {RandomTensor(DType::kInt64, {1, 2, 6, 6}, rng)}, a,
                 "floating-point");
  ExpectRunError(PrimId::kMaxPool2dGrad, {x, RandomTensor(kF32, {1, 2, 3, 2}, rng)}, a,
                 "input 1 must be shaped [1,2,3,3] (the pooled shape of input 0)");
  ExpectRunError(PrimId::kMaxPool2dGrad, {x, RandomTensor(kF64, {1, 2, 3, 3}, rng)}, a,
                 "input 1 must be f32 like input 0");
  ExpectRunError(PrimId::kMaxPool2dGradGrad, {x, RandomTensor(kF32, {1, 2, 6, 5}, rng)}, a,
                 "input 1 must be shaped [1,2,6,6] (like input 0)");
  ExpectRunError(PrimId::kAvgPool2dGrad, {RandomTensor(kF32, {1, 2, 3, 4}, rng), x}, a,
                 "input 0 must be shaped [1,2,3,3] (the pooled shape of input 1)");
  ExpectRunError(PrimId::kAvgPool2dGrad,
                 {RandomTensor(kF32, {1, 2, 3, 3}, rng), RandomTensor(kF64, {1, 2, 6, 6}, rng)}, a,
                 "input 1 must be f32 like input 0");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
