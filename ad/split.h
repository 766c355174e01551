// A gradient split into a forward and a backward graph (DiffFX's fwd/bwd,
// functorch's partition): the residuals between them an explicit list.
//
//   fwd(x...)            = (value, r_1, ..., r_k)
//   bwd(r_1, ..., r_k, dout) = gradients
//
// The optimised value_and_grad of f with the output sensitivity as an input
// (`dout`) is cut by data flow: its applications that depend on dout are the
// backward pass, every other one the forward pass. The rules decide what lands
// where, so the residual forms (ops/residual_form.h) carry over: a value
// recomputed behind remat_barrier(x, dout) depends on dout (backward), sin's
// cos x under save_outputs does not (forward, a residual). The residuals are the
// forward values and inputs the backward reads; constants are copied into both,
// weights are read by both. Running fwd then bwd gives the gradients of the
// whole bit for bit (the same applications on the same values).
#ifndef KGRAD_AD_SPLIT_H_
#define KGRAD_AD_SPLIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "ad/grad_operation.h"
#include "core/func_graph.h"
#include "core/module.h"

namespace kgrad {

struct SplitGradient {
  FuncGraph* fwd = nullptr;  // "fwd_<f>", public
  FuncGraph* bwd = nullptr;  // "bwd_<f>", public: parameters r_1..r_k, then dout
  // The residuals as bwd's parameters name them (the forward node's name where it
  // has a unique one, else r<i>), in order.
  std::vector<std::string> residuals;
  // Their bytes where every shape is static, else -1.
  int64_t residual_bytes = 0;
};

// The cut SplitGrad makes, for passes that rewrite the gradient in place (the
// automatic rematerialisation plan): `whole` is the optimised value-and-gradient
// with the sensitivity as its last parameter, returning (value, gradients).
struct GradientCut {
  FuncGraph* whole = nullptr;
  std::vector<CNode*> order;                       // its applications, inputs first
  absl::flat_hash_set<const AnfNode*> backward;    // what depends on the sensitivity
  std::vector<AnfNode*> residuals;                 // forward values and inputs bwd reads
  AnfNode* value = nullptr;
  AnfNode* grads = nullptr;
};
// Builds and cuts the gradient `options` describe (as SplitGrad, without making
// the two graphs).
absl::StatusOr<GradientCut> CutGradient(Module& module, FuncGraph* f,
                                        const ValueAndGradOptions& options);
// The bytes of a value of type `a` when its shape is static, else -1.
int64_t StaticBytes(const AbstractPtr& a);

// Splits the gradient `options` describe (inputs, weights, residual policy; no
// has_aux, no operator form). An error names the node when the optimised
// gradient still calls graphs (loops, closures: not split) or a residual is not
// a tensor or scalar.
absl::StatusOr<SplitGradient> SplitGrad(Module& module, FuncGraph* f,
                                        const ValueAndGradOptions& options);

}  // namespace kgrad

#endif  // KGRAD_AD_SPLIT_H_
