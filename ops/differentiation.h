// Differentiation as operators of the IR: `J`, `grad`, `value_and_grad`, `jvp`
// and `vjp` applied to a graph-valued node give a function (MindSpore's J node,
// Relay's `grad`). Their definitions live here: attributes, the inference of the
// function they return, and which weights a `weights` attribute names. ad/
// (expand_differentiation.h) replaces each by the graph it stands for before a
// program runs; the executor refuses one that was not expanded.
//
//   J(f)(x...)                       = (f(x...), bprop)  bprop(dy) = (env, dx...)
//   grad{wrt, weights, sens, has_aux}(f)(x... [, sens])
//                                    = grads; (grads, aux) with has_aux
//   value_and_grad{wrt, weights, has_aux}(f)(x...) = (f(x...), grads)
//   jvp(f)(x..., v...)               = (f(x...), J v)
//   vjp(f)(x..., ct)                 = (f(x...), (J^T ct per input))
//
// grads is the gradient of input wrt[0] when wrt has one entry, else the tuple
// over wrt (negative positions count from the end); with weights it is
// (input grads, weight grads), or only the weight grads when wrt is empty.
// weights: "" (none), "*" (every weight of the module, in order) or a
// comma-separated list of weight names.
#ifndef KGRAD_OPS_DIFFERENTIATION_H_
#define KGRAD_OPS_DIFFERENTIATION_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/module.h"
#include "core/primitive.h"

namespace kgrad {
namespace ops {

void RegisterDifferentiationOps(std::vector<PrimitiveDef>* defs);

// The weights of `module` that `prim`'s `weights` attribute names; error naming
// an unknown one. Empty for primitives without the attribute.
absl::StatusOr<std::vector<Parameter*>> DifferentiatedWeights(const Primitive& prim,
                                                              const Module& module);

// wrt as positions from the start among `num_inputs` inputs; error naming the
// position as written when out of range.
absl::StatusOr<std::vector<int>> DifferentiatedInputs(const Primitive& prim, int num_inputs);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_DIFFERENTIATION_H_
