#include "core/manager.h"

#include <algorithm>
#include <utility>

#include "core/module.h"

namespace kgrad {
namespace {

// Graphs named by a constant (directly, or inside a constant tuple).
void CollectGraphs(const Value& v, std::vector<FuncGraph*>* out) {
  if (v.is_graph()) {
    out->push_back(v.graph());
  } else if (v.is_tuple()) {
    for (const Value& e : v.tuple()) CollectGraphs(e, out);
  }
}

bool OwnedOutside(const AnfNode* n, const FuncGraph* g) {
  return !n->is_value() && n->graph() != g;
}

void SortById(std::vector<AnfNode*>* nodes) {
  std::sort(nodes->begin(), nodes->end(),
            [](const AnfNode* a, const AnfNode* b) { return a->id() < b->id(); });
}

}  // namespace

const GraphInfo& Manager::Info(FuncGraph* g) {
  if (version_ != module_->version()) Recompute();
  auto it = info_.find(g);
  if (it == info_.end()) {
    // A graph created after the last recompute without any edit since cannot
    // exist (creation bumps the version); an unknown graph has no info.
    static const GraphInfo* const kEmpty = new GraphInfo();
    return *kEmpty;
  }
  return it->second;
}

int Manager::FvIndex(FuncGraph* g, AnfNode* node) {
  if (version_ != module_->version()) Recompute();
  auto it = fv_index_.find(g);
  if (it == fv_index_.end()) return -1;
  auto jt = it->second.find(node);
  return jt == it->second.end() ? -1 : jt->second;
}

bool Manager::IsFreeVariableOf(FuncGraph* g, AnfNode* node) { return FvIndex(g, node) >= 0; }

void Manager::Recompute() {
  info_.clear();
  fv_index_.clear();
  std::vector<FuncGraph*> graphs;
  for (const auto& g : module_->graphs()) graphs.push_back(g.get());
  for (FuncGraph* g : graphs) info_[g];

  // Phase 1: what each graph reads directly. Nodes of g that only a nested graph
  // reads are found through that graph's direct free variables and scanned too.
  absl::flat_hash_map<FuncGraph*, absl::flat_hash_set<AnfNode*>> visited;
  std::vector<std::pair<FuncGraph*, AnfNode*>> work;
  for (FuncGraph* g : graphs) {
    if (g->output() != nullptr) work.emplace_back(g, g->output());
  }
  absl::flat_hash_map<FuncGraph*, absl::flat_hash_set<AnfNode*>> direct_set;
  absl::flat_hash_map<FuncGraph*, absl::flat_hash_set<FuncGraph*>> used_set;
  while (!work.empty()) {
    auto [g, node] = work.back();
    work.pop_back();
    if (!visited[g].insert(node).second) continue;
    if (node->is_value()) {
      std::vector<FuncGraph*> refs;
      CollectGraphs(node->AsValue()->value(), &refs);
      for (FuncGraph* h : refs) {
        if (used_set[g].insert(h).second) info_[g].used_graphs.push_back(h);
        info_[h].referenced_by.push_back(node->AsValue());
      }
      continue;
    }
    if (OwnedOutside(node, g)) {
      if (direct_set[g].insert(node).second) {
        info_[g].direct_fvs.push_back(node);
        // The owner must evaluate it: scan it there as well.
        if (node->graph() != nullptr && info_.contains(node->graph())) {
          work.emplace_back(node->graph(), node);
        }
      }
      continue;
    }
    if (const CNode* c = node->AsCNode()) {
      for (AnfNode* in : c->inputs()) work.emplace_back(g, in);
    }
  }
  for (FuncGraph* g : graphs) {
    SortById(&info_[g].direct_fvs);
    info_[g].fvs = info_[g].direct_fvs;
  }
  ComputeTotalFvs(graphs);
  for (FuncGraph* g : graphs) {
    auto& idx = fv_index_[g];
    const auto& fvs = info_[g].fvs;
    for (size_t i = 0; i < fvs.size(); ++i) idx[fvs[i]] = static_cast<int>(i);
  }
  for (FuncGraph* g : graphs) ComputeOrder(g);
  version_ = module_->version();
}

// fvs(g) = direct(g) + { v in fvs(h) : h used by g, v a weight or owned by a strict
// ancestor of g }, to a fixpoint (graphs may reference each other recursively).
void Manager::ComputeTotalFvs(const std::vector<FuncGraph*>& graphs) {
  absl::flat_hash_map<FuncGraph*, absl::flat_hash_set<AnfNode*>> sets;
  for (FuncGraph* g : graphs) {
    sets[g].insert(info_[g].fvs.begin(), info_[g].fvs.end());
  }
  bool changed = true;
  while (changed) {
    changed = false;
    for (FuncGraph* g : graphs) {
      GraphInfo& gi = info_[g];
      for (FuncGraph* h : gi.used_graphs) {
        auto it = info_.find(h);
        if (it == info_.end() || h == g) continue;
        for (AnfNode* v : it->second.fvs) {
          bool outside = v->graph() == nullptr ||
                         (v->graph() != g && g->IsSelfOrAncestor(v->graph()));
          if (outside && sets[g].insert(v).second) {
            gi.fvs.push_back(v);
            changed = true;
          }
        }
      }
    }
  }
  for (FuncGraph* g : graphs) SortById(&info_[g].fvs);
}

// Iterative post-order DFS (graphs of 100k nodes must not overflow the stack).
void Manager::ComputeOrder(FuncGraph* g) {
  GraphInfo& gi = info_[g];
  if (g->output() == nullptr) return;
  absl::flat_hash_map<AnfNode*, int> state;  // 1: on stack, 2: done
  struct Frame {
    AnfNode* node;
    std::vector<AnfNode*> succ;
    size_t next;
  };
  auto successors = [&](AnfNode* n) {
    std::vector<AnfNode*> out;
    const CNode* c = n->AsCNode();
    if (c == nullptr) return out;
    for (AnfNode* in : c->inputs()) {
      if (in->is_value()) {
        std::vector<FuncGraph*> refs;
        CollectGraphs(in->AsValue()->value(), &refs);
        for (FuncGraph* h : refs) {
          auto it = info_.find(h);
          if (it == info_.end()) continue;
          for (AnfNode* v : it->second.fvs) {
            if (v->graph() == g && v->is_cnode()) out.push_back(v);
          }
        }
      } else if (in->graph() == g && in->is_cnode()) {
        out.push_back(in);
      }
    }
    return out;
  };
  std::vector<AnfNode*> roots;
  if (g->output()->graph() == g && g->output()->is_cnode()) {
    roots.push_back(g->output());
  } else if (g->output()->is_value()) {
    // A graph returning a closure needs the closure's free variables.
    std::vector<FuncGraph*> refs;
    CollectGraphs(g->output()->AsValue()->value(), &refs);
    for (FuncGraph* h : refs) {
      auto it = info_.find(h);
      if (it == info_.end()) continue;
      for (AnfNode* v : it->second.fvs) {
        if (v->graph() == g && v->is_cnode()) roots.push_back(v);
      }
    }
  }
  for (AnfNode* root : roots) {
    if (state[root] != 0) continue;
    std::vector<Frame> stack;
    stack.push_back(Frame{root, successors(root), 0});
    state[root] = 1;
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next < f.succ.size()) {
        AnfNode* s = f.succ[f.next++];
        if (state[s] == 0) {
          state[s] = 1;
          std::vector<AnfNode*> ss = successors(s);
          stack.push_back(Frame{s, std::move(ss), 0});
        }
        // state 1: a cycle; the verifier reports it. state 2: already placed.
        continue;
      }
      state[f.node] = 2;
      gi.order.push_back(f.node->AsCNode());
      stack.pop_back();
    }
  }
}

