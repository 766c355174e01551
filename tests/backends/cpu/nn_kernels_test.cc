// CPU kernels of the nn family against naive float64 references.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/dropout_hash.h"
#include "core/tensor.h"
#include "core/value.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {


// |got - want| <= tol * (1 + |want|) elementwise, after checking shape and dtype.
void ExpectClose(const absl::StatusOr<Value>& got, DType dtype, const Shape& shape,
                 const std::vector<double>& want) {
  ExpectTensorNear(got, dtype, shape, want,
                   [&](size_t i) { return KernelTolerance(dtype) * (1 + std::abs(want[i])); });
}

AttrMap Axis(int64_t axis) { return {{"axis", axis}}; }

// Kernel inputs whose first tensor nothing else references, so that the kernel may
// write its output into that buffer. (A braced list would copy it.)
std::vector<Value> OwnedFirst(Tensor first, const std::vector<Value>& rest = {}) {
  std::vector<Value> in;
  in.push_back(Value(std::move(first)));
  in.insert(in.end(), rest.begin(), rest.end());
  return in;
}

// [outer, len, inner] around `axis`, and the flat index of (o, j, i).
struct Rows {
  int64_t outer = 1, len, inner = 1;
  Rows(const Shape& s, int64_t axis) {
    if (axis < 0) axis += static_cast<int64_t>(s.size());
    len = s[axis];
    for (int64_t d = 0; d < axis; ++d) outer *= s[d];
    for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  }
  int64_t At(int64_t o, int64_t j, int64_t i) const { return (o * len + j) * inner + i; }
};

// ----- softmax / log_softmax -------------------------------------------------------------
std::vector<double> NaiveSoftmax(const Tensor& x, int64_t axis, bool log) {
  std::vector<double> v = ToDoubles(x), out(v.size());
  Rows r(x.shape(), axis);
  for (int64_t o = 0; o < r.outer; ++o) {
    for (int64_t i = 0; i < r.inner; ++i) {
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t j = 0; j < r.len; ++j) mx = std::max(mx, v[r.At(o, j, i)]);
      for (int64_t j = 0; j < r.len; ++j) sum += std::exp(v[r.At(o, j, i)] - mx);
      for (int64_t j = 0; j < r.len; ++j) {
        double z = v[r.At(o, j, i)] - mx;
        out[r.At(o, j, i)] = log ? z - std::log(sum) : std::exp(z) / sum;
      }
    }
  }
  return out;
}

struct AxisCase {
  Shape shape;
  int64_t axis;
};

std::vector<AxisCase> AxisCases() {
  return {
      {{5, 7}, -1},      {{5, 7}, 0},      {{3, 4, 5}, 1},
      {{4}, 0},          {{2, 3, 300}, 1},  // inner > one block of columns
      {{300, 200}, -1},                     // enough rows to go parallel
      {{40, 30, 50}, 0},                    // parallel blocks, strided
      {{1, 1}, 1},       {{6, 1, 2}, -2},
  };
}

TEST(SoftmaxKernelTest, MatchesNaiveReference) {
  std::mt19937_64 rng(2024);
  for (bool log : {false, true}) {
    PrimId id = log ? PrimId::kLogSoftmax : PrimId::kSoftmax;
    for (DType dtype : {kF32, kF64}) {
      for (const AxisCase& c : AxisCases()) {
        SCOPED_TRACE(::testing::Message() << PrimIdName(id) << " " << DTypeName(dtype) << " "
                                          << ShapeToString(c.shape) << " axis " << c.axis);
        Tensor x = RandomTensor(dtype, c.shape, rng, -5, 5);
        ExpectClose(RunCpuKernel(id, {x}, Axis(c.axis)), dtype, c.shape,
                    NaiveSoftmax(x, c.axis, log));
      }
    }
  }
}

TEST(SoftmaxKernelTest, StableForLargeLogits) {
  for (DType dtype : {kF32, kF64}) {
    Tensor x = MakeTensor(dtype, {2, 3}, {1000, 1001, 1002, -1000, -1001, -1002});
    std::vector<double> e = {std::exp(-2.0), std::exp(-1.0), 1.0};
    double s = e[0] + e[1] + e[2];
    ExpectClose(RunCpuKernel(PrimId::kSoftmax, {x}), dtype, {2, 3},
                {e[0] / s, e[1] / s, e[2] / s, e[2] / s, e[1] / s, e[0] / s});
    double ls = std::log(s);
    ExpectClose(RunCpuKernel(PrimId::kLogSoftmax, {x}), dtype, {2, 3},
                {-2 - ls, -1 - ls, -ls, -ls, -1 - ls, -2 - ls});
    // Along axis 0, each column holds 1000 + c and -1000 - c.
    ExpectClose(RunCpuKernel(PrimId::kSoftmax, {x}, Axis(0)), dtype, {2, 3}, {1, 1, 1, 0, 0, 0});
  }
}

