#include "backends/cpu/cpu_device.h"

#include <atomic>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/fused_elementwise_kernel.h"
#include "backends/cpu/parallel.h"
#include "backends/collective_kernels.h"
#include "backends/list_kernels.h"
#include "backends/structural_kernels.h"

namespace kgrad {
namespace {

class CpuDeviceImpl final : public Device {
 public:
  DeviceType type() const override { return DeviceType::kCpu; }
  std::string name() const override { return "cpu"; }
  Allocator* allocator() override { return CpuAllocator(); }
  KernelFn kernel(PrimId id) const override { return CpuKernels().Get(id); }
  FusedElementwiseFn fused_elementwise() const override { return &cpu::RunFusedElementwise; }
  absl::StatusOr<Tensor> CopyToDevice(const Tensor& host) override { return host; }
  absl::StatusOr<Tensor> CopyToHost(const Tensor& t) override { return t; }
  absl::StatusOr<Tensor> Fill(DType dtype, absl::Span<const int64_t> shape,
                              double value) override {
    return Tensor::Full(dtype, shape, value);
  }

  // Concurrent callers. Each caller thread has its own OpenMP team; with several
  // runs at once the cores are oversubscribed, and every parallel region (and each
  // barrier inside Eigen's GEMM) waits for team threads the OS has not scheduled:
  // 16 callers on 2 cores ran at 0.15x the throughput of one. So a run alone uses
  // the caller's OpenMP thread count (the token), and while other runs are in
  // flight each kernel runs on its caller's thread only: the callers themselves
  // keep the cores busy. BeforeKernel re-decides before every kernel, so a run
  // that began alone gives up its team as soon as another run starts.
  int BeginRun() override {
    active_runs_.fetch_add(1, std::memory_order_relaxed);
    return cpu::MaxThreads();
  }
  void BeforeKernel(int token) override {
    cpu::SetMaxThreads(active_runs_.load(std::memory_order_relaxed) > 1 ? 1 : token);
  }
  void EndRun(int token) override {
    active_runs_.fetch_sub(1, std::memory_order_relaxed);
    cpu::SetMaxThreads(token);  // the caller's own setting back
  }

 private:
  std::atomic<int> active_runs_{0};
};

}  // namespace

const KernelTable& CpuKernels() {
  static const KernelTable* const table = [] {
    auto* t = new KernelTable();
    RegisterStructuralKernels(t);
    RegisterListKernels(t);
    RegisterCollectiveKernels(t);
    cpu::RegisterElementwiseKernels(t);
    cpu::RegisterReduceKernels(t);
    cpu::RegisterShapeKernels(t);
    cpu::RegisterIndexKernels(t);
    cpu::RegisterDynamicShapeKernels(t);
    cpu::RegisterDynamicIndexKernels(t);
    cpu::RegisterDynamicAxesKernels(t);
    cpu::RegisterSelectionKernels(t);
    cpu::RegisterTcKernels(t);
    cpu::RegisterLinalgKernels(t);
    cpu::RegisterNnKernels(t);
    cpu::RegisterConvKernels(t);
    return t;
  }();
  return *table;
}

Device* CpuDevice() {
  static Device* const device = new CpuDeviceImpl();
  return device;
}

}  // namespace kgrad
