// Kernels of the structural primitives (tuples, switch, partial, envs,
// hyper_add, zeros_like/ones_like, scalars). They work on Values and are shared
// by every device; tensor work inside them goes through the device.
#ifndef KGRAD_BACKENDS_STRUCTURAL_KERNELS_H_
#define KGRAD_BACKENDS_STRUCTURAL_KERNELS_H_

#include "backends/kernel.h"

namespace kgrad {

class Device;

void RegisterStructuralKernels(KernelTable* table);

// Helpers the executor and the kernels share.
// The truth value of a switch condition (bool/int scalar or one-element bool tensor).
absl::StatusOr<bool> ConditionValue(const Value& c, Device* device);
// zeros_like/ones_like over any structure (functions and envs: the empty env).
absl::StatusOr<Value> FilledLike(const Value& v, double value, Device* device);
// Addition of two sensitivities of one structure (tensors, scalars, tuples, lists,
// envs).
absl::StatusOr<Value> HyperAdd(const Value& a, const Value& b, Device* device);

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_STRUCTURAL_KERNELS_H_
