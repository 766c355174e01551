// The per-call state of one reverse-mode transform: the DFunctor of every graph
// being differentiated, and the set of those graphs. Nothing here is static or
// global: two threads differentiating two modules use two contexts.
#ifndef KGRAD_AD_AD_CONTEXT_H_
#define KGRAD_AD_AD_CONTEXT_H_

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "ad/functor_worklist.h"
#include "ad/residual_policy.h"
#include "core/manager.h"
#include "core/module.h"

namespace kgrad {

class DFunctor;

class AdContext : public FunctorWorklist<DFunctor, AdContext> {
 public:
  // `root` and everything it reaches (but not its enclosing graphs) will be
  // differentiated.
  AdContext(Module* module, FuncGraph* root);
  ~AdContext();

  // K(g): the fprop graph of g, returning (result, bprop). Builds every functor
  // the transform needs; errors name the primitive and node that cannot be
  // differentiated.
  absl::StatusOr<FuncGraph*> K(FuncGraph* g);

  // The key under which a free variable's sensitivity travels in envs. Stable
  // for a node within a module, shared by every functor.
  static std::string KeyOf(const AnfNode* fv);

  // The residual policy of this transform (ad/residual_policy.h; not owned, it
  // outlives the context); none: every rule's default.
  void SetResidualPolicy(const ResidualPolicy* policy) { residuals_ = policy; }
  // What the policy asks of one application, noting its name as seen.
  ResidualPolicy::Ask AskResidualForm(const CNode& app, const Primitive& prim);
  // After K: an error for each node name of the policy that named no
  // application the transform differentiated (a typo would otherwise change
  // nothing, silently).
  absl::Status CheckResidualNames() const;

 private:
  const ResidualPolicy* residuals_ = nullptr;
  absl::flat_hash_set<std::string> seen_names_;
};

}  // namespace kgrad

#endif  // KGRAD_AD_AD_CONTEXT_H_
