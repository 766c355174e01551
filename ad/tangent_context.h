// The per-call state of one forward-mode transform (ad/tangent_functor.h): the
// functor of every graph being transformed, the set of those graphs, their
// analyses taken before the transform starts, and the primitives' tangent rules.
// Nothing here is static or global.
#ifndef KGRAD_AD_TANGENT_CONTEXT_H_
#define KGRAD_AD_TANGENT_CONTEXT_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "ad/functor_worklist.h"
#include "ad/tangent_rules.h"
#include "core/manager.h"
#include "core/module.h"

namespace kgrad {

class TangentFunctor;

class TangentContext : public FunctorWorklist<TangentFunctor, TangentContext> {
 public:
  // `root` and everything it reaches (but not its enclosing graphs) are
  // transformed; T(root) is called `root_name`.
  TangentContext(Module* module, FuncGraph* root, std::string root_name);
  ~TangentContext();

  // T(g): (x..., t...) -> (g(x...), J t). Builds every functor the transform needs.
  absl::StatusOr<FuncGraph*> T(FuncGraph* g);

  TangentRules& rules() { return rules_; }
  // Whether input `node` of an application in a transformed graph may carry a
  // tangent (from its type and where it comes from: constants, weights and values
  // of enclosing graphs do not).
  bool MayVary(const AnfNode* node) const;
  // Whether the primitive application `c` needs a derived rule, and for which
  // inputs; false for the primitives the functor maps structurally.
  bool NeedsRule(const CNode* c, std::vector<bool>* active) const;
  // A graph in scope with a custom bprop that reads differentiated values of
  // enclosing graphs (nullptr: none). Its bprop also gives those values'
  // sensitivities, which a rule for the graph alone cannot transpose: such a
  // program is differentiated as a whole by ad/transposed_jvp.h instead.
  const FuncGraph* CustomBpropReadingEnclosingValues() const;
  // The whole-graph Jvp standing for T(g), for a graph with a custom bprop.
  FuncGraph* CustomJvp(const FuncGraph* g) const { return custom_jvp_.at(g); }
  // The name of T(g).
  std::string NameOf(const FuncGraph* g) const;

 private:
  FuncGraph* root_;
  std::string root_name_;
  // Derives every rule (and custom bprop's Jvp) the transform needs, before any
  // graph of it exists.
  absl::Status DeriveRules();

  absl::flat_hash_map<const FuncGraph*, FuncGraph*> custom_jvp_;
  TangentRules rules_;
};

}  // namespace kgrad

#endif  // KGRAD_AD_TANGENT_CONTEXT_H_
