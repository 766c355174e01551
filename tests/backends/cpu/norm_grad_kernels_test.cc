// batch_norm_grad and layer_norm_grad (backends/cpu/norm_grad_kernels.cc) against
// a naive float64 reference of the formula, on every layout the kernels split,
// with empty tensors, thread counts and bad inputs.
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "backends/cpu/parallel.h"
#include "core/tensor.h"
#include "core/value.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

// The norm's gradients by the definition: the groups of the statistics are
// given by group(i) (flat index -> group) and the affine index by param(i);
// dx = r (g - mean(g) - h mean(g h)), dscale = sum(dy h), dbias = sum(dy) per
// affine index, all in double.
struct NaiveGrads {
  std::vector<double> dx, ds, db;
};

NaiveGrads NaiveNormGrad(const Tensor& x, const Tensor& scale, const Tensor& dy, double eps,
                         int64_t groups, const std::function<int64_t(int64_t)>& group,
                         const std::function<int64_t(int64_t)>& param) {
  const std::vector<double> v = ToDoubles(x), s = ToDoubles(scale), d = ToDoubles(dy);
  const size_t n = v.size();
  std::vector<double> count(groups), mean(groups), var(groups), mg(groups), mgh(groups);
  for (size_t i = 0; i < n; ++i) {
    count[group(i)] += 1;
    mean[group(i)] += v[i];
  }
  for (int64_t k = 0; k < groups; ++k) mean[k] /= count[k];
  for (size_t i = 0; i < n; ++i) var[group(i)] += (v[i] - mean[group(i)]) * (v[i] - mean[group(i)]);
  std::vector<double> h(n), g(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t k = group(i);
    h[i] = (v[i] - mean[k]) / std::sqrt(var[k] / count[k] + eps);
    g[i] = d[i] * s[param(i)];
    mg[k] += g[i] / count[k];
    mgh[k] += g[i] * h[i] / count[k];
  }
  NaiveGrads out{std::vector<double>(n), std::vector<double>(s.size()), std::vector<double>(s.size())};
  for (size_t i = 0; i < n; ++i) {
    const int64_t k = group(i);
    out.dx[i] = (g[i] - mg[k] - h[i] * mgh[k]) / std::sqrt(var[k] / count[k] + eps);
    out.ds[param(i)] += d[i] * h[i];
    out.db[param(i)] += d[i];
  }
  return out;
}

// |got - want| <= tol * (1 + max|want|): the gradients are sums whose terms cancel.
void ExpectGrads(const absl::StatusOr<Value>& got, DType dtype, const Shape& x_shape,
                 const Shape& p_shape, const NaiveGrads& want) {
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->is_tuple() && got->elements().size() == 3) << got->TypeString();
  const std::vector<double>* parts[3] = {&want.dx, &want.ds, &want.db};
  const Shape* shapes[3] = {&x_shape, &p_shape, &p_shape};
  for (int k = 0; k < 3; ++k) {
    double scale = 0;
    for (double w : *parts[k]) scale = std::max(scale, std::abs(w));
    const double tol = (dtype == kF64 ? 1e-12 : 1e-6) * (1 + scale);
    SCOPED_TRACE(::testing::Message() << "output " << k);
    ExpectTensorNear(Value(got->elements()[k]), dtype, *shapes[k], *parts[k],
                     [&](size_t) { return tol; });
  }
}

struct BatchCase {
  Shape shape;
  int64_t axis;
};

NaiveGrads NaiveBatchNormGrad(const Tensor& x, const Tensor& scale, const Tensor& dy,
                              int64_t axis, double eps) {
  const Shape& s = x.shape();
  int64_t inner = 1;
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t c = s[axis];
  auto channel = [&](int64_t i) { return (i / inner) % c; };
  return NaiveNormGrad(x, scale, dy, eps, c, channel, channel);
}

