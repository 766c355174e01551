// Constants stored in types kgrad has no dtype for (float16, bfloat16, 8/16-bit and
// unsigned integers) are widened exactly at import; values of those types at run
// time stay refused with a Status.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/onnx/onnx_model_builder.h"
#include "tests/onnx/onnx_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

using testing::HasSubstr;

onnx::TensorProto Stored(int32_t type, const std::vector<int64_t>& dims, const std::string& raw) {
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(type);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(raw);
  return t;
}

std::string Raw16(const std::vector<uint16_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 2);
}

TEST(OnnxNarrowConstants, Float16WidensExactly) {
  // 1, -2.5, 65504 (max), 2^-14 (min normal), 2^-24 (min subnormal), inf, -0.
  onnx::TensorProto p = Stored(onnx::TensorProto::FLOAT16, {7},
                               Raw16({0x3c00, 0xc100, 0x7bff, 0x0400, 0x0001, 0x7c00, 0x8000}));
  absl::StatusOr<Tensor> t = ConstantFromOnnx(p, LoadLimits());
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->TypeString(), "f32[7]");
  const float* v = t->data<float>();
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.5f);
  EXPECT_EQ(v[2], 65504.0f);
  EXPECT_EQ(v[3], std::ldexp(1.0f, -14));
  EXPECT_EQ(v[4], std::ldexp(1.0f, -24));
  EXPECT_EQ(v[5], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(v[6] == 0 && std::signbit(v[6]));
  // A NaN stays a NaN.
  absl::StatusOr<Tensor> nan = ConstantFromOnnx(Stored(onnx::TensorProto::FLOAT16, {1}, Raw16({0x7e00})), {});
  ASSERT_TRUE(nan.ok());
  EXPECT_TRUE(std::isnan(nan->data<float>()[0]));
}

TEST(OnnxNarrowConstants, BFloat16AndIntegers) {
  absl::StatusOr<Tensor> bf = ConstantFromOnnx(Stored(onnx::TensorProto::BFLOAT16, {2}, Raw16({0x3f80, 0xc040})), {});
  ASSERT_TRUE(bf.ok()) << bf.status();
  EXPECT_EQ(bf->data<float>()[0], 1.0f);
  EXPECT_EQ(bf->data<float>()[1], -3.0f);
  absl::StatusOr<Tensor> i8 = ConstantFromOnnx(Stored(onnx::TensorProto::INT8, {3}, std::string("\x7f\x80\xff", 3)), {});
  ASSERT_TRUE(i8.ok()) << i8.status();
  ASSERT_EQ(i8->TypeString(), "i32[3]");
  EXPECT_EQ(i8->data<int32_t>()[0], 127);
  EXPECT_EQ(i8->data<int32_t>()[1], -128);
  EXPECT_EQ(i8->data<int32_t>()[2], -1);
  absl::StatusOr<Tensor> u8 = ConstantFromOnnx(Stored(onnx::TensorProto::UINT8, {2}, std::string("\xff\x01", 2)), {});
  ASSERT_TRUE(u8.ok());
  EXPECT_EQ(u8->data<int32_t>()[0], 255);
  // The typed field form: int32_data holds UINT16 values.
  onnx::TensorProto u16;
  u16.set_data_type(onnx::TensorProto::UINT16);
  u16.add_dims(2);
  u16.add_int32_data(65535);
  u16.add_int32_data(7);
  absl::StatusOr<Tensor> w = ConstantFromOnnx(u16, {});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->data<int32_t>()[0], 65535);
  EXPECT_EQ(w->data<int32_t>()[1], 7);
}

TEST(OnnxNarrowConstants, BadPayloadsAreErrors) {
  EXPECT_THAT(std::string(ConstantFromOnnx(Stored(onnx::TensorProto::FLOAT16, {3}, Raw16({1, 2})), {})
                              .status().message()),
              HasSubstr("need 3"));
  uint64_t big = uint64_t{1} << 63;
  std::string raw(reinterpret_cast<const char*>(&big), 8);
  EXPECT_THAT(std::string(ConstantFromOnnx(Stored(onnx::TensorProto::UINT64, {1}, raw), {}).status().message()),
              HasSubstr("does not fit i64"));
}

// A mixed-precision export: float16 weights cast to float before use.
TEST(OnnxNarrowConstants, Float16WeightsCastToFloatImportAndRun) {
  OnnxModelBuilder b(13);
  b.Input("x", DType::kFloat32, {2});
  onnx::TensorProto w = Stored(onnx::TensorProto::FLOAT16, {2}, Raw16({0x3c00, 0xc100}));
  b.mutable_model()->mutable_graph()->add_initializer()->CopyFrom(w);
  onnx::NodeProto& cast = b.Node("Cast", {"w"}, {"wf"});
  SetAttr(cast, "to", int64_t{onnx::TensorProto::FLOAT});
  b.Node("Mul", {"x", "wf"}, {"y"});
  b.Output("y");
  absl::StatusOr<std::vector<Tensor>> out = b.Run({Tensor::FromVector<float>({2}, {3, 4})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].data<float>()[0], 3.0f);
  EXPECT_EQ((*out)[0].data<float>()[1], -10.0f);
}

TEST(OnnxNarrowConstants, Float16ValuesAtRunTimeAreRefused) {
  OnnxModelBuilder b(13);
  onnx::ValueInfoProto* v = b.mutable_model()->mutable_graph()->add_input();
  v->set_name("x");
  v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT16);
  v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
  b.Node("Relu", {"x"}, {"y"});
  b.Output("y");
  EXPECT_THAT(std::string(b.Import().status().message()), HasSubstr("FLOAT16 is not supported"));
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
