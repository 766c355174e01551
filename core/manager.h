// Manager: the def-use and scoping analyses of a Module (after MindSpore's
// FuncGraphManager): per graph, the nodes it evaluates in order, its free
// variables (direct, and transitive through the graphs it references), the graphs
// it references, and which graphs reference it. Node users are kept on the nodes
// themselves (AnfNode::uses) and are always current; the analyses here are
// recomputed lazily when the module's version changes. Edits are batched in a
// Transaction (SetEdge, Replace, SetOutput) and applied by Commit.
//
// Threading: a Manager belongs to its Module; same contract (one thread mutates).
#ifndef KGRAD_CORE_MANAGER_H_
#define KGRAD_CORE_MANAGER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/func_graph.h"

namespace kgrad {

class Module;

struct GraphInfo {
  // CNodes owned by the graph that its output, or a graph it references, needs,
  // inputs before users. Nodes needed only as free variables of a referenced graph
  // come before the ValueNode that references that graph is used.
  std::vector<CNode*> order;
  // Nodes owned elsewhere (enclosing graphs, or weights) used directly.
  std::vector<AnfNode*> direct_fvs;
  // direct_fvs plus the free variables of referenced graphs that live outside this
  // graph (owned by a strict ancestor, or weights); sorted by node id.
  std::vector<AnfNode*> fvs;
  // Graphs named by constants among the graph's nodes, including nodes that only
  // other graphs read (an over-approximation, safe for free variables).
  std::vector<FuncGraph*> used_graphs;
  // Graphs named by constants among the nodes the graph evaluates (`order`) or
  // returns: what running the graph can reach. Reachability follows these.
  std::vector<FuncGraph*> live_graphs;
};

// The analyses are computed on demand, per graph: Info(g) brings g and the graphs
// it uses (transitively) up to date and nothing else, so graphs that nothing asks
// about (left dead by a pass until the next collection) cost nothing. A graph is
// rescanned only when its own version moved; its order is recomputed when it was
// rescanned or the free variables of a graph it uses changed.
class Manager {
 public:
  explicit Manager(Module* module) : module_(module) {}

  // Up to date with the module's current version.
  const GraphInfo& Info(FuncGraph* g);
  // Graphs reachable from `roots` through graph references (and custom bprops).
  std::vector<FuncGraph*> Reachable(const std::vector<FuncGraph*>& roots);
  // Graphs reachable from every public graph.
  std::vector<FuncGraph*> ReachableFromPublic();
  // Forgets every cached analysis (after nodes or graphs were deleted).
  void Reset();
  // Index of `node` in Info(g).fvs, or -1.
  int FvIndex(FuncGraph* g, AnfNode* node);
  // A fresh value for AnfNode::mark_epoch: a traversal marks the nodes it visits
  // with it (the manager's own traversals draw from the same counter).
  uint64_t NewEpoch() { return ++epoch_; }

 private:
  // What a graph reads directly, cached per graph version.
  struct Scan {
    uint64_t version = ~uint64_t{0};
    std::vector<AnfNode*> direct_fvs;
    std::vector<FuncGraph*> used_graphs;
    // The applications the output needs, inputs first: the graph's order when it
    // names no other graph (then no closure needs anything placed early).
    std::vector<CNode*> order;
  };
  // One iterative post-order walk of a graph's own applications, recording what
  // it reads from elsewhere into `sc` (ScanGraph's worker).
  void ScanFrom(FuncGraph* g, AnfNode* root, uint64_t epoch, Scan* sc, std::vector<CNode*>* order,
                absl::flat_hash_set<AnfNode*>* fv_set, absl::flat_hash_set<FuncGraph*>* used_set);
  struct Entry {
    GraphInfo info;
    Scan scan;
    uint64_t verified = ~uint64_t{0};  // module version the info is current for
    uint64_t fvs_stamp = 0;            // stamp_ when `info.fvs` last changed
    uint64_t order_stamp = 0;          // stamp_ when `info.order` was computed
    bool has_order = false;
    absl::flat_hash_map<AnfNode*, int> fv_index;  // built on demand
    uint64_t fv_index_version = ~uint64_t{0};
  };
  void Verify(FuncGraph* root);
  std::vector<FuncGraph*> StaleClosure(FuncGraph* root, std::vector<FuncGraph*>* rescanned);
  void ScanGraph(FuncGraph* g, Scan* sc);
  void ComputeTotalFvs(const std::vector<FuncGraph*>& graphs);
  void ComputeOrder(FuncGraph* g);
  // The free variables (known so far) of the graph a constant input names, or
  // nullptr; `scratch` holds graphs found in a tuple.
  const std::vector<AnfNode*>* GraphInputFvs(const AnfNode* in, std::vector<FuncGraph*>* scratch);
  std::vector<FuncGraph*> CalleesFirst(const std::vector<FuncGraph*>& graphs);

  Module* module_;
  uint64_t epoch_ = 0;  // node marks of the current traversal
  uint64_t stamp_ = 0;  // orders free-variable changes against order computations
  // Node-based: a GraphInfo reference stays valid while other graphs are added.
  absl::node_hash_map<FuncGraph*, Entry> entries_;
};

// Batched edits. Nothing changes until Commit; then edges are rewired in order.
class Transaction {
 public:
  explicit Transaction(Module* module) : module_(module) {}
  // Input `index` of `user` becomes `node`.
  void SetEdge(CNode* user, int index, AnfNode* node);
  // Every use of `old_node` (inputs and graph outputs) becomes a use of `new_node`.
  void Replace(AnfNode* old_node, AnfNode* new_node);
  void SetOutput(FuncGraph* g, AnfNode* node);
  bool empty() const { return edits_.empty(); }
  // Applies the edits; returns whether anything changed.
  bool Commit();

 private:
  struct Edit {
    enum class Kind { kSetEdge, kReplace, kSetOutput } kind;
    CNode* user;
    int index;
    AnfNode* old_node;
    AnfNode* node;
    FuncGraph* graph;
  };
  Module* module_;
  std::vector<Edit> edits_;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_MANAGER_H_