TEST(SoftmaxKernelTest, InPlaceWhenTheInputIsUniquelyOwned) {
  std::mt19937_64 rng(8);
  for (PrimId id : {PrimId::kSoftmax, PrimId::kLogSoftmax}) {
    for (int64_t axis : {-1, 0}) {
      Tensor x = RandomTensor(kF32, {30, 40}, rng);
      std::vector<double> want = NaiveSoftmax(x, axis, id == PrimId::kLogSoftmax);
      Tensor owned = x.Clone();
      const void* buffer = owned.raw_data();
      absl::StatusOr<Value> y = RunCpuKernel(id, OwnedFirst(std::move(owned)), Axis(axis));
      ExpectClose(y, kF32, {30, 40}, want);
      EXPECT_EQ(y->tensor().raw_data(), buffer);  // reused, and still correct
    }
  }
}

TEST(SoftmaxKernelTest, EmptyTensors) {
  std::mt19937_64 rng(1);
  for (PrimId id : {PrimId::kSoftmax, PrimId::kLogSoftmax}) {
    for (Shape s : {Shape{0, 5}, Shape{5, 0}, Shape{2, 0, 3}}) {
      absl::StatusOr<Value> y = RunCpuKernel(id, {RandomTensor(kF32, s, rng)}, Axis(-1));
      ASSERT_TRUE(y.ok()) << y.status();
      EXPECT_EQ(y->tensor().shape(), s);
    }
  }
}

TEST(SoftmaxKernelTest, RejectsBadInputs) {
  std::mt19937_64 rng(1);
  for (PrimId id : {PrimId::kSoftmax, PrimId::kLogSoftmax}) {
    ExpectError(RunCpuKernel(id, {RandomTensor(kF32, {2, 3}, rng)}, Axis(2)),
                "axis 2 is out of range for rank 2");
    ExpectError(RunCpuKernel(id, {RandomTensor(kF32, {}, rng)}), "rank 0");
    ExpectError(RunCpuKernel(id, {RandomTensor(DType::kInt32, {3}, rng)}), "floating-point");
  }
}

// ----- softmax_cross_entropy ----------------------------------------------------------------
std::vector<double> NaiveCrossEntropy(const Tensor& x, const Tensor& labels, int64_t axis) {
  std::vector<double> ls = NaiveSoftmax(x, axis, /*log=*/true), l = ToDoubles(labels);
  Rows r(x.shape(), axis);
  std::vector<double> out(r.outer * r.inner, 0.0);
  for (int64_t o = 0; o < r.outer; ++o) {
    for (int64_t i = 0; i < r.inner; ++i) {
      for (int64_t j = 0; j < r.len; ++j)
        out[o * r.inner + i] -= l[r.At(o, j, i)] * ls[r.At(o, j, i)];
    }
  }
  return out;
}

Shape WithoutAxis(Shape s, int64_t axis) {
  if (axis < 0) axis += static_cast<int64_t>(s.size());
  s.erase(s.begin() + axis);
  return s;
}

TEST(SoftmaxCrossEntropyKernelTest, MatchesNaiveReference) {
  std::mt19937_64 rng(77);
  for (DType dtype : {kF32, kF64}) {
    for (const AxisCase& c : AxisCases()) {
      SCOPED_TRACE(::testing::Message()
                   << DTypeName(dtype) << " " << ShapeToString(c.shape) << " axis " << c.axis);
      Tensor x = RandomTensor(dtype, c.shape, rng, -4, 4);
      Tensor labels = RandomTensor(dtype, c.shape, rng, 0, 1);
      ExpectClose(RunCpuKernel(PrimId::kSoftmaxCrossEntropy, {x, labels}, Axis(c.axis)), dtype,
                  WithoutAxis(c.shape, c.axis), NaiveCrossEntropy(x, labels, c.axis));
    }
  }
}

TEST(SoftmaxCrossEntropyKernelTest, HandValuesAndLargeLogits) {
  // Uniform logits over 4 classes and a one-hot label: log(4).
  Tensor x = MakeTensor(kF64, {1, 4}, {3, 3, 3, 3});
  Tensor y = MakeTensor(kF64, {1, 4}, {0, 1, 0, 0});
  ExpectClose(RunCpuKernel(PrimId::kSoftmaxCrossEntropy, {x, y}), kF64, {1}, {std::log(4.0)});
  // -log_softmax at the smallest of 1000, 1001, 1002.
  x = MakeTensor(kF32, {3}, {1000, 1001, 1002});
  y = MakeTensor(kF32, {3}, {1, 0, 0});
  double lse = 2 + std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0);
  ExpectClose(RunCpuKernel(PrimId::kSoftmaxCrossEntropy, {x, y}), kF32, {}, {lse});
}