TEST(BatchNormGradKernelTest, MatchesNaiveReference) {
  std::mt19937_64 rng(71);
  const std::vector<BatchCase> cases = {
      {{4, 3}, 1},         // [N, C]: one value per (row, channel)
      {{2, 3, 4, 5}, 1},   // NCHW
      {{2, 3, 4}, 2},      // channels last
      {{3, 4, 5}, 0},      // channels first
      {{2, 6, 1, 1}, 1},   // two values per channel: dx is a near-cancellation
      {{32, 16, 8, 8}, 1}, // parallel over channels
  };
  for (DType dtype : {kF32, kF64}) {
    for (const BatchCase& c : cases) {
      for (double eps : {1e-5, 0.5}) {
        SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " " << ShapeToString(c.shape)
                                          << " axis " << c.axis << " eps " << eps);
        Tensor x = RandomTensor(dtype, c.shape, rng, -3, 3);
        Tensor dy = RandomTensor(dtype, c.shape, rng);
        Tensor scale = RandomTensor(dtype, {c.shape[c.axis]}, rng, 0.5, 2);
        ExpectGrads(RunCpuKernel(PrimId::kBatchNormGrad, {x, scale, dy},
                                 {{"axis", c.axis}, {"epsilon", eps}}),
                    dtype, c.shape, {c.shape[c.axis]},
                    NaiveBatchNormGrad(x, scale, dy, c.axis, eps));
      }
    }
  }
}

// At a large mean and two values per channel the float32 result is still the
// float64 one rounded (the kernel keeps everything in double).
TEST(BatchNormGradKernelTest, Float32TinyBatchAndLargeMeanStayAccurate) {
  std::mt19937_64 rng(72);
  for (Shape s : {Shape{2, 4, 1, 1}, Shape{3, 4, 3, 3}}) {
    Tensor x = RandomTensor(kF32, s, rng, 999.9, 1000.1);
    Tensor dy = RandomTensor(kF32, s, rng), scale = RandomTensor(kF32, {4}, rng, 0.5, 2);
    ExpectGrads(RunCpuKernel(PrimId::kBatchNormGrad, {x, scale, dy}), kF32, s, {4},
                NaiveBatchNormGrad(x, scale, dy, 1, 1e-5));
  }
}

// dx is written over dy's buffer, or else x's, when nothing else holds it, with
// the same bits as into a new buffer; a buffer held elsewhere is never written.
TEST(BatchNormGradKernelTest, DxTakesAFreeInputBufferWithTheSameBits) {
  std::mt19937_64 rng(77);
  for (DType dtype : {kF32, kF64}) {
    const Shape s = {4, 8, 5, 5};
    Tensor x = RandomTensor(dtype, s, rng, -3, 3), dy = RandomTensor(dtype, s, rng);
    Tensor scale = RandomTensor(dtype, {8}, rng, 0.5, 2);
    const Tensor x_copy = x.Clone(), dy_copy = dy.Clone();
    const Value fresh = RunCpuKernel(PrimId::kBatchNormGrad, {x, scale, dy}).value();
    for (int free_input : {2, 0}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " free input " << free_input);
      Tensor own = (free_input == 2 ? dy : x).Clone();
      const void* buffer = own.raw_data();
      std::vector<Value> in;
      in.push_back(free_input == 0 ? Value(std::move(own)) : Value(x));
      in.push_back(Value(scale));
      in.push_back(free_input == 2 ? Value(std::move(own)) : Value(dy));
      const Value got = RunCpuKernel(PrimId::kBatchNormGrad, std::move(in)).value();
      EXPECT_EQ(got.elements()[0].tensor().raw_data(), buffer);
      for (size_t j = 0; j < 3; ++j) {
        EXPECT_EQ(MaxAbsDiff(got.elements()[j].tensor(), ToDoubles(fresh.elements()[j].tensor())), 0.0)
            << "output " << j;
      }
    }
    // The held inputs are unchanged.
    EXPECT_EQ(MaxAbsDiff(x, ToDoubles(x_copy)), 0.0);
    EXPECT_EQ(MaxAbsDiff(dy, ToDoubles(dy_copy)), 0.0);
  }
}

NaiveGrads NaiveLayerNormGrad(const Tensor& x, const Tensor& scale, const Tensor& dy, double eps) {
  const int64_t n = scale.NumElements(), rows = n == 0 ? 0 : x.NumElements() / n;
  return NaiveNormGrad(
      x, scale, dy, eps, rows, [n](int64_t i) { return i / n; }, [n](int64_t i) { return i % n; });
}

