#include "core/cloner.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/manager.h"
#include "core/module.h"
#include "core/status_macros.h"
#include "core/value_walk.h"

namespace kgrad {
namespace {

// Every graph nested (transitively) in one of `roots`, parents before children.
std::vector<FuncGraph*> WithNested(Module* m, const std::vector<FuncGraph*>& roots) {
  absl::flat_hash_set<const FuncGraph*> in(roots.begin(), roots.end());
  std::vector<FuncGraph*> out(roots.begin(), roots.end());
  bool grew = true;
  while (grew) {
    grew = false;
    for (const auto& g : m->graphs()) {
      if (!in.contains(g.get()) && g->parent() != nullptr && in.contains(g->parent())) {
        in.insert(g.get());
        out.push_back(g.get());
        grew = true;
      }
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](FuncGraph* a, FuncGraph* b) { return a->depth() < b->depth(); });
  return out;
}

// A constant with the graphs in it (at any tuple depth) replaced by their copies.
Value MapValue(const Value& v, const CloneMap& map) {
  return *MapLeaves(v, [&map](const Value& leaf) -> absl::StatusOr<Value> {
    return leaf.is_graph() ? Value::Graph(map.Graph(leaf.graph())) : leaf;
  });
}

// The shared machinery: shells for graphs, parameters, and node copies in a
// given order (inputs mapped when copied, shared otherwise).
class Copier {
 public:
  Copier(Module* m, CloneMap* map) : module_(m), map_(map) {}

  void MakeShells(const std::vector<FuncGraph*>& graphs, const std::string& suffix,
                  FuncGraph* from_parent, FuncGraph* to_parent) {
    for (FuncGraph* g : graphs) {
      FuncGraph* parent = g->parent() == nullptr ? nullptr
                          : g->parent() == from_parent ? to_parent
                                                       : map_->Graph(g->parent());
      FuncGraph* copy = module_->NewGraph(absl::StrCat(g->name(), suffix), parent);
      // The checkpoint marker is a property of the computation, so copies keep it.
      copy->set_remat(g->remat());
      map_->graphs[g] = copy;
    }
    for (FuncGraph* g : graphs) {
      for (Parameter* p : g->parameters()) {
        Parameter* q = map_->graphs[g]->AddParameter(p->name(), p->declared());
        q->set_abstract(p->abstract());
        map_->nodes[p] = q;
      }
    }
  }

  AnfNode* Mapped(AnfNode* n, FuncGraph* target) {
    auto it = map_->nodes.find(n);
    if (it != map_->nodes.end()) return it->second;
    const ValueNode* v = n->AsValue();
    if (v == nullptr || (!v->value().is_graph() && !v->value().is_sequence())) return n;
    Value nv = MapValue(v->value(), *map_);
    if (ValuesEqual(nv, v->value())) return n;  // constants are shared
    ValueNode* k = target->NewValueNode(std::move(nv));
    k->set_name(n->name());
    return k;
  }

  void CopyNodes(FuncGraph* target, const std::vector<CNode*>& order) {
    for (CNode* node : order) {
      std::vector<AnfNode*> inputs;
      inputs.reserve(node->size());
      for (AnfNode* in : node->inputs()) inputs.push_back(Mapped(in, target));
      CNode* copy = target->NewCNode(std::move(inputs));
      copy->set_name(node->name());
      copy->set_abstract(node->abstract());
      map_->nodes[node] = copy;
    }
  }

  // Body, output and custom bprop of a copied graph.
  void CopyGraph(FuncGraph* g, const std::vector<CNode*>& order) {
    FuncGraph* c = map_->graphs[g];
    CopyNodes(c, order);
    if (g->output() != nullptr) c->set_output(Mapped(g->output(), c));
    if (g->custom_bprop() != nullptr) c->set_custom_bprop(map_->Graph(g->custom_bprop()));
  }

