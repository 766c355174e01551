// The collectives on CUDA: with an NCCL communicator of one rank (the lent GPU
// machines have one GPU; one NCCL rank per GPU) they run on the device and
// return their input; with a host communicator they stage through the CPU; a
// data-parallel MLP step trains on the GPU as it does on the CPU. Skipped
// without a GPU. Several ranks (the timeout, disagreement across ranks) need a
// machine with several GPUs, run with mpirun like tests/distributed.
#include <memory>
#include <string>

#include "ad/data_parallel.h"
#include "backends/cuda/nccl_communicator.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/status_macros.h"
#include "examples/distributed/step_programs.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/graph_test_util.h"

namespace kgrad {
namespace testing {
namespace {

Value Iota(DType dtype, Shape shape) {
  Tensor t = Tensor::Create(dtype, shape).value();
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    if (dtype == DType::kFloat32) t.mutable_data<float>()[i] = 0.5f * i - 1;
    if (dtype == DType::kFloat64) t.mutable_data<double>()[i] = 0.5 * i - 1;
  }
  return Value(t);
}

absl::StatusOr<Value> RunOn(Device* dev, Communicator* comm, PrimId id, AttrMap attrs, Value x) {
  ExecutorOptions o;
  o.device = dev;
  o.communicator = comm;
  return RunOneOp(id, std::move(attrs), std::move(x), o);
}

TEST(NcclCommunicatorTest, OneRankReturnsTheInputOnTheDevice) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  LocalCommunicator bootstrap;
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> nccl = NcclCommunicator::Create(bootstrap, dev);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  EXPECT_EQ((*nccl)->memory(), DeviceType::kCuda);
  EXPECT_TRUE((*nccl)->Agree(42, "a number").ok());
  struct Case {
    PrimId id;
    AttrMap attrs;
  };
  for (const Case& c : std::vector<Case>{{PrimId::kAllReduce, {{"op", std::string("sum")}}},
                                         {PrimId::kAllReduce, {{"op", std::string("mean")}}},
                                         {PrimId::kAllReduce, {{"op", std::string("max")}}},
                                         {PrimId::kAllGather, {{"axis", int64_t{0}}}},
                                         {PrimId::kReduceScatter, {{"axis", int64_t{0}}}},
                                         {PrimId::kBroadcast, {}},
                                         {PrimId::kReduceTo, {}}}) {
    for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
      Value x = Iota(dtype, {4, 3});
      absl::StatusOr<Value> y = RunOn(dev, nccl->get(), c.id, c.attrs, x);
      ASSERT_TRUE(y.ok()) << PrimIdName(c.id) << ": " << y.status();
      EXPECT_EQ(MaxRelDiff(*y, x), 0) << PrimIdName(c.id);
    }
  }
  // A gather along an inner axis is refused, with the way out.
  absl::StatusOr<Value> inner =
      RunOn(dev, nccl->get(), PrimId::kAllGather, {{"axis", int64_t{1}}}, Iota(DType::kFloat32, {4, 3}));
  ASSERT_FALSE(inner.ok());
  EXPECT_NE(inner.status().message().find("transpose it to the front"), std::string::npos) << inner.status();
}

TEST(NcclCommunicatorTest, HostCommunicatorsStageThroughTheCpu) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  LocalCommunicator one;
  Value x = Iota(DType::kFloat32, {2, 3});
  absl::StatusOr<Value> y = RunOn(dev, &one, PrimId::kAllGather, {{"axis", int64_t{1}}}, x);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(MaxRelDiff(*y, x), 0);
  absl::StatusOr<Value> none = RunOn(dev, nullptr, PrimId::kAllReduce, {}, x);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("needs a communicator"), std::string::npos) << none.status();
}

TEST(NcclCommunicatorTest, DataParallelStepTrainsOnTheGpuAsOnTheCpu) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  LocalCommunicator bootstrap;
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> nccl = NcclCommunicator::Create(bootstrap, dev);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  std::vector<examples::Trained> trained;
  for (Communicator* comm : std::vector<Communicator*>{&bootstrap, nccl->get()}) {
    examples::StepProgram p = examples::MlpStep(DType::kFloat64, 8, {4, 8, 2});
    DataParallelOptions o;
    o.ranks = 1;
    o.bucket_bytes = 64;
    ASSERT_TRUE(MakeDataParallel(*p.module, p.step, o).ok());
    absl::StatusOr<examples::Trained> t = examples::Train(
        p, examples::StepData(p, 8, 3), 5, comm, nullptr, true, comm == &bootstrap ? nullptr : dev);
    ASSERT_TRUE(t.ok()) << t.status();
    trained.push_back(*std::move(t));
  }
  // f64 on both: only the order of the matmuls' sums differs.
  EXPECT_LE(examples::MaxWeightDiff(trained[0], trained[1]), 1e-10);
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
