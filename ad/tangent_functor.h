// TangentFunctor: maps one primal graph to its tangent graph, the forward-mode
// twin of DFunctor (ad/dfunctor.h). Forward mode keeps the program's shape:
//
//   T(g)(x_1..x_n, t_1..t_n) = (y, t_y)     t_y = J_g(x) t
//
// Every node v of g gets a primal image P(v) and a tangent D(v) in T(g)
// (nullptr: a symbolic zero, materialised as zeros_like only where a value is
// needed):
//   - parameters: T(g)'s parameters x_i and t_i (integer ones carry no tangent);
//   - constants and weights: themselves, zero tangent;
//   - a graph constant @h: the constant T(h), zero tangent (a closure's tangent
//     travels in what it captures: T(h) is nested in T(g) and reads the tangents
//     of g's nodes as free variables);
//   - a free variable: its images in its owner's T graph;
//   - y = P(x...) for a primitive: P'(y) = P(P'(x)...), D(y) = rule_P(P'(x)...,
//     D(x)...) from ad/tangent_rules.h (zero when every D(x) is);
//   - y = f(x...) for a call: r = P'(f)(P'(x)..., D(x)...), P'(y) = r[0],
//     D(y) = r[1]; when y is g's output, T(g) returns r itself, so a tail call
//     stays a tail call and a loop (tail recursion) stays a loop over
//     (value, tangent) state, in constant memory;
//   - switch, make_tuple, tuple_getitem, depend and remat_barrier map
//     structurally: switch(c, a, b) -> switch(c, D(a), D(b)), and so on.
// A graph with a custom bprop is the one place where the whole-graph
// transposition (ad/transposed_jvp.h) is used: its rule is its bprop. (A program
// where such a graph reads values of enclosing graphs is differentiated as a
// whole by that construction: see ad/jvp.h.)
#ifndef KGRAD_AD_TANGENT_FUNCTOR_H_
#define KGRAD_AD_TANGENT_FUNCTOR_H_

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "ad/tangent_context.h"
#include "core/builder.h"
#include "core/func_graph.h"

namespace kgrad {

class TangentFunctor {
 public:
  TangentFunctor(TangentContext* ctx, FuncGraph* primal);

  FuncGraph* t_graph() const { return t_; }
  // Builds T(g) (the worklist calls it once).
  absl::Status Run();
  // P(v) and D(v) (nullptr: zero) of a node of this graph or of a free variable.
  absl::StatusOr<AnfNode*> PrimalOf(AnfNode* node);
  absl::StatusOr<AnfNode*> TangentOf(AnfNode* node);

 private:
  absl::Status MapParameters();
  absl::Status MapPrimitive(CNode* c);
  absl::StatusOr<AnfNode*> PrimitiveTangent(CNode* c, const std::vector<AnfNode*>& xs);
  absl::Status MapCall(CNode* c);
  // D(v), or a zero of v's structure where D(v) is a symbolic zero.
  absl::StatusOr<AnfNode*> Materialize(AnfNode* node);
  absl::Status BuildOutput();
  absl::Status RunCustomBprop();

  TangentContext* ctx_;
  FuncGraph* primal_;
  FuncGraph* t_;
  absl::flat_hash_map<const AnfNode*, AnfNode*> p_;
  absl::flat_hash_map<const AnfNode*, AnfNode*> d_;
  absl::flat_hash_map<const CNode*, AnfNode*> call_result_;
};

}  // namespace kgrad

#endif  // KGRAD_AD_TANGENT_FUNCTOR_H_
