// The CUDA device: availability (checked on every machine: without a GPU the
// device is an Unavailable status, never a crash), the kernel table's coverage
// (no GPU needed), and with a GPU: copies, fills, allocator statistics, one
// stream per thread, structural kernels on device values, and errors.
#include "backends/cuda/cuda_device.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "backends/cpu/cpu_device.h"
#include "backends/cuda/cuda_context.h"
#include "backends/structural_kernels.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

TEST(CudaDeviceTest, WithoutAGpuTheDeviceIsUnavailable) {
  const int count = CudaDeviceCount();
  absl::StatusOr<Device*> d = CudaDevice();
  if (count == 0) {
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable) << d.status();
    EXPECT_NE(d.status().message().find("no CUDA device"), absl::string_view::npos) << d.status();
    EXPECT_EQ(CudaDevice(1).status().code(), absl::StatusCode::kUnavailable);
  } else {
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ((*d)->type(), DeviceType::kCuda);
    EXPECT_EQ((*d)->name().rfind("cuda:0", 0), 0u) << (*d)->name();
    EXPECT_EQ(*CudaDevice(), *d) << "one device per ordinal";
    EXPECT_EQ(CudaDevice(count).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(CudaDevice(-1).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(CudaDeviceTest, EveryPrimitiveWithACpuKernelHasACudaKernel) {
  const KernelTable& cuda = cuda::CudaKernels();
  const KernelTable& cpu = CpuKernels();
  for (int i = 0; i < kNumPrimIds; ++i) {
    const PrimId id = static_cast<PrimId>(i);
    if (cpu.Get(id) != nullptr) {
      EXPECT_NE(cuda.Get(id), nullptr) << PrimIdName(id);
    }
  }
  // Every primitive has a native kernel (some fall back for particular inputs:
  // integer matmul, shapes beyond cuDNN's int dims), but the run-time shape and
  // axes primitives (which read their shape operands on the host) and topk and
  // nonzero, which run through the CPU (backends/cuda/README.md).
  const std::vector<PrimId> through_cpu = {
      PrimId::kShapeOf,           PrimId::kSizeOf,      PrimId::kDynamicReshape,
      PrimId::kDynamicBroadcastTo, PrimId::kDynamicFill, PrimId::kDynamicSlice,
      PrimId::kDynamicSliceGrad,   PrimId::kDynamicPad,  PrimId::kDynamicRange,
      // Run-time counts and axes.
      PrimId::kDynamicCumSum, PrimId::kDynamicOneHot, PrimId::kDynamicSplit,
      PrimId::kDynamicTile, PrimId::kDynamicTileGrad, PrimId::kDynamicUnsqueeze,
      PrimId::kDynamicSqueeze, PrimId::kDynamicReduceSum,
      // Selection by value (data-dependent output order and count).
      PrimId::kTopK, PrimId::kNonZero, PrimId::kUnique,
      // Small dense linear algebra (det's gradient uses the inverse) and the
      // seeded random draws: CPU kernels only so far.
      PrimId::kDet, PrimId::kMatrixInverse, PrimId::kRandomUniformLike, PrimId::kRandomNormalLike,
      // layer_norm's gradient (in double on the host, backends/cpu/norm_grad_kernels.cc;
      // batch_norm's is cuDNN's backward).
      PrimId::kLayerNormGrad,
      // A rate computed at run time, read on the host.
      PrimId::kDynamicDropout,
      // Unsigned integers only (ONNX BitShift): storage dtypes, which every
      // primitive hands to the CPU.
      PrimId::kBitShift,
      // Tensor comprehensions: the CPU's interpreter and GEMMs only so far.
      PrimId::kTc};
  std::vector<std::string> names;
  for (PrimId id : CudaFallbackPrimitives()) {
    if (std::find(through_cpu.begin(), through_cpu.end(), id) == through_cpu.end()) {
      names.push_back(PrimIdName(id));
    }
  }
  EXPECT_TRUE(names.empty()) << names.size() << " primitives fall back: " << absl::StrJoin(names, ", ");
}

TEST(CudaDeviceTest, StatsNeedACudaDevice) {
  EXPECT_EQ(CudaMemoryStats(CpuDevice()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaMemoryStats(nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaDeviceTest, CopiesRoundTripEveryDtype) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  std::mt19937_64 rng(61);
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kBool}) {
    for (Shape s : {Shape{}, Shape{0}, Shape{3, 0, 2}, Shape{5}, Shape{123, 457}}) {
      Tensor host = RandomTensor(t, s, rng, -100, 100);
      absl::StatusOr<Tensor> d = dev->CopyToDevice(host);
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_EQ(d->device(), DeviceType::kCuda);
      absl::StatusOr<Tensor> back = dev->CopyToHost(*d);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_TRUE(TensorsEqual(*back, host)) << host.TypeString();
    }
  }
}

TEST(CudaDeviceTest, FillConvertsTheValue) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kBool}) {
    absl::StatusOr<Tensor> d = dev->Fill(t, {4, 3}, 2.5);
    ASSERT_TRUE(d.ok()) << d.status();
    Tensor host = *dev->CopyToHost(*d);
    Tensor want = *Tensor::Full(t, {4, 3}, 2.5);
    EXPECT_TRUE(TensorsEqual(host, want)) << DTypeName(t);
  }
}

