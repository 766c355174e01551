#include "backends/device.h"

#include <utility>

#include "core/status_macros.h"
#include "core/value_walk.h"

namespace kgrad {

absl::StatusOr<Value> ValueToDevice(const Value& v, Device* device) {
  return MapLeaves(v, [device](const Value& leaf) -> absl::StatusOr<Value> {
    if (!leaf.is_tensor() || leaf.tensor().device() == device->type()) return leaf;
    KGRAD_ASSIGN_OR_RETURN(Tensor t, device->CopyToDevice(leaf.tensor()));
    return Value(std::move(t));
  });
}

absl::StatusOr<Value> ValueToHost(const Value& v, Device* device) {
  return MapLeaves(v, [device](const Value& leaf) -> absl::StatusOr<Value> {
    if (!leaf.is_tensor() || leaf.tensor().device() == DeviceType::kCpu) return leaf;
    KGRAD_ASSIGN_OR_RETURN(Tensor t, device->CopyToHost(leaf.tensor()));
    return Value(std::move(t));
  });
}

}  // namespace kgrad