TEST(SoftmaxCrossEntropyKernelTest, EmptyAxisGivesZeroLoss) {
  std::mt19937_64 rng(2);
  Tensor x = RandomTensor(kF32, {3, 0}, rng);
  ExpectClose(RunCpuKernel(PrimId::kSoftmaxCrossEntropy, {x, x}), kF32, {3}, {0, 0, 0});
  Tensor e = RandomTensor(kF64, {0, 4}, rng);
  ExpectClose(RunCpuKernel(PrimId::kSoftmaxCrossEntropy, {e, e}), kF64, {0}, {});
}

TEST(SoftmaxCrossEntropyKernelTest, RejectsBadInputs) {
  std::mt19937_64 rng(2);
  Tensor x = RandomTensor(kF32, {3, 4}, rng);
  ExpectError(RunCpuKernel(PrimId::kSoftmaxCrossEntropy, {x, RandomTensor(kF32, {4, 3}, rng)}),
              "labels must have the shape of logits, got logits f32[3,4] and labels f32[4,3]");
  ExpectError(RunCpuKernel(PrimId::kSoftmaxCrossEntropy, {x, RandomTensor(kF64, {3, 4}, rng)}),
              "input 1 must be f32 like input 0, got f64[3,4]");
  ExpectError(RunCpuKernel(PrimId::kSoftmaxCrossEntropy, {x, x}, Axis(-3)),
              "axis -3 is out of range");
}

// ----- sparse_softmax_cross_entropy ----------------------------------------------------------
TEST(SparseSoftmaxCrossEntropyKernelTest, MatchesNaiveReference) {
  std::mt19937_64 rng(31);
  for (DType dtype : {kF32, kF64}) {
    for (DType label_type : {DType::kInt32, DType::kInt64}) {
      for (Shape s : {Shape{8, 5}, Shape{1, 1}, Shape{2000, 33}}) {
        SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " " << DTypeName(label_type) << " "
                                          << ShapeToString(s));
        Tensor x = RandomTensor(dtype, s, rng, -6, 6);
        Tensor labels = RandomTensor(label_type, {s[0]}, rng, 0, static_cast<double>(s[1]));
        std::vector<double> ls = NaiveSoftmax(x, 1, /*log=*/true), l = ToDoubles(labels);
        std::vector<double> want(s[0]);
        for (int64_t n = 0; n < s[0]; ++n) want[n] = -ls[n * s[1] + static_cast<int64_t>(l[n])];
        ExpectClose(RunCpuKernel(PrimId::kSparseSoftmaxCrossEntropy, {x, labels}), dtype, {s[0]},
                    want);
      }
    }
  }
}

TEST(SparseSoftmaxCrossEntropyKernelTest, HandValueAndEmptyBatch) {
  Tensor x = MakeTensor(kF64, {2, 3}, {0, 0, 0, 1, 2, 3});
  Tensor labels = MakeTensor(DType::kInt64, {2}, {1, 0});
  double lse = 3 + std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0);
  ExpectClose(RunCpuKernel(PrimId::kSparseSoftmaxCrossEntropy, {x, labels}), kF64, {2},
              {std::log(3.0), lse - 1});
  std::mt19937_64 rng(3);
  ExpectClose(RunCpuKernel(PrimId::kSparseSoftmaxCrossEntropy,
                           {RandomTensor(kF32, {0, 3}, rng), MakeTensor(DType::kInt32, {0}, {})}),
              kF32, {0}, {});
}

TEST(SparseSoftmaxCrossEntropyKernelTest, LabelOutOfRangeIsAnError) {
  std::mt19937_64 rng(4);
  Tensor x = RandomTensor(kF32, {3, 5}, rng);
  ExpectError(RunCpuKernel(PrimId::kSparseSoftmaxCrossEntropy,
                           {x, MakeTensor(DType::kInt32, {3}, {0, 5, 1})}),
              "label 5 at position 1 is out of range [0, 5)", absl::StatusCode::kOutOfRange);
  ExpectError(RunCpuKernel(PrimId::kSparseSoftmaxCrossEntropy,
                           {x, MakeTensor(DType::kInt64, {3}, {0, 1, -1})}),
              "label -1 at position 2", absl::StatusCode::kOutOfRange);
  // No class at all: every label is out of range.
  ExpectError(RunCpuKernel(PrimId::kSparseSoftmaxCrossEntropy,
                           {RandomTensor(kF32, {1, 0}, rng), MakeTensor(DType::kInt32, {1}, {0})}),
              "out of range [0, 0)", absl::StatusCode::kOutOfRange);
}

