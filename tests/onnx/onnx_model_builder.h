// Builds small ONNX models in tests: graph inputs, Constant nodes, one or more
// nodes with attributes, outputs; then imports or runs them with kgrad.
#ifndef KGRAD_TESTS_ONNX_ONNX_MODEL_BUILDER_H_
#define KGRAD_TESTS_ONNX_ONNX_MODEL_BUILDER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/executor.h"
#include "core/module.h"
#include "onnx_proto/onnx.pb.h"
#include "ops/registry.h"
#include "proto/onnx/onnx_import.h"
#include "proto/onnx/onnx_tensor.h"

namespace kgrad {
namespace onnx_test {

class OnnxModelBuilder {
 public:
  explicit OnnxModelBuilder(int64_t opset = 14) {
    model_.set_ir_version(8);
    onnx::OperatorSetIdProto* o = model_.add_opset_import();
    o->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  // A graph input of `t`'s dtype and shape (dims < 0 unknown when given).
  OnnxModelBuilder& Input(const std::string& name, DType dtype, const Shape& shape) {
    onnx::ValueInfoProto* v = model_.mutable_graph()->add_input();
    v->set_name(name);
    onnx::TypeProto::Tensor* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(DTypeToOnnx(dtype));
    tt->mutable_shape();  // rank 0 has a shape with no dims
    for (int64_t d : shape) {
      if (d < 0) {
        tt->mutable_shape()->add_dim()->set_dim_param("n");
      } else {
        tt->mutable_shape()->add_dim()->set_dim_value(d);
      }
    }
    return *this;
  }
  // A Constant node producing `t`.
  OnnxModelBuilder& Constant(const std::string& name, const Tensor& t) {
    onnx::NodeProto& n = Node("Constant", {}, {name});
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    TensorToOnnx(t, name, a->mutable_t());
    return *this;
  }
  // A weight (a float initializer).
  OnnxModelBuilder& Initializer(const std::string& name, const Tensor& t) {
    TensorToOnnx(t, name, model_.mutable_graph()->add_initializer());
    return *this;
  }
  onnx::NodeProto& Node(const std::string& op, const std::vector<std::string>& in,
                        const std::vector<std::string>& out) {
    onnx::NodeProto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(absl::StrCat(op, "_", model_.graph().node_size()));
    for (const std::string& s : in) n->add_input(s);
    for (const std::string& s : out) n->add_output(s);
    return *n;
  }
  OnnxModelBuilder& Output(const std::string& name) {
    model_.mutable_graph()->add_output()->set_name(name);
    return *this;
  }

  const onnx::ModelProto& model() const { return model_; }
  onnx::ModelProto* mutable_model() { return &model_; }
  absl::StatusOr<std::unique_ptr<Module>> Import() const {
    OnnxImportOptions o;
    return ImportOnnx(model_, DefaultRegistry(), o, "<test>");
  }
  // Imports and runs the model on `inputs`: the outputs, in order.
  absl::StatusOr<std::vector<Tensor>> Run(std::vector<Value> inputs) const {
    absl::StatusOr<std::unique_ptr<Module>> m = Import();
    if (!m.ok()) return m.status();
    absl::StatusOr<Value> v = RunGraph((*m)->entry(), std::move(inputs));
    if (!v.ok()) return v.status();
    std::vector<Tensor> out;
    if (v->is_tensor()) {
      out.push_back(v->tensor());
    } else {
      for (const Value& e : v->tuple()) out.push_back(e.tensor());
    }
    return out;
  }

 private:
  onnx::ModelProto model_;
};

inline void SetAttr(onnx::NodeProto& n, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void SetAttr(onnx::NodeProto& n, const std::string& name, double v) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(v));
}
inline void SetAttr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
inline void SetAttr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

}  // namespace onnx_test
}  // namespace kgrad

#endif  // KGRAD_TESTS_ONNX_ONNX_MODEL_BUILDER_H_
