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
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
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

// Many inlines in one sweep: the callees' orders are the ones the caller read when
// the sweep started (`start_orders`, which must outlive the Inliner), valid while no
// edge changes (new nodes and graphs may appear), plus those of graphs the inlines
// create.
class Inliner {
 public:
  using Orders = absl::flat_hash_map<const FuncGraph*, std::vector<CNode*>>;
  Inliner(Module* m, const Orders* start_orders);
  // `copies`, when given, receives the applications created in `caller`.
  AnfNode* Inline(FuncGraph* callee, FuncGraph* caller, absl::Span<AnfNode* const> args,
                  std::vector<CNode*>* copies = nullptr);
  // Inlines by moving the callee's body into the caller, for a callee called at
  // this site and nowhere else: nothing is copied, and the graphs nested in the
  // callee move under the caller. `moved` receives the applications, in the
  // callee's order. Returns the callee's former output, which may be one of its
  // parameters: the caller binds them to the arguments (Transaction::Replace).
  AnfNode* Transplant(FuncGraph* callee, FuncGraph* caller, std::vector<CNode*>* moved);
  // Whether the Inliner has the graph's order (given at the start, or an inline
  // made the graph), and the graph was not transplanted.
  bool Knows(const FuncGraph* g) const { return Order(g) != nullptr; }
  // Whether a graph nested in an inlined callee, now copied under the caller,
  // calls something other than a primitive (calls the sweep did not visit).
  bool copied_calls() const { return copied_calls_; }

 private:
  const std::vector<CNode*>* Order(const FuncGraph* g) const;

  Module* module_;
  const Orders* start_orders_;
  // Graphs the inlines made; node-based, since Inline holds references to orders
  // while it adds more.
  absl::node_hash_map<const FuncGraph*, std::vector<CNode*>> orders_;
  absl::flat_hash_set<const FuncGraph*> emptied_;  // transplanted
  bool copied_calls_ = false;
  absl::flat_hash_map<const FuncGraph*, std::vector<FuncGraph*>> children_;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_CLONER_H_
