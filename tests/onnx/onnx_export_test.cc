// Export: the optimised gradient graphs of the MLP and the CNN (and the forward
// graphs) go out as ONNX, come back through the importer and give torch's numbers.
// Graphs that keep control flow or closures are refused with the node named.
#include <vector>

#include "ad/grad_operation.h"
#include "core/builder.h"
#include "core/infer.h"
#include "backends/executor.h"
#include "core/passes/optimize.h"
#include "proto/onnx/onnx_export.h"
#include "tests/onnx/onnx_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

constexpr double kTol = 1e-5;  // as in onnx_import_test.cc

// Serialises `g` as ONNX and imports the bytes again.
absl::StatusOr<std::unique_ptr<Module>> RoundTrip(Module& m, FuncGraph* g) {
  absl::StatusOr<onnx::ModelProto> model = ExportOnnx(m, g);
  if (!model.ok()) return model.status();
  std::string bytes;
  if (!model->SerializeToString(&bytes)) return absl::InternalError("serialise");
  OnnxImportOptions o;
  return ParseOnnx(bytes, DefaultRegistry(), o, "<exported>");
}

class OnnxExportTest : public ::testing::TestWithParam<const char*> {};

TEST_P(OnnxExportTest, ForwardRoundTrip) {
  std::string name = GetParam();
  absl::StatusOr<std::unique_ptr<Module>> m = ImportFixture(name);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<std::unique_ptr<Module>> back = RoundTrip(**m, (*m)->entry());
  ASSERT_TRUE(back.ok()) << back.status();
  absl::StatusOr<Value> out = RunGraph((*back)->entry(), {Npy(name + "_in0.npy")});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectClose(*out, Npy(name + "_out.npy"), kTol, "output");
}

TEST_P(OnnxExportTest, OptimizedGradientRoundTrip) {
  std::string name = GetParam();
  absl::StatusOr<std::unique_ptr<Module>> m = ImportFixture(name);
  ASSERT_TRUE(m.ok()) << m.status();
  GradOptions o;
  o.argnums = {0};
  std::vector<std::string> expected = {name + "_din0.npy"};
  for (const auto& w : (*m)->weights()) {
    std::string file = absl::StrCat(name, "_dw_", w->name(), ".npy");
    if (!Exists(DataPath(file))) continue;
    o.weights.push_back(w.get());
    expected.push_back(file);
  }
  absl::StatusOr<FuncGraph*> g = SensGradient(**m, o, /*optimize=*/true);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::unique_ptr<Module>> back = RoundTrip(**m, *g);
  ASSERT_TRUE(back.ok()) << back.status();
  // The exported graph returns the gradients flattened: dx, dw_0, dw_1, ...
  absl::StatusOr<Value> r = RunGraph((*back)->entry(), {Npy(name + "_in0.npy"), Npy(name + "_ct.npy")});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->is_tuple()) << r->TypeString();
  ASSERT_EQ(r->tuple().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) ExpectClose(r->tuple()[i], Npy(expected[i]), kTol, expected[i]);
}

INSTANTIATE_TEST_SUITE_P(Torch, OnnxExportTest, ::testing::Values("mlp", "cnn", "block17"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

// kgrad's one_hot gives a negative index a row of off_value; ONNX's OneHot would
// count it from the end, so the export sends negative indices out of range.
TEST(OnnxExport, OneHotKeepsNegativeIndicesOff) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* i = b.Param("i", DType::kInt64, {5});
  FuncGraph* f = b.Return(b.Op(PrimId::kOneHot, {i}, {{"depth", int64_t{3}}, {"on_value", 2.0},
                                                      {"off_value", -1.0}})).value();
  ASSERT_TRUE(InferGraph(f).ok());
  const Value idx(Tensor::FromVector<int64_t>({5}, {-1, 0, 2, -3, 1}));
  absl::StatusOr<Value> want = RunGraph(f, {idx});
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::unique_ptr<Module>> back = RoundTrip(m, f);
  ASSERT_TRUE(back.ok()) << back.status();
  absl::StatusOr<Value> got = RunGraph((*back)->entry(), {idx});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectClose(*got, want->tensor(), 0, "one_hot");
  const std::vector<double> rows = {-1, -1, -1, 2, -1, -1, -1, -1, 2, -1, -1, -1, -1, 2, -1};
  ASSERT_EQ(got->tensor().NumElements(), 15);
  for (int k = 0; k < 15; ++k) EXPECT_EQ(got->tensor().ElementAsDouble(k), rows[k]) << k;
}

TEST(OnnxExport, RefusesControlFlowNamingTheNode) {
  absl::StatusOr<std::unique_ptr<Module>> m = ImportFixture("if_pos");
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<onnx::ModelProto> model = ExportOnnx(**m, (*m)->entry());
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()), ::testing::HasSubstr("cannot export to ONNX"));
  EXPECT_THAT(std::string(model.status().message()), ::testing::HasSubstr("switch"));
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
