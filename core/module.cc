#include "core/module.h"

#include <algorithm>

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

absl::Status Module::RenameGraph(FuncGraph* g, std::string name) {
  if (g->name() == name) return absl::OkStatus();
  if (graphs_by_name_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("a graph named '", name, "' exists"));
  }
  graphs_by_name_.erase(g->name());
  g->name_ = std::move(name);
  graphs_by_name_[g->name_] = g;
  return absl::OkStatus();
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

void Module::CollectGarbage(const std::function<bool(const FuncGraph*)>& may_modify) {
  std::vector<FuncGraph*> live_graphs = manager_->ReachableFromPublic();
  absl::flat_hash_set<FuncGraph*> live_set(live_graphs.begin(), live_graphs.end());
  if (may_modify) {
    // Graphs that must not change stay whole, live or not.
    for (const auto& g : graphs_) {
      if (!may_modify(g.get()) && live_set.insert(g.get()).second) live_graphs.push_back(g.get());
    }
  }

  // A node lives if a live graph evaluates it, takes it as a parameter, returns
  // it, or a live CNode reads it (ValueNodes may be shared across graphs).
  absl::flat_hash_set<const AnfNode*> live;
  for (FuncGraph* g : live_graphs) {
    if (may_modify && !may_modify(g)) {
      // Untouched: every node stays, with whatever it reads.
      for (const auto& n : g->nodes_) {
        live.insert(n.get());
        if (const CNode* c = n->AsCNode()) live.insert(c->inputs().begin(), c->inputs().end());
      }
    }
    for (Parameter* p : g->parameters()) live.insert(p);
    if (g->output() != nullptr) live.insert(g->output());
    for (CNode* c : manager_->Info(g).order) {
      live.insert(c);
      for (AnfNode* in : c->inputs()) live.insert(in);
    }
  }
  // A graph nothing reaches may still own nodes that live graphs read: constants
  // shared by a pass (adopted by a live user's graph), or, should scoping ever be
  // broken, other nodes (then the graph stays rather than leave a dangling edge).
  for (auto& g : graphs_) {
    if (live_set.contains(g.get())) continue;
    for (auto& n : g->nodes_) {
      if (!live.contains(n.get())) continue;
      if (!n->is_value()) {
        live_set.insert(g.get());
        break;
      }
    }
  }
  for (auto& g : graphs_) {
    if (live_set.contains(g.get())) continue;
    for (auto& n : g->nodes_) {
      if (n == nullptr || !live.contains(n.get())) continue;
      FuncGraph* adopter = nullptr;
      for (const Use& u : n->uses()) {
        FuncGraph* ug = u.user != nullptr ? u.user->graph() : u.graph;
        if (ug != nullptr && live_set.contains(ug)) {
          adopter = ug;
          break;
        }
      }
      KGRAD_CHECK(adopter != nullptr);
      n->graph_ = adopter;
      adopter->nodes_.push_back(std::move(n));
    }
  }
  // First cut every edge out of dead nodes, then free them.
  for (auto& g : graphs_) {
    bool graph_dead = !live_set.contains(g.get());
    if (graph_dead && g->output_ != nullptr) {
      g->output_->RemoveUse(Use{nullptr, -1, g.get()});
      g->output_ = nullptr;
    }
    for (auto& n : g->nodes_) {
      if (n != nullptr && !live.contains(n.get())) {
        if (CNode* c = n->AsCNode()) {
          for (size_t i = 0; i < c->inputs_.size(); ++i) {
            c->inputs_[i]->RemoveUse(Use{c, static_cast<int>(i), nullptr});
          }
          c->inputs_.clear();
        }
      }
    }
  }
  for (auto& g : graphs_) {
    auto& nodes = g->nodes_;
    nodes.erase(std::remove_if(nodes.begin(), nodes.end(),
                               [&](const std::unique_ptr<AnfNode>& n) {
                                 return n == nullptr || !live.contains(n.get());
                               }),
                nodes.end());
  }
  for (auto& g : graphs_) {
    if (!live_set.contains(g.get())) graphs_by_name_.erase(g->name());
  }
  graphs_.erase(std::remove_if(graphs_.begin(), graphs_.end(),
                               [&](const std::unique_ptr<FuncGraph>& g) {
                                 return !live_set.contains(g.get());
                               }),
                graphs_.end());
  Touch();
}

}  // namespace kgrad
