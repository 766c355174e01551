#include "backends/cpu/cpu_device.h"

#include "backends/cpu/cpu_kernels.h"
#include "backends/structural_kernels.h"

namespace kgrad {
namespace {

class CpuDeviceImpl final : public Device {
 public:
  DeviceType type() const override { return DeviceType::kCpu; }
  std::string name() const override { return "cpu"; }
  Allocator* allocator() override { return CpuAllocator(); }
  KernelFn kernel(PrimId id) const override { return CpuKernels().Get(id); }
  absl::StatusOr<Tensor> CopyToDevice(const Tensor& host) override { return host; }
  absl::StatusOr<Tensor> CopyToHost(const Tensor& t) override { return t; }
  absl::StatusOr<Tensor> Fill(DType dtype, absl::Span<const int64_t> shape,
                              double value) override {
    return Tensor::Full(dtype, shape, value);
  }
};

}  // namespace

const KernelTable& CpuKernels() {
  static const KernelTable* const table = [] {
    auto* t = new KernelTable();
    RegisterStructuralKernels(t);
    cpu::RegisterElementwiseKernels(t);
    cpu::RegisterReduceKernels(t);
    cpu::RegisterShapeKernels(t);
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
