// The exporter's internals, shared by onnx_export.cc (the walk, elementwise and
// shape primitives) and onnx_export_nn.cc (the neural-network primitives).
#ifndef KGRAD_PROTO_ONNX_ONNX_EXPORTER_H_
#define KGRAD_PROTO_ONNX_ONNX_EXPORTER_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/func_graph.h"
#include "core/infer.h"
#include "ops/conv_window.h"
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

class Exporter {
 public:
  Exporter(FuncGraph* g, onnx::GraphProto* out) : g_(g), out_(out) {}
  absl::Status Run();

 private:
  std::string Fresh(const std::string& base) { return absl::StrCat(base, "_", next_++); }
  NodeProto* Add(const std::string& op, std::vector<std::string> inputs, int outputs = 1) {
    NodeProto* n = out_->add_node();
    n->set_op_type(op);
    n->set_name(Fresh(op));
    for (std::string& s : inputs) n->add_input(std::move(s));
    for (int i = 0; i < outputs; ++i) n->add_output(Fresh("v"));
    return n;
  }
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
  absl::StatusOr<Val> ValueOf(AnfNode* n, const CNode* user);
  absl::StatusOr<std::string> TensorArg(const CNode* c, int i);
  absl::Status Emit(CNode* c);
  absl::StatusOr<std::string> EmitPrim(CNode* c, const Primitive& p, const std::vector<std::string>& a);
  absl::StatusOr<std::string> EmitConvFilterGrad(CNode* c, const Primitive& p, const std::vector<std::string>& a);
  absl::StatusOr<std::string> EmitPoolGrad(CNode* c, const Primitive& p, const std::vector<std::string>& a);
  absl::StatusOr<std::string> EmitBatchNorm(CNode* c, const Primitive& p, const std::vector<std::string>& a);
  // The neural-network primitives (onnx_export_nn.cc): softmax, norms, one_hot,
  // scatter_add, convolution and pooling with their gradients.
  absl::StatusOr<std::string> EmitNnPrim(CNode* c, const Primitive& p, const std::vector<std::string>& a);
  absl::StatusOr<std::string> EmitScatterAdd(CNode* c, const Primitive& p, const std::vector<std::string>& a);
  absl::StatusOr<std::string> EmitMaxPoolGrad(const std::vector<std::string>& a,
                                              const AbstractTensor& tx, const AbstractTensor& tdy,
                                              const ops::Window& w);
  absl::StatusOr<std::string> EmitSumTo(CNode* c, const std::vector<std::string>& a, const Shape& target);
  // Run-time shapes (onnx_export_dynamic.cc): the dynamic_* primitives, and the
  // *_like ones whose reference is not static, through Shape.
  absl::StatusOr<std::string> EmitDynamicPrim(CNode* c, const Primitive& p, const std::vector<std::string>& a);
  absl::StatusOr<std::string> EmitSumToLikeAtRunTime(CNode* c, const std::vector<std::string>& a);
  absl::StatusOr<std::string> EmitSliceGradAtRunTime(CNode* c, const Primitive& p,
                                                     const std::vector<std::string>& a);
  // A tensor-valued attribute of n.
  onnx::TensorProto* AddAttr(NodeProto* n, const std::string& name) {
    onnx::AttributeProto* at = n->add_attribute();
    at->set_name(name);
    at->set_type(onnx::AttributeProto::TENSOR);
    return at->mutable_t();
  }
  std::string EmitMod(const Primitive& p, const std::vector<std::string>& a, DType dt);
  absl::StatusOr<std::string> EmitScatterElements(CNode* c, const Primitive& p,
                                                  const std::vector<std::string>& a);
  // topk: ONNX TopK's two outputs as a tuple.
  absl::StatusOr<Val> EmitTopK(CNode* c, const Primitive& p);
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

// The output types of the exported graph's outputs.
void SetOutputTypes(const AbstractPtr& a, onnx::GraphProto* g, int* next);

}  // namespace onnx_export_internal
}  // namespace kgrad

#endif  // KGRAD_PROTO_ONNX_ONNX_EXPORTER_H_
