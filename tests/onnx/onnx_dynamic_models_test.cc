// Models exported with dynamic axes (tests/onnx/make_dynamic_fixtures.py): one
// import, one gradient graph and one executor serve every batch size (and
// sequence length), matching torch at each; inputs that disagree on a dim symbol
// are refused by name. The ResNet needs only symbolic dims (Flatten of
// [batch,64,1,1]); the transformer reads its sizes at run time (Shape of the
// [seq,batch,16] activations feeds 10 Reshapes and 10 Slices: shape_of,
// dynamic_reshape, dynamic_slice), and the LSTM builds h0/c0 with
// ConstantOfShape(Concat(2, Gather(Shape(x), 1), 12)) (dynamic_fill) and loops
// over a symbolic sequence length.
#include <string>
#include <vector>

#include "core/dim_symbol.h"
#include "core/infer.h"
#include "tests/onnx/onnx_model_builder.h"
#include "tests/onnx/onnx_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

using ::testing::HasSubstr;

constexpr double kTol = 1e-4;  // as onnx_models_test

// torchvision's ResNet forward (Flatten of [batch,64,1,1]) at batch 1, 3 and 8.
TEST(OnnxDynamicModelTest, ResNetAtThreeBatchSizes) {
  CheckDynamicFixture("dyn_resnet", {"b1", "b3", "b8"}, kTol);
}

TEST(OnnxDynamicModelTest, TransformerEncoderAtThreeSizes) {
  CheckDynamicFixture("dyn_transformer", {"b1s5", "b3s17", "b8s5"}, kTol);
}

TEST(OnnxDynamicModelTest, LstmAtThreeSizes) {
  CheckDynamicFixture("dyn_lstm", {"b1s5", "b3s17", "b8s5"}, kTol);
}

TEST(OnnxDynamicModelTest, ResNetImportKeepsTheBatchSymbol) {
  absl::StatusOr<std::unique_ptr<Module>> m = ImportFixture("dyn_resnet");
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<AbstractPtr> type = InferGraph((*m)->entry());  // the declared inputs
  ASSERT_TRUE(type.ok()) << type.status();
  const AbstractTensor* out = AsTensor(*type);
  ASSERT_NE(out, nullptr) << (*type)->ToString();
  EXPECT_EQ(out->shape(), (Shape{DimSymbol("batch"), 10}));
}

// Two inputs sharing dim_param "batch" given different sizes.
TEST(OnnxDynamicModelTest, InputsContradictingASymbolAreRefused) {
  OnnxModelBuilder b;
  b.Input("a", DType::kFloat32, {-1, 3}).Input("b", DType::kFloat32, {-1, 3});
  for (onnx::ValueInfoProto& v : *b.mutable_model()->mutable_graph()->mutable_input()) {
    v.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param(
        "batch");
  }
  b.Node("Add", {"a", "b"}, {"y"});
  b.Output("y");
  absl::StatusOr<std::vector<Tensor>> ok =
      b.Run({*Tensor::Zeros(DType::kFloat32, {2, 3}), *Tensor::Zeros(DType::kFloat32, {2, 3})});
  ASSERT_TRUE(ok.ok()) << ok.status();
  absl::StatusOr<std::vector<Tensor>> bad =
      b.Run({*Tensor::Zeros(DType::kFloat32, {2, 3}), *Tensor::Zeros(DType::kFloat32, {4, 3})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("'batch'"));
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
