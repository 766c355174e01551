// Module: owns graphs and weights; the unit that is loaded, saved, transformed
// and executed. A Module is mutated by one thread at a time.
#ifndef KGRAD_CORE_MODULE_H_
#define KGRAD_CORE_MODULE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/constant_evaluator.h"
#include "core/func_graph.h"
#include "core/infer_options.h"
#include "core/primitive.h"

namespace kgrad {

class Manager;

class Module {
 public:
  explicit Module(const PrimitiveRegistry& registry);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const PrimitiveRegistry& registry() const { return *registry_; }

  // A new graph; the name is made unique within the module by a numeric suffix.
  FuncGraph* NewGraph(absl::string_view name, FuncGraph* parent = nullptr);
  FuncGraph* FindGraph(absl::string_view name) const;
  // All graphs in creation order.
  const std::vector<std::unique_ptr<FuncGraph>>& graphs() const { return graphs_; }

  // Weights: named module-level parameters with values.
  absl::StatusOr<Parameter*> AddWeight(std::string name, Tensor value);
  Parameter* FindWeight(absl::string_view name) const;
  const std::vector<std::unique_ptr<Parameter>>& weights() const { return weights_; }

  // Shorthand for registry().Make(...) that must succeed (internal use: ids and
  // attributes written in C++ source).
  PrimitivePtr Prim(PrimId id, AttrMap attrs = {}) const;

  // The main graph (what `kgrad run` runs; graph files name it). Public.
  FuncGraph* entry() const { return entry_; }
  void set_entry(FuncGraph* g) {
    entry_ = g;
    if (g != nullptr) g->set_public(true);
  }

  // The options of every inference over this module that is not given its own
  // (AD, the optimiser, the executor's type check).
  const InferOptions& infer_options() const { return infer_options_; }
  void set_infer_options(const InferOptions& o) { infer_options_ = o; }

  // What folds constant tensor applications in this module (optimiser, import);
  // nullptr: only scalars fold. Not owned; it must outlive the module.
  const ConstantEvaluator* constant_evaluator() const { return constant_evaluator_; }
  void set_constant_evaluator(const ConstantEvaluator* e) { constant_evaluator_ = e; }

  // Analyses of the graph structure (free variables, order), recomputed on demand
  // after edits.
  Manager& manager();

  // Bumped on every structural change; analyses compare it to know they are stale.
  uint64_t version() const { return version_; }
  void Touch() { ++version_; }
  uint64_t NewNodeId() { return next_node_id_++; }
  // The id the next node will get: nodes with an id at least this were made later.
  uint64_t next_node_id() const { return next_node_id_; }

  // Deletes graphs that no public graph reaches and, in every remaining graph,
  // nodes that neither its output nor a nested graph needs. Pointers to deleted
  // graphs and nodes dangle afterwards: hold only public graphs across calls.
  // With `may_modify`, only graphs for which it holds lose nodes or are deleted;
  // `roots` live besides the public graphs. Returns how many graphs and nodes went.
  struct Collected {
    size_t graphs = 0;
    size_t nodes = 0;
  };
  Collected CollectGarbage(const std::function<bool(const FuncGraph*)>& may_modify = nullptr,
                           const std::vector<FuncGraph*>& roots = {});

  // Checks that every edge has its use entry and every use entry its edge (tests).
  absl::Status CheckUses() const;

 private:
  std::string UniqueGraphName(absl::string_view base) const;

  // The phases of CollectGarbage (module.cc), over what it found live.
  struct Liveness;
  Liveness MarkLive(const std::function<bool(const FuncGraph*)>& may_modify,
                    const std::vector<FuncGraph*>& roots);
  void KeepGraphsOwningLiveNodes(Liveness& l);
  void AdoptLiveNodesOfDeadGraphs(const Liveness& l);
  void CutEdgesOfDeadNodes(const Liveness& l);
  Collected FreeDeadNodesAndGraphs(const Liveness& l);

  const PrimitiveRegistry* registry_;
  std::vector<std::unique_ptr<FuncGraph>> graphs_;
  absl::flat_hash_map<std::string, FuncGraph*> graphs_by_name_;
  std::vector<std::unique_ptr<Parameter>> weights_;
  absl::flat_hash_map<std::string, Parameter*> weights_by_name_;
  FuncGraph* entry_ = nullptr;
  InferOptions infer_options_;
  const ConstantEvaluator* constant_evaluator_ = nullptr;
  std::unique_ptr<Manager> manager_;
  uint64_t version_ = 0;
  uint64_t next_node_id_ = 1;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_MODULE_H_