TEST(SparseSoftmaxCrossEntropyKernelTest, RejectsBadInputs) {
  std::mt19937_64 rng(4);
  Tensor x = RandomTensor(kF32, {3, 5}, rng);
  ExpectError(
      RunCpuKernel(PrimId::kSparseSoftmaxCrossEntropy,
                   {RandomTensor(kF32, {15}, rng), MakeTensor(DType::kInt32, {3}, {0, 0, 0})}),
      "logits of rank 2 [N, C], got f32[15]");
  ExpectError(RunCpuKernel(PrimId::kSparseSoftmaxCrossEntropy, {x, RandomTensor(kF32, {3}, rng)}),
              "i32 or i64 labels [3], got f32[3]");
  ExpectError(
      RunCpuKernel(PrimId::kSparseSoftmaxCrossEntropy, {x, MakeTensor(DType::kInt32, {2}, {0, 0})}),
      "labels [3], got i32[2]");
}

// ----- batch_norm ------------------------------------------------------------------------------
std::vector<double> NaiveBatchNorm(const Tensor& x, const Tensor& scale, const Tensor& bias,
                                   int64_t axis, double eps) {
  std::vector<double> v = ToDoubles(x), g = ToDoubles(scale), b = ToDoubles(bias);
  std::vector<double> out(v.size());
  Rows r(x.shape(), axis);
  double count = static_cast<double>(r.outer * r.inner);
  for (int64_t c = 0; c < r.len; ++c) {
    double mean = 0, var = 0;
    for (int64_t o = 0; o < r.outer; ++o) {
      for (int64_t i = 0; i < r.inner; ++i) mean += v[r.At(o, c, i)] / count;
    }
    for (int64_t o = 0; o < r.outer; ++o) {
      for (int64_t i = 0; i < r.inner; ++i) {
        var += (v[r.At(o, c, i)] - mean) * (v[r.At(o, c, i)] - mean) / count;
      }
    }
    for (int64_t o = 0; o < r.outer; ++o) {
      for (int64_t i = 0; i < r.inner; ++i) {
        out[r.At(o, c, i)] = (v[r.At(o, c, i)] - mean) / std::sqrt(var + eps) * g[c] + b[c];
      }
    }
  }
  return out;
}

TEST(BatchNormKernelTest, MatchesNaiveReference) {
  std::mt19937_64 rng(55);
  std::vector<AxisCase> cases = {
      {{4, 3}, 1},           // [N, C]: column blocks
      {{2, 3, 4, 5}, 1},     // NCHW: channel segments
      {{2, 3, 4}, -1},       // channels last
      {{3, 4, 5}, 0},        // channels first, no outer dims
      {{5, 300}, 1},         // more channels than one column block
      {{64, 8, 16, 16}, 1},  // parallel over channels
      {{1, 2}, 1},           // one value per channel: y = bias
  };
  for (DType dtype : {kF32, kF64}) {
    for (const AxisCase& c : cases) {
      for (double eps : {1e-5, 1e-2}) {
        SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " " << ShapeToString(c.shape)
                                          << " axis " << c.axis << " eps " << eps);
        int64_t channels = c.shape[c.axis < 0 ? c.axis + c.shape.size() : c.axis];
        Tensor x = RandomTensor(dtype, c.shape, rng, -3, 3);
        Tensor scale = RandomTensor(dtype, {channels}, rng, 0.5, 2);
        Tensor bias = RandomTensor(dtype, {channels}, rng);
        ExpectClose(RunCpuKernel(PrimId::kBatchNorm, {x, scale, bias},
                                 {{"axis", c.axis}, {"epsilon", eps}}),
                    dtype, c.shape, NaiveBatchNorm(x, scale, bias, c.axis, eps));
      }
    }
  }
}

TEST(BatchNormKernelTest, Float32WithALargeMeanStaysAccurate) {
  // Values 1000 +- 1 in float32: single-precision sums would lose the spread.
  std::mt19937_64 rng(56);
  for (Shape s : {Shape{512, 4}, Shape{16, 4, 32}}) {
    Tensor x = RandomTensor(kF32, s, rng, 999, 1001);
    Tensor scale = RandomTensor(kF32, {4}, rng, 0.5, 2);
    Tensor bias = RandomTensor(kF32, {4}, rng);
    ExpectClose(RunCpuKernel(PrimId::kBatchNorm, {x, scale, bias}), kF32, s,
                NaiveBatchNorm(x, scale, bias, 1, 1e-5));
  }
}

