#include "core/module.h"

#include <algorithm>
#include <cstdlib>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/manager.h"
#include "core/status_macros.h"

namespace kgrad {

Module::Module(const PrimitiveRegistry& registry)
    : registry_(&registry), manager_(std::make_unique<Manager>(this)) {}

Module::~Module() {
  // Outputs and inputs point across graphs; drop every edge before any node goes
  // so that no use list is touched after its node is freed.
  for (auto& g : graphs_) {
    for (auto& n : g->nodes_) {
      if (CNode* c = n->AsCNode()) c->inputs_.clear();
    }
  }
}

std::string Module::UniqueGraphName(absl::string_view base) const {
  std::string name(base.empty() ? "graph" : base);
  if (!graphs_by_name_.contains(name)) return name;
  for (int i = 1;; ++i) {
    std::string candidate = absl::StrCat(name, "_", i);
    if (!graphs_by_name_.contains(candidate)) return candidate;
  }
}

FuncGraph* Module::NewGraph(absl::string_view name, FuncGraph* parent) {
  std::unique_ptr<FuncGraph> g(new FuncGraph(this, UniqueGraphName(name), parent));
  FuncGraph* raw = g.get();
  graphs_by_name_[raw->name()] = raw;
  graphs_.push_back(std::move(g));
  Touch();
  return raw;
}

FuncGraph* Module::FindGraph(absl::string_view name) const {
  auto it = graphs_by_name_.find(name);
  return it == graphs_by_name_.end() ? nullptr : it->second;
}

absl::StatusOr<Parameter*> Module::AddWeight(std::string name, Tensor value) {
  if (name.empty()) return absl::InvalidArgumentError("a weight needs a name");
  if (weights_by_name_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("duplicate weight name '", name, "'"));
  }
  auto p = std::make_unique<Parameter>(nullptr, NewNodeId());
  p->set_name(name);
  p->set_abstract(MakeAbstractTensor(value.dtype(), value.shape()));
  p->set_default_value(std::move(value));
  Parameter* raw = p.get();
  weights_by_name_[name] = raw;
  weights_.push_back(std::move(p));
  Touch();
  return raw;
}

Parameter* Module::FindWeight(absl::string_view name) const {
  auto it = weights_by_name_.find(name);
  return it == weights_by_name_.end() ? nullptr : it->second;
}

PrimitivePtr Module::Prim(PrimId id, AttrMap attrs) const {
  absl::StatusOr<PrimitivePtr> p = registry_->Make(id, std::move(attrs));
  KGRAD_CHECK(p.ok());
  return *std::move(p);
}

Manager& Module::manager() { return *manager_; }

