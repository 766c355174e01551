// The state of one ONNX import, shared by the importer (onnx_import.cc), the op
// table (onnx_op_table.cc), the op-by-op mappings of each family and control flow
// (onnx_control_flow.cc).
//
// Every ONNX value becomes an ImportedValue: a kgrad node (created lazily for
// constants), its static type from kgrad's per-primitive inference, and its value
// when known at import time. Applications whose inputs are all known are
// evaluated on the spot (ConstantEvaluator), which folds the Shape / Gather /
// Unsqueeze / Concat chains exporters emit into constants that attributes need.
#ifndef KGRAD_PROTO_ONNX_ONNX_CONTEXT_H_
#define KGRAD_PROTO_ONNX_ONNX_CONTEXT_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/builder.h"
#include "core/module.h"
#include "onnx_proto/onnx.pb.h"
#include "proto/onnx/onnx_import.h"

namespace kgrad {
namespace onnx_import {

struct ImportedValue {
  AnfNode* node = nullptr;        // null for a constant not yet placed in a graph
  AbstractPtr type;               // never null
  std::optional<Tensor> constant;  // the value, when known at import time
  // A QuantizeLinear's output only: a float value of the same numbers whose
  // derivative is the straight-through estimator's (onnx_quantize_ops.cc), which
  // a DequantizeLinear of it reads instead.
  AnfNode* straight_through = nullptr;
  AbstractPtr straight_through_type;
  // An ONNX optional (a list of at most one element: onnx_sequence_ops.cc), as
  // opposed to a sequence, which is a list too.
  bool optional = false;
};

// The values visible in one (sub)graph; lookups fall back to enclosing scopes
// (ONNX subgraphs read outer values, kgrad nested graphs use free variables).
class Scope {
 public:
  Scope(GraphBuilder* builder, const Scope* parent) : builder_(builder), parent_(parent) {}
  GraphBuilder& builder() const { return *builder_; }
  const ImportedValue* Find(const std::string& name) const;
  // Error when the name is defined already in this scope (ONNX is SSA).
  absl::Status Define(const std::string& name, ImportedValue v);

 private:
  GraphBuilder* builder_;
  const Scope* parent_;
  absl::flat_hash_map<std::string, ImportedValue> values_;
};

class Importer;

// What an op mapping sees of one NodeProto.
class NodeContext {
 public:
  NodeContext(Importer& importer, Scope& scope, const onnx::NodeProto& node)
      : importer_(importer), scope_(scope), node_(node) {}

  const onnx::NodeProto& node() const { return node_; }
  Importer& importer() const { return importer_; }
  Scope& scope() const { return scope_; }
  GraphBuilder& b() const { return scope_.builder(); }
  int64_t opset() const;

  // "node 'name' (OpType)" for messages.
  std::string Where() const;
  absl::Status Error(absl::string_view message) const;

  // Inputs; an empty name is an omitted optional input.
  int num_inputs() const { return node_.input_size(); }
  bool HasInput(int i) const { return i < node_.input_size() && !node_.input(i).empty(); }
  absl::StatusOr<ImportedValue> Input(int i) const;
  absl::StatusOr<Tensor> ConstInput(int i) const;  // must be known at import time
  absl::StatusOr<std::vector<int64_t>> ConstInts(int i) const;
  // A 1-D integer input as far as import knows it: a constant's entries, or the
  // shape value of one computed at run time (entries that are numbers, dim
  // symbols or kUnknownValue; [batch, 4, 16, 16] for Concat(Shape(x)[:2], [16, 16])).
  absl::StatusOr<std::vector<int64_t>> KnownInts(int i) const;
  // The input's static tensor type (error for tuples and scalars).
  absl::StatusOr<const AbstractTensor*> TensorType(const ImportedValue& v) const;
  absl::Status ExpectInputs(int min, int max) const;
  absl::Status ExpectOutputs(int max) const;

  // Attributes, with their ONNX types checked.
  const onnx::AttributeProto* Attr(const std::string& name) const;
  absl::StatusOr<int64_t> Int(const std::string& name, int64_t dflt) const;
  absl::StatusOr<double> Float(const std::string& name, double dflt) const;
  absl::StatusOr<std::string> String(const std::string& name, const std::string& dflt) const;
  absl::StatusOr<std::vector<int64_t>> Ints(const std::string& name,
                                            std::vector<int64_t> dflt) const;
  absl::StatusOr<const onnx::GraphProto*> Graph(const std::string& name) const;
  bool HasAttr(const std::string& name) const { return Attr(name) != nullptr; }

  // An application of a primitive: inferred, and evaluated when every input is known.
  absl::StatusOr<ImportedValue> Emit(PrimId id, const std::vector<ImportedValue>& args,
                                     AttrMap attrs = {}) const;
  // Element `i` of a tuple value.
  absl::StatusOr<ImportedValue> Item(const ImportedValue& tuple, int64_t i) const;
  ImportedValue Const(Tensor t) const;
  // A rank-0 constant of dtype `t` (of `like`'s dtype) holding `v`.
  absl::StatusOr<ImportedValue> Scalar(DType t, double v) const;
  absl::StatusOr<ImportedValue> ScalarLike(const ImportedValue& like, double v) const;
  // The static length of dim `axis` (negative counts from the end) of `v`, or an
  // error naming `what` when the rank or that dim is unknown.
  absl::StatusOr<int64_t> StaticDim(const ImportedValue& v, int64_t axis, const char* what) const;
  // The node of `v` in the current graph (places constants).
  AnfNode* NodeOf(const ImportedValue& v) const;

