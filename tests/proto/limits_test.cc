// LoadLimits: each bound fails the load with ResourceExhausted naming the limit
// and its value, and a file within every limit loads. Also nesting that would
// recurse inside the protobuf parsers (before our checks) is refused.
#include <string>

#include "absl/strings/str_cat.h"
#include "core/builder.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "proto/model_io.h"

namespace kgrad {
namespace {

using ::testing::HasSubstr;

// f(x[4]) = sum(x * w + c) with a 16-byte weight w and a 16-byte constant c,
// a nested graph (a closure), 2 graphs in all.
proto::ModelProto SmallModel() {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat32, {4});
  AnfNode* w = b.Weight("w", Tensor::FromVector<float>({4}, {1, 2, 3, 4}));
  AnfNode* c = b.Const(Value(Tensor::FromVector<float>({4}, {0.5f, 0.5f, 0.5f, 0.5f})));
  ValueNode* add_c = b.Closure("add_c", 1, [&](GraphBuilder& g, absl::Span<AnfNode* const> p) {
    return g.Op(PrimId::kAdd, {p[0], c});
  });
  AnfNode* y = b.Call(add_c, {b.Op(PrimId::kMul, {x, w})});
  m.set_entry(b.Return(b.Op(PrimId::kReduceSum, {y})).value());
  return SaveModel(m).value();
}

absl::Status Load(const proto::ModelProto& p, const LoadLimits& limits) {
  return LoadModel(p, DefaultRegistry(), "small.pb", limits).status();
}

// Default limits with one of them set.
template <typename T>
LoadLimits With(T LoadLimits::*limit, T value) {
  LoadLimits l;
  l.*limit = value;
  return l;
}

void ExpectExhausted(const absl::Status& s, const std::string& limit) {
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(limit)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("small.pb")) << s;
}

TEST(LoadLimitsTest, TheSmallModelLoadsWithinTightLimits) {
  LoadLimits l;
  l.max_file_bytes = 4096;
  l.max_tensor_bytes = 16;
  l.max_total_tensor_bytes = 32;
  l.max_graphs = 2;
  l.max_nesting_depth = 2;
  proto::ModelProto p = SmallModel();
  int64_t nodes = 0;
  for (const auto& g : p.graphs()) nodes += g.nodes_size() + g.parameters_size();
  l.max_nodes = nodes;
  EXPECT_TRUE(Load(p, l).ok()) << Load(p, l);
}

TEST(LoadLimitsTest, FileBytes) {
  std::string bytes;
  ASSERT_TRUE(SmallModel().SerializeToString(&bytes));
  LoadLimits l;
  l.max_file_bytes = 10;
  absl::Status s = ParseModel(bytes, false, DefaultRegistry(), "small.pb", l).status();
  ExpectExhausted(s, "LoadLimits::max_file_bytes = 10");
}

TEST(LoadLimitsTest, TensorBytes) {
  ExpectExhausted(Load(SmallModel(), With(&LoadLimits::max_tensor_bytes, int64_t{15})),
                  "LoadLimits::max_tensor_bytes = 15");
}

TEST(LoadLimitsTest, TotalTensorBytesOfWeightsAndConstants) {
  // The weight (16 bytes) fits, the constant (16 more) does not.
  absl::Status s = Load(SmallModel(), With(&LoadLimits::max_total_tensor_bytes, int64_t{31}));
  ExpectExhausted(s, "LoadLimits::max_total_tensor_bytes = 31");
  EXPECT_THAT(std::string(s.message()), HasSubstr("32 bytes"));
}

TEST(LoadLimitsTest, Nodes) {
  ExpectExhausted(Load(SmallModel(), With(&LoadLimits::max_nodes, int64_t{3})),
                  "LoadLimits::max_nodes = 3");
}

TEST(LoadLimitsTest, Graphs) {
  ExpectExhausted(Load(SmallModel(), With(&LoadLimits::max_graphs, int64_t{1})),
                  "LoadLimits::max_graphs = 1");
}

