// ExecutorOptions::reuse_weight_layouts: a convolution's weight is put in
// oneDNN's layout once per executor and kept (backends/kernel_cache.h); results
// are those of a fresh reorder every call, weights given to Run are used as
// given and never kept, and the executor's own weights come back after them.
#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/executor.h"
#include "backends/kernel_cache.h"
#include "core/builder.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

constexpr DType kF32 = DType::kFloat32;

// y = conv2d(x, w) + conv2d_backprop_input(x-shaped dy, w) summed: the weight
// feeds both directions of the convolution.
FuncGraph* TwoConvs(Module* m, const Tensor& w) {
  GraphBuilder b(m, "two_convs");
  AnfNode* x = b.Param("x", kF32, {2, 8, 10, 10});
  AnfNode* dy = b.Param("dy", kF32, {2, 16, 10, 10});
  AnfNode* wn = b.Weight("w", w);
  AttrMap pad = {{"padding", AttrValue(Ints{1, 1})}};
  CNode* y = b.Op(PrimId::kConv2d, {x, wn}, pad);
  CNode* dx = b.Op(PrimId::kConv2dBackpropInput, {dy, wn, x}, pad);
  return b.Return(b.Tuple({y, dx})).value();
}

std::vector<double> Flat(const Value& v) {
  std::vector<double> out;
  for (const Value& t : v.tuple()) {
    for (int64_t i = 0; i < t.tensor().NumElements(); ++i) out.push_back(t.tensor().ElementAsDouble(i));
  }
  return out;
}

class WeightCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng(7);
    w_ = RandomTensor(kF32, {16, 8, 3, 3}, rng);
    w2_ = RandomTensor(kF32, {16, 8, 3, 3}, rng);
    args_ = {Value(RandomTensor(kF32, {2, 8, 10, 10}, rng)), Value(RandomTensor(kF32, {2, 16, 10, 10}, rng))};
  }

  // The results of a fresh executor that keeps nothing.
  std::vector<double> Fresh(const Tensor& w) {
    Module m(DefaultRegistry());
    ExecutorOptions o;
    o.reuse_weight_layouts = false;
    std::unique_ptr<Executor> e = Executor::Create(TwoConvs(&m, w), o).value();
    absl::StatusOr<Value> r = e->Run(args_);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? Flat(*r) : std::vector<double>();
  }

  Tensor w_, w2_;
  std::vector<Value> args_;
};

TEST_F(WeightCacheTest, KeptLayoutsGiveTheResultsOfFreshOnes) {
  const std::vector<double> want = Fresh(w_), want2 = Fresh(w2_);
  ASSERT_NE(want, want2);
  Module m(DefaultRegistry());
  std::unique_ptr<Executor> e = Executor::Create(TwoConvs(&m, w_)).value();
  for (int run = 0; run < 3; ++run) {
    absl::StatusOr<Value> r = e->Run(args_);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Flat(*r), want) << "run " << run;  // bit for bit
  }
  // A weight given to Run is used as given, and the executor's own comes back.
  absl::StatusOr<Value> r = e->Run(args_, {{"w", w2_}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Flat(*r), want2);
  r = e->Run(args_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Flat(*r), want);
}

#ifndef KGRAD_NO_DNNL
// Evidence that the copy is kept: the executor shares the module's weight buffer
// on the CPU, and writing into it after Create (which callers must not do) is
// not seen once the layout is kept; with reuse_weight_layouts off it is.
TEST_F(WeightCacheTest, TheKeptCopyIsWhatLaterRunsRead) {
  const std::vector<double> want = Fresh(w_);
  for (bool reuse : {true, false}) {
    SCOPED_TRACE(reuse ? "reuse" : "no reuse");
    Module m(DefaultRegistry());
    Tensor w = Tensor::Create(kF32, {16, 8, 3, 3}).value();
    std::copy(w_.data<float>(), w_.data<float>() + w_.NumElements(), w.mutable_data<float>());
    ExecutorOptions o;
    o.reuse_weight_layouts = reuse;
    std::unique_ptr<Executor> e = Executor::Create(TwoConvs(&m, w), o).value();
    absl::StatusOr<Value> r = e->Run(args_);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(Flat(*r), want);
    Tensor shared = *m.FindWeight("w")->default_value();
    ASSERT_EQ(shared.buffer(), w.buffer());
    std::copy(w2_.data<float>(), w2_.data<float>() + w2_.NumElements(), w.mutable_data<float>());
    r = e->Run(args_);
    ASSERT_TRUE(r.ok()) << r.status();
    if (reuse) {
      EXPECT_EQ(Flat(*r), want);
    } else {
      EXPECT_EQ(Flat(*r), Fresh(w2_));
    }
  }
}
#endif

TEST(KernelCacheTest, MatchesTheSameBufferOnlyAndKeepsAFewKeys) {
  std::mt19937_64 rng(3);
  Tensor a = RandomTensor(kF32, {4}, rng);
  Tensor a_copy = Tensor::Create(kF32, {4}).value();
  std::copy(a.data<float>(), a.data<float>() + 4, a_copy.mutable_data<float>());
  Tensor derived = RandomTensor(kF32, {8}, rng);
  KernelCache cache;
  EXPECT_FALSE(cache.Find(a, "k").has_value());
  cache.Store(a, "k", derived);
  std::optional<Tensor> hit = cache.Find(a, "k");
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->buffer(), derived.buffer());
  EXPECT_FALSE(cache.Find(a, "other").has_value());
  EXPECT_FALSE(cache.Find(a_copy, "k").has_value());  // equal values, another buffer
  Tensor a_view = a.Reshaped({2, 2});  // the buffer, another shape
  EXPECT_FALSE(cache.Find(a_view, "k").has_value());
  // The same key for another source replaces the entry.
  cache.Store(a_copy, "k", derived);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_FALSE(cache.Find(a, "k").has_value());
  EXPECT_TRUE(cache.Find(a_copy, "k").has_value());
  for (int i = 0; i < 10; ++i) cache.Store(a, absl::StrCat("key", i), derived);
  EXPECT_EQ(cache.size(), KernelCache::kMaxEntries);
  EXPECT_TRUE(cache.Find(a, "key9").has_value());
  EXPECT_FALSE(cache.Find(a, "key0").has_value());  // the oldest went
}

// Plans: one per key, the same object back, replaced under the same key, the
// oldest going past kMaxEntries; apart from the derived tensors.
TEST(KernelCacheTest, KeepsAPlanPerKey) {
  KernelCache cache;
  EXPECT_EQ(cache.FindPlan("tc f32[2]"), nullptr);
  auto plan = std::make_shared<const int>(7);
  cache.StorePlan("tc f32[2]", plan);
  std::shared_ptr<const int> hit = cache.FindPlanAs<int>("tc f32[2]");
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit.get(), plan.get());
  EXPECT_EQ(cache.FindPlan("tc f32[3]"), nullptr);
  cache.StorePlan("tc f32[2]", std::make_shared<const int>(8));
  EXPECT_EQ(cache.num_plans(), 1u);
  EXPECT_EQ(*cache.FindPlanAs<int>("tc f32[2]"), 8);
  EXPECT_EQ(cache.size(), 0u);  // no derived tensors
  for (int i = 0; i < 10; ++i) cache.StorePlan(absl::StrCat("key", i), plan);
  EXPECT_EQ(cache.num_plans(), KernelCache::kMaxEntries);
  EXPECT_NE(cache.FindPlan("key9"), nullptr);
  EXPECT_EQ(cache.FindPlan("key0"), nullptr);  // the oldest went
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
