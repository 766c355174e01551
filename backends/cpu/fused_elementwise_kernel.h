// The CPU's evaluator of fused elementwise programs (backends/fused_elementwise.h).
#ifndef KGRAD_BACKENDS_CPU_FUSED_ELEMENTWISE_KERNEL_H_
#define KGRAD_BACKENDS_CPU_FUSED_ELEMENTWISE_KERNEL_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/fused_elementwise.h"
#include "core/tensor.h"

namespace kgrad {
namespace cpu {

// Blocks of the elements at a time: each instruction runs over one block of its
// operands (a vectorised loop, Eigen's array functions for the transcendental
// ones, as their own kernels compute them), values not written to outputs live in
// a scratch row per live value, rows reused after a value's last read.
absl::Status RunFusedElementwise(const FusedProgram& program, absl::Span<const Tensor* const> inputs,
                                 absl::Span<Tensor> outputs, Device* device);

}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_FUSED_ELEMENTWISE_KERNEL_H_
