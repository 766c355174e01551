#include "backends/kernel.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/device.h"

namespace kgrad {

absl::StatusOr<const Tensor*> KernelContext::TensorAt(size_t i) const {
  if (i >= inputs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected at least ", i + 1, " inputs, got ", inputs_.size()));
  }
  if (!inputs_[i].is_tensor()) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", i, " must be a tensor, got ", inputs_[i].TypeString()));
  }
  return &inputs_[i].tensor();
}

absl::StatusOr<const Tensor*> KernelContext::FloatTensorAt(size_t i) const {
  absl::StatusOr<const Tensor*> t = TensorAt(i);
  if (!t.ok()) return t;
  if (!IsFloating((*t)->dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input ", i, " must be a floating-point tensor, got ", (*t)->TypeString()));
  }
  return t;
}

absl::StatusOr<const Tensor*> KernelContext::TypedTensorAt(size_t i, DTypeSet allowed) const {
  absl::StatusOr<const Tensor*> t = TensorAt(i);
  if (!t.ok() || Allows(allowed, (*t)->dtype())) return t;
  return absl::InvalidArgumentError(absl::StrCat(
      "input ", i, " must be a ", DTypeSetNames(allowed), " tensor, got ", (*t)->TypeString()));
}

absl::StatusOr<const Tensor*> KernelContext::NumericTensorAt(size_t i) const {
  absl::StatusOr<const Tensor*> t = TensorAt(i);
  if (!t.ok() || Allows(kNumericTypes, (*t)->dtype())) return t;
  return absl::InvalidArgumentError(absl::StrCat(
      "input ", i, " must be a numeric (f32, f64, i32 or i64) tensor, got ", (*t)->TypeString()));
}

absl::StatusOr<const Tensor*> KernelContext::IndexTensorAt(size_t i) const {
  absl::StatusOr<const Tensor*> t = TensorAt(i);
  if (!t.ok() || IsInteger((*t)->dtype())) return t;
  return absl::InvalidArgumentError(
      absl::StrCat("input ", i, " must be an i32 or i64 index tensor, got ", (*t)->TypeString()));
}

absl::Status SameDTypes(const Tensor& a, int i, const Tensor& b, int j) {
  if (a.dtype() == b.dtype()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("inputs ", i, " and ", j,
                                                 " must have the same dtype, got ",
                                                 a.TypeString(), " and ", b.TypeString()));
}

absl::StatusOr<Tensor> KernelContext::Allocate(DType dtype,
                                               absl::Span<const int64_t> shape) const {
  return Tensor::Create(dtype, shape, device_->allocator());
}

absl::StatusOr<Tensor> KernelContext::AllocateOrReuse(std::initializer_list<int> candidates,
                                                      DType dtype,
                                                      absl::Span<const int64_t> shape) const {
  int64_t n = NumElementsOf(shape);
  for (int i : candidates) {
    if (i < 0 || static_cast<size_t>(i) >= inputs_.size()) continue;
    const Value& v = inputs_[i];
    if (!v.is_tensor()) continue;
    const Tensor& t = v.tensor();
    if (t.dtype() == dtype && t.NumElements() == n && t.IsUniquelyOwned() &&
        t.buffer()->allocator() == device_->allocator()) {
      // The same shape: the input's handle itself (no new handle per node).
      if (absl::MakeConstSpan(t.shape()) == shape) return t;
      return t.Reshaped(shape);
    }
  }
  return Allocate(dtype, shape);
}

}  // namespace kgrad
