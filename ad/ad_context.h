// The per-call state of one reverse-mode transform: the DFunctor of every graph
// being differentiated, and the set of those graphs. Nothing here is static or
// global: two threads differentiating two modules use two contexts.
#ifndef KGRAD_AD_AD_CONTEXT_H_
#define KGRAD_AD_AD_CONTEXT_H_

#include <string>

#include "absl/status/statusor.h"
#include "ad/functor_worklist.h"
#include "core/manager.h"
#include "core/module.h"

namespace kgrad {

class DFunctor;

class AdContext {
 public:
  // `root` and everything it reaches (but not its enclosing graphs) will be
  // differentiated.
  AdContext(Module* module, FuncGraph* root);
  ~AdContext();

  Module* module() const { return module_; }
  // K(g): the fprop graph of g, returning (result, bprop). Builds every functor
  // the transform needs; errors name the primitive and node that cannot be
  // differentiated.
  absl::StatusOr<FuncGraph*> K(FuncGraph* g);

  // Whether g is differentiated in this context (its nodes have K-images).
  bool InScope(const FuncGraph* g) const { return worklist_.InScope(g); }
  // The functor of g (created, with an empty K graph, on first request).
  DFunctor* FunctorOf(FuncGraph* g);
  // Order and free variables of a primal graph, as they were before the
  // transform started adding graphs.
  const GraphInfo& PrimalInfo(const FuncGraph* g) const { return worklist_.PrimalInfo(g); }

  // The key under which a free variable's sensitivity travels in envs. Stable
  // for a node within a module, shared by every functor.
  static std::string KeyOf(const AnfNode* fv);

 private:
  Module* module_;
  FunctorWorklist<DFunctor, AdContext> worklist_;
};

}  // namespace kgrad

#endif  // KGRAD_AD_AD_CONTEXT_H_