TEST(LayerNormGradKernelTest, MatchesNaiveReference) {
  std::mt19937_64 rng(73);
  const std::vector<BatchCase> cases = {
      {{4, 6}, -1}, {{2, 3, 4}, 1}, {{2, 3}, 0}, {{5}, 0}, {{300, 260}, -1}, {{7, 1}, 1},
  };
  for (DType dtype : {kF32, kF64}) {
    for (const BatchCase& c : cases) {
      SCOPED_TRACE(::testing::Message()
                   << DTypeName(dtype) << " " << ShapeToString(c.shape) << " begin " << c.axis);
      const int64_t begin = c.axis < 0 ? c.axis + c.shape.size() : c.axis;
      Shape norm(c.shape.begin() + begin, c.shape.end());
      Tensor x = RandomTensor(dtype, c.shape, rng, -3, 3);
      Tensor dy = RandomTensor(dtype, c.shape, rng), scale = RandomTensor(dtype, norm, rng, 0.5, 2);
      ExpectGrads(RunCpuKernel(PrimId::kLayerNormGrad, {x, scale, dy},
                               {{"begin_norm_axis", c.axis}, {"epsilon", 1e-3}}),
                  dtype, c.shape, norm, NaiveLayerNormGrad(x, scale, dy, 1e-3));
    }
  }
}

// The sums run in one fixed order: the same bits on 1, 2, 3 and 5 threads.
TEST(NormGradKernelTest, ResultsDoNotDependOnTheThreadCount) {
  std::mt19937_64 rng(74);
  Tensor x = RandomTensor(kF32, {64, 32, 6, 6}, rng), dy = RandomTensor(kF32, {64, 32, 6, 6}, rng);
  Tensor c32 = RandomTensor(kF32, {32}, rng), r = RandomTensor(kF32, {6, 6}, rng);
  const int saved = cpu::MaxThreads();
  std::vector<Value> first;
  for (int threads : {1, 2, 3, 5}) {
    cpu::SetMaxThreads(threads);
    std::vector<Value> got = {
        RunCpuKernel(PrimId::kBatchNormGrad, {x, c32, dy}).value(),
        RunCpuKernel(PrimId::kLayerNormGrad, {x, r, dy}, {{"begin_norm_axis", int64_t{2}}}).value()};
    if (first.empty()) first = got;
    for (size_t k = 0; k < got.size(); ++k) {
      for (size_t j = 0; j < 3; ++j) {
        EXPECT_EQ(MaxAbsDiff(got[k].elements()[j].tensor(), ToDoubles(first[k].elements()[j].tensor())), 0.0)
            << "op " << k << " output " << j << " on " << threads << " threads";
      }
    }
  }
  cpu::SetMaxThreads(saved);
}

TEST(NormGradKernelTest, EmptyTensorsGiveZeroSums) {
  std::mt19937_64 rng(75);
  Tensor c3 = RandomTensor(kF32, {3}, rng);
  Tensor empty = RandomTensor(kF32, {0, 3}, rng);
  ExpectGrads(RunCpuKernel(PrimId::kBatchNormGrad, {empty, c3, empty}), kF32, {0, 3}, {3},
              {{}, {0, 0, 0}, {0, 0, 0}});
  ExpectGrads(RunCpuKernel(PrimId::kLayerNormGrad, {empty, c3, empty}), kF32, {0, 3}, {3},
              {{}, {0, 0, 0}, {0, 0, 0}});
}

TEST(NormGradKernelTest, RejectsBadInputs) {
  std::mt19937_64 rng(76);
  Tensor x = RandomTensor(kF32, {2, 3}, rng), c3 = RandomTensor(kF32, {3}, rng);
  ExpectError(RunCpuKernel(PrimId::kBatchNormGrad, {x, RandomTensor(kF32, {4}, rng), x}),
              "input 1 must have shape [3], got f32[4]");
  ExpectError(RunCpuKernel(PrimId::kBatchNormGrad, {x, c3, RandomTensor(kF32, {3, 2}, rng)}),
              "input 2 (dy) must be shaped like input 0 f32[2,3], got f32[3,2]");
  ExpectError(RunCpuKernel(PrimId::kLayerNormGrad, {x, c3, RandomTensor(kF64, {2, 3}, rng)}),
              "input 2 must be f32 like input 0");
  ExpectError(RunCpuKernel(PrimId::kLayerNormGrad, {x, c3, x}, {{"epsilon", -1.0}}),
              "'epsilon' must be finite and >= 0");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
