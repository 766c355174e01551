// Copying graphs. Clone copies a set of graphs (each with the graphs nested in
// it) so that references among them point to the copies, while free variables
// and graphs outside the set stay shared. Inline copies a callee's body into a
// caller at a call site (partial evaluation: the optimizer's inliner and the
// AD preparation both use it).
#ifndef KGRAD_CORE_CLONER_H_
#define KGRAD_CORE_CLONER_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "core/func_graph.h"

namespace kgrad {

struct CloneMap {
  absl::flat_hash_map<const FuncGraph*, FuncGraph*> graphs;
  absl::flat_hash_map<const AnfNode*, AnfNode*> nodes;

  AnfNode* Node(AnfNode* n) const {
    auto it = nodes.find(n);
    return it == nodes.end() ? n : it->second;
  }
  FuncGraph* Graph(FuncGraph* g) const {
    auto it = graphs.find(g);
    return it == graphs.end() ? g : it->second;
  }
};

// Copies `roots` and every graph nested in them. The copies keep the originals'
// parents unless a parent was copied too. Names get `suffix`.
CloneMap CloneGraphs(const std::vector<FuncGraph*>& roots, const std::string& suffix);

// Closure conversion: a top-level copy of `g` (with the graphs nested in it) that
// takes g's free variables, weights excepted (they are global), as parameters
// after its own, in the order of `free_variables`. The copy has no custom bprop.
struct LiftedGraph {
  FuncGraph* graph;
  std::vector<AnfNode*> free_variables;
};
LiftedGraph LiftFreeVariables(FuncGraph* g, const std::string& suffix);

// Many inlines in one sweep: the graphs' orders are read once, when the Inliner is
// made, and stay valid while no edge changes (new nodes and graphs may appear).
class Inliner {
 public:
  explicit Inliner(Module* m);
  // `copies`, when given, receives the applications created in `caller`.
  AnfNode* Inline(FuncGraph* callee, FuncGraph* caller, absl::Span<AnfNode* const> args,
                  std::vector<CNode*>* copies = nullptr);
  // Whether the Inliner has the graph's order (it existed when the Inliner was
  // made, or an inline made it).
  bool Knows(const FuncGraph* g) const { return orders_.contains(g); }

 private:
  Module* module_;
  absl::flat_hash_map<const FuncGraph*, std::vector<CNode*>> orders_;
  absl::flat_hash_map<const FuncGraph*, std::vector<FuncGraph*>> children_;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_CLONER_H_
