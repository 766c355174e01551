// The exporter's internals: the walk over one graph (onnx_export.cc) and the
// emitters, one table per op family, each in its own file as the importer's
// mappings are:
//
//   onnx_export_elementwise.cc  every row of ops/elementwise_table.inc: its ONNX op,
//                               or its functor's formula (onnx_formula.h)
//   onnx_export_reduce.cc       reductions, argmax / argmin
//   onnx_export_shape.cc        shape, data movement, indexing, selection by value
//   onnx_export_nn.cc           softmax, norms, matmul / einsum, convolution and
//                               pooling with their gradients
//   onnx_export_dynamic.cc      run-time shapes (dynamic_*, shape_of, *_like at run
//                               time)
//   onnx_export_structural.cc   tuples and the identities (depend, stop_gradient)
//   onnx_not_exportable.cc      the primitives no emitter writes, and why
//
// Every PrimId has an emitter or a reason (tests/onnx/onnx_export_coverage_test.cc).
#ifndef KGRAD_PROTO_ONNX_ONNX_EXPORTER_H_
#define KGRAD_PROTO_ONNX_ONNX_EXPORTER_H_

#include <array>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/func_graph.h"
#include "core/infer.h"
#include "onnx_proto/onnx.pb.h"
#include "proto/onnx/onnx_tensor.h"

namespace kgrad {
namespace onnx_export_internal {

using onnx::AttributeProto;
using onnx::NodeProto;

// A node's value in ONNX: one named tensor, or a (nested) tuple of them.
struct Val {
  std::string name;
  std::vector<Val> elems;
  bool is_tuple = false;
};

inline void SetInt(NodeProto* n, const std::string& k, int64_t v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(AttributeProto::INT);
  a->set_i(v);
}
inline void SetFloat(NodeProto* n, const std::string& k, double v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(AttributeProto::FLOAT);
  a->set_f(static_cast<float>(v));
}
inline void SetString(NodeProto* n, const std::string& k, const std::string& v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(AttributeProto::STRING);
  a->set_s(v);
}
inline void SetInts(NodeProto* n, const std::string& k, const std::vector<int64_t>& v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
// A tensor-valued attribute of n.
inline onnx::TensorProto* AddTensorAttr(NodeProto* n, const std::string& name) {
  AttributeProto* at = n->add_attribute();
  at->set_name(name);
  at->set_type(AttributeProto::TENSOR);
  return at->mutable_t();
}

// Writes one first-order graph as ONNX nodes. The emitters build with the public
// part: nodes and initializers with fresh names, and the graph's types.
class Exporter {
 public:
  Exporter(FuncGraph* g, onnx::GraphProto* out) : g_(g), out_(out) {}
  absl::Status Run();

  // A node `op`(inputs) with `outputs` fresh output names.
  NodeProto* Add(const std::string& op, std::vector<std::string> inputs, int outputs = 1) {
    NodeProto* n = out_->add_node();
    n->set_op_type(op);
    n->set_name(Fresh(op));
    for (std::string& s : inputs) n->add_input(std::move(s));
    for (int i = 0; i < outputs; ++i) n->add_output(Fresh("v"));
    return n;
  }
  // The output of a node without attributes.
  std::string Op(const std::string& op, std::vector<std::string> inputs) {
    return Add(op, std::move(inputs))->output(0);
  }
  std::string Const(const Tensor& t) {
    std::string name = Fresh("const");
    TensorToOnnx(t, name, out_->add_initializer());
    return name;
  }
  std::string Ints(const std::vector<int64_t>& v) {
    return Const(Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v));
  }
  std::string Scalar(DType t, double v) { return Const(Tensor::Full(t, {}, v).value()); }

  absl::Status Error(const CNode* c, absl::string_view why) const {
    return absl::InvalidArgumentError(absl::StrCat(c->Location(), " (", c->primitive() ? c->primitive()->ToString() : "call",
                                                   "): cannot export to ONNX: ", why));
  }
  absl::StatusOr<const AbstractTensor*> StaticType(const CNode* c, const AnfNode* n) const {
    const AbstractTensor* t = AsTensor(n->abstract());
    if (t == nullptr || !t->shape_known()) {
      return Error(c, absl::StrCat("needs a static tensor type for ", n->DebugName(), ", got ",
                                   n->abstract() ? n->abstract()->ToString() : "nothing"));
    }
    return t;
  }
  // The value of operand `n` of `user` (null: the graph's output).
  absl::StatusOr<Val> ValueOf(AnfNode* n, const CNode* user);
  // Operand i of c, which must be one tensor.
  absl::StatusOr<std::string> TensorArg(const CNode* c, int i);

 private:
  std::string Fresh(const std::string& base) { return absl::StrCat(base, "_", next_++); }
  absl::Status Emit(CNode* c);
  // Why c cannot be exported at all (a call, or a primitive without an emitter).
  absl::Status Refuse(const CNode* c) const;
  void Flatten(const Val& v, std::vector<std::string>* leaves) const {
    if (!v.is_tuple) {
      leaves->push_back(v.name);
      return;
    }
    for (const Val& e : v.elems) Flatten(e, leaves);
  }

  FuncGraph* g_;
  onnx::GraphProto* out_;
  int next_ = 0;
  absl::flat_hash_map<const AnfNode*, Val> values_;
};

// ----- Emitters -----------------------------------------------------------------------
// One application for a tensor emitter: its operands as tensors, in order, and its
// output dtype (float32 when the output is not a tensor).
struct ExportCall {
  CNode* node;
  const Primitive& prim;
  const std::vector<std::string>& in;
  DType dtype;
};
// Writes one application whose operands and result are tensors.
using TensorEmitter = absl::StatusOr<std::string> (*)(Exporter& e, const ExportCall& call);
// Writes one application from its operands' values (tuples allowed).
using ValueEmitter = absl::StatusOr<Val> (*)(Exporter& e, CNode* c, const Primitive& p);

struct Emitter {
  TensorEmitter tensor = nullptr;
  ValueEmitter value = nullptr;
  int registered = 0;  // how many times a family registered one (1 when it exports)
};

// PrimId -> emitter, filled once by the families and immutable after.
class EmitterTable {
 public:
  void Emit(PrimId id, TensorEmitter f) {
    Emitter& e = by_id_[static_cast<int>(id)];
    e.tensor = f;
    ++e.registered;
  }
  void EmitValue(PrimId id, ValueEmitter f) {
    Emitter& e = by_id_[static_cast<int>(id)];
    e.value = f;
    ++e.registered;
  }
  const Emitter& Find(PrimId id) const { return by_id_[static_cast<int>(id)]; }