TEST(BatchNormKernelTest, InPlaceAndEmpty) {
  std::mt19937_64 rng(57);
  for (Shape s : {Shape{8, 3}, Shape{2, 3, 7}}) {
    Tensor x = RandomTensor(kF64, s, rng);
    Tensor scale = RandomTensor(kF64, {3}, rng), bias = RandomTensor(kF64, {3}, rng);
    std::vector<double> want = NaiveBatchNorm(x, scale, bias, 1, 1e-5);
    Tensor owned = x.Clone();
    const void* buffer = owned.raw_data();
    absl::StatusOr<Value> y =
        RunCpuKernel(PrimId::kBatchNorm, OwnedFirst(std::move(owned), {scale, bias}));
    ExpectClose(y, kF64, s, want);
    EXPECT_EQ(y->tensor().raw_data(), buffer);
  }
  Tensor c3 = RandomTensor(kF32, {3}, rng);
  ExpectClose(RunCpuKernel(PrimId::kBatchNorm, {RandomTensor(kF32, {0, 3}, rng), c3, c3}), kF32,
              {0, 3}, {});
  Tensor c0 = RandomTensor(kF32, {0}, rng);
  ExpectClose(RunCpuKernel(PrimId::kBatchNorm, {RandomTensor(kF32, {2, 0}, rng), c0, c0}), kF32,
              {2, 0}, {});
}

TEST(BatchNormKernelTest, RejectsBadInputs) {
  std::mt19937_64 rng(58);
  Tensor x = RandomTensor(kF32, {2, 3}, rng), c3 = RandomTensor(kF32, {3}, rng);
  ExpectError(RunCpuKernel(PrimId::kBatchNorm, {x, RandomTensor(kF32, {4}, rng), c3}),
              "input 1 must have shape [3], got f32[4]");
  ExpectError(RunCpuKernel(PrimId::kBatchNorm, {x, c3, RandomTensor(kF64, {3}, rng)}),
              "input 2 must be f32 like input 0");
  ExpectError(RunCpuKernel(PrimId::kBatchNorm, {c3, c3, c3}), "rank >= 2");
  ExpectError(RunCpuKernel(PrimId::kBatchNorm, {x, c3, c3}, {{"epsilon", -1.0}}),
              "'epsilon' must be finite and >= 0");
  ExpectError(RunCpuKernel(PrimId::kBatchNorm, {x, c3, c3}, {{"axis", int64_t{5}}}),
              "axis 5 is out of range");
}

// ----- layer_norm ------------------------------------------------------------------------------
std::vector<double> NaiveLayerNorm(const Tensor& x, const Tensor& scale, const Tensor& bias,
                                   double eps) {
  std::vector<double> v = ToDoubles(x), g = ToDoubles(scale), b = ToDoubles(bias);
  int64_t n = scale.NumElements(), rows = n == 0 ? 0 : x.NumElements() / n;
  std::vector<double> out(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += v[r * n + i] / n;
    for (int64_t i = 0; i < n; ++i) var += (v[r * n + i] - mean) * (v[r * n + i] - mean) / n;
    for (int64_t i = 0; i < n; ++i) {
      out[r * n + i] = (v[r * n + i] - mean) / std::sqrt(var + eps) * g[i] + b[i];
    }
  }
  return out;
}

TEST(LayerNormKernelTest, MatchesNaiveReference) {
  std::mt19937_64 rng(66);
  std::vector<AxisCase> cases = {
      {{4, 6}, -1}, {{2, 3, 4}, 1}, {{2, 3}, 0}, {{5}, 0}, {{300, 200}, -1}, {{7, 1}, 1},
  };
  for (DType dtype : {kF32, kF64}) {
    for (const AxisCase& c : cases) {
      SCOPED_TRACE(::testing::Message()
                   << DTypeName(dtype) << " " << ShapeToString(c.shape) << " begin " << c.axis);
      int64_t begin = c.axis < 0 ? c.axis + c.shape.size() : c.axis;
      Shape norm(c.shape.begin() + begin, c.shape.end());
      Tensor x = RandomTensor(dtype, c.shape, rng, -3, 3);
      Tensor scale = RandomTensor(dtype, norm, rng, 0.5, 2), bias = RandomTensor(dtype, norm, rng);
      ExpectClose(RunCpuKernel(PrimId::kLayerNorm, {x, scale, bias},
                               {{"begin_norm_axis", c.axis}, {"epsilon", 1e-3}}),
                  dtype, c.shape, NaiveLayerNorm(x, scale, bias, 1e-3));
    }
  }
}

TEST(LayerNormKernelTest, Float32WithALargeMeanInPlace) {
  std::mt19937_64 rng(67);
  Tensor x = RandomTensor(kF32, {16, 256}, rng, 999, 1001);
  Tensor scale = RandomTensor(kF32, {256}, rng, 0.5, 2), bias = RandomTensor(kF32, {256}, rng);
  std::vector<double> want = NaiveLayerNorm(x, scale, bias, 1e-5);
  Tensor owned = x.Clone();
  const void* buffer = owned.raw_data();
  absl::StatusOr<Value> y =
      RunCpuKernel(PrimId::kLayerNorm, OwnedFirst(std::move(owned), {scale, bias}));
  ExpectClose(y, kF32, {16, 256}, want);
  EXPECT_EQ(y->tensor().raw_data(), buffer);
}

