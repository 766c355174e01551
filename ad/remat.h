// Rematerialisation (gradient checkpointing) in the K-transform, after JAX's
// `jax.checkpoint` policies and MindSpore's `recompute`.
//
// A graph g carries a RematPolicy (core/func_graph.h). Once g's DFunctor has built
// K(g) and its bprop, the bprop's residuals are the nodes of K(g) it reads (free
// variables of the bprop). Under a policy other than everything_saveable, each
// residual r the policy does not save is replaced, inside the bprop, by a copy of
// its forward computation, cloned back to leaves:
//
//   K(g):   a = matmul(x, w); z = add(a, c); y = tanh(z); ...      (forward, kept)
//   bprop:  dz = mul(dy, sub(1, square(y)))                          (reads y: residual)
//   nothing_saveable ->
//   bprop:  x' = remat_barrier(x, dout); w' = remat_barrier(w, dout); c' = ...
//           y' = tanh(add(matmul(x', w'), c'));  dz = mul(dy, sub(1, square(y')))
//
// Leaves (what stays saved): K(g)'s parameters (the segment's inputs), constants,
// values of enclosing graphs and weights, the nodes the policy saves
// (dots_saveable: matmul, einsum, conv2d and its two backprop ops), and the results
// of calls to other graphs or closures. Calls are not recomputed: each called
// graph is a segment with its own policy (SetRematPolicy marks them all), its
// bprop closure keeps what that policy saves, and a recursive loop is not
// recomputed once per iteration (quadratic time).
//
// Each leaf enters the copy as remat_barrier(leaf, dout), an identity that (a)
// makes the copy differ from the forward, so CSE does not merge them back after
// inlining, and (b) makes the copy depend on dout, so it is not scheduled before
// the backward pass reaches it. Function-valued leaves (closures) enter as they
// are, so the optimiser can still inline them.
//
// Only the bprop's own reads are rewritten: graphs nested in g (closures) read
// K(g)'s values through their own K graphs, which keep them (saved).
#ifndef KGRAD_AD_REMAT_H_
#define KGRAD_AD_REMAT_H_

#include "absl/status/status.h"
#include "core/func_graph.h"
#include "core/module.h"

namespace kgrad {

// Step 5 of the DFunctor (see ad/dfunctor.h): rewrites `tape`, the bprop of
// `k_graph` = K(primal) with parameter `dout`, by `primal`'s policy. No change for
// everything_saveable.
absl::Status Rematerialize(const FuncGraph* primal, FuncGraph* k_graph, FuncGraph* tape,
                           AnfNode* dout);

// Whether `policy` lets the bprop read the forward value `node` (a node of K(g))
// instead of recomputing it.
bool RematSaves(RematPolicy policy, const AnfNode* node);

// Marks every graph reachable from `entry` (the graphs it calls, closures nested
// in it, transitively), but not `entry` itself nor its enclosing graphs, with
// `policy`: each called graph becomes a checkpointed segment whose inputs are
// saved. (Marking the entry too would recompute its whole forward pass in its
// backward pass, saving nothing.) InvalidArgument when `entry` is not a graph of
// `module`.
absl::Status SetRematPolicy(Module& module, FuncGraph* entry, RematPolicy policy);

}  // namespace kgrad

#endif  // KGRAD_AD_REMAT_H_
