// The kernel interface: a kernel computes one primitive application on one
// device. It reads its inputs (Values; tensors already on the device), may reuse
// an input's buffer when nothing else holds it, and returns the output Value.
// Errors are plain Status messages ("input 1 must be f32, got f64"); the
// executor adds the graph, node and primitive.
#ifndef KGRAD_BACKENDS_KERNEL_H_
#define KGRAD_BACKENDS_KERNEL_H_

#include <array>
#include <initializer_list>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/primitive.h"
#include "core/value.h"

namespace kgrad {

class Communicator;
class Device;
class KernelCache;

class KernelContext {
 public:
  // `communicator`: the ranks the collective primitives run across
  // (ExecutorOptions::communicator), or nullptr.
  KernelContext(const Primitive& prim, absl::Span<Value> inputs, Device* device,
                Communicator* communicator = nullptr)
      : prim_(prim), inputs_(inputs), device_(device), communicator_(communicator) {}

  const Primitive& prim() const { return prim_; }
  size_t num_inputs() const { return inputs_.size(); }
  const Value& input(size_t i) const { return inputs_[i]; }
  Value& mutable_input(size_t i) { return inputs_[i]; }
  Device* device() const { return device_; }
  Communicator* communicator() const { return communicator_; }
  // The step's memo across runs (backends/kernel_cache.h: derived weights and
  // compiled plans), and whether input `i` is one of the executor's own weights
  // (the same tensor every run unless a Run overrides it): only such inputs may
  // have derived copies kept there.
  // nullptr / false outside a compiled step, or with
  // ExecutorOptions::reuse_weight_layouts off.
  KernelCache* cache() const { return cache_; }
  bool persistent(size_t i) const { return cache_ != nullptr && i < 32 && ((persistent_ >> i) & 1u); }
  void set_cache(KernelCache* cache, uint32_t persistent_inputs) {
    cache_ = cache;
    persistent_ = persistent_inputs;
  }

  // Input `i` as a tensor (a scalar input is not converted); error otherwise.
  absl::StatusOr<const Tensor*> TensorAt(size_t i) const;
  // The first N inputs as tensors (the error names the first that is not one).
  template <size_t N>
  absl::StatusOr<std::array<const Tensor*, N>> TensorsAt() const {
    std::array<const Tensor*, N> out;
    for (size_t i = 0; i < N; ++i) {
      absl::StatusOr<const Tensor*> t = TensorAt(i);
      if (!t.ok()) return t.status();
      out[i] = *t;
    }
    return out;
  }
  // Input `i` as a tensor of one of the floating dtypes.
  absl::StatusOr<const Tensor*> FloatTensorAt(size_t i) const;
  // Input `i` as a tensor with a dtype in `allowed` ("input 0 must be a f32 or
  // f64 tensor, got i32[3]").
  absl::StatusOr<const Tensor*> TypedTensorAt(size_t i, DTypeSet allowed) const;
  // Input `i` as a numeric compute-type (f32, f64, i32, i64) tensor.
  absl::StatusOr<const Tensor*> NumericTensorAt(size_t i) const;
  // Input `i` as an i32 or i64 index tensor.
  absl::StatusOr<const Tensor*> IndexTensorAt(size_t i) const;

  absl::StatusOr<Tensor> Allocate(DType dtype, absl::Span<const int64_t> shape) const;
  // An output buffer: the buffer of the first candidate input that nothing else
  // references and that has `dtype` and as many elements (an in-place update,
  // legal because the executor moved the last use into this call), else a new one.
  absl::StatusOr<Tensor> AllocateOrReuse(std::initializer_list<int> candidates, DType dtype,
                                         absl::Span<const int64_t> shape) const;

 private:
  const Primitive& prim_;
  absl::Span<Value> inputs_;
  Device* device_;
  Communicator* communicator_;
  KernelCache* cache_ = nullptr;
  uint32_t persistent_ = 0;  // bit i: input i is an executor weight
};

// Error unless tensors `a` (input i) and `b` (input j) share a dtype.
absl::Status SameDTypes(const Tensor& a, int i, const Tensor& b, int j);

using KernelFn = absl::StatusOr<Value> (*)(KernelContext& ctx);

// One kernel per primitive id (nullptr: not available on this device).
struct KernelTable {
  std::array<KernelFn, kNumPrimIds> fns{};
  void Set(PrimId id, KernelFn fn) { fns[static_cast<int>(id)] = fn; }
  KernelFn Get(PrimId id) const { return fns[static_cast<int>(id)]; }
};

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_KERNEL_H_