TEST(LayerNormKernelTest, EmptyAndErrors) {
  std::mt19937_64 rng(68);
  Tensor s4 = RandomTensor(kF32, {4}, rng);
  ExpectClose(RunCpuKernel(PrimId::kLayerNorm, {RandomTensor(kF32, {0, 4}, rng), s4, s4}), kF32,
              {0, 4}, {});
  Tensor x = RandomTensor(kF32, {2, 3, 4}, rng);
  ExpectError(RunCpuKernel(PrimId::kLayerNorm, {x, RandomTensor(kF32, {3, 4}, rng), s4}),
              "input 1 must have shape [4], got f32[3,4]");
  ExpectError(RunCpuKernel(PrimId::kLayerNorm, {x, s4, s4}, {{"begin_norm_axis", int64_t{1}}}),
              "input 1 must have shape [3,4]");
  ExpectError(RunCpuKernel(PrimId::kLayerNorm, {x, s4, RandomTensor(kF64, {4}, rng)}),
              "input 2 must be f32 like input 0");
  ExpectError(RunCpuKernel(PrimId::kLayerNorm, {x, s4, s4}, {{"begin_norm_axis", int64_t{3}}}),
              "attribute 'begin_norm_axis'");
  ExpectError(RunCpuKernel(PrimId::kLayerNorm, {x, s4, s4},
                           {{"epsilon", std::numeric_limits<double>::quiet_NaN()}}),
              "'epsilon'");
}

// ----- dropout ---------------------------------------------------------------------------------
TEST(DropoutHashTest, MatchesSplitMix64) {
  // seed k, i 0 is the k-th output of SplitMix64 started from state 0 (published
  // reference values of Vigna's splitmix64.c).
  EXPECT_EQ(DropoutBits(1, 0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(DropoutBits(2, 0), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(DropoutBits(3, 0), 0x06C45D188009454Full);
  // Counter and seed mix: values worked out independently (Python, arbitrary precision).
  EXPECT_EQ(DropoutBits(0, 0), 0u);
  EXPECT_EQ(DropoutBits(0, 1), 0x5692161D100B05E5ull);
  EXPECT_EQ(DropoutBits(42, 7), 0xEB7A07AACD555FC9ull);
  EXPECT_EQ(DropoutBits(~uint64_t{0}, 5), 0xE9FE8A0A9A8306D3ull);
  EXPECT_EQ(DropoutUniform(0, 0), 0.0);
  EXPECT_DOUBLE_EQ(DropoutUniform(1, 0), 0.8833108082136426);
  EXPECT_DOUBLE_EQ(DropoutUniform(3, 0), 0.026433771592597743);
  EXPECT_TRUE(DropoutKeep(1, 0, 0.88));
  EXPECT_FALSE(DropoutKeep(1, 0, 0.89));
}

// The mask written out in the test, apart from the header: SplitMix64's
// finaliser on seed * golden + i.
bool ReferenceKeep(uint64_t seed, uint64_t i, double rate) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) / 9007199254740992.0 >= rate;
}

std::vector<double> NaiveDropout(const Tensor& x, double rate, int64_t seed) {
  std::vector<double> v = ToDoubles(x);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = ReferenceKeep(static_cast<uint64_t>(seed), i, rate) ? v[i] / (1 - rate) : 0.0;
  }
  return v;
}

TEST(DropoutKernelTest, MatchesTheCounterBasedMask) {
  std::mt19937_64 rng(88);
  for (DType dtype : {kF32, kF64}) {
    for (double rate : {0.0, 0.1, 0.5, 0.9}) {
      for (int64_t seed : {int64_t{0}, int64_t{12345}, int64_t{-3}}) {
        for (Shape s : {Shape{7, 9}, Shape{}, Shape{0, 3}, Shape{100000}}) {
          SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " rate " << rate << " seed "
                                            << seed << " " << ShapeToString(s));
          Tensor x = RandomTensor(dtype, s, rng, 0.5, 2);  // nonzero: drops are visible
          ExpectClose(RunCpuKernel(PrimId::kDropout, {x}, {{"rate", rate}, {"seed", seed}}), dtype,
                      s, NaiveDropout(x, rate, seed));
        }
      }
    }
  }
}

