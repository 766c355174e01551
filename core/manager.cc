#include "core/manager.h"

#include <algorithm>
#include <utility>

#include "core/module.h"
#include "core/value_walk.h"

namespace kgrad {
namespace {

// Graphs named by a constant (directly, or inside a constant tuple).
void CollectGraphs(const Value& v, std::vector<FuncGraph*>* out) {
  if (v.is_graph()) {
    out->push_back(v.graph());
    return;
  }
  if (!v.is_sequence()) return;
  (void)ForEachLeaf(v, [out](const Value& leaf, absl::Span<const size_t>) {
    if (leaf.is_graph()) out->push_back(leaf.graph());
    return absl::OkStatus();
  });
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
  Verify(g);
  return entries_[g].info;
}

int Manager::FvIndex(FuncGraph* g, AnfNode* node) {
  Verify(g);
  Entry& e = entries_[g];
  if (e.fv_index_version != e.verified) {
    e.fv_index.clear();
    for (size_t i = 0; i < e.info.fvs.size(); ++i) e.fv_index[e.info.fvs[i]] = static_cast<int>(i);
    e.fv_index_version = e.verified;
  }
  auto it = e.fv_index.find(node);
  return it == e.fv_index.end() ? -1 : it->second;
}

void Manager::Reset() { entries_.clear(); }

// What a graph reads directly: free variables, graphs named by constants. The scan
// starts from the output and from the graph's nodes that other graphs use (a nested
// graph's free variables must be computed here too). Applications are visited once
// (node marks, not hash sets: this runs after every batch of edits). The walk from
// the output is a post-order, kept as the graph's order when the graph names no
// other graph (most graphs, once inlined): no second walk in ComputeOrder.
void Manager::ScanGraph(FuncGraph* g, Scan* sc) {
  sc->direct_fvs.clear();
  sc->used_graphs.clear();
  sc->order.clear();
  const uint64_t epoch = ++epoch_;
  absl::flat_hash_set<AnfNode*> fv_set;
  absl::flat_hash_set<FuncGraph*> used_set;
  if (g->output() != nullptr) ScanFrom(g, g->output(), epoch, sc, &sc->order, &fv_set, &used_set);
  std::vector<CNode*> elsewhere;  // needed by other graphs only: not in the order
  for (const auto& owned : g->owned_nodes()) {
    if (!owned->is_cnode() || owned->mark_epoch == epoch) continue;
    for (const Use& u : owned->uses()) {
      FuncGraph* ug = u.user != nullptr ? u.user->graph() : u.graph;
      if (ug != g) {
        ScanFrom(g, owned.get(), epoch, sc, &elsewhere, &fv_set, &used_set);
        break;
      }
    }
  }
  SortById(&sc->direct_fvs);
}

void Manager::ScanFrom(FuncGraph* g, AnfNode* root, uint64_t epoch, Scan* sc, std::vector<CNode*>* order,
                       absl::flat_hash_set<AnfNode*>* fv_set, absl::flat_hash_set<FuncGraph*>* used_set) {
  std::vector<std::pair<CNode*, size_t>> stack;
  std::vector<FuncGraph*> refs;
  // Records what `n` says about the graph's reads; true for an own application
  // not seen yet (to be walked).
  auto note = [&](AnfNode* n) {
    if (n->mark_epoch == epoch) return false;
    if (n->is_value()) {
      const Value& v = n->AsValue()->value();
      if (!v.is_graph() && !v.is_sequence()) return false;  // primitives and data: nothing to record
      n->mark_epoch = epoch;
      refs.clear();
      CollectGraphs(v, &refs);
      for (FuncGraph* h : refs) {
        if (used_set->insert(h).second) sc->used_graphs.push_back(h);
      }
      return false;
    }
    if (OwnedOutside(n, g)) {
      if (fv_set->insert(n).second) sc->direct_fvs.push_back(n);
      return false;
    }
    n->mark_epoch = epoch;
    return n->is_cnode();
  };
  if (!note(root)) return;
  stack.emplace_back(root->AsCNode(), 0);
  while (!stack.empty()) {
    auto& [c, next] = stack.back();
    if (next < c->size()) {
      AnfNode* in = c->input(next++);
      if (note(in)) stack.emplace_back(in->AsCNode(), 0);
      continue;
    }
    order->push_back(c);
    stack.pop_back();
  }
}

// Brings `root` and the graphs it uses (transitively) up to date:
//   1. the stale part of its closure, rescanning graphs whose version moved;
//   2. their transitive free variables (graphs verified earlier are read as given);
//   3. orders of graphs rescanned, or using a graph whose free variables changed.
void Manager::Verify(FuncGraph* root) {
  const uint64_t version = module_->version();
  if (entries_[root].verified == version) return;
  std::vector<FuncGraph*> rescanned;
  std::vector<FuncGraph*> stale = StaleClosure(root, &rescanned);
  ComputeTotalFvs(stale);
  absl::flat_hash_set<FuncGraph*> was_rescanned(rescanned.begin(), rescanned.end());
  for (FuncGraph* g : stale) {
    Entry& e = entries_[g];
    if (was_rescanned.contains(g) && e.scan.used_graphs.empty()) {
      // The scan's walk from the output is the order (ScanGraph).
      e.info.order = std::move(e.scan.order);
      e.info.live_graphs.clear();
      e.order_stamp = stamp_;
      e.has_order = true;
      e.verified = version;
      continue;
    }
    bool order_stale = !e.has_order || was_rescanned.contains(g);
    for (FuncGraph* h : e.info.used_graphs) {
      auto it = entries_.find(h);
      order_stale |= it != entries_.end() && it->second.fvs_stamp > e.order_stamp;
    }
    if (order_stale) {
      ComputeOrder(g);
      e.order_stamp = stamp_;
      e.has_order = true;
    }
    e.verified = version;
  }
}

// Step 1 of Verify: the graphs reachable from `root` through used graphs that are
// not verified at the current version, each rescanned if its version moved.
std::vector<FuncGraph*> Manager::StaleClosure(FuncGraph* root, std::vector<FuncGraph*>* rescanned) {
  const uint64_t version = module_->version();
  std::vector<FuncGraph*> out;
  absl::flat_hash_set<FuncGraph*> seen;
  std::vector<FuncGraph*> work{root};
  while (!work.empty()) {
    FuncGraph* g = work.back();
    work.pop_back();
    if (!seen.insert(g).second) continue;
    Entry& e = entries_[g];
    if (e.verified == version) continue;
    if (e.scan.version != g->version()) {
      ScanGraph(g, &e.scan);
      e.scan.version = g->version();
      rescanned->push_back(g);
    }
    e.info.direct_fvs = e.scan.direct_fvs;
    e.info.used_graphs = e.scan.used_graphs;
    out.push_back(g);
    for (FuncGraph* h : e.scan.used_graphs) work.push_back(h);
  }
  return out;
}

// Iterative post-order over used_graphs: a graph after the graphs it uses, except
// along cycles.
std::vector<FuncGraph*> Manager::CalleesFirst(const std::vector<FuncGraph*>& graphs) {
  std::vector<FuncGraph*> post;
  post.reserve(graphs.size());
  absl::flat_hash_set<FuncGraph*> in(graphs.begin(), graphs.end());
  absl::flat_hash_set<FuncGraph*> seen;
  std::vector<std::pair<FuncGraph*, size_t>> stack;
  for (FuncGraph* root : graphs) {
    if (!seen.insert(root).second) continue;
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [g, next] = stack.back();
      const std::vector<FuncGraph*>& used = entries_[g].info.used_graphs;
      if (next < used.size()) {
        FuncGraph* h = used[next++];
        if (in.contains(h) && seen.insert(h).second) stack.emplace_back(h, 0);
        continue;
      }
      post.push_back(g);
      stack.pop_back();
    }
  }
  return post;
}

// fvs(g) = direct(g) + { v in fvs(h) : h used by g, v a weight or owned by a strict
// ancestor of g }, to a fixpoint (graphs may reference each other recursively), for
// the graphs being verified; the graphs they use that are current already give
// their sets as they are. A worklist revisits only the users of a graph whose set
// grew, so a chain of unrolled iterations costs its length, not its length squared.
void Manager::ComputeTotalFvs(const std::vector<FuncGraph*>& graphs) {
  absl::flat_hash_map<FuncGraph*, absl::flat_hash_set<AnfNode*>> sets;
  absl::flat_hash_map<FuncGraph*, std::vector<FuncGraph*>> users;
  absl::flat_hash_map<FuncGraph*, std::vector<AnfNode*>> before;
  for (FuncGraph* g : graphs) {
    GraphInfo& gi = entries_[g].info;
    before[g] = std::move(gi.fvs);
    gi.fvs = gi.direct_fvs;
    sets[g].insert(gi.fvs.begin(), gi.fvs.end());
  }
  auto pull = [&](FuncGraph* g, const std::vector<AnfNode*>& hfvs) {
    GraphInfo& gi = entries_[g].info;
    absl::flat_hash_set<AnfNode*>& set = sets[g];
    bool grew = false;
    for (AnfNode* v : hfvs) {
      bool outside = v->graph() == nullptr || (v->graph() != g && g->IsSelfOrAncestor(v->graph()));
      if (outside && set.insert(v).second) {
        gi.fvs.push_back(v);
        grew = true;
      }
    }
    return grew;
  };
  for (FuncGraph* g : graphs) {
    for (FuncGraph* h : entries_[g].info.used_graphs) {
      if (h == g) continue;
      if (sets.contains(h)) {
        users[h].push_back(g);
      } else {
        pull(g, entries_[h].info.fvs);  // current already
      }
    }
  }
  // Callees first (a post-order of the used-graphs relation), so that outside
  // recursion each graph hands on its final set once.
  std::vector<FuncGraph*> post = CalleesFirst(graphs);
  std::vector<FuncGraph*> work(post.rbegin(), post.rend());
  absl::flat_hash_set<FuncGraph*> queued(graphs.begin(), graphs.end());
  while (!work.empty()) {
    FuncGraph* h = work.back();
    work.pop_back();
    queued.erase(h);
    auto uit = users.find(h);
    if (uit == users.end()) continue;
    const std::vector<AnfNode*> hfvs = entries_[h].info.fvs;
    for (FuncGraph* g : uit->second) {
      if (pull(g, hfvs) && queued.insert(g).second) work.push_back(g);
    }
  }
  for (FuncGraph* g : graphs) {
    Entry& e = entries_[g];
    SortById(&e.info.fvs);
    if (e.info.fvs != before[g]) e.fvs_stamp = ++stamp_;
  }
}

const std::vector<AnfNode*>* Manager::GraphInputFvs(const AnfNode* in,
                                                    std::vector<FuncGraph*>* scratch) {
  if (!in->is_value()) return nullptr;
  const Value& v = in->AsValue()->value();
  FuncGraph* named = nullptr;
  if (v.is_graph()) {
    named = v.graph();
  } else {
    if (!v.is_sequence()) return nullptr;
    scratch->clear();
    CollectGraphs(v, scratch);
    // Constant tuples of graphs are rare; their free variables go through the
    // first graph only when it is alone.
    if (scratch->size() != 1) return nullptr;
    named = (*scratch)[0];
  }
  auto it = entries_.find(named);
  return it == entries_.end() ? nullptr : &it->second.info.fvs;
}

namespace {

// Graphs named by constants among the inputs of the nodes placed (and the
// output): what a live graph keeps alive, each once.
class LiveGraphNotes {
 public:
  explicit LiveGraphNotes(std::vector<FuncGraph*>* out) : out_(out) { out_->clear(); }
  void Note(const AnfNode* in) {
    const Value& v = in->AsValue()->value();
    if (!v.is_graph() && !v.is_sequence()) return;
    refs_.clear();
    CollectGraphs(v, &refs_);
    for (FuncGraph* h : refs_) {
      if (seen_.insert(h).second) out_->push_back(h);
    }
  }

