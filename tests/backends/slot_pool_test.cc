// SlotPool (backends/slot_pool.h): frame storage kept between an executor's runs,
// and the executor's results when its runs reuse it; KernelContext's in-place
// output (backends/kernel.h) when the shape is unchanged.
#include "backends/slot_pool.h"

#include <vector>

#include "backends/cpu/cpu_device.h"
#include "backends/executor.h"
#include "backends/kernel.h"
#include "core/tensor.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/graph_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

TEST(SlotPoolTest, ARecycledVectorServesTheNextFrameEmpty) {
  SlotPool::Set spare;
  SlotPool::Slots a = SlotPool::NewSlots(&spare, 5);
  ASSERT_EQ(a.size(), 5u);
  Tensor t = Tensor::FromVector<float>({2}, {1, 2});
  a[3] = Value(t);
  const Value* storage = a.data();
  SlotPool::Recycle(&spare, &a);
  // The slot's value is released when the frame returns, not kept in the spare.
  EXPECT_TRUE(t.IsUniquelyOwned());
  ASSERT_EQ(spare.size(), 1u);
  SlotPool::Slots b = SlotPool::NewSlots(&spare, 4);
  EXPECT_EQ(b.data(), storage);
  ASSERT_EQ(b.size(), 4u);
  for (const Value& v : b) EXPECT_FALSE(v.is_tensor());
  EXPECT_TRUE(spare.empty());
}

TEST(SlotPoolTest, SpareVectorsAndSetsAreBounded) {
  SlotPool::Set spare;
  for (size_t i = 0; i < SlotPool::kMaxSpare + 5; ++i) {
    SlotPool::Slots v(3);
    SlotPool::Recycle(&spare, &v);
  }
  EXPECT_EQ(spare.size(), SlotPool::kMaxSpare);

  SlotPool pool;
  EXPECT_TRUE(pool.Take().empty());
  for (size_t i = 0; i < SlotPool::kMaxSets + 3; ++i) pool.Give(SlotPool::Set(1));
  size_t taken = 0;
  while (!pool.Take().empty()) ++taken;
  EXPECT_EQ(taken, SlotPool::kMaxSets);
}

TEST(SlotPoolTest, RunsOfOneExecutorReusingFramesGiveEachRunsOwnResult) {
  Module m(DefaultRegistry());
  FuncGraph* f = BuildFactorial(&m);  // non-tail recursion: a frame per level
  ExecutorOptions o;
  o.max_call_depth = 64;
  auto e = Executor::Create(f, o);
  ASSERT_TRUE(e.ok()) << e.status();
  const int64_t expected[] = {1, 1, 2, 6, 24, 120, 720, 5040, 40320, 362880, 3628800};
  for (int round = 0; round < 3; ++round) {
    for (int n : {10, 3, 0, 7, 1}) {
      absl::StatusOr<Value> r = (*e)->Run({I(n)});
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->scalar().AsInt(), expected[n]) << "n = " << n;
    }
    // A run that fails deep in the recursion leaves nothing behind for the next.
    ExpectError((*e)->Run({I(500)}), "call depth exceeds 64", absl::StatusCode::kResourceExhausted);
  }
}

TEST(KernelContextTest, AnInPlaceOutputOfTheSameShapeKeepsTheInputsBuffer) {
  PrimitivePtr add = DefaultRegistry().Make(PrimId::kAdd).value();
  std::vector<Value> in = {Value(Tensor::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6}))};
  const void* data = in[0].tensor().raw_data();
  KernelContext ctx(*add, absl::MakeSpan(in), CpuDevice());
  absl::StatusOr<Tensor> same = ctx.AllocateOrReuse({0}, DType::kFloat32, {2, 3});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->raw_data(), data);
  EXPECT_EQ(same->shape(), Shape({2, 3}));
  // Another shape of as many elements: the same buffer, seen with the new shape.
  std::vector<Value> in2 = {Value(Tensor::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6}))};
  const void* data2 = in2[0].tensor().raw_data();
  KernelContext ctx2(*add, absl::MakeSpan(in2), CpuDevice());
  absl::StatusOr<Tensor> reshaped = ctx2.AllocateOrReuse({0}, DType::kFloat32, {3, 2});
  ASSERT_TRUE(reshaped.ok());
  EXPECT_EQ(reshaped->raw_data(), data2);
  EXPECT_EQ(reshaped->shape(), Shape({3, 2}));
  EXPECT_EQ(in2[0].tensor().shape(), Shape({2, 3}));
  // A shared input is never written: a fresh buffer.
  Tensor held = in2[0].tensor();
  KernelContext ctx3(*add, absl::MakeSpan(in2), CpuDevice());
  absl::StatusOr<Tensor> fresh = ctx3.AllocateOrReuse({0}, DType::kFloat32, {2, 3});
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(fresh->raw_data(), held.raw_data());
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