TEST(CudaDeviceTest, AllocatorStatisticsFollowTensors) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  ASSERT_TRUE(dev->Synchronize().ok());
  const cuda::MemoryStats before = *CudaMemoryStats(dev);
  ASSERT_TRUE(CudaResetPeakMemory(dev).ok());
  {
    Tensor a = *Tensor::Create(DType::kFloat32, {1000, 1000}, dev->allocator());
    cuda::MemoryStats s = *CudaMemoryStats(dev);
    EXPECT_GE(s.bytes_in_use - before.bytes_in_use, 4000000);
    EXPECT_GE(s.peak_bytes_in_use, s.bytes_in_use);
  }
  cuda::MemoryStats freed = *CudaMemoryStats(dev);
  EXPECT_EQ(freed.bytes_in_use, before.bytes_in_use);
  EXPECT_GE(freed.bytes_cached, 4000000);
  // The same size again comes from the cache.
  Tensor b = *Tensor::Create(DType::kFloat32, {1000, 1000}, dev->allocator());
  cuda::MemoryStats again = *CudaMemoryStats(dev);
  EXPECT_EQ(again.cache_hits, freed.cache_hits + 1);
  EXPECT_EQ(again.raw_mallocs, freed.raw_mallocs);
  b = Tensor();
  absl::StatusOr<size_t> released = CudaEmptyCache(dev);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_GE(*released, 4000000u);
  EXPECT_EQ(CudaMemoryStats(dev)->bytes_cached, 0);
}

TEST(CudaDeviceTest, EachThreadHasItsOwnStream) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  auto* d = static_cast<cuda::CudaDeviceImpl*>(dev);
  cudaStream_t mine = (*d->Resources())->stream;
  EXPECT_EQ((*d->Resources())->stream, mine) << "stable within a thread";
  constexpr int kThreads = 4;
  std::vector<cudaStream_t> streams(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      streams[t] = (*d->Resources())->stream;
      // Keep the thread (and its stream) alive until everyone has looked.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<cudaStream_t> distinct(streams.begin(), streams.end());
  distinct.insert(mine);
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kThreads + 1));
}

TEST(CudaDeviceTest, StructuralKernelsWorkOnDeviceValues) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  Tensor a = *dev->CopyToDevice(Tensor::FromVector<double>({2}, {1, 2}));
  Tensor b = *dev->CopyToDevice(Tensor::FromVector<double>({2}, {10, 20}));
  Value t1 = Value::Tuple({Value(a), Value(Scalar::Float(1.5))});
  Value t2 = Value::Tuple({Value(b), Value(Scalar::Float(2.0))});
  absl::StatusOr<Value> sum = HyperAdd(t1, t2, dev);
  ASSERT_TRUE(sum.ok()) << sum.status();
  Tensor host = *dev->CopyToHost(sum->tuple()[0].tensor());
  EXPECT_EQ(host.data<double>()[0], 11);
  EXPECT_EQ(host.data<double>()[1], 22);
  EXPECT_EQ(sum->tuple()[1].scalar().AsDouble(), 3.5);
  absl::StatusOr<Value> zeros = FilledLike(Value(a), 0.0, dev);
  ASSERT_TRUE(zeros.ok());
  EXPECT_EQ(dev->CopyToHost(zeros->tensor())->data<double>()[1], 0);
  Tensor flag = *dev->CopyToDevice(Tensor::FromVector<bool>({1}, {true}));
  EXPECT_TRUE(*ConditionValue(Value(flag), dev));
}

TEST(CudaDeviceTest, HostInputsAreMovedToTheDevice) {
  KGRAD_CUDA_DEVICE_OR_SKIP(dev);
  // A host tensor reaching a kernel (a tensor inside a tuple constant, say).
  PrimitivePtr add = DefaultRegistry().Make(PrimId::kAdd).value();
  std::vector<Value> in = {Value(Tensor::FromVector<float>({2}, {1, 2})),
                           Value(*dev->CopyToDevice(Tensor::FromVector<float>({2}, {3, 4})))};
  KernelContext ctx(*add, absl::MakeSpan(in), dev);
  absl::StatusOr<Value> out = dev->kernel(PrimId::kAdd)(ctx);
  ASSERT_TRUE(out.ok()) << out.status();
  Tensor host = *dev->CopyToHost(out->tensor());
  EXPECT_EQ(host.data<float>()[0], 4);
  EXPECT_EQ(host.data<float>()[1], 6);
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