std::vector<FuncGraph*> Manager::Reachable(const std::vector<FuncGraph*>& roots) {
  if (version_ != module_->version()) Recompute();
  std::vector<FuncGraph*> out;
  absl::flat_hash_set<FuncGraph*> seen;
  std::vector<FuncGraph*> work(roots.begin(), roots.end());
  while (!work.empty()) {
    FuncGraph* g = work.back();
    work.pop_back();
    if (g == nullptr || !seen.insert(g).second) continue;
    out.push_back(g);
    auto it = info_.find(g);
    if (it != info_.end()) {
      for (FuncGraph* h : it->second.used_graphs) work.push_back(h);
    }
    if (g->parent() != nullptr) work.push_back(g->parent());
    if (g->custom_bprop() != nullptr) work.push_back(g->custom_bprop());
  }
  return out;
}

std::vector<FuncGraph*> Manager::ReachableFromPublic() {
  std::vector<FuncGraph*> roots;
  for (const auto& g : module_->graphs()) {
    if (g->is_public()) roots.push_back(g.get());
  }
  return Reachable(roots);
}

void Transaction::SetEdge(CNode* user, int index, AnfNode* node) {
  edits_.push_back(Edit{Edit::Kind::kSetEdge, user, index, nullptr, node, nullptr});
}

void Transaction::Replace(AnfNode* old_node, AnfNode* new_node) {
  edits_.push_back(Edit{Edit::Kind::kReplace, nullptr, 0, old_node, new_node, nullptr});
}

void Transaction::SetOutput(FuncGraph* g, AnfNode* node) {
  edits_.push_back(Edit{Edit::Kind::kSetOutput, nullptr, 0, nullptr, node, g});
}

bool Transaction::Commit() {
  bool changed = false;
  for (const Edit& e : edits_) {
    switch (e.kind) {
      case Edit::Kind::kSetEdge:
        if (e.user->input(e.index) != e.node) {
          e.user->set_input(e.index, e.node);
          changed = true;
        }
        break;
      case Edit::Kind::kSetOutput:
        if (e.graph->output() != e.node) {
          e.graph->set_output(e.node);
          changed = true;
        }
        break;
      case Edit::Kind::kReplace: {
        if (e.old_node == e.node) break;
        std::vector<Use> uses = e.old_node->uses();
        for (const Use& u : uses) {
          if (u.user != nullptr) {
            u.user->set_input(u.index, e.node);
          } else {
            u.graph->set_output(e.node);
          }
          changed = true;
        }
        break;
      }
    }
  }
  edits_.clear();
  if (changed) module_->Touch();
  return changed;
}

}  // namespace kgrad
