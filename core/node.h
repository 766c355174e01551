// The IR's nodes. Grammar (after MindSpore's anf.h):
//
//   module    ::= weight* graph*
//   graph     ::= @name(parameter*) -> node   [nested in an enclosing graph]
//   node      ::= parameter | value | cnode
//   parameter ::= %name                       an input of one graph (or, owned by
//                                             the module, a weight with a value)
//   value     ::= constant                    tensor | scalar | string | none |
//                                             tuple | primitive | @graph | newenv
//   cnode     ::= %name = node(node*)         input 0 is the callee: a primitive,
//                                             a graph, or any node yielding a closure
//
// A graph may use nodes owned by an enclosing graph: those are its free variables.
// Ownership: a FuncGraph owns its nodes, the Module owns graphs and weights. Edges
// are plain pointers. Each node keeps its list of uses (user, input index), updated
// by every edge change, so "who uses x" is always current.
#ifndef KGRAD_CORE_NODE_H_
#define KGRAD_CORE_NODE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"

#include "core/abstract.h"
#include "core/value.h"

namespace kgrad {

class FuncGraph;
class Module;
class AnfNode;
class CNode;
class Parameter;
class ValueNode;

enum class NodeKind : uint8_t { kParameter, kValueNode, kCNode };

// One use of a node: input `index` of `user`, or (user == nullptr) the output of
// `graph`.
struct Use {
  CNode* user;
  int index;
  FuncGraph* graph;
  bool operator==(const Use& o) const {
    return user == o.user && index == o.index && graph == o.graph;
  }
};

// A node's inputs and uses are stored in the node while they are few (most nodes
// read up to three inputs and are read once or twice): a graph of hundreds of
// thousands of nodes is then one allocation per node, and a walk over it touches
// one block per node instead of three.
using NodeInputs = absl::InlinedVector<AnfNode*, 3>;
using NodeUses = absl::InlinedVector<Use, 2>;

class AnfNode {
  // The kind and the scratch marks come first, packed into one word beside the
  // vtable pointer: graphs hold hundreds of thousands of nodes, and every
  // traversal reads these fields.
 private:
  NodeKind kind_;

 public:
  // Scratch marks for graph traversals (Manager, garbage collection, inference):
  // valid while `mark_epoch` equals the traversal's epoch (Manager::NewEpoch).
  // Traversals run on the thread that owns the module.
  uint8_t mark_state = 0;
  uint64_t mark_epoch = 0;

  virtual ~AnfNode() = default;
  AnfNode(const AnfNode&) = delete;
  AnfNode& operator=(const AnfNode&) = delete;

  NodeKind kind() const { return kind_; }
  bool is_parameter() const { return kind_ == NodeKind::kParameter; }
  bool is_value() const { return kind_ == NodeKind::kValueNode; }
  bool is_cnode() const { return kind_ == NodeKind::kCNode; }
  Parameter* AsParameter();
  ValueNode* AsValue();
  CNode* AsCNode();
  const CNode* AsCNode() const;
  const ValueNode* AsValue() const;
  const Parameter* AsParameter() const;

  // The graph that owns the node; nullptr for module weights.
  FuncGraph* graph() const { return graph_; }
  // Module-unique, increasing in creation order.
  uint64_t id() const { return id_; }
  const std::string& name() const;
  void set_name(std::string name);
  // The name, or "%<id>" for unnamed nodes.
  std::string DebugName() const;
  // "graph @g, node %x" for error messages.
  std::string Location() const;

  const AbstractPtr& abstract() const { return abstract_; }
  void set_abstract(AbstractPtr a) { abstract_ = std::move(a); }

  const NodeUses& uses() const { return uses_; }

 protected:
  AnfNode(NodeKind kind, FuncGraph* graph, uint64_t id) : kind_(kind), graph_(graph), id_(id) {}

 private:
  friend class CNode;
  friend class FuncGraph;
  friend class Module;
  friend class Transaction;
  void AddUse(const Use& u) { uses_.push_back(u); }
  void RemoveUse(const Use& u);

  FuncGraph* graph_;
  uint64_t id_;
  std::unique_ptr<std::string> name_;  // most nodes have none
  AbstractPtr abstract_;
  NodeUses uses_;
};

class Parameter final : public AnfNode {
 public:
  Parameter(FuncGraph* graph, uint64_t id) : AnfNode(NodeKind::kParameter, graph, id) {}

  // A weight: a module-level parameter with a value, which graphs use as a free
  // variable; `get_by_list` differentiates with respect to these.
  bool is_weight() const { return graph() == nullptr; }
  const std::optional<Tensor>& default_value() const { return default_value_; }
  void set_default_value(Tensor t) { default_value_ = std::move(t); }

  // The type declared for an entry graph's input (graph files carry it); drives
  // inference when no caller provides argument types.
  const AbstractPtr& declared() const { return declared_; }
  void set_declared(AbstractPtr a) { declared_ = std::move(a); }

 private:
  std::optional<Tensor> default_value_;
  AbstractPtr declared_;
};

class ValueNode final : public AnfNode {
 public:
  ValueNode(FuncGraph* graph, uint64_t id, Value value)
      : AnfNode(NodeKind::kValueNode, graph, id), value_(std::move(value)) {}
  const Value& value() const { return value_; }

 private:
  Value value_;
};

class CNode final : public AnfNode {
 public:
  const NodeInputs& inputs() const { return inputs_; }
  AnfNode* input(size_t i) const { return inputs_[i]; }
  size_t size() const { return inputs_.size(); }
  // Arguments only (inputs 1..n).
  size_t num_args() const { return inputs_.size() - 1; }
  AnfNode* arg(size_t i) const { return inputs_[i + 1]; }

  // Rewires input `i`, keeping both nodes' use lists current.
  void set_input(size_t i, AnfNode* node);

  // The primitive called by this node when input 0 is a constant primitive.
  const Primitive* primitive() const;
  bool IsPrim(PrimId id) const;
  // The graph called when input 0 is a constant graph.
  FuncGraph* called_graph() const;

 private:
  friend class FuncGraph;
  friend class Module;
  friend class Transaction;
  // The inputs are `head` then `tail` (the callee first).
  CNode(FuncGraph* graph, uint64_t id, absl::Span<AnfNode* const> head, absl::Span<AnfNode* const> tail);

  NodeInputs inputs_;
};

// The constant value of a ValueNode, else nullptr.
const Value* ConstantOf(const AnfNode* node);
// The FuncGraph held by a ValueNode, else nullptr.
FuncGraph* GraphOf(const AnfNode* node);

}  // namespace kgrad

#endif  // KGRAD_CORE_NODE_H_
