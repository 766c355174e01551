// The CPU kernel of unique (ops/selection_ops.h) against naive references:
// std::map over the elements (or slices) for the sorted order, a scan for the
// first occurrences, over every dtype it takes and both orders.
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/value.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

struct Expected {
  std::vector<std::vector<double>> items;  // the distinct items, in output order
  std::vector<double> indices, inverse, counts;
};

// x's items along `axis` (whole-x flattened when axis < 0) as vectors of doubles.
std::vector<std::vector<double>> ItemsOf(const Tensor& x, int axis) {
  std::vector<double> v = ToDoubles(x);
  if (axis < 0) {
    std::vector<std::vector<double>> items;
    for (double e : v) items.push_back({e});
    return items;
  }
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int i = axis + 1; i < x.rank(); ++i) inner *= x.dim(i);
  const int64_t len = x.dim(axis);
  std::vector<std::vector<double>> items(len);
  for (int64_t j = 0; j < len; ++j) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) items[j].push_back(v[(o * len + j) * inner + i]);
    }
  }
  return items;
}

Expected Naive(const std::vector<std::vector<double>>& items, bool sorted) {
  std::map<std::vector<double>, int64_t> first;  // lexicographic order (no NaN here)
  std::vector<std::vector<double>> order;         // by first occurrence
  for (size_t j = 0; j < items.size(); ++j) {
    if (first.emplace(items[j], static_cast<int64_t>(j)).second) order.push_back(items[j]);
  }
  Expected e;
  if (sorted) {
    for (const auto& [item, j] : first) e.items.push_back(item);
  } else {
    e.items = order;
  }
  std::map<std::vector<double>, int64_t> pos;
  for (size_t k = 0; k < e.items.size(); ++k) {
    pos[e.items[k]] = static_cast<int64_t>(k);
    e.indices.push_back(static_cast<double>(first[e.items[k]]));
  }
  e.counts.assign(e.items.size(), 0);
  for (const auto& item : items) {
    e.inverse.push_back(static_cast<double>(pos[item]));
    ++e.counts[pos[item]];
  }
  return e;
}

void ExpectUnique(const Tensor& x, int axis, bool sorted) {
  SCOPED_TRACE(::testing::Message() << x.TypeString() << " axis " << axis << " sorted " << sorted);
  AttrMap a = {{"sorted", sorted}, {"axis", axis < 0 ? Ints{} : Ints{axis}}};
  absl::StatusOr<Value> out = RunCpuKernel(PrimId::kUnique, {x}, a);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->is_tuple() && out->tuple().size() == 4);
  const Expected e = Naive(ItemsOf(x, axis), sorted);
  const Tensor& y = out->tuple()[0].tensor();
  EXPECT_EQ(y.dtype(), x.dtype());
  std::vector<std::vector<double>> got = ItemsOf(y, axis);
  EXPECT_EQ(got, e.items);
  EXPECT_EQ(ToDoubles(out->tuple()[1].tensor()), e.indices);
  EXPECT_EQ(ToDoubles(out->tuple()[2].tensor()), e.inverse);
  EXPECT_EQ(ToDoubles(out->tuple()[3].tensor()), e.counts);
}

TEST(UniqueKernelTest, FlattenedAndAlongEachAxisEveryDType) {
  std::mt19937_64 rng(81);
  std::uniform_int_distribution<int> small(-2, 2);
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kUInt8, DType::kInt8,
                  DType::kInt16, DType::kBool}) {
    std::vector<double> v(4 * 3 * 2);
    for (double& e : v) e = t == DType::kBool ? (small(rng) > 0) : small(rng) + (t == DType::kUInt8 ? 2 : 0);
    Tensor x = MakeTensor(t, {4, 3, 2}, v);
    for (bool sorted : {true, false}) {
      for (int axis : {-1, 0, 1, 2}) ExpectUnique(x, axis, sorted);
    }
  }
}

// ONNX's example: [2, 1, 1, 3, 4, 3] -> y [1, 2, 3, 4] (sorted), first indices
// [1, 0, 3, 4], inverse [1, 0, 0, 2, 3, 2], counts [2, 1, 2, 1]; unsorted
// y [2, 1, 3, 4].
TEST(UniqueKernelTest, OnnxExample) {
  Tensor x = MakeTensor(DType::kFloat32, {6}, {2, 1, 1, 3, 4, 3});
  absl::StatusOr<Value> s = RunCpuKernel(PrimId::kUnique, {x}, {{"sorted", true}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToDoubles(s->tuple()[0].tensor()), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(ToDoubles(s->tuple()[1].tensor()), (std::vector<double>{1, 0, 3, 4}));
  EXPECT_EQ(ToDoubles(s->tuple()[2].tensor()), (std::vector<double>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(ToDoubles(s->tuple()[3].tensor()), (std::vector<double>{2, 1, 2, 1}));
  absl::StatusOr<Value> u = RunCpuKernel(PrimId::kUnique, {x}, {{"sorted", false}});
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(ToDoubles(u->tuple()[0].tensor()), (std::vector<double>{2, 1, 3, 4}));
  EXPECT_EQ(ToDoubles(u->tuple()[2].tensor()), (std::vector<double>{0, 1, 1, 2, 3, 2}));
}

TEST(UniqueKernelTest, NaNsAreOneValueAfterTheNumbersAndEmptyInputs) {
  const double nan = std::nan("");
  Tensor x = MakeTensor(DType::kFloat64, {5}, {nan, 1, nan, -1, 1});
  absl::StatusOr<Value> s = RunCpuKernel(PrimId::kUnique, {x}, {{"sorted", true}});
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<double> y = ToDoubles(s->tuple()[0].tensor());
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(y[0], -1);
  EXPECT_EQ(y[1], 1);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(ToDoubles(s->tuple()[3].tensor()), (std::vector<double>{1, 2, 2}));
  absl::StatusOr<Value> e = RunCpuKernel(PrimId::kUnique, {Tensor::Zeros(DType::kFloat32, {0, 3}).value()},
                                         {{"axis", Ints{1}}});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->tuple()[0].tensor().shape(), (Shape{0, 1}));  // three empty slices are one
  ExpectRunError(PrimId::kUnique, {x}, {{"axis", Ints{1}}}, "axis 1 is out of range for f64[5]");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