 private:
  Importer& importer_;
  Scope& scope_;
  const onnx::NodeProto& node_;
};

// One mapping per ONNX op type: the node's outputs, in order.
using Outputs = absl::StatusOr<std::vector<ImportedValue>>;
using OpMapping = Outputs (*)(NodeContext& c);
using OpTable = absl::flat_hash_map<std::string, OpMapping>;
// The node's form is one the importer reads at its opset (before opset 7, only
// ops whose meaning did not change since).
absl::Status CheckLegacyForm(const NodeContext& c);
// Gives a constant operand the other operand's dtype (exporters write Pow(x, 2.0)
// with a double exponent next to a float x, or integer constants next to floats):
// b when both are constants; nothing when neither is (inference reports the
// mismatch).
absl::Status AlignConstantDType(NodeContext& c, ImportedValue& a, ImportedValue& b);
// Activations shared by the activation ops and the recurrent cells
// (onnx_activation_ops.cc), each an exact composition of primitives (or the one
// primitive, for ThresholdedRelu).
absl::StatusOr<ImportedValue> HardSigmoidOf(NodeContext& c, const ImportedValue& x, double alpha,
                                            double beta);  // max(0, min(1, alpha x + beta))
absl::StatusOr<ImportedValue> LeakyReluOf(NodeContext& c, const ImportedValue& x,
                                          double alpha);  // x >= 0 ? x : alpha x
absl::StatusOr<ImportedValue> ThresholdedReluOf(NodeContext& c, const ImportedValue& x,
                                                double alpha);  // thresholded_relu{alpha}
absl::StatusOr<ImportedValue> SoftsignOf(NodeContext& c, const ImportedValue& x);  // x / (1 + |x|)
// The outputs of a mapping with one output.
Outputs OneOutput(absl::StatusOr<ImportedValue> v);
// The mapping for `op_type` (default domain), or null when unsupported.
OpMapping FindOpMapping(const std::string& op_type);
// Every mapping, by op type (onnx_op_table.cc).
const OpTable& AllOpMappings();

// The one-to-one mappings generated from ops/elementwise_table.inc: each row with
// an ONNX name, its wire name and its mapping (a family may replace it in
// AllOpMappings).
struct TableOp {
  const char* onnx;
  const char* wire;
  OpMapping mapping;
};
std::vector<TableOp> TableOps();

// README's line for one mapped op (onnx_op_notes.cc).
struct OnnxOpNote {
  const char* op;
  const char* form;     // the kgrad primitives it becomes
  const char* refused;  // what it does not accept, beyond the opset range
};
// The hand notes and those generated for the table's mappings, sorted by op.
absl::Span<const OnnxOpNote> OpNotes();
// One entry of a family's list: an ONNX op type and its mapping.
struct NamedMapping {
  const char* op;
  OpMapping mapping;
};
// Sets t[op] = mapping for every entry (replacing a generated mapping of that name).
void AddMappings(OpTable* t, std::initializer_list<NamedMapping> mappings);
// The families, one per file: the mappings that need more than the one-to-one
// form of the table.
void AddElementwiseOps(OpTable* t);  // onnx_elementwise_ops.cc
void AddReduceOps(OpTable* t);       // onnx_reduce_ops.cc
void AddShapeOps(OpTable* t);        // onnx_shape_ops.cc
void AddNnOps(OpTable* t);           // onnx_nn_ops.cc
void AddWindowOps(OpTable* t);       // onnx_window_ops.cc
void AddResizeOps(OpTable* t);       // onnx_resize_ops.cc
void AddControlFlowOps(OpTable* t);  // onnx_control_flow.cc
void AddActivationOps(OpTable* t);   // onnx_activation_ops.cc
void AddLossOps(OpTable* t);         // onnx_loss_ops.cc
void AddNormOps(OpTable* t);         // onnx_norm_ops.cc
void AddRnnOps(OpTable* t);          // onnx_rnn_ops.cc
void AddGridSampleOps(OpTable* t);  // onnx_grid_sample.cc
void AddQuantizeOps(OpTable* t);     // onnx_quantize_ops.cc
void AddRandomOps(OpTable* t);       // onnx_random_ops.cc
void AddIndexOps(OpTable* t);        // onnx_index_ops.cc
void AddSequenceOps(OpTable* t);     // onnx_sequence_ops.cc

class Importer {
 public:
  Importer(Module& module, const OnnxImportOptions& options, int64_t opset)
      : module_(module), options_(options), opset_(opset) {}
  Module& module() const { return module_; }
  const OnnxImportOptions& options() const { return options_; }
  int64_t opset() const { return opset_; }

  // Imports the nodes of `graph` into `scope` (inputs and initializers defined
  // already) and returns the values of its outputs.
  absl::StatusOr<std::vector<ImportedValue>> ImportNodes(const onnx::GraphProto& graph,
                                                         Scope& scope, int depth);
  int depth() const { return depth_; }

 private:
  Module& module_;
  const OnnxImportOptions& options_;
  int64_t opset_;
  int depth_ = 0;
};

}  // namespace onnx_import
}  // namespace kgrad

#endif  // KGRAD_PROTO_ONNX_ONNX_CONTEXT_H_
