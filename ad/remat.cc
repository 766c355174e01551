#include "ad/remat.h"

#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/abstract.h"
#include "core/builder.h"
#include "core/manager.h"

namespace kgrad {
namespace {

// Copies the forward computation of residuals into a bprop graph (see remat.h).
class Rematerializer {
 public:
  Rematerializer(RematPolicy policy, FuncGraph* k_graph, FuncGraph* tape, AnfNode* dout)
      : policy_(policy), k_graph_(k_graph), tape_(tape), dout_(dout) {}

  // Step 1. The residuals: the bprop's reads of unsaved nodes of K(g).
  // Step 2. Each read is rewired to the residual's copy (built once).
  void Run() {
    std::vector<std::pair<Use, CNode*>> reads;
    for (const auto& owned : k_graph_->owned_nodes()) {
      CNode* r = owned->AsCNode();
      if (r == nullptr || !Recomputed(r)) continue;
      for (const Use& u : r->uses()) {
        FuncGraph* reader = u.user != nullptr ? u.user->graph() : u.graph;
        if (reader != nullptr && reader->IsSelfOrAncestor(tape_)) reads.emplace_back(u, r);
      }
    }
    for (const auto& [use, r] : reads) {
      AnfNode* copy = Copy(r);
      if (use.user != nullptr) {
        use.user->set_input(use.index, copy);
      } else {
        use.graph->set_output(copy);
      }
    }
  }

 private:
  // A node of K(g) that the bprop recomputes: computed by a primitive in K(g)
  // and not saved by the policy. Calls of graphs and closures (and the elements
  // taken from their results) are saved: see remat.h.
  bool Recomputed(const AnfNode* n) const {
    const CNode* c = n->AsCNode();
    if (c == nullptr || c->graph() != k_graph_ || c->primitive() == nullptr) return false;
    if (c->IsPrim(PrimId::kTupleGetItem)) {
      const CNode* t = c->arg(0)->AsCNode();
      if (t != nullptr && t->graph() == k_graph_ && t->primitive() == nullptr) return false;
    }
    return !RematSaves(policy_, n);
  }

  // A saved value as the copy reads it: remat_barrier(leaf, dout) (built once).
  AnfNode* Leaf(AnfNode* n) {
    if (n->is_value() || AsFunction(n->abstract()) != nullptr) return n;
    auto it = barriers_.find(n);
    if (it != barriers_.end()) return it->second;
    GraphBuilder b(tape_);
    CNode* barrier = b.Op(PrimId::kRematBarrier, {n, dout_});
    barrier->set_abstract(n->abstract());
    barrier->set_name(absl::StrCat(n->name().empty() ? "v" : n->name(), "_saved"));
    barriers_[n] = barrier;
    return barrier;
  }

  // The copy of residual `r` in the bprop, inputs first. Iterative: a graph's
  // forward chain can be longer than the stack is deep.
  AnfNode* Copy(CNode* r) {
    std::vector<std::pair<CNode*, bool /*inputs copied*/>> stack{{r, false}};
    while (!stack.empty()) {
      auto [n, ready] = stack.back();
      stack.pop_back();
      if (copies_.contains(n)) continue;
      if (!ready) {
        stack.emplace_back(n, true);
        for (AnfNode* in : n->inputs()) {
          if (Recomputed(in) && !copies_.contains(in)) stack.emplace_back(in->AsCNode(), false);
        }
        continue;
      }
      std::vector<AnfNode*> inputs;
      inputs.reserve(n->size());
      for (AnfNode* in : n->inputs()) inputs.push_back(Recomputed(in) ? copies_.at(in) : Leaf(in));
      CNode* copy = tape_->NewCNode(std::move(inputs));
      copy->set_name(absl::StrCat(n->name().empty() ? "v" : n->name(), "_remat"));
      copy->set_abstract(n->abstract());
      copies_[n] = copy;
    }
    return copies_.at(r);
  }

  RematPolicy policy_;
  FuncGraph* k_graph_;
  FuncGraph* tape_;
  AnfNode* dout_;
  absl::flat_hash_map<const AnfNode*, AnfNode*> copies_;
  absl::flat_hash_map<const AnfNode*, AnfNode*> barriers_;
};

}  // namespace

bool RematSaves(RematPolicy policy, const AnfNode* node) {
  switch (policy) {
    case RematPolicy::kEverythingSaveable:
      return true;
    case RematPolicy::kNothingSaveable:
      return false;
    case RematPolicy::kDotsSaveable: {
      const CNode* c = node->AsCNode();
      return c != nullptr && c->primitive() != nullptr && c->primitive()->def().dot;
    }
  }
  return true;
}

absl::Status Rematerialize(const FuncGraph* primal, FuncGraph* k_graph, FuncGraph* tape,
                           AnfNode* dout) {
  if (primal->remat() == RematPolicy::kEverythingSaveable) return absl::OkStatus();
  if (tape == nullptr || dout == nullptr || tape->parent() != k_graph) {
    return absl::InternalError(absl::StrCat("graph '", primal->name(), "': remat ",
                                            RematPolicyName(primal->remat()),
                                            ": the bprop is not nested in K(g)"));
  }
  Rematerializer(primal->remat(), k_graph, tape, dout).Run();
  return absl::OkStatus();
}

absl::Status SetRematPolicy(Module& module, FuncGraph* entry, RematPolicy policy) {
  if (entry == nullptr || entry->module() != &module) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SetRematPolicy: graph '", entry == nullptr ? "(null)" : entry->name(),
        "' is not a graph of this module"));
  }
  for (FuncGraph* g : module.manager().Reachable({entry})) {
    if (entry->IsSelfOrAncestor(g)) continue;
    g->set_remat(policy);
  }
  return absl::OkStatus();
}

}  // namespace kgrad