 private:
  std::vector<FuncGraph*>* out_;
  absl::flat_hash_set<FuncGraph*> seen_;
  std::vector<FuncGraph*> refs_;
};

}  // namespace

// Iterative post-order DFS (graphs of 100k nodes must not overflow the stack).
// A node's predecessors are its inputs owned by g and, for an input that names a
// graph, that graph's free variables owned by g (a closure needs them first).
void Manager::ComputeOrder(FuncGraph* g) {
  GraphInfo& gi = entries_[g].info;
  gi.order.clear();
  gi.live_graphs.clear();
  if (g->output() == nullptr) return;
  const uint64_t epoch = ++epoch_;  // mark_state: 1 on the stack, 2 placed
  struct Frame {
    AnfNode* node;
    size_t input;                      // next input to look at
    const std::vector<AnfNode*>* fvs;  // free variables of the graph input `input - 1`
    size_t fv;
  };
  std::vector<Frame> stack;
  std::vector<FuncGraph*> scratch;
  LiveGraphNotes live(&gi.live_graphs);
  auto push = [&](AnfNode* n) {
    if (n->graph() != g || !n->is_cnode()) return;
    if (n->mark_epoch == epoch) return;  // on the stack (a cycle: the verifier reports it) or placed
    n->mark_epoch = epoch;
    n->mark_state = 1;
    stack.push_back(Frame{n, 0, nullptr, 0});
  };
  std::vector<AnfNode*> roots;
  if (g->output()->graph() == g && g->output()->is_cnode()) {
    roots.push_back(g->output());
  } else if (const std::vector<AnfNode*>* fvs = GraphInputFvs(g->output(), &scratch)) {
    roots = *fvs;  // a graph returning a closure needs the closure's free variables
  }
  // One root at a time, so that a root reached from another is placed first.
  for (AnfNode* root : roots) {
    push(root);
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.fvs != nullptr && f.fv < f.fvs->size()) {
        push((*f.fvs)[f.fv++]);
        continue;
      }
      f.fvs = nullptr;
      const CNode* c = f.node->AsCNode();
      if (f.input < c->size()) {
        AnfNode* in = c->input(f.input++);
        if (in->is_value()) {
          live.Note(in);
          f.fvs = GraphInputFvs(in, &scratch);
          f.fv = 0;
        } else {
          push(in);
        }
        continue;
      }
      f.node->mark_state = 2;
      gi.order.push_back(static_cast<CNode*>(f.node));
      stack.pop_back();
    }
  }
  if (g->output()->is_value()) live.Note(g->output());
}

