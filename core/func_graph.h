// FuncGraph: parameters, an output, the nodes it owns, and an optional enclosing
// (lexical parent) graph whose nodes it may use as free variables.
#ifndef KGRAD_CORE_FUNC_GRAPH_H_
#define KGRAD_CORE_FUNC_GRAPH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/node.h"

namespace kgrad {

class Module;

// Rematerialisation (gradient checkpointing) of a graph's forward values in its
// bprop, after JAX's checkpoint policies. Which values computed inside the graph
// the bprop may read as saved residuals; the rest it recomputes from the graph's
// inputs (ad/remat.h).
enum class RematPolicy {
  kEverythingSaveable,  // the default: save every residual (no recomputation)
  kNothingSaveable,     // save only the graph's inputs and outer values
  kDotsSaveable,        // save also matmul, einsum and conv outputs
};
// "everything_saveable", "nothing_saveable", "dots_saveable" (file and CLI spelling).
absl::string_view RematPolicyName(RematPolicy p);
// The policy of that name; InvalidArgument naming the accepted spellings otherwise.
absl::StatusOr<RematPolicy> ParseRematPolicy(absl::string_view name);

class FuncGraph {
 public:
  FuncGraph(const FuncGraph&) = delete;
  FuncGraph& operator=(const FuncGraph&) = delete;

  Module* module() const { return module_; }
  const std::string& name() const { return name_; }

  // The enclosing graph (lexical scope); nullptr for a top-level graph. Free
  // variables must be owned by an ancestor; the verifier checks it.
  FuncGraph* parent() const { return parent_; }
  void set_parent(FuncGraph* parent);
  // True when `g` is this graph or one of its ancestors.
  bool IsSelfOrAncestor(const FuncGraph* g) const;
  int depth() const;

  const std::vector<Parameter*>& parameters() const { return parameters_; }
  Parameter* AddParameter(std::string name = "", AbstractPtr declared = nullptr);

  AnfNode* output() const { return output_; }
  void set_output(AnfNode* node);

  CNode* NewCNode(absl::Span<AnfNode* const> inputs);
  // An application of `callee` to `args` (no vector to build for the inputs).
  CNode* NewCNode(AnfNode* callee, absl::Span<AnfNode* const> args);
  ValueNode* NewValueNode(Value v);
  // The graph's one constant node for primitive `p` (equal primitives share it), so
  // that a graph of n applications does not carry n primitive constants.
  ValueNode* PrimitiveNode(const PrimitivePtr& p);

  // A user-attached bprop: a graph taking (params..., out, dout) and returning the
  // tuple of parameter sensitivities. The K-transform uses it instead of
  // differentiating the body.
  FuncGraph* custom_bprop() const { return custom_bprop_; }
  void set_custom_bprop(FuncGraph* g);

  // How the K-transform treats this graph's residuals (default: saves them all).
  RematPolicy remat() const { return remat_; }
  void set_remat(RematPolicy p) { remat_ = p; }

  // Graphs the user holds (entry points, GradOperation results). Garbage
  // collection keeps public graphs and whatever they reach.
  bool is_public() const { return public_; }
  void set_public(bool p) { public_ = p; }

  // Every node this graph owns, reachable or not, in creation order.
  const std::vector<std::unique_ptr<AnfNode>>& owned_nodes() const { return nodes_; }

  // The constants that hold this graph (as themselves, not inside a tuple), live
  // or not, until garbage collection frees them; and how many constant tuples hold
  // it (a graph in a tuple constant can be reached in ways nothing tracks).
  const std::vector<ValueNode*>& referrers() const { return referrers_; }
  int tuple_referrers() const { return tuple_referrers_; }

  // Inlining at the only call site: every node but the parameters moves into
  // `target`, the graphs nested here (`children`) move under it, and the former
  // output is returned; this graph is left with its parameters and no output.
  AnfNode* MoveBodyTo(FuncGraph* target, const std::vector<FuncGraph*>& children);

  // Whether the types on the nodes this graph reaches are what InferGraph records
  // for its declared parameter types, with nothing changed in the module since
  // (set after such an inference, or by whoever typed the nodes as it would): a
  // pass that needs types may then skip inferring them again.
  bool types_current() const;
  void set_types_current();

  // Bumped whenever the graph's structure may have changed: its edges, output,
  // parameters, or the uses of its nodes by other graphs. The manager recomputes
  // only graphs whose version moved.
  uint64_t version() const { return version_; }
  void Touch();
  // Touches the graph owning `n` when `n` is an application (whose uses from
  // other graphs the graph's analyses depend on).
  static void TouchOwner(const AnfNode* n);

 private:
  friend class Module;
  friend class Transaction;
  // Garbage collection frees `v`: it no longer refers to its graph(s).
  static void ForgetReferrer(const ValueNode* v);
  CNode* NewCNode(absl::Span<AnfNode* const> head, absl::Span<AnfNode* const> tail);
  FuncGraph(Module* module, std::string name, FuncGraph* parent)
      : module_(module), name_(std::move(name)), parent_(parent) {}
  Module* module_;
  std::string name_;
  FuncGraph* parent_;
  std::vector<Parameter*> parameters_;
  AnfNode* output_ = nullptr;
  FuncGraph* custom_bprop_ = nullptr;
  bool public_ = false;
  RematPolicy remat_ = RematPolicy::kEverythingSaveable;
  uint64_t version_ = 0;
  uint64_t types_version_ = ~uint64_t{0};  // module version when types were current
  std::vector<std::unique_ptr<AnfNode>> nodes_;
  std::vector<ValueNode*> referrers_;
  int tuple_referrers_ = 0;
  // PrimitiveNode's cache, by definition and attribute hash (equality checked).
  absl::flat_hash_map<std::pair<const PrimitiveDef*, size_t>, std::vector<ValueNode*>> prim_nodes_;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_FUNC_GRAPH_H_
