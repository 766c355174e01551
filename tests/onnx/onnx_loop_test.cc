// ONNX Loop with scan outputs (body outputs after the condition and the
// loop-carried values, stacked along a new axis 0) on hand-built models: values
// against a reference loop written here, every trip count including 0, trip
// counts and element dims known only at run time, early exit by the condition,
// and gradients through the stacked outputs by finite differences.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/onnx/onnx_model_builder.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/testing/grad_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

using ::testing::HasSubstr;

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& in,
                         const std::vector<std::string>& out) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(absl::StrCat("body_", op, "_", g->node_size()));
  for (const std::string& s : in) n->add_input(s);
  for (const std::string& s : out) n->add_output(s);
  return n;
}

void AddConstant(onnx::GraphProto* g, const std::string& name, const Tensor& t) {
  onnx::AttributeProto* a = AddNode(g, "Constant", {}, {name})->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  TensorToOnnx(t, name, a->mutable_t());
}

void SetBody(onnx::NodeProto& loop, const onnx::GraphProto& body) {
  onnx::AttributeProto* a = loop.add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = body;
}

// body(i, c, v): v' = sin(v) + y (y from the enclosing graph), scans v' * v and i.
onnx::GraphProto SinBody() {
  onnx::GraphProto g;
  g.set_name("body");
  for (const char* in : {"i", "c", "v"}) g.add_input()->set_name(in);
  AddNode(&g, "Sin", {"v"}, {"s"});
  AddNode(&g, "Add", {"s", "y"}, {"v2"});
  AddNode(&g, "Mul", {"v2", "v"}, {"p"});
  AddNode(&g, "Identity", {"c"}, {"c2"});
  for (const char* out : {"c2", "v2", "p", "i"}) g.add_output()->set_name(out);
  return g;
}

// Loop(M, true, x){SinBody} -> (v, scan p, scan i); M a graph input when
// `trip_count` < 0, x and y of length `n` (< 0: a dim symbol). `outputs` picks
// the graph outputs among v, p, idx.
OnnxModelBuilder SinLoop(int64_t trip_count, int64_t n, const std::vector<std::string>& outputs) {
  OnnxModelBuilder b(13);
  b.Input("x", DType::kFloat64, {n}).Input("y", DType::kFloat64, {n});
  if (trip_count < 0) {
    b.Input("M", DType::kInt64, {});
  } else {
    b.Constant("M", Tensor::FromScalar<int64_t>(trip_count));
  }
  b.Constant("cond", Tensor::FromScalar<bool>(true));
  SetBody(b.Node("Loop", {"M", "cond", "x"}, {"v", "p", "idx"}), SinBody());
  for (const std::string& o : outputs) b.Output(o);
  return b;
}

struct SinReference {
  Tensor v, p, idx;
};

SinReference RunSinReference(const std::vector<double>& x, const std::vector<double>& y, int64_t m) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<double> v = x, p;
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t k = 0; k < n; ++k) {
      const double v2 = std::sin(v[k]) + y[k];
      p.push_back(v2 * v[k]);
      v[k] = v2;
    }
    idx.push_back(i);
  }
  return {Tensor::FromVector<double>({n}, v), Tensor::FromVector<double>({m, n}, p),
          Tensor::FromVector<int64_t>({m}, idx)};
}

const std::vector<double> kX = {0.3, -1.2, 2.0}, kY = {0.5, 0.25, -0.75};

void ExpectSinLoop(const absl::StatusOr<std::vector<Tensor>>& got, int64_t m) {
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 3u);
  SinReference want = RunSinReference(kX, kY, m);
  ExpectClose(Value((*got)[0]), want.v, 1e-12, "v");
  ASSERT_EQ((*got)[1].shape(), want.p.shape());
  ExpectClose(Value((*got)[1]), want.p, 1e-12, "scan p");
  ASSERT_EQ((*got)[2].TypeString(), want.idx.TypeString());
  EXPECT_TRUE(TensorsEqual((*got)[2], want.idx));
}

TEST(OnnxLoop, ScanOutputsStackEveryIteration) {
  const Tensor x = Tensor::FromVector<double>({3}, kX), y = Tensor::FromVector<double>({3}, kY);
  for (int64_t m : {0, 1, 4}) {
    SCOPED_TRACE(absl::StrCat("M = ", m));
    ExpectSinLoop(SinLoop(m, 3, {"v", "p", "idx"}).Run({x, y}), m);
  }
  // Zero iterations: the carried value as it came in, and scans of [0, 3] and [0].
  absl::StatusOr<std::vector<Tensor>> none = SinLoop(0, 3, {"v", "p", "idx"}).Run({x, y});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ((*none)[1].TypeString(), "f64[0,3]");
  EXPECT_EQ((*none)[2].TypeString(), "i64[0]");
}

