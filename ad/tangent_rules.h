// Tangent rules of primitives, for the structural forward transform
// (ad/tangent_functor.h). A rule is never written by hand: it is derived once
// from the primitive's bprop by transposition, i.e. ad/transposed_jvp.h applied
// to the one-primitive graph p(x_1..x_k) = P(x_1..x_k), optimised, and cached per
// signature (primitive and attributes, input types, constant inputs, and which
// inputs carry a tangent):
//
//   rule_P(x_1..x_k, t_a1..t_am) = J_P(x) (t with zeros in the other inputs)
//
// The optimiser deletes the reverse pass of the one-primitive graph (there is no
// control flow in it), so a rule is what a hand-written one would be: for tanh,
// tanh_grad(tanh(x), t); for a matmul with one varying input, one matmul.
// Constant inputs that are not large tensors are baked into the rule (a reshape's
// shape, an axis), so that the rule's shapes and foldings see them. The set of
// inputs that carry a tangent is decided from types before the transform (an
// input that turns out to have a zero tangent is given zeros, which the
// optimiser folds), because deriving a rule runs the optimiser, whose garbage
// collection must not meet graphs that are half built.
#ifndef KGRAD_AD_TANGENT_RULES_H_
#define KGRAD_AD_TANGENT_RULES_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/builder.h"
#include "core/module.h"

namespace kgrad {

// Whether values of this type have a tangent: floating tensors and scalars,
// tuples holding one, envs (of sensitivities, in a Jvp of a gradient); not
// integers, strings or functions (a closure's tangent is in what it captures).
// Unknown (nullptr): yes.
bool CarriesTangent(const AbstractPtr& a);

class TangentRules {
 public:
  explicit TangentRules(Module* module) : module_(module) {}
  // Rules still held stop being public: the optimiser's garbage collection takes
  // them once they are inlined.
  ~TangentRules() { Release(); }
  TangentRules(const TangentRules&) = delete;
  TangentRules& operator=(const TangentRules&) = delete;

  // Derives (once) the rule of the primitive application `c` with tangents in the
  // inputs marked `active`. Runs the optimiser: its garbage collection deletes
  // graphs that no public graph reaches.
  absl::Status Derive(const CNode* c, const std::vector<bool>& active);
  // The tangent of `c`, built in b's graph from the images `xs` of its arguments
  // and their tangents `ts` (nullptr: zero; only where `active`), by the rule
  // Derive made.
  absl::StatusOr<AnfNode*> Apply(GraphBuilder& b, const CNode* c, const std::vector<bool>& active,
                                 const std::vector<AnfNode*>& xs, const std::vector<AnfNode*>& ts);
  // Keeps `g` (a graph the transform calls) public until Release().
  void Hold(FuncGraph* g) { held_.push_back(g); }
  void Release();
  size_t size() const { return rules_.size(); }

 private:
  Module* module_;
  absl::flat_hash_map<std::string, FuncGraph*> rules_;
  std::vector<FuncGraph*> held_;
};

}  // namespace kgrad

#endif  // KGRAD_AD_TANGENT_RULES_H_
