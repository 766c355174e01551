// CPU kernels of gather_elements, scatter_elements and cumsum (the shape
// family's element-wise indexing and scans) against naive float64 references
// written here (coordinates unravelled and ravelled one element at a time), in
// every dtype each accepts; plus hand-computed cases from the ONNX operator
// documentation, negative indices, repeated indices, and run-time errors.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "core/value.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

constexpr uint64_t kSeed = 20261124;

// Random indices in [-dim, dim) shaped `shape`.
Tensor RandomIndices(DType t, const Shape& shape, int64_t dim, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> pick(-dim, dim - 1);
  std::vector<double> v(NumElementsOf(shape));
  for (double& x : v) x = static_cast<double>(pick(rng));
  return MakeTensor(t, shape, v);
}

// The position in data that indices element i names.
int64_t Target(const Shape& data, const Shape& ishape, const std::vector<double>& idx, int axis,
               int64_t i) {
  Shape c = Unravel(ishape, i);
  int64_t k = static_cast<int64_t>(idx[i]);
  c[axis] = k < 0 ? k + data[axis] : k;
  return Ravel(data, c);
}

void ExpectValues(const Tensor& got, DType dtype, const Shape& shape,
                  const std::vector<double>& want, const std::string& what, double tol = 0) {
  ASSERT_TRUE(got.defined()) << what;
  EXPECT_EQ(got.dtype(), dtype) << what;
  EXPECT_EQ(got.shape(), shape) << what;
  std::vector<double> v = ToDoubles(got);
  ASSERT_EQ(v.size(), want.size()) << what;
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_NEAR(v[i], want[i], tol * (1 + std::abs(want[i]))) << what << " element " << i;
  }
}

struct IndexCase {
  Shape data, indices;
  int64_t axis;
};

const std::vector<IndexCase>& IndexCases() {
  static const auto* cases = new std::vector<IndexCase>{
      {{5}, {7}, 0},        {{3, 4}, {2, 4}, 0},        {{3, 4}, {3, 6}, 1},
      {{3, 4}, {2, 3}, -1}, {{2, 3, 4}, {2, 5, 4}, 1},  {{2, 3, 4}, {1, 2, 3}, 2},
      {{4, 3}, {0, 3}, 0},  {{2, 3, 4}, {2, 3, 4}, -3},
  };
  return *cases;
}

TEST(IndexKernelTest, GatherElementsMatchesReference) {
  std::mt19937_64 rng(kSeed);
  for (const IndexCase& c : IndexCases()) {
    for (DType t : {kF32, kF64, kI32, kI64, kBool}) {
      for (DType it : {kI32, kI64}) {
        const int axis = c.axis < 0 ? c.axis + static_cast<int>(c.data.size()) : c.axis;
        std::string what = absl::StrCat(DTypeName(t), ShapeToString(c.data), " ", DTypeName(it),
                                        ShapeToString(c.indices), " axis ", axis);
        Tensor data = RandomTensor(t, c.data, rng, -10, 10);
        Tensor idx = RandomIndices(it, c.indices, c.data[axis], rng);
        std::vector<double> dv = ToDoubles(data), iv = ToDoubles(idx);
        std::vector<double> want(iv.size());
        for (size_t i = 0; i < want.size(); ++i) {
          want[i] = dv[Target(c.data, c.indices, iv, axis, i)];
        }
        ExpectValues(RunOk(PrimId::kGatherElements, {data, idx}, {{"axis", c.axis}}, what), t,
                     c.indices, want, what);
      }
    }
  }
}

