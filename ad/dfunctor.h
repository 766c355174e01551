// DFunctor: maps one primal graph to its fprop K(g), after MindSpore's DFunctor.
//
//   K(g)(x...) = (y, bprop)     bprop(dy) = (env of free-variable sensitivities,
//                                            dx_1, ..., dx_n)
//
// Step 1 (MapObject): parameters become K(g)'s parameters; a free variable maps to
// the K-image in its owner's functor (or to itself when the owner is not being
// differentiated, e.g. a weight); constants map to themselves; a graph constant
// maps to the constant K(h).
// Step 2 (MapMorphism, forward): `y = f(x...)` becomes `y = P(K(x)...)` when f is
// a primitive P (its rule is applied in step 3), else
// `app = K(f)(K(x)...); y = app[0]; b = app[1]`.
// Step 3 (backward): nodes in reverse order; each node's sensitivity is the sum of
// what its users contributed: a primitive's rule emits input sensitivities
// (BpropContext); a call emits `din = b(dy)` and gives din[i] to input i (din[0],
// an env, to the callee); when every user of a closure constant has been seen,
// its env is opened and each captured variable gets env_getitem(env, key(v)).
// Step 4: bprop returns (env_setitem(..., key(v), dv) for each free variable v,
// dx_1, ..., dx_n); K(g) returns (y, bprop).
// Step 5 (ad/remat.h): under g's remat policy, the bprop recomputes the residuals
// (nodes of K(g) it reads) that the policy does not save.
#ifndef KGRAD_AD_DFUNCTOR_H_
#define KGRAD_AD_DFUNCTOR_H_

#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "ad/ad_context.h"
#include "ad/adjoint.h"
#include "core/builder.h"
#include "core/func_graph.h"

namespace kgrad {

class DFunctor {
 public:
  DFunctor(AdContext* ctx, FuncGraph* primal);

  FuncGraph* primal() const { return primal_; }
  FuncGraph* k_graph() const { return k_graph_; }
  // Builds K(g) and its bprop graph (the worklist calls it once).
  absl::Status Run();
  // The K-image of a node of the primal graph, or of one of its free variables.
  absl::StatusOr<AnfNode*> KOf(AnfNode* node);

 private:
  absl::Status MapObjects();
  absl::Status MapMorphism(CNode* c);
  absl::Status BackPropagate();
  absl::Status BackPropNode(CNode* c);
  absl::Status BackPropPrimitive(CNode* c, const Primitive& prim, AnfNode* dout);
  absl::Status BackPropCall(CNode* c, AnfNode* dout);
  absl::Status BackPropClosure(ValueNode* vn);
  absl::Status BuildOutputs();
  absl::Status RunCustomBprop();
  absl::StatusOr<AnfNode*> CallInKScope(GraphBuilder& b, FuncGraph* g, std::vector<AnfNode*> args);

  // The total sensitivity of a primal node, as one bprop-graph node (nullptr: zero).
  absl::StatusOr<AnfNode*> Materialize(AnfNode* primal_node);
  AnfNode* Sum(absl::Span<AnfNode* const> parts, const AbstractPtr& type);
  // Adds `d` to the sensitivity of `input` (dropped for constants other than
  // closures, and for integer or bool values, whose sensitivity is zero).
  void Accumulate(AnfNode* input, AnfNode* d);
  absl::StatusOr<AnfNode*> ZerosOf(AnfNode* primal_node);

  AdContext* ctx_;
  FuncGraph* primal_;
  FuncGraph* k_graph_;
  FuncGraph* tape_;
  Parameter* dout_ = nullptr;
  absl::flat_hash_map<const AnfNode*, AnfNode*> k_;
  absl::flat_hash_map<const CNode*, AnfNode*> bprop_of_;  // calls: their `b`
  absl::flat_hash_map<const AnfNode*, Adjoint> adjoints_;
  // Forward order: nodes, and closure constants placed before their first user.
  std::vector<std::pair<AnfNode*, bool /*closure*/>> schedule_;
};

}  // namespace kgrad

#endif  // KGRAD_AD_DFUNCTOR_H_
