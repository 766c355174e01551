// What the reverse (ad/ad_context.h) and forward (ad/tangent_context.h)
// transforms share: the graphs a transform maps (a root and everything it
// reaches, not its enclosing graphs), their analyses taken before the transform
// adds graphs (they would otherwise be recomputed after every new node), and one
// functor per graph, run from a worklist in creation order. A functor's
// constructor asks for its enclosing graph's functor first, so an enclosing graph
// is always mapped before the graphs nested in it (their free variables then have
// images), and nothing recurses on the C++ stack over the program's nesting.
#ifndef KGRAD_AD_FUNCTOR_WORKLIST_H_
#define KGRAD_AD_FUNCTOR_WORKLIST_H_

#include <deque>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/manager.h"
#include "core/module.h"
#include "core/status_macros.h"

namespace kgrad {

// The base of both transforms' contexts (CRTP: Ctx derives from
// FunctorWorklist<F, Ctx>). F is constructed as F(Ctx*, FuncGraph*) and has
// absl::Status Run(), which the worklist calls once per functor.
template <typename F, typename Ctx>
class FunctorWorklist {
 public:
  // `root` and everything it reaches (but not its enclosing graphs) are mapped.
  FunctorWorklist(Module* module, FuncGraph* root) : module_(module) {
    Manager& m = module->manager();
    for (FuncGraph* g : m.Reachable({root})) {
      if (g != root && root->IsSelfOrAncestor(g)) continue;  // enclosing graphs are context
      scope_.insert(g);
      graphs_.push_back(g);
    }
    for (const FuncGraph* g : graphs_) primal_info_[g] = m.Info(const_cast<FuncGraph*>(g));
  }

  Module* module() const { return module_; }
  // Whether g is mapped in this context (its nodes have images).
  bool InScope(const FuncGraph* g) const { return scope_.contains(g); }
  // Order and free variables of a primal graph, as they were before the
  // transform started adding graphs.
  const GraphInfo& PrimalInfo(const FuncGraph* g) const { return primal_info_.at(g); }

  // The functor of g (created, with an empty image graph, and queued on first
  // request).
  F* FunctorOf(FuncGraph* g) {
    auto it = functors_.find(g);
    if (it != functors_.end()) return it->second.get();
    auto f = std::make_unique<F>(static_cast<Ctx*>(this), g);
    F* raw = f.get();
    functors_[g] = std::move(f);
    pending_.push_back(raw);
    return raw;
  }

 protected:
  // The error for a transform asked for a graph outside its scope.
  absl::Status CheckInScope(const FuncGraph* g) const {
    if (InScope(g)) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("graph '", g->name(), "' is not in the scope of this transform"));
  }
  // The graphs in scope, in the order the manager reaches them.
  const std::vector<FuncGraph*>& graphs() const { return graphs_; }
  bool started() const { return !functors_.empty(); }

  // Runs every queued functor, and those they queue, in creation order.
  absl::Status RunPending() {
    while (!pending_.empty()) {
      F* next = pending_.front();
      pending_.pop_front();
      KGRAD_RETURN_IF_ERROR(next->Run());
    }
    return absl::OkStatus();
  }

 private:
  Module* module_;
  absl::flat_hash_set<const FuncGraph*> scope_;
  std::vector<FuncGraph*> graphs_;
  absl::flat_hash_map<const FuncGraph*, GraphInfo> primal_info_;
  absl::flat_hash_map<const FuncGraph*, std::unique_ptr<F>> functors_;
  std::deque<F*> pending_;
};

// The check both transforms make before mapping a constant of graph `primal`: a
// graph constant must be in the transform's scope (an enclosing graph cannot be
// called from inside), and a primitive used as a value must have been lowered to
// a graph (ad/prepare.h).
absl::Status CheckMappableConstant(const FuncGraph* primal, const Value& value, bool graph_in_scope);

// Both transforms' functors map graph `primal` to an image graph (DFunctor: K(g),
// TangentFunctor: T(g)) read by kImageGraph, and each of its nodes to an image in
// it read by kImageOf (KOf, PrimalOf). What they share:

// The graph the image of `primal` nests in: the image of primal's parent when the
// parent is transformed too, else the parent itself (null at top level).
template <auto kImageGraph, typename Ctx>
FuncGraph* ImageParent(Ctx* ctx, const FuncGraph* primal) {
  FuncGraph* parent = primal->parent();
  if (parent == nullptr || !ctx->InScope(parent)) return parent;
  return (ctx->FunctorOf(parent)->*kImageGraph)();
}

// The image of `node` in `image`, given the images of primal's nodes mapped so
// far (`images`): weights and constants stand for themselves; a graph constant
// maps to the constant image graph of its graph; a free variable to its image in
// its owner's functor (itself when the owner is not transformed, as a value of
// an enclosing graph). Any other node of `primal` is used before it was mapped:
// an internal error naming its `what`.
template <auto kImageGraph, auto kImageOf, typename Ctx>
absl::StatusOr<AnfNode*> ImageOf(Ctx* ctx, const FuncGraph* primal, FuncGraph* image,
                                 absl::flat_hash_map<const AnfNode*, AnfNode*>& images,
                                 AnfNode* node, absl::string_view what) {
  auto it = images.find(node);
  if (it != images.end()) return it->second;
  if (const Parameter* p = node->AsParameter(); p != nullptr && p->is_weight()) return node;
  if (const ValueNode* v = node->AsValue()) {
    const Value& value = v->value();
    KGRAD_RETURN_IF_ERROR(
        CheckMappableConstant(primal, value, value.is_graph() && ctx->InScope(value.graph())));
    if (!value.is_graph()) return node;
    AnfNode* k = image->NewValueNode(Value::Graph((ctx->FunctorOf(value.graph())->*kImageGraph)()));
    images[node] = k;
    return k;
  }
  FuncGraph* owner = node->graph();
  if (owner != primal) {
    if (owner != nullptr && ctx->InScope(owner)) return (ctx->FunctorOf(owner)->*kImageOf)(node);
    return node;
  }
  return absl::InternalError(absl::StrCat(node->Location(), ": used before its ", what, " exists"));
}

}  // namespace kgrad

#endif  // KGRAD_AD_FUNCTOR_WORKLIST_H_