// The limit's worth of graphs loads, and verification stays linear in their
// number (it checked every graph's nesting once per graph: 20,000 graphs took
// 8.6 s, a million would have taken days).
TEST(LoadLimitsTest, AMillionGraphsLoad) {
  constexpr int kGraphs = 1'000'000;
  proto::ModelProto p;
  p.set_format_version(1);
  p.set_entry("g0");
  for (int i = 0; i < kGraphs; ++i) {
    proto::GraphProto* g = p.add_graphs();
    g->set_name(absl::StrCat("g", i));
    proto::ParameterProto* x = g->add_parameters();
    x->set_name("x");
    if (i == 0) x->mutable_type()->mutable_scalar()->set_dtype(proto::DT_INT64);
    // g_i(x) = g_{i+1}(x), the last returns x: every graph is referenced.
    if (i + 1 < kGraphs) {
      proto::NodeProto* next = g->add_nodes();
      next->set_name("next");
      next->mutable_constant()->set_graph(absl::StrCat("g", i + 1));
      proto::NodeProto* call = g->add_nodes();
      call->set_name("call");
      call->mutable_apply()->add_inputs("next");
      call->mutable_apply()->add_inputs("x");
      g->set_output("call");
    } else {
      g->set_output("x");
    }
  }
  absl::StatusOr<std::unique_ptr<Module>> m = LoadModel(p, DefaultRegistry(), "many.pb", {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->graphs().size(), static_cast<size_t>(kGraphs));
  EXPECT_EQ((*m)->entry()->name(), "g0");
  // One more is over the limit.
  proto::GraphProto* extra = p.add_graphs();
  extra->set_name("extra");
  extra->add_parameters()->set_name("x");
  extra->set_output("x");
  absl::Status s = LoadModel(p, DefaultRegistry(), "many.pb", {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("LoadLimits::max_graphs = 1000000"));
}

TEST(LoadLimitsTest, GraphNesting) {
  LoadLimits l;
  l.max_nesting_depth = 1;
  ExpectExhausted(Load(SmallModel(), l), "LoadLimits::max_nesting_depth = 1");
}

// A constant ((((x)))) nested `depth` tuples deep.
proto::ModelProto NestedConstant(int depth) {
  proto::ModelProto p = SmallModel();
  proto::NodeProto* n = p.mutable_graphs(0)->add_nodes();
  n->set_name("deep");
  proto::ValueProto* v = n->mutable_constant();
  for (int i = 0; i < depth; ++i) v = v->mutable_tuple()->add_elements();
  v->mutable_scalar()->set_dtype(proto::DT_INT64);
  v->mutable_scalar()->set_i(7);
  return p;
}

TEST(LoadLimitsTest, ConstantNesting) {
  LoadLimits l;
  l.max_value_depth = 5;
  ExpectExhausted(Load(NestedConstant(6), l), "LoadLimits::max_value_depth = 5");
  EXPECT_TRUE(Load(NestedConstant(5), l).ok()) << Load(NestedConstant(5), l);
}

// Nesting deeper than the parsers accept, binary and text: an error, not a stack
// overflow inside protobuf (the text parser had no recursion limit set).
TEST(LoadLimitsTest, MessageNestingInTheParsers) {
  std::string text = "format_version: 1 graphs { name: \"f\" nodes { name: \"n\" constant { ";
  const int kDepth = 200'000;
  for (int i = 0; i < kDepth; ++i) text += "tuple { elements { ";
  for (int i = 0; i < kDepth; ++i) text += "} } ";
  text += "} } }";
  absl::Status s = ParseModel(text, true, DefaultRegistry(), "deep.pbtxt").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("deep.pbtxt"));

  proto::ModelProto p = NestedConstant(60);  // 120 message levels: over the default 100
  std::string bytes;
  ASSERT_TRUE(p.SerializeToString(&bytes));
  s = ParseModel(bytes, false, DefaultRegistry(), "deep.pb").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  LoadLimits l;
  l.max_message_depth = 200;
  l.max_value_depth = 100;
  absl::StatusOr<std::unique_ptr<Module>> m = ParseModel(bytes, false, DefaultRegistry(), "deep.pb", l);
  EXPECT_TRUE(m.ok()) << m.status();
}

}  // namespace
}  // namespace kgrad