// ONNX's GatherElements examples.
TEST(IndexKernelTest, GatherElementsOnnxExamples) {
  ExpectValues(
      RunOk(PrimId::kGatherElements, {F64({2, 2}, {1, 2, 3, 4}), I64({2, 2}, {0, 0, 1, 0})},
            {{"axis", int64_t{1}}}),
      kF64, {2, 2}, {1, 1, 4, 3}, "axis 1");
  ExpectValues(RunOk(PrimId::kGatherElements,
                     {F64({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), I64({2, 3}, {1, 2, 0, 2, 0, 0})}),
               kF64, {2, 3}, {4, 8, 3, 7, 2, 3}, "axis 0");
  ExpectValues(RunOk(PrimId::kGatherElements, {F64({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}),
                                               I64({2, 3}, {-1, -2, 0, -2, 0, 0})}),
               kF64, {2, 3}, {7, 5, 3, 4, 2, 3}, "negative");
}

TEST(IndexKernelTest, GatherElementsIndexOutOfRange) {
  for (int64_t bad : {3, -4, 100}) {
    ExpectRunError(PrimId::kGatherElements, {F64({3}, {1, 2, 3}), I64({2}, {0, double(bad)})}, {},
                   absl::StrCat("index ", bad,
                                " (at position 1 of the indices) is out of range "
                                "[-3, 3) for dim 0 of f64[3]"),
                   absl::StatusCode::kOutOfRange);
  }
  ExpectRunError(PrimId::kGatherElements, {F64({3, 2}, {1, 2, 3, 4, 5, 6}), I64({3}, {0, 0, 0})},
                 {}, "rank of input 0");
}

double Combine(const std::string& r, double out, double u) {
  if (r == "add") return out + u;
  if (r == "mul") return out * u;
  if (r == "max") return std::max(out, u);
  if (r == "min") return std::min(out, u);
  return u;
}

TEST(IndexKernelTest, ScatterElementsMatchesReference) {
  std::mt19937_64 rng(kSeed);
  for (const IndexCase& c : IndexCases()) {
    for (const std::string red : {"none", "add", "mul", "max", "min"}) {
      for (DType t : {kF32, kF64, kI32, kI64, kBool}) {
        if (t == kBool && red != "none") continue;
        const int axis = c.axis < 0 ? c.axis + static_cast<int>(c.data.size()) : c.axis;
        std::string what = absl::StrCat(red, " ", DTypeName(t), ShapeToString(c.data), " ",
                                        ShapeToString(c.indices), " axis ", axis);
        Tensor data = RandomTensor(t, c.data, rng, -4, 4);
        Tensor idx = RandomIndices(kI64, c.indices, c.data[axis], rng);  // repeats too
        Tensor upd = RandomTensor(t, c.indices, rng, -4, 4);
        std::vector<double> want = ToDoubles(data), iv = ToDoubles(idx), uv = ToDoubles(upd);
        for (size_t i = 0; i < iv.size(); ++i) {  // row-major order: the last write wins
          int64_t p = Target(c.data, c.indices, iv, axis, i);
          want[p] = Combine(red, want[p], uv[i]);
        }
        AttrMap attrs = {{"axis", c.axis}, {"reduction", red}};
        ExpectValues(RunOk(PrimId::kScatterElements, {data, idx, upd}, attrs, what), t, c.data,
                     want, what, t == kF32 ? 1e-5 : 0);
      }
    }
  }
}

// ONNX's ScatterElements examples, with the reductions on a repeated index.
TEST(IndexKernelTest, ScatterElementsOnnxExamples) {
  Value data = F64({3, 3}, {0, 0, 0, 0, 0, 0, 0, 0, 0});
  ExpectValues(RunOk(PrimId::kScatterElements, {data, I64({2, 3}, {1, 0, 2, 0, 2, 1}),
                                                F64({2, 3}, {1, 1.1, 1.2, 2, 2.1, 2.2})}),
               kF64, {3, 3}, {2, 1.1, 0, 1, 0, 2.2, 0, 2.1, 1.2}, "axis 0");
  Value row = F64({1, 5}, {1, 2, 3, 4, 5});
  ExpectValues(RunOk(PrimId::kScatterElements, {row, I64({1, 2}, {1, -2}), F64({1, 2}, {1.1, 2.1})},
                     {{"axis", int64_t{1}}}),
               kF64, {1, 5}, {1, 1.1, 3, 2.1, 5}, "negative index");
  const std::vector<std::pair<std::string, std::vector<double>>> reductions = {
      {"add", {1, 2, 3 + 1.1 + 2.1, 4, 5}},
      {"mul", {1, 2, 3 * 1.1 * 2.1, 4, 5}},
      {"max", {1, 2, 3, 4, 5}},
      {"min", {1, 1.1, 2.1, 4, 5}},
      {"none", {1, 2, 2.1, 4, 5}},  // the last write wins
  };
  for (const auto& [red, want] : reductions) {
    Value idx = red == "min" ? I64({1, 2}, {1, 2}) : I64({1, 2}, {2, 2});
    ExpectValues(RunOk(PrimId::kScatterElements, {row, idx, F64({1, 2}, {1.1, 2.1})},
                       {{"axis", int64_t{1}}, {"reduction", red}}),
                 kF64, {1, 5}, want, red, 1e-15);
  }
}

TEST(IndexKernelTest, ScatterElementsErrors) {
  ExpectRunError(PrimId::kScatterElements, {F64({3}, {1, 2, 3}), I64({1}, {-4}), F64({1}, {0})}, {},
                 "index -4 (at position 0 of the indices) is out of range [-3, 3)",
                 absl::StatusCode::kOutOfRange);
  ExpectRunError(PrimId::kScatterElements, {F64({3}, {1, 2, 3}), I64({1}, {0}), F64({2}, {0, 1})},
                 {}, "input 2 (updates)");
  ExpectRunError(PrimId::kScatterElements, {F64({3}, {1, 2, 3}), I64({1}, {0}), F64({1}, {0})},
                 {{"reduction", std::string("avg")}}, "attribute 'reduction'");
}

TEST(IndexKernelTest, CumSumMatchesReference) {
  std::mt19937_64 rng(kSeed);
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{6}, 0}, {{3, 4}, 0}, {{3, 4}, 1}, {{2, 3, 4}, -2}, {{2, 0, 3}, 2}, {{1000, 70}, 1}};
  for (const auto& [shape, attr_axis] : cases) {
    const int axis = attr_axis < 0 ? attr_axis + static_cast<int>(shape.size()) : attr_axis;
    for (DType t : {kF32, kF64, kI32, kI64}) {
      for (bool exclusive : {false, true}) {
        for (bool reverse : {false, true}) {
          std::string what = absl::StrCat(DTypeName(t), ShapeToString(shape), " axis ", axis,
                                          exclusive ? " exclusive" : "", reverse ? " reverse" : "");
          Tensor x = RandomTensor(t, shape, rng, -10, 10);
          // f32 sums in f32: its error grows with the length summed (and a
          // partial sum may cancel), hence the tolerance below.
          std::vector<double> xv = ToDoubles(x), want(xv.size(), 0);
          for (size_t i = 0; i < want.size(); ++i) {
            Shape c = Unravel(shape, i);
            const int64_t k = c[axis];
            for (int64_t j = 0; j < shape[axis]; ++j) {
              bool in = reverse ? (exclusive ? j > k : j >= k) : (exclusive ? j < k : j <= k);
              c[axis] = j;
              if (in) want[i] += xv[Ravel(shape, c)];
            }
          }
          ExpectValues(
              RunOk(PrimId::kCumSum, {x},
                    {{"axis", attr_axis}, {"exclusive", exclusive}, {"reverse", reverse}}, what),
              t, shape, want, what, t == kF32 ? 1e-4 * shape[axis] : 1e-12);
        }
      }
    }
  }
}

TEST(IndexKernelTest, CumSumOnnxExamplesAndErrors) {
  Value x = F64({5}, {1, 2, 3, 4, 5});
  auto run = [&](bool exclusive, bool reverse) {
    return RunOk(PrimId::kCumSum, {x}, {{"exclusive", exclusive}, {"reverse", reverse}});
  };
  ExpectValues(run(false, false), kF64, {5}, {1, 3, 6, 10, 15}, "plain");
  ExpectValues(run(true, false), kF64, {5}, {0, 1, 3, 6, 10}, "exclusive");
  ExpectValues(run(false, true), kF64, {5}, {15, 14, 12, 9, 5}, "reverse");
  ExpectValues(run(true, true), kF64, {5}, {14, 12, 9, 5, 0}, "exclusive reverse");
  ExpectRunError(PrimId::kCumSum, {MakeTensor(kBool, {2}, {1, 0})}, {}, "input 0");
  ExpectRunError(PrimId::kCumSum, {x}, {{"axis", int64_t{1}}}, "'axis'");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
