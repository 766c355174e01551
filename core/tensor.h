// Tensor: dtype, shape and a reference-counted buffer. Copying a Tensor is cheap
// (it shares the buffer); Reshaped() shares the buffer too. Buffers never point
// back at anything, so reference counting cannot form cycles.
#ifndef KGRAD_CORE_TENSOR_H_
#define KGRAD_CORE_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace kgrad {

enum class DeviceType : uint8_t { kCpu = 0, kCuda = 1 };
const char* DeviceTypeName(DeviceType d);

// Allocates device memory. Implementations are thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual DeviceType device() const = 0;
  // Returns nullptr when out of memory.
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr, size_t bytes) = 0;
};

// The process-wide host allocator (64-byte aligned, thread-safe). Large blocks are
// cached by size when freed and handed out again, so that a kernel writing a fresh
// output does not pay page faults on every run (glibc returns large blocks to the
// system). The cache is bounded (1 GiB): when full, the blocks cached longest ago
// are released first. Small blocks (under 64 KiB) are kept per size too, up to
// 16 MiB (not under ASAN): aligned allocation is slow in glibc. Its statistics
// give the peak memory in use.
Allocator* CpuAllocator();

struct AllocatorStats {
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;
  int64_t cached_bytes = 0;
};
AllocatorStats CpuAllocatorStats();
// Starts a new peak measurement (peak := bytes in use now).
void ResetCpuAllocatorPeak();

// A block of device memory owned by exactly one Buffer, returned to its allocator
// when the last Tensor referencing it goes away.
class Buffer {
 public:
  Buffer(Allocator* allocator, void* data, size_t bytes)
      : allocator_(allocator), data_(data), bytes_(bytes) {}
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  DeviceType device() const { return allocator_->device(); }
  Allocator* allocator() const { return allocator_; }

 private:
  Allocator* allocator_;
  void* data_;
  size_t bytes_;
};

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor; defined() is false

  // Allocates an uninitialised tensor. Fails on bad shapes or out of memory.
  static absl::StatusOr<Tensor> Create(DType dtype, absl::Span<const int64_t> shape,
                                       Allocator* allocator = CpuAllocator());
  // Allocates and zero-fills a host tensor.
  static absl::StatusOr<Tensor> Zeros(DType dtype, absl::Span<const int64_t> shape);

  // Host tensors from C++ data (internal use and tests; shapes must be valid).
  template <typename T>
  static Tensor FromVector(absl::Span<const int64_t> shape, const std::vector<T>& v);
  template <typename T>
  static Tensor FromScalar(T v) { return FromVector<T>({}, std::vector<T>{v}); }
  // A host tensor filled with `value` converted to `dtype`.
  static absl::StatusOr<Tensor> Full(DType dtype, absl::Span<const int64_t> shape,
                                     double value);

  bool defined() const { return impl_ != nullptr; }
  DType dtype() const { return impl_->dtype; }
  const Shape& shape() const { return impl_->shape; }
  int rank() const { return static_cast<int>(impl_->shape.size()); }
  int64_t dim(int i) const { return impl_->shape[i]; }
  int64_t NumElements() const { return impl_->num_elements; }
  size_t nbytes() const { return impl_->num_elements * DTypeSize(impl_->dtype); }
  DeviceType device() const { return impl_->buffer->device(); }
  const std::shared_ptr<Buffer>& buffer() const { return impl_->buffer; }

  void* raw_data() const { return static_cast<char*>(impl_->buffer->data()); }
  template <typename T>
  const T* data() const { return static_cast<const T*>(raw_data()); }
  template <typename T>
  T* mutable_data() const { return static_cast<T*>(raw_data()); }

  // Same buffer, new shape with the same number of elements.
  Tensor Reshaped(absl::Span<const int64_t> shape) const;
  // A deep copy on the host (the tensor must be on the host).
  Tensor Clone() const;
  // True when nothing else references this tensor's buffer, so a kernel may
  // overwrite it in place.
  bool IsUniquelyOwned() const {
    return impl_.use_count() == 1 && impl_->buffer.use_count() == 1;
  }

  // Element `i` (row-major) as double; host tensors only. For tests and printing.
  double ElementAsDouble(int64_t i) const;
  // "f32[2,3]".
  std::string TypeString() const;
  // "f32[2,3]{1, 2, 3, ...}", at most `max_elements` values.
  std::string DebugString(int max_elements = 8) const;

 private:
  struct Impl {
    DType dtype;
    Shape shape;
    int64_t num_elements;
    std::shared_ptr<Buffer> buffer;
  };
  explicit Tensor(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

  std::shared_ptr<const Impl> impl_;
};

// Bytewise equality of dtype, shape and contents (host tensors).
bool TensorsEqual(const Tensor& a, const Tensor& b);

template <typename T>
Tensor Tensor::FromVector(absl::Span<const int64_t> shape, const std::vector<T>& v) {
  absl::StatusOr<Tensor> t = Create(DTypeOf<T>::value, shape);
  Tensor out = std::move(t).value();
  T* dst = out.mutable_data<T>();
  for (int64_t i = 0; i < out.NumElements() && i < static_cast<int64_t>(v.size()); ++i) {
    dst[i] = v[i];
  }
  return out;
}

}  // namespace kgrad

#endif  // KGRAD_CORE_TENSOR_H_