 private:
  Module* module_;
  CloneMap* map_;
};

}  // namespace

CloneMap CloneGraphs(const std::vector<FuncGraph*>& roots, const std::string& suffix) {
  CloneMap map;
  if (roots.empty()) return map;
  Module* m = roots[0]->module();
  Manager& manager = m->manager();
  std::vector<FuncGraph*> graphs = WithNested(m, roots);
  // Orders of the originals, computed before any copy changes the module.
  absl::flat_hash_map<FuncGraph*, std::vector<CNode*>> orders;
  for (FuncGraph* g : graphs) orders[g] = manager.Info(g).order;
  Copier copier(m, &map);
  copier.MakeShells(graphs, suffix, nullptr, nullptr);
  // Parents first, so that free variables of nested graphs are already mapped.
  for (FuncGraph* g : graphs) copier.CopyGraph(g, orders[g]);
  return map;
}

LiftedGraph LiftFreeVariables(FuncGraph* g, const std::string& suffix) {
  Module* m = g->module();
  Manager& manager = m->manager();
  LiftedGraph out;
  for (AnfNode* fv : manager.Info(g).fvs) {
    if (fv->graph() != nullptr) out.free_variables.push_back(fv);
  }
  std::vector<FuncGraph*> graphs = WithNested(m, {g});
  absl::flat_hash_map<FuncGraph*, std::vector<CNode*>> orders;
  for (FuncGraph* h : graphs) orders[h] = manager.Info(h).order;
  CloneMap map;
  Copier copier(m, &map);
  copier.MakeShells(graphs, suffix, g->parent(), nullptr);
  out.graph = map.graphs[g];
  // Every use of a free variable, in g or nested in it, reads the new parameter.
  for (AnfNode* fv : out.free_variables) {
    Parameter* p = out.graph->AddParameter(fv->DebugName());
    p->set_abstract(fv->abstract());
    map.nodes[fv] = p;
  }
  for (FuncGraph* h : graphs) copier.CopyGraph(h, orders[h]);
  out.graph->set_custom_bprop(nullptr);
  return out;
}

Inliner::Inliner(Module* m, const Orders* start_orders) : module_(m), start_orders_(start_orders) {
  for (const auto& g : m->graphs()) {
    if (g->parent() != nullptr) children_[g->parent()].push_back(g.get());
  }
}

const std::vector<CNode*>* Inliner::Order(const FuncGraph* g) const {
  if (emptied_.contains(g)) return nullptr;
  auto it = start_orders_->find(g);
  if (it != start_orders_->end()) return &it->second;
  auto jt = orders_.find(g);
  return jt == orders_.end() ? nullptr : &jt->second;
}

AnfNode* Inliner::Inline(FuncGraph* callee, FuncGraph* caller, absl::Span<AnfNode* const> args,
                         std::vector<CNode*>* copies) {
  KGRAD_CHECK(args.size() == callee->parameters().size());
  // Graphs nested in the callee (transitively), parents first.
  std::vector<FuncGraph*> nested;
  std::vector<FuncGraph*> frontier{callee};
  while (!frontier.empty()) {
    FuncGraph* g = frontier.back();
    frontier.pop_back();
    auto it = children_.find(g);
    if (it == children_.end()) continue;
    for (FuncGraph* c : it->second) {
      nested.push_back(c);
      frontier.push_back(c);
    }
  }
  std::stable_sort(nested.begin(), nested.end(),
                   [](FuncGraph* a, FuncGraph* b) { return a->depth() < b->depth(); });
  CloneMap map;
  for (size_t i = 0; i < args.size(); ++i) map.nodes[callee->parameters()[i]] = args[i];
  Copier copier(module_, &map);
  // Graphs nested in the callee move under the caller; the body reads their
  // shells, and they read the copied body as free variables.
  copier.MakeShells(nested, "", callee, caller);
  const std::vector<CNode*>& body = *Order(callee);
  copier.CopyNodes(caller, body);
  if (copies != nullptr) {
    for (CNode* n : body) copies->push_back(map.nodes.at(n)->AsCNode());
  }
  AnfNode* result = copier.Mapped(callee->output(), caller);
  // A nested graph the sweep never saw (unreachable at its start) has its order
  // read now: the sweep has not changed it.
  std::vector<const std::vector<CNode*>*> nested_orders;
  for (FuncGraph* g : nested) {
    const std::vector<CNode*>* order = Order(g);
    if (order == nullptr) order = &(orders_[g] = module_->manager().Info(g).order);
    nested_orders.push_back(order);
    for (const CNode* c : *order) copied_calls_ |= c->primitive() == nullptr;
  }
  for (size_t i = 0; i < nested.size(); ++i) copier.CopyGraph(nested[i], *nested_orders[i]);
  // The copies' orders are the originals' mapped (copied in that order), so a
  // graph created by this inline can itself be inlined in the same sweep.
  for (size_t i = 0; i < nested.size(); ++i) {
    FuncGraph* c = map.graphs.at(nested[i]);
    std::vector<CNode*>& order = orders_[c];
    for (CNode* n : *nested_orders[i]) order.push_back(map.nodes.at(n)->AsCNode());
    children_[c->parent()].push_back(c);
  }
  return result;
}

AnfNode* Inliner::Transplant(FuncGraph* callee, FuncGraph* caller, std::vector<CNode*>* moved) {
  const std::vector<CNode*>& body = *Order(callee);
  moved->insert(moved->end(), body.begin(), body.end());
  std::vector<FuncGraph*> children;
  auto it = children_.find(callee);
  if (it != children_.end()) {
    children = std::move(it->second);
    children_.erase(it);
  }
  AnfNode* out = callee->MoveBodyTo(caller, children);
  std::vector<FuncGraph*>& adopted = children_[caller];
  adopted.insert(adopted.end(), children.begin(), children.end());
  emptied_.insert(callee);
  return out;
}

}  // namespace kgrad
