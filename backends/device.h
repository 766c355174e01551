// Device: where tensors live and kernels run. CPU is the default; CUDA is built
// with --config=cuda. A device is shared by every executor that uses it and is
// thread-safe.
#ifndef KGRAD_BACKENDS_DEVICE_H_
#define KGRAD_BACKENDS_DEVICE_H_

#include <string>

#include "absl/status/statusor.h"
#include "backends/fused_elementwise.h"
#include "backends/kernel.h"
#include "core/tensor.h"
#include "core/value.h"

namespace kgrad {

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceType type() const = 0;
  virtual std::string name() const = 0;
  virtual Allocator* allocator() = 0;
  // The kernel for `id`, or nullptr when the device has none.
  virtual KernelFn kernel(PrimId id) const = 0;

  // Host <-> device copies at a graph's boundary (the identity on CPU).
  virtual absl::StatusOr<Tensor> CopyToDevice(const Tensor& host) = 0;
  virtual absl::StatusOr<Tensor> CopyToHost(const Tensor& tensor) = 0;
  // A tensor of `dtype` and `shape` filled with `value`.
  virtual absl::StatusOr<Tensor> Fill(DType dtype, absl::Span<const int64_t> shape,
                                      double value) = 0;
  // The evaluator of fused elementwise runs (backends/fused_elementwise.h), or
  // nullptr: the executor then runs every application on its own.
  virtual FusedElementwiseFn fused_elementwise() const { return nullptr; }
  // Waits for queued work (no-op on CPU).
  virtual absl::Status Synchronize() { return absl::OkStatus(); }

  // Runs in flight share the device. The executor calls BeginRun before a run's
  // first kernel, BeforeKernel(token) before each kernel and EndRun(token) after
  // the run, with the token BeginRun returned. The CPU uses them to give each of
  // several concurrent runs one thread (see cpu_device.cc).
  virtual int BeginRun() { return 0; }
  virtual void BeforeKernel(int token) { (void)token; }
  virtual void EndRun(int token) { (void)token; }
};

// `v` with every tensor in it (at any tuple depth) copied to `device`, or to the
// host; tensors already there are shared, not copied.
absl::StatusOr<Value> ValueToDevice(const Value& v, Device* device);
absl::StatusOr<Value> ValueToHost(const Value& v, Device* device);

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_DEVICE_H_
