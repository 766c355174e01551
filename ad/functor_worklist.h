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
#include "core/manager.h"
#include "core/module.h"
#include "core/status_macros.h"

namespace kgrad {

// F is constructed as F(Ctx*, FuncGraph*) and has absl::Status Run().
template <typename F, typename Ctx>
class FunctorWorklist {
 public:
  FunctorWorklist(Module* module, FuncGraph* root) {
    Manager& m = module->manager();
    for (FuncGraph* g : m.Reachable({root})) {
      if (g != root && root->IsSelfOrAncestor(g)) continue;  // enclosing graphs are context
      scope_.insert(g);
      graphs_.push_back(g);
    }
    for (const FuncGraph* g : graphs_) primal_info_[g] = m.Info(const_cast<FuncGraph*>(g));
  }

  bool InScope(const FuncGraph* g) const { return scope_.contains(g); }
  const GraphInfo& PrimalInfo(const FuncGraph* g) const { return primal_info_.at(g); }
  // The graphs in scope, in the order the manager reaches them.
  const std::vector<FuncGraph*>& graphs() const { return graphs_; }
  bool started() const { return !functors_.empty(); }

  // The functor of g, created (and queued) on first request.
  F* FunctorOf(Ctx* ctx, FuncGraph* g) {
    auto it = functors_.find(g);
    if (it != functors_.end()) return it->second.get();
    auto f = std::make_unique<F>(ctx, g);
    F* raw = f.get();
    functors_[g] = std::move(f);
    pending_.push_back(raw);
    return raw;
  }

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

}  // namespace kgrad

#endif  // KGRAD_AD_FUNCTOR_WORKLIST_H_
