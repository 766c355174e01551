// Malformed and hostile ONNX bytes: every one is a Status naming what is wrong
// (and the node), never a crash.
#include <string>

#include "tests/onnx/onnx_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

using ::testing::HasSubstr;

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

absl::Status Import(const onnx::ModelProto& m) {
  OnnxImportOptions o;
  return ImportOnnx(m, DefaultRegistry(), o, "<test>").status();
}

onnx::ModelProto Mlp() {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(ReadBytes(DataPath("mlp.onnx"))));
  return m;
}

onnx::NodeProto* FindNode(onnx::ModelProto& m, const std::string& op) {
  for (onnx::NodeProto& n : *m.mutable_graph()->mutable_node()) {
    if (n.op_type() == op) return &n;
  }
  ADD_FAILURE() << "no " << op;
  return nullptr;
}

TEST(OnnxHostile, GarbageBytes) {
  OnnxImportOptions o;
  absl::StatusOr<std::unique_ptr<Module>> m = ParseOnnx("\xff\xff\xff\x0f garbage", DefaultRegistry(), o);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("not a valid ONNX model"));
}

TEST(OnnxHostile, EveryTruncationFailsCleanly) {
  std::string bytes = ReadBytes(DataPath("cnn.onnx"));
  OnnxImportOptions o;
  int rejected = 0;
  for (size_t n = 0; n < bytes.size(); n += 7) {
    absl::StatusOr<std::unique_ptr<Module>> m = ParseOnnx(bytes.substr(0, n), DefaultRegistry(), o);
    rejected += !m.ok();
  }
  EXPECT_GT(rejected, 0);
}

TEST(OnnxHostile, UnsupportedOpsAreListedTogether) {
  onnx::ModelProto m = Mlp();
  FindNode(m, "Relu")->set_op_type("FancyRelu");
  FindNode(m, "Tanh")->set_op_type("Hardmax2");
  absl::Status s = Import(m);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), HasSubstr("2 unsupported ONNX ops"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("FancyRelu (node '"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("Hardmax2 (node '"));
}

TEST(OnnxHostile, DanglingInputNamesTheNode) {
  onnx::ModelProto m = Mlp();
  onnx::NodeProto* relu = FindNode(m, "Relu");
  relu->set_input(0, "nowhere");
  absl::Status s = Import(m);
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("node '", relu->name(), "' (Relu)")));
  EXPECT_THAT(std::string(s.message()), HasSubstr("'nowhere' is not defined"));
}

TEST(OnnxHostile, MissingInput) {
  onnx::ModelProto m = Mlp();
  FindNode(m, "Gemm")->clear_input();
  EXPECT_THAT(std::string(Import(m).message()), HasSubstr("(Gemm): has 0 inputs, expected 2 to 3"));
}

TEST(OnnxHostile, AttributeOfWrongType) {
  onnx::ModelProto m = Mlp();
  onnx::NodeProto* gemm = FindNode(m, "Gemm");
  for (onnx::AttributeProto& a : *gemm->mutable_attribute()) {
    if (a.name() == "transB") {
      a.set_type(onnx::AttributeProto::FLOAT);
      a.set_f(1);
    }
  }
  EXPECT_THAT(std::string(Import(m).message()), HasSubstr("attribute 'transB' must be an int, got type FLOAT"));
}

TEST(OnnxHostile, ShapeMismatchNamesTheNode) {
  onnx::ModelProto m = Mlp();
  onnx::NodeProto* gemm = FindNode(m, "Gemm");
  for (onnx::AttributeProto& a : *gemm->mutable_attribute()) {
    if (a.name() == "transB") a.set_i(0);
  }
  absl::Status s = Import(m);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("node '", gemm->name(), "' (Gemm)")));
}

TEST(OnnxHostile, HostileTensorDims) {
  onnx::ModelProto m = Mlp();
  onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_dims();
  w->add_dims(int64_t{1} << 40);
  w->add_dims(int64_t{1} << 40);
  EXPECT_THAT(std::string(Import(m).message()), HasSubstr("bad dims"));
  w->clear_dims();
  w->add_dims(3);  // fewer elements than raw_data holds
  EXPECT_THAT(std::string(Import(m).message()), HasSubstr("raw_data has"));
  w->clear_dims();
  w->add_dims(-4);
  EXPECT_FALSE(Import(m).ok());
}

TEST(OnnxHostile, WrongElementType) {
  onnx::ModelProto m = Mlp();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::COMPLEX64);
  EXPECT_THAT(std::string(Import(m).message()), HasSubstr("COMPLEX64 is not supported"));
}

TEST(OnnxHostile, DuplicateOutputName) {
  onnx::ModelProto m = Mlp();
  FindNode(m, "Tanh")->set_output(0, FindNode(m, "Relu")->output(0));
  EXPECT_THAT(std::string(Import(m).message()), HasSubstr("is defined twice"));
}

TEST(OnnxHostile, MissingOpset) {
  onnx::ModelProto m = Mlp();
  m.clear_opset_import();
  EXPECT_THAT(std::string(Import(m).message()), HasSubstr("imports no default-domain opset"));
}

TEST(OnnxHostile, DeeplyNestedIfIsBounded) {
  onnx::ModelProto m;
  m.add_opset_import()->set_version(15);
  onnx::GraphProto* g = m.mutable_graph();
  for (int i = 0; i < 300; ++i) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type("If");
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("then_branch");
    a->set_type(onnx::AttributeProto::GRAPH);
    g = a->mutable_g();
  }
  EXPECT_THAT(std::string(Import(m).message()), HasSubstr("nested too deep"));
}

TEST(OnnxHostile, LoopWithoutBoundsIsRefused) {
  std::string bytes = ReadBytes(DataPath("loop.onnx"));
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(bytes));
  onnx::NodeProto* loop = FindNode(m, "Loop");
  loop->set_input(0, "");
  loop->set_input(1, "");
  EXPECT_THAT(std::string(Import(m).message()), HasSubstr("never ends"));
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