TEST(DropoutKernelTest, KeepsAboutOneMinusRateAndDependsOnTheSeed) {
  std::mt19937_64 rng(89);
  Tensor x = RandomTensor(kF32, {20000}, rng, 1, 2);
  absl::StatusOr<Value> a =
      RunCpuKernel(PrimId::kDropout, {x}, {{"rate", 0.3}, {"seed", int64_t{1}}});
  absl::StatusOr<Value> b =
      RunCpuKernel(PrimId::kDropout, {x}, {{"rate", 0.3}, {"seed", int64_t{1}}});
  absl::StatusOr<Value> c =
      RunCpuKernel(PrimId::kDropout, {x}, {{"rate", 0.3}, {"seed", int64_t{2}}});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  std::vector<double> va = ToDoubles(a->tensor()), vc = ToDoubles(c->tensor());
  EXPECT_EQ(va, ToDoubles(b->tensor()));  // deterministic
  int64_t kept = std::count_if(va.begin(), va.end(), [](double v) { return v != 0; });
  EXPECT_NEAR(kept / 20000.0, 0.7, 0.02);
  int64_t differ = 0;
  for (size_t i = 0; i < va.size(); ++i) differ += (va[i] != 0) != (vc[i] != 0);
  EXPECT_GT(differ, 20000 * 0.3);  // independent masks differ in ~42% of places
}

TEST(DropoutKernelTest, InPlaceAndErrors) {
  std::mt19937_64 rng(90);
  Tensor x = RandomTensor(kF64, {64}, rng);
  std::vector<double> want = NaiveDropout(x, 0.5, 9);
  Tensor owned = x.Clone();
  const void* buffer = owned.raw_data();
  absl::StatusOr<Value> y = RunCpuKernel(PrimId::kDropout, OwnedFirst(std::move(owned)),
                                         {{"rate", 0.5}, {"seed", int64_t{9}}});
  ExpectClose(y, kF64, {64}, want);
  EXPECT_EQ(y->tensor().raw_data(), buffer);
  ExpectError(RunCpuKernel(PrimId::kDropout, {x}, {{"rate", 1.0}}),
              "'rate' of dropout must be in [0, 1), got 1");
  ExpectError(RunCpuKernel(PrimId::kDropout, {x}, {{"rate", -0.5}}), "got -0.5");
  ExpectError(RunCpuKernel(PrimId::kDropout, {RandomTensor(DType::kInt32, {3}, rng)}),
              "floating-point");
}

// dynamic_dropout reads the rate (rank 0 or [1]) and draws dropout's mask.
TEST(DynamicDropoutKernelTest, IsDropoutWithTheRateReadAtRunTime) {
  std::mt19937_64 rng(91);
  for (DType dtype : {kF32, kF64}) {
    for (double rate : {0.0, 0.25, 0.9}) {
      for (const Shape& rate_shape : {Shape{}, Shape{1}}) {
        SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " rate " << rate << " "
                                          << ShapeToString(rate_shape));
        Tensor x = RandomTensor(dtype, {7, 9}, rng, 0.5, 2);
        Tensor r = Tensor::Full(dtype, rate_shape, rate).value();
        absl::StatusOr<Value> y = RunCpuKernel(PrimId::kDynamicDropout, {x, r}, {{"seed", int64_t{12345}}});
        // The rate as the kernel reads it (0.25 and 0.9 rounded to f32 for f32).
        ExpectClose(y, dtype, {7, 9}, NaiveDropout(x, r.ElementAsDouble(0), 12345));
        if (rate == 0) {
          EXPECT_EQ(ToDoubles(y->tensor()), ToDoubles(x));  // exactly the identity
        }
      }
    }
  }
}

TEST(DynamicDropoutKernelTest, RateOutOfRangeIsAnError) {
  std::mt19937_64 rng(92);
  Tensor x = RandomTensor(kF64, {4}, rng);
  for (double bad : {1.0, -0.5, 2.0, std::numeric_limits<double>::quiet_NaN()}) {
    ExpectError(RunCpuKernel(PrimId::kDynamicDropout, {x, Tensor::FromScalar<double>(bad)}),
                "input 1 (rate) of dynamic_dropout must be in [0, 1), got");
  }
  ExpectError(RunCpuKernel(PrimId::kDynamicDropout, {x, Tensor::FromVector<double>({2}, {0.1, 0.2})}),
              "must be one value");
}