 private:
  std::array<Emitter, kNumPrimIds> by_id_{};
};

void AddElementwiseEmitters(EmitterTable* t);  // onnx_export_elementwise.cc
void AddReduceEmitters(EmitterTable* t);       // onnx_export_reduce.cc
void AddShapeEmitters(EmitterTable* t);        // onnx_export_shape.cc
void AddNnEmitters(EmitterTable* t);           // onnx_export_nn.cc
void AddDynamicEmitters(EmitterTable* t);      // onnx_export_dynamic.cc
void AddStructuralEmitters(EmitterTable* t);   // onnx_export_structural.cc
// Every family's (onnx_export.cc).
const EmitterTable& AllEmitters();

// The primitives without an emitter, each with the reason (onnx_not_exportable.cc).
struct NotExportable {
  PrimId id;
  const char* reason;
};
absl::Span<const NotExportable> NotExportablePrims();

// The *_like primitives and slice_grad whose shapes are not static, through Shape
// of the reference at run time (onnx_export_dynamic.cc); the shape family's
// emitters fall back on them.
absl::StatusOr<std::string> ReshapeLikeAtRunTime(Exporter& e, const ExportCall& call);
absl::StatusOr<std::string> BroadcastToLikeAtRunTime(Exporter& e, const ExportCall& call);
absl::StatusOr<std::string> SumToLikeAtRunTime(Exporter& e, const ExportCall& call);
absl::StatusOr<std::string> SliceGradAtRunTime(Exporter& e, const ExportCall& call);
absl::StatusOr<std::string> FillLikeAtRunTime(Exporter& e, const ExportCall& call);

// The output types of the exported graph's outputs.
void SetOutputTypes(const AbstractPtr& a, onnx::GraphProto* g, int* next);

}  // namespace onnx_export_internal
}  // namespace kgrad

#endif  // KGRAD_PROTO_ONNX_ONNX_EXPORTER_H_
