// Models exported with dynamic axes (tests/onnx/make_dynamic_fixtures.py): one
// import, one gradient graph and one executor serve every batch size (and
// sequence length), matching torch at each; inputs that disagree on a dim symbol
// are refused by name. The ResNet needs only symbolic dims (Flatten of
// [batch,64,1,1]); the transformer reads its sizes at run time (Shape of the
// [seq,batch,16] activations feeds 10 Reshapes and 10 Slices: shape_of,
// dynamic_reshape, dynamic_slice), and the LSTM builds h0/c0 with
// ConstantOfShape(Concat(2, Gather(Shape(x), 1), 12)) (dynamic_fill) and loops
// over a symbolic sequence length. A scripted loop that appends to Python lists
// exports ONNX sequences (SequenceEmpty/Construct/Insert/At/Length,
// SplitToSequence, ConcatFromSequence) carried through Loops.
#include <string>
#include <vector>

#include "backends/executor.h"
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
  // out[:, -1]: Gather of index -1 on the symbolic sequence axis, wrapped at run time.
  CheckDynamicFixture("dyn_lstm_last", {"b1s5", "b3s17", "b8s5"}, kTol);
}

// A torch.jit.script'ed list of tensors (make_dynamic_fixtures.py ListCat):
// SequenceEmpty, then SequenceInsert of tanh(Linear(x[:, t])) in a Loop of seq
// trips; torch.cat and torch.stack of it are ConcatFromSequence (axis 1, and
// axis 0 with new_axis 1, then ReduceSum); outs[-1] is SequenceAt -1, split by
// SplitToSequence, and a second Loop carries SequenceConstruct(parts[0]) with
// SequenceAt and SequenceInsert in its body, its trip count from SequenceLength.
TEST(OnnxDynamicModelTest, ListOfTensorsAtThreeSizes) {
  CheckDynamicFixture("dyn_list_cat", {"b1s5", "b3s17", "b8s5"}, kTol);
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

// F.interpolate(x, size=(4, 4)) with a dynamic batch: torch computes the sizes as
// Concat(Shape(x)[0:2], [4, 4]), whose batch entry is the symbol; the resized
// axes are static, so one import serves every batch (nearest: each input pixel
// becomes a 2x2 block).
TEST(OnnxDynamicModelTest, ResizeSizesFromAShapeChainKeepTheBatchSymbol) {
  OnnxModelBuilder b(13);
  b.Input("x", DType::kFloat32, {-1, 1, 2, 2});
  b.Constant("starts", Tensor::FromVector<int64_t>({1}, {0}));
  b.Constant("ends", Tensor::FromVector<int64_t>({1}, {2}));
  b.Constant("hw", Tensor::FromVector<int64_t>({2}, {4, 4}));
  b.Node("Shape", {"x"}, {"shape"});
  b.Node("Slice", {"shape", "starts", "ends"}, {"nc"});
  SetAttr(b.Node("Concat", {"nc", "hw"}, {"sizes"}), "axis", int64_t{0});
  onnx::NodeProto& resize = b.Node("Resize", {"x", "", "", "sizes"}, {"y"});
  SetAttr(resize, "mode", std::string("nearest"));
  SetAttr(resize, "coordinate_transformation_mode", std::string("asymmetric"));
  SetAttr(resize, "nearest_mode", std::string("floor"));
  b.Output("y");
  absl::StatusOr<std::unique_ptr<Module>> m = b.Import();
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<std::unique_ptr<Executor>> ex = Executor::Create((*m)->entry());
  ASSERT_TRUE(ex.ok()) << ex.status();
  for (int64_t n : {1, 3}) {
    std::vector<float> x(n * 4);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
    absl::StatusOr<Value> y = (*ex)->Run({Value(Tensor::FromVector<float>({n, 1, 2, 2}, x))});
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(y->tensor().shape(), (Shape{n, 1, 4, 4}));
    for (int64_t k = 0; k < n * 16; ++k) {
      const int64_t img = k / 16, r = k % 16 / 4, col = k % 4;
      EXPECT_EQ(y->tensor().data<float>()[k], x[img * 4 + (r / 2) * 2 + col / 2]) << k;
    }
  }
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