// Softmax rows, batch-norm statistics (per channel, in fixed lanes) and the
// cross-entropy's sums give the same bits on any number of threads.
TEST(NnKernelTest, ResultsDoNotDependOnTheThreadCount) {
  std::mt19937_64 rng(92);
  Tensor rows = RandomTensor(kF32, {256, 1000}, rng, -5, 5);
  for (PrimId id : {PrimId::kSoftmax, PrimId::kLogSoftmax}) {
    ExpectSameOnAnyThreadCount(id, {Value(rows)}, Axis(1));
    ExpectSameOnAnyThreadCount(id, {Value(rows)}, Axis(0));
  }
  Tensor labels = RandomTensor(kF32, {256, 1000}, rng, 0, 1);
  ExpectSameOnAnyThreadCount(PrimId::kSoftmaxCrossEntropy, {Value(rows), Value(labels)}, Axis(1));
  for (auto [shape, axis] : std::vector<std::pair<Shape, int64_t>>{
           {{64, 8, 32, 32}, 1}, {{32, 20, 20, 16}, -1}, {{4096, 300}, 1}}) {
    int64_t channels = shape[axis < 0 ? axis + shape.size() : axis];
    Tensor x = RandomTensor(kF32, shape, rng, -3, 3);
    Tensor scale = RandomTensor(kF32, {channels}, rng, 0.5, 2);
    Tensor bias = RandomTensor(kF32, {channels}, rng);
    ExpectSameOnAnyThreadCount(PrimId::kBatchNorm, {Value(x), Value(scale), Value(bias)},
                               {{"axis", axis}, {"epsilon", 1e-5}});
  }
}

// ----- random_uniform_like, random_normal_like -------------------------------------------------
AttrMap RandomAttrs(PrimId id, double a, double b, int64_t seed, DType t) {
  if (id == PrimId::kRandomUniformLike) {
    return {{"low", a}, {"high", b}, {"seed", seed}, {"dtype", AttrValue(t)}};
  }
  return {{"mean", a}, {"scale", b}, {"seed", seed}, {"dtype", AttrValue(t)}};
}

// The same seed gives the same numbers; another seed others; x gives only the shape.
TEST(RandomKernelTest, ReproduciblePerSeed) {
  for (PrimId id : {PrimId::kRandomUniformLike, PrimId::kRandomNormalLike}) {
    Tensor shape_of = Tensor::Zeros(DType::kInt64, {3, 50}).value();
    std::vector<double> a = ToDoubles(RunOk(id, {shape_of}, RandomAttrs(id, 0, 1, 7, kF64)));
    std::vector<double> b = ToDoubles(RunOk(id, {shape_of}, RandomAttrs(id, 0, 1, 7, kF64)));
    std::vector<double> c = ToDoubles(RunOk(id, {shape_of}, RandomAttrs(id, 0, 1, 8, kF64)));
    EXPECT_EQ(a, b);
    int same = 0;
    for (size_t i = 0; i < a.size(); ++i) same += a[i] == c[i];
    EXPECT_EQ(same, 0);
    Tensor f32 = RunOk(id, {shape_of}, RandomAttrs(id, 0, 1, 7, kF32));
    EXPECT_EQ(f32.dtype(), kF32);
    EXPECT_EQ(f32.shape(), (Shape{3, 50}));
    EXPECT_LE(MaxAbsDiff(f32, a), 1e-6 * (1 + MaxAbs(a)));  // the same draws, rounded
  }
}

// Moments of 20000 draws: uniform on [low, high) (and inside it), normal with
// its mean and scale; bounds at ~5 standard errors.
TEST(RandomKernelTest, Distributions) {
  Tensor x = Tensor::Zeros(kF32, {20000}).value();
  std::vector<double> u = ToDoubles(RunOk(PrimId::kRandomUniformLike, {x},
                                          RandomAttrs(PrimId::kRandomUniformLike, -2, 3, 1, kF64)));
  double mean = 0, var = 0;
  for (double v : u) {
    EXPECT_GE(v, -2);
    EXPECT_LT(v, 3);
    mean += v / u.size();
  }
  for (double v : u) var += (v - mean) * (v - mean) / u.size();
  EXPECT_NEAR(mean, 0.5, 5 * 5 / std::sqrt(12.0 * u.size()));
  EXPECT_NEAR(var, 25 / 12.0, 0.1);
  std::vector<double> n = ToDoubles(RunOk(PrimId::kRandomNormalLike, {x},
                                          RandomAttrs(PrimId::kRandomNormalLike, 1.5, 2, 2, kF64)));
  mean = var = 0;
  for (double v : n) mean += v / n.size();
  for (double v : n) var += (v - mean) * (v - mean) / n.size();
  EXPECT_NEAR(mean, 1.5, 5 * 2 / std::sqrt(1.0 * n.size()));
  EXPECT_NEAR(var, 4.0, 0.2);
}

TEST(RandomKernelTest, OutputTypeMustBeFloat) {
  ExpectRunError(PrimId::kRandomUniformLike, {Tensor::Zeros(kF32, {2}).value()},
                 RandomAttrs(PrimId::kRandomUniformLike, 0, 1, 0, DType::kInt32), "must be f32 or f64");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