std::vector<FuncGraph*> Manager::Reachable(const std::vector<FuncGraph*>& roots) {
  std::vector<FuncGraph*> out;
  absl::flat_hash_set<FuncGraph*> seen;
  std::vector<FuncGraph*> work(roots.begin(), roots.end());
  while (!work.empty()) {
    FuncGraph* g = work.back();
    work.pop_back();
    if (g == nullptr || !seen.insert(g).second) continue;
    out.push_back(g);
    for (FuncGraph* h : Info(g).live_graphs) work.push_back(h);
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
        // All uses move at once (O(uses), not O(uses^2) through set_input).
        if (e.old_node == e.node || e.old_node->uses_.empty()) break;
        NodeUses uses = std::move(e.old_node->uses_);
        e.old_node->uses_.clear();
        FuncGraph::TouchOwner(e.old_node);
        FuncGraph::TouchOwner(e.node);
        FuncGraph* last = nullptr;
        for (const Use& u : uses) {
          FuncGraph* g = u.user != nullptr ? u.user->graph() : u.graph;
          if (u.user != nullptr) {
            u.user->inputs_[u.index] = e.node;
          } else {
            u.graph->output_ = e.node;
          }
          e.node->uses_.push_back(u);
          if (g != last) g->Touch();
          last = g;
        }
        changed = true;
        break;
      }
    }
  }
  edits_.clear();
  if (changed) module_->Touch();
  return changed;
}

}  // namespace kgrad
