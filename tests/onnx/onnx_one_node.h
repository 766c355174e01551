// One-node ONNX models for the window and resize tests: a builder, reference
// helpers (Nd, ForEach) and the import/run/finite-difference check they share.
#ifndef KGRAD_TESTS_ONNX_ONNX_ONE_NODE_H_
#define KGRAD_TESTS_ONNX_ONNX_ONE_NODE_H_

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/passes/optimize.h"
#include "proto/onnx/onnx_tensor.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/testing/grad_test_util.h"

namespace kgrad {
namespace onnx_test {

// ----- Building models ----------------------------------------------------------------

struct Attr {
  std::string name;
  std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>> v;
};

// A one-node model: inputs x0, x1, ... (declared shapes, float64 unless said),
// optional constant inputs (Constant nodes), output "y".
class OneNode {
 public:
  OneNode(const std::string& op, int opset) {
    m_.set_ir_version(8);
    m_.add_opset_import()->set_version(opset);
    node_.set_op_type(op);
    node_.set_name("n");
    node_.add_output("y");
    m_.mutable_graph()->add_output()->set_name("y");
  }
  OneNode& In(const Shape& shape, DType t = DType::kFloat64) {
    const std::string name = absl::StrCat("x", num_inputs_++);
    onnx::ValueInfoProto* v = m_.mutable_graph()->add_input();
    v->set_name(name);
    TypeToOnnx(AbstractTensor(t, shape), v->mutable_type());
    node_.add_input(name);
    return *this;
  }
  OneNode& Const(const Tensor& t) {  // a Constant node's output
    const std::string name = absl::StrCat("k", node_.input_size());
    onnx::NodeProto* k = m_.mutable_graph()->add_node();
    k->set_op_type("Constant");
    k->add_output(name);
    onnx::AttributeProto* a = k->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    TensorToOnnx(t, name, a->mutable_t());
    node_.add_input(name);
    return *this;
  }
  OneNode& Skip() {  // an omitted optional input
    node_.add_input("");
    return *this;
  }
  OneNode& Set(const Attr& a) {
    onnx::AttributeProto* p = node_.add_attribute();
    p->set_name(a.name);
    if (auto* i = std::get_if<int64_t>(&a.v)) p->set_type(onnx::AttributeProto::INT), p->set_i(*i);
    if (auto* f = std::get_if<double>(&a.v)) p->set_type(onnx::AttributeProto::FLOAT), p->set_f(*f);
    if (auto* s = std::get_if<std::string>(&a.v)) p->set_type(onnx::AttributeProto::STRING), p->set_s(*s);
    if (auto* is = std::get_if<std::vector<int64_t>>(&a.v)) {
      p->set_type(onnx::AttributeProto::INTS);
      for (int64_t x : *is) p->add_ints(x);
    }
    if (auto* fs = std::get_if<std::vector<double>>(&a.v)) {
      p->set_type(onnx::AttributeProto::FLOATS);
      for (double x : *fs) p->add_floats(static_cast<float>(x));
    }
    return *this;
  }
  OneNode& Set(std::initializer_list<Attr> attrs) {
    for (const Attr& a : attrs) Set(a);
    return *this;
  }
  OneNode& TwoOutputs() {
    node_.add_output("indices");
    m_.mutable_graph()->add_output()->set_name("indices");
    return *this;
  }
  absl::StatusOr<std::unique_ptr<Module>> Import() const {
    onnx::ModelProto m = m_;
    *m.mutable_graph()->add_node() = node_;
    OnnxImportOptions o;
    return ImportOnnx(m, DefaultRegistry(), o, "<test>");
  }

 private:
  onnx::ModelProto m_;
  onnx::NodeProto node_;
  int num_inputs_ = 0;
};

inline std::vector<int64_t> I(std::initializer_list<int64_t> v) { return v; }

// ----- Running and checking --------------------------------------------------------------

inline Tensor Random(const Shape& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return testing::RandomF64(shape, rng).tensor();
}

// A dense NCHW-style view of a float64 tensor, any rank.
struct Nd {
  Shape shape;
  std::vector<double> v;
  explicit Nd(const Shape& s) : shape(s), v(CheckedNumElements(s).value(), 0.0) {}
  explicit Nd(const Tensor& t) : shape(t.shape()), v(t.data<double>(), t.data<double>() + t.NumElements()) {}
  int64_t Flat(const std::vector<int64_t>& i) const {
    int64_t f = 0;
    for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + i[d];
    return f;
  }
  double& at(const std::vector<int64_t>& i) { return v[Flat(i)]; }
  double at(const std::vector<int64_t>& i) const { return v[Flat(i)]; }
  Tensor ToTensor() const { return Tensor::FromVector<double>(shape, v); }
};

// Calls f on every index of `shape`.
inline void ForEach(const Shape& shape, const std::function<void(const std::vector<int64_t>&)>& f) {
  std::vector<int64_t> i(shape.size(), 0);
  const int64_t n = CheckedNumElements(shape).value();
  for (int64_t k = 0; k < n; ++k) {
    f(i);
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++i[d] < shape[d]) break;
      i[d] = 0;
    }
  }
}

// Imports, runs at `args` and compares with `want`; then checks the gradient of
// the imported graph by finite differences.
inline void ExpectModel(const OneNode& model, const std::vector<Tensor>& args, const Tensor& want,
                 bool check_grad = true) {
  absl::StatusOr<std::unique_ptr<Module>> m = model.Import();
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<Value> in(args.begin(), args.end());
  absl::StatusOr<Value> out = RunGraph((*m)->entry(), in);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->is_tensor());
  ASSERT_EQ(out->tensor().shape(), want.shape()) << out->tensor().DebugString(8);
  ExpectClose(*out, want, 1e-12, "output");
  if (check_grad) {
    EXPECT_TRUE(testing::GraphGradientOk(**m, (*m)->entry(), in, testing::Order(1, 7), /*nonvacuous=*/true));
  }
}

inline std::string ImportError(const OneNode& model) {
  absl::StatusOr<std::unique_ptr<Module>> m = model.Import();
  EXPECT_FALSE(m.ok());
  return m.ok() ? "" : std::string(m.status().message());
}

}  // namespace onnx_test
}  // namespace kgrad

#endif  // KGRAD_TESTS_ONNX_ONNX_ONE_NODE_H_
