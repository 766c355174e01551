// Structural primitives: tuples, switch, partial, envs, gradient plumbing
// (stop_gradient, depend, hyper_add, zeros_like, ones_like) and scalar arithmetic
// for loop counters.
#ifndef KGRAD_OPS_STRUCTURAL_H_
#define KGRAD_OPS_STRUCTURAL_H_

#include <vector>

#include "core/primitive.h"

namespace kgrad {
namespace ops {

void RegisterStructuralOps(std::vector<PrimitiveDef>* defs);

// The sensitivity type of a value: itself for tensors, scalars (without their
// constant) and tuples (elementwise); an env for functions (the sensitivities of
// what they capture).
AbstractPtr SensitivityOf(const AbstractPtr& a);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_STRUCTURAL_H_