absl::Status Module::CheckUses() const {
  absl::flat_hash_set<const AnfNode*> all;
  for (const auto& g : graphs_) {
    for (const auto& n : g->nodes_) {
      if (n != nullptr) all.insert(n.get());
    }
  }
  for (const auto& w : weights_) all.insert(w.get());
  for (const auto& g : graphs_) {
    for (const auto& n : g->nodes_) {
      if (n == nullptr) continue;
      for (const Use& u : n->uses()) {
        if (u.user != nullptr) {
          if (!all.contains(u.user)) {
            return absl::InternalError(absl::StrCat(n->Location(), ": a use by a deleted node"));
          }
          if (u.index >= static_cast<int>(u.user->size()) || u.user->input(u.index) != n.get()) {
            return absl::InternalError(absl::StrCat(n->Location(), ": stale use by ", u.user->Location()));
          }
        } else if (u.graph->output() != n.get()) {
          return absl::InternalError(absl::StrCat(n->Location(), ": stale output use"));
        }
      }
      if (const CNode* c = n->AsCNode()) {
        for (size_t i = 0; i < c->size(); ++i) {
          const auto& uses = c->input(i)->uses();
          if (std::find(uses.begin(), uses.end(), Use{const_cast<CNode*>(c), static_cast<int>(i), nullptr}) == uses.end()) {
            return absl::InternalError(absl::StrCat(c->Location(), ": input ", i, " has no use entry"));
          }
          if (!all.contains(c->input(i))) {
            return absl::InternalError(absl::StrCat(c->Location(), ": input ", i, " is deleted"));
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

// Live nodes carry the collection's epoch in mark_epoch (no hash set of every
// node: a collection after a large inline sees hundreds of thousands).
struct Module::Liveness {
  std::vector<FuncGraph*> graphs;                // live graphs
  absl::flat_hash_set<FuncGraph*> graph_set;     // the same, as a set
  uint64_t epoch = 0;
  bool IsLive(const AnfNode* n) const { return n->mark_epoch == epoch; }
  void Mark(AnfNode* n) const {
    n->mark_epoch = epoch;
    n->mark_state = 0;
  }
};

// Garbage collection in five phases:
//   1. mark the graphs public graphs reach (and those `may_modify` protects) and the
//      nodes they need;
//   2. keep graphs that own a live node other than a constant;
//   3. hand live constants owned by dead graphs to a live graph that uses them;
//   4. cut every edge out of dead nodes;
//   5. free dead nodes and graphs.
Module::Collected Module::CollectGarbage(
    const std::function<bool(const FuncGraph*)>& may_modify, const std::vector<FuncGraph*>& roots) {
  Liveness live = MarkLive(may_modify, roots);
  KeepGraphsOwningLiveNodes(live);
  AdoptLiveNodesOfDeadGraphs(live);
  CutEdgesOfDeadNodes(live);
  Collected out = FreeDeadNodesAndGraphs(live);
  Touch();
  return out;
}

// A node lives if a live graph evaluates it, takes it as a parameter, returns
// it, or a live CNode reads it (ValueNodes may be shared across graphs).
Module::Liveness Module::MarkLive(const std::function<bool(const FuncGraph*)>& may_modify,
                                  const std::vector<FuncGraph*>& roots) {
  Liveness l;
  l.graphs = manager_->ReachableFromPublic();
  l.graph_set.insert(l.graphs.begin(), l.graphs.end());
  for (FuncGraph* g : manager_->Reachable(roots)) {
    if (l.graph_set.insert(g).second) l.graphs.push_back(g);
  }
  if (may_modify) {
    // Graphs that must not change stay whole, live or not.
    for (const auto& g : graphs_) {
      if (!may_modify(g.get()) && l.graph_set.insert(g.get()).second) l.graphs.push_back(g.get());
    }
  }
  // Every order first: the manager's own traversals use the node marks.
  std::vector<const std::vector<CNode*>*> orders;
  for (FuncGraph* g : l.graphs) orders.push_back(&manager_->Info(g).order);
  l.epoch = manager_->NewEpoch();
  for (size_t i = 0; i < l.graphs.size(); ++i) {
    FuncGraph* g = l.graphs[i];
    if (may_modify && !may_modify(g)) {
      // Untouched: every node stays, with whatever it reads.
      for (const auto& n : g->nodes_) {
        l.Mark(n.get());
        if (const CNode* c = n->AsCNode()) {
          for (AnfNode* in : c->inputs()) l.Mark(in);
        }
      }
    }
    for (Parameter* p : g->parameters()) l.Mark(p);
    if (g->output() != nullptr) l.Mark(g->output());
    for (CNode* c : *orders[i]) {
      l.Mark(c);
      for (AnfNode* in : c->inputs()) l.Mark(in);
    }
  }
  return l;
}

// A graph nothing reaches may still own nodes that live graphs read: constants
// shared by a pass (adopted below by a live user's graph), or, should scoping ever
// be broken, other nodes (then the graph stays rather than leave a dangling edge).
void Module::KeepGraphsOwningLiveNodes(Liveness& l) {
  for (auto& g : graphs_) {
    if (l.graph_set.contains(g.get())) continue;
    for (auto& n : g->nodes_) {
      if (l.IsLive(n.get()) && !n->is_value()) {
        l.graph_set.insert(g.get());
        break;
      }
    }
  }
}

void Module::AdoptLiveNodesOfDeadGraphs(const Liveness& l) {
  for (auto& g : graphs_) {
    if (l.graph_set.contains(g.get())) continue;
    for (auto& n : g->nodes_) {
      if (n == nullptr || !l.IsLive(n.get())) continue;
      FuncGraph* adopter = nullptr;
      for (const Use& u : n->uses()) {
        FuncGraph* ug = u.user != nullptr ? u.user->graph() : u.graph;
        if (ug != nullptr && l.graph_set.contains(ug)) {
          adopter = ug;
          break;
        }
      }
      KGRAD_CHECK(adopter != nullptr);
      n->graph_ = adopter;
      adopter->nodes_.push_back(std::move(n));
    }
  }
}

// Use lists are filtered once per affected live node (a constant may have
// thousands of uses), before any dead node is freed; mark_state flags the live
// nodes already queued.
void Module::CutEdgesOfDeadNodes(const Liveness& l) {
  std::vector<AnfNode*> affected;
  for (auto& g : graphs_) {
    if (!l.graph_set.contains(g.get()) && g->output_ != nullptr) {
      g->output_->RemoveUse(Use{nullptr, -1, g.get()});
      g->output_ = nullptr;
    }
    for (auto& n : g->nodes_) {
      if (n == nullptr || l.IsLive(n.get())) continue;
      CNode* c = n->AsCNode();
      if (c == nullptr) continue;
      for (AnfNode* in : c->inputs_) {
        if (l.IsLive(in) && in->mark_state == 0) {
          in->mark_state = 1;
          affected.push_back(in);
        }
      }
    }
  }
  for (AnfNode* n : affected) {
    auto& uses = n->uses_;
    uses.erase(std::remove_if(uses.begin(), uses.end(),
                              [&](const Use& u) { return u.user != nullptr && !l.IsLive(u.user); }),
               uses.end());
    n->mark_state = 0;
  }
  for (auto& g : graphs_) {
    for (auto& n : g->nodes_) {
      if (n == nullptr || l.IsLive(n.get())) continue;
      if (CNode* c = n->AsCNode()) c->inputs_.clear();
    }
  }
}

Module::Collected Module::FreeDeadNodesAndGraphs(const Liveness& l) {
  Collected out;
  for (auto& g : graphs_) {
    auto& nodes = g->nodes_;
    for (const auto& n : nodes) {
      if (n != nullptr && n->is_value() && !l.IsLive(n.get())) FuncGraph::ForgetReferrer(n->AsValue());
    }
    const size_t before = nodes.size();
    nodes.erase(std::remove_if(nodes.begin(), nodes.end(),
                               [&](const std::unique_ptr<AnfNode>& n) {
                                 return n == nullptr || !l.IsLive(n.get());
                               }),
                nodes.end());
    out.nodes += before - nodes.size();
    if (!l.graph_set.contains(g.get())) graphs_by_name_.erase(g->name());
  }
  manager_->Reset();  // cached scans may name deleted nodes
  for (auto& g : graphs_) g->prim_nodes_.clear();  // so may the primitive constants
  const size_t graphs_before = graphs_.size();
  graphs_.erase(std::remove_if(graphs_.begin(), graphs_.end(),
                               [&](const std::unique_ptr<FuncGraph>& g) {
                                 return !l.graph_set.contains(g.get());
                               }),
                graphs_.end());
  out.graphs = graphs_before - graphs_.size();
  return out;
}

}  // namespace kgrad