TEST(OnnxLoop, TripCountAndElementDimsKnownOnlyAtRunTime) {
  const Tensor x = Tensor::FromVector<double>({3}, kX), y = Tensor::FromVector<double>({3}, kY);
  for (int64_t n : {3, -1}) {  // a static length, then a dim symbol
    absl::StatusOr<std::unique_ptr<Module>> m = SinLoop(-1, n, {"v", "p", "idx"}).Import();
    ASSERT_TRUE(m.ok()) << m.status();
    for (int64_t trips : {5, 0, 2}) {  // one imported graph, three trip counts
      SCOPED_TRACE(absl::StrCat("n ", n, ", M = ", trips));
      absl::StatusOr<Value> out = RunGraph((*m)->entry(), {x, y, Tensor::FromScalar<int64_t>(trips)});
      ASSERT_TRUE(out.ok()) << out.status();
      if (trips == 0 && n < 0) {
        // The element's length is a dim symbol: an empty scan cannot know it.
        EXPECT_EQ(out->tuple()[1].tensor().TypeString(), "f64[0,0]");
        continue;
      }
      std::vector<Tensor> got;
      for (const Value& v : out->tuple()) got.push_back(v.tensor());
      ExpectSinLoop(got, trips);
    }
  }
}

// Loop(, true, x) into `b`: no trip count; body(i, c, v) continues while i < 2
// and scans v' = 1.5 v. The body's constants 2 and 1.5 are Constant nodes or,
// with `initializers`, the body's own initializers; the body is returned.
onnx::GraphProto AddConditionLoop(OnnxModelBuilder& b, bool initializers) {
  b.Input("x", DType::kFloat64, {2});
  b.Constant("cond", Tensor::FromScalar<bool>(true));
  onnx::GraphProto body;
  for (const char* in : {"i", "c", "v"}) body.add_input()->set_name(in);
  const Tensor two = Tensor::FromScalar<int64_t>(2), k = Tensor::FromScalar<double>(1.5);
  if (initializers) {
    TensorToOnnx(two, "two", body.add_initializer());
    TensorToOnnx(k, "k", body.add_initializer());
  } else {
    AddConstant(&body, "two", two);
    AddConstant(&body, "k", k);
  }
  AddNode(&body, "Less", {"i", "two"}, {"c2"});
  AddNode(&body, "Mul", {"v", "k"}, {"v2"});
  for (const char* out : {"c2", "v2", "v2"}) body.add_output()->set_name(out);
  SetBody(b.Node("Loop", {"", "cond", "x"}, {"v", "scan"}), body);
  b.Output("v").Output("scan");
  return body;
}

// The condition loop runs three iterations (the condition is read before the
// next one).
void ExpectThreeIterations(OnnxModelBuilder& b) {
  absl::StatusOr<std::vector<Tensor>> got = b.Run({Tensor::FromVector<double>({2}, {2, -4})});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectClose(Value((*got)[0]), Tensor::FromVector<double>({2}, {6.75, -13.5}), 0, "v");
  ExpectClose(Value((*got)[1]), Tensor::FromVector<double>({3, 2}, {3, -6, 4.5, -9, 6.75, -13.5}), 0, "scan");
}

TEST(OnnxLoop, ConditionEndsTheScan) {
  OnnxModelBuilder b(13);
  AddConditionLoop(b, /*initializers=*/false);
  ASSERT_NO_FATAL_FAILURE(ExpectThreeIterations(b));
}

// The same loop with the body's constants as the body's own initializers (valid
// ONNX for any subgraph): they are read like the Constant nodes above.
TEST(OnnxLoop, BodyInitializersAreItsConstants) {
  OnnxModelBuilder b(13);
  onnx::GraphProto body = AddConditionLoop(b, /*initializers=*/true);
  ASSERT_NO_FATAL_FAILURE(ExpectThreeIterations(b));
  // A bad initializer is an error naming the body graph.
  body.mutable_initializer(1)->set_raw_data("abc");
  body.set_name("loop_body");
  b.mutable_model()->mutable_graph()->mutable_node(1)->mutable_attribute(0)->mutable_g()->CopyFrom(body);
  EXPECT_THAT(std::string(b.Import().status().message()), HasSubstr("graph 'loop_body': initializer"));
}

// The scan of v' * v as the one output: reverse- and forward-mode derivatives
// for x and y against central differences, to second order (the second-order
// transform adds the all-false sensitivities of the bool condition state:
// hyper_add of bool tensors is `or`).
TEST(OnnxLoop, GradientsThroughAScanOutput) {
  const Tensor x = Tensor::FromVector<double>({3}, kX), y = Tensor::FromVector<double>({3}, kY);
  for (int64_t trips : {1, 3}) {
    absl::StatusOr<std::unique_ptr<Module>> m = SinLoop(trips, 3, {"p"}).Import();
    ASSERT_TRUE(m.ok()) << m.status();
    SCOPED_TRACE(absl::StrCat("M = ", trips));
    EXPECT_TRUE(testing::GraphGradientOk(**m, (*m)->entry(), {x, y}, testing::Order(2, 7), /*nonvacuous=*/true));
  }
  // Element dims not static: the run-time reshape and concat's run-time adjoint.
  absl::StatusOr<std::unique_ptr<Module>> m = SinLoop(3, -1, {"p"}).Import();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(testing::GraphGradientOk(**m, (*m)->entry(), {x, y}, testing::Order(2, 7), /*nonvacuous=*/true));
}

TEST(OnnxLoop, BodyWithTooFewOutputsIsRefused) {
  OnnxModelBuilder b = SinLoop(2, 3, {"v"});
  onnx::GraphProto* body = b.mutable_model()->mutable_graph()->mutable_node(2)->mutable_attribute(0)->mutable_g();
  body->clear_output();
  body->add_output()->set_name("c2");
  EXPECT_THAT(std::string(b.Import().status().message()), HasSubstr("body has 1 outputs for 1 loop-carried values"));
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
