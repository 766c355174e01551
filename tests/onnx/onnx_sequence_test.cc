// ONNX's sequences and optionals as kgrad lists (onnx_sequence_ops.cc): the
// values each op gives, as onnx's reference implementation defines them, and
// clear errors for what kgrad refuses (a float position, an element of another
// dtype or rank, a concatenation without its axis, types nested without end, an
// opset-18 optional that cannot be told from a sequence).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_model_builder.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

using ::testing::HasSubstr;
using testing::ToDoubles;

Tensor I64s(Shape shape, const std::vector<int64_t>& v) { return Tensor::FromVector<int64_t>(shape, v); }
Tensor F32s(Shape shape, const std::vector<float>& v) { return Tensor::FromVector<float>(shape, v); }

// A graph input of type sequence(tensor(f32) of `shape`), nested `depth` times.
void SequenceInput(OnnxModelBuilder& b, const std::string& name, const Shape& shape, int depth = 1) {
  onnx::ValueInfoProto* v = b.mutable_model()->mutable_graph()->add_input();
  v->set_name(name);
  onnx::TypeProto* t = v->mutable_type();
  for (int i = 0; i < depth; ++i) t = t->mutable_sequence_type()->mutable_elem_type();
  onnx::TypeProto::Tensor* tt = t->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape();
  for (int64_t d : shape) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

std::string ImportError(const OnnxModelBuilder& b) {
  absl::StatusOr<std::unique_ptr<Module>> m = b.Import();
  EXPECT_FALSE(m.ok());
  return m.ok() ? "" : std::string(m.status().message());
}

TEST(OnnxSequence, ConstructAtLengthAndConcat) {
  OnnxModelBuilder b(13);
  b.Input("x", DType::kFloat32, {2}).Input("y", DType::kFloat32, {2});
  b.Constant("last", I64s({}, {-1}));
  b.Node("SequenceConstruct", {"x", "y", "x"}, {"s"});
  b.Node("SequenceAt", {"s", "last"}, {"at"});
  b.Node("SequenceLength", {"s"}, {"n"});
  SetAttr(b.Node("ConcatFromSequence", {"s"}, {"cat"}), "axis", int64_t{0});
  onnx::NodeProto& stack = b.Node("ConcatFromSequence", {"s"}, {"stack"});
  SetAttr(stack, "axis", int64_t{-1});
  SetAttr(stack, "new_axis", int64_t{1});
  b.Output("at").Output("n").Output("cat").Output("stack");
  absl::StatusOr<std::vector<Tensor>> out = b.Run({Value(F32s({2}, {1, 2})), Value(F32s({2}, {3, 4}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ToDoubles((*out)[0]), (std::vector<double>{1, 2}));
  EXPECT_EQ((*out)[1].dtype(), DType::kInt64);
  EXPECT_EQ(ToDoubles((*out)[1]), (std::vector<double>{3}));
  EXPECT_EQ(ToDoubles((*out)[2]), (std::vector<double>{1, 2, 3, 4, 1, 2}));
  EXPECT_EQ((*out)[3].shape(), (Shape{2, 3}));  // stacked along a new last axis
  EXPECT_EQ(ToDoubles((*out)[3]), (std::vector<double>{1, 3, 1, 2, 4, 2}));
}

TEST(OnnxSequence, SplitInsertEraseFromAnInputSequence) {
  OnnxModelBuilder b(13);
  SequenceInput(b, "s", {2});
  b.Input("x", DType::kFloat32, {5});
  b.Constant("chunk", I64s({}, {2})).Constant("front", I64s({}, {0}));
  b.Node("SplitToSequence", {"x", "chunk"}, {"parts"});  // [0 1] [2 3] [4]
  b.Node("SequenceErase", {"parts"}, {"kept"});          // the last dropped
  b.Node("SequenceAt", {"s", "front"}, {"s0"});
  b.Node("SequenceInsert", {"kept", "s0", "front"}, {"joined"});
  SetAttr(b.Node("ConcatFromSequence", {"joined"}, {"out"}), "axis", int64_t{0});
  b.Output("out");
  Value s = Value::List({Value(F32s({2}, {7, 8})), Value(F32s({2}, {9, 9}))});
  absl::StatusOr<std::vector<Tensor>> out = b.Run({s, Value(F32s({5}, {0, 1, 2, 3, 4}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ToDoubles((*out)[0]), (std::vector<double>{7, 8, 0, 1, 2, 3}));
}

TEST(OnnxSequence, OptionalsAreListsOfAtMostOne) {
  OnnxModelBuilder b(15);
  b.Input("x", DType::kFloat32, {2});
  b.Node("Optional", {"x"}, {"some"});
  b.Node("OptionalHasElement", {"some"}, {"has"});
  b.Node("OptionalGetElement", {"some"}, {"got"});
  b.Output("has").Output("got");
  absl::StatusOr<std::vector<Tensor>> out = b.Run({Value(F32s({2}, {5, 6}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kBool);
  EXPECT_EQ(ToDoubles((*out)[0]), (std::vector<double>{1}));
  EXPECT_EQ(ToDoubles((*out)[1]), (std::vector<double>{5, 6}));
}

TEST(OnnxSequence, RefusalsNameTheNodeAndWhatWasExpected) {
  {
    OnnxModelBuilder b(13);
    SequenceInput(b, "s", {2});
    b.Constant("p", F32s({}, {0}));
    b.Node("SequenceAt", {"s", "p"}, {"y"});
    b.Output("y");
    EXPECT_THAT(ImportError(b), HasSubstr("(SequenceAt): input 1 (position) must be an i32 or i64 scalar, got f32[]"));
  }
  {
    OnnxModelBuilder b(13);
    SequenceInput(b, "s", {2});
    b.Input("x", DType::kInt64, {2});
    b.Node("SequenceInsert", {"s", "x"}, {"y"});
    b.Output("y");
    EXPECT_THAT(ImportError(b), HasSubstr("cannot store i64[2] in a list<f32[2]>"));
  }
  {
    OnnxModelBuilder b(13);
    b.Input("x", DType::kFloat32, {2}).Input("y", DType::kFloat32, {2, 1});
    b.Node("SequenceConstruct", {"x", "y"}, {"s"});
    b.Output("s");
    EXPECT_THAT(ImportError(b), HasSubstr("input 1 is f32[2,1], the ones before f32[2]"));
  }
  {
    OnnxModelBuilder b(13);
    SequenceInput(b, "s", {2});
    b.Node("ConcatFromSequence", {"s"}, {"y"});
    b.Output("y");
    EXPECT_THAT(ImportError(b), HasSubstr("(ConcatFromSequence): the attribute 'axis' is required"));
  }
  {
    OnnxModelBuilder b(13);
    SequenceInput(b, "s", {2}, /*depth=*/40);
    b.Node("Identity", {"s"}, {"y"});
    b.Output("y");
    EXPECT_THAT(ImportError(b), HasSubstr("graph input 's': sequence element: a type nests deeper than 16"));
  }
  {
    OnnxModelBuilder b(18);
    SequenceInput(b, "s", {2});
    b.Node("OptionalGetElement", {"s"}, {"y"});
    b.Output("y");
    EXPECT_THAT(ImportError(b), HasSubstr("cannot tell whether input 0 (list<f32[2]>) is an optional or a sequence"));
  }
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
