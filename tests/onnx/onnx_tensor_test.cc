// Tensors of the narrow types (float16, bfloat16, 8/16-bit and unsigned integers)
// keep their types at import: constants, graph inputs and exports.
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

using ::testing::HasSubstr;

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

// The typed-field form of `n` elements: int32_data holds FLOAT16 bits and UINT16
// values, uint64_data UINT32 and UINT64 values.
onnx::TensorProto Typed(int32_t type, int64_t n, const std::vector<int32_t>& int32_data,
                        const std::vector<uint64_t>& uint64_data = {}) {
  onnx::TensorProto t;
  t.set_data_type(type);
  t.add_dims(n);
  for (int32_t x : int32_data) t.add_int32_data(x);
  for (uint64_t x : uint64_data) t.add_uint64_data(x);
  return t;
}

TEST(OnnxNarrowTensors, Float16IsStoredAsIs) {
  // 1, -2.5, 65504 (max), 2^-14 (min normal), 2^-24 (min subnormal), inf, -0.
  onnx::TensorProto p = Stored(onnx::TensorProto::FLOAT16, {7},
                               Raw16({0x3c00, 0xc100, 0x7bff, 0x0400, 0x0001, 0x7c00, 0x8000}));
  absl::StatusOr<Tensor> t = TensorFromOnnx(p, LoadLimits());
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->TypeString(), "f16[7]");
  EXPECT_EQ(t->data<Float16>()[2].bits, 0x7bff);
  EXPECT_EQ(t->ElementAsDouble(0), 1.0);
  EXPECT_EQ(t->ElementAsDouble(1), -2.5);
  EXPECT_EQ(t->ElementAsDouble(2), 65504.0);
  EXPECT_EQ(t->ElementAsDouble(3), std::ldexp(1.0, -14));
  EXPECT_EQ(t->ElementAsDouble(4), std::ldexp(1.0, -24));
  EXPECT_EQ(t->ElementAsDouble(5), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(t->ElementAsDouble(6) == 0 && std::signbit(t->ElementAsDouble(6)));
  absl::StatusOr<Tensor> nan = TensorFromOnnx(Stored(onnx::TensorProto::FLOAT16, {1}, Raw16({0x7e00})), {});
  ASSERT_TRUE(nan.ok());
  EXPECT_TRUE(std::isnan(nan->ElementAsDouble(0)));
  // The typed-field form: int32_data holds the bits.
  absl::StatusOr<Tensor> f = TensorFromOnnx(Typed(onnx::TensorProto::FLOAT16, 2, {0x3c00, 0xc100}), {});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->ElementAsDouble(0), 1.0);
  EXPECT_EQ(f->ElementAsDouble(1), -2.5);
}

TEST(OnnxNarrowTensors, BFloat16AndIntegersKeepTheirTypes) {
  absl::StatusOr<Tensor> bf = TensorFromOnnx(Stored(onnx::TensorProto::BFLOAT16, {2}, Raw16({0x3f80, 0xc040})), {});
  ASSERT_TRUE(bf.ok()) << bf.status();
  EXPECT_EQ(bf->TypeString(), "bf16[2]");
  EXPECT_EQ(bf->ElementAsDouble(0), 1.0);
  EXPECT_EQ(bf->ElementAsDouble(1), -3.0);
  absl::StatusOr<Tensor> i8 = TensorFromOnnx(Stored(onnx::TensorProto::INT8, {3}, std::string("\x7f\x80\xff", 3)), {});
  ASSERT_TRUE(i8.ok()) << i8.status();
  ASSERT_EQ(i8->TypeString(), "i8[3]");
  EXPECT_EQ(i8->data<int8_t>()[0], 127);
  EXPECT_EQ(i8->data<int8_t>()[1], -128);
  EXPECT_EQ(i8->data<int8_t>()[2], -1);
  absl::StatusOr<Tensor> u8 = TensorFromOnnx(Stored(onnx::TensorProto::UINT8, {2}, std::string("\xff\x01", 2)), {});
  ASSERT_TRUE(u8.ok());
  EXPECT_EQ(u8->TypeString(), "u8[2]");
  EXPECT_EQ(u8->data<uint8_t>()[0], 255);
  // int32_data holds UINT16 values, uint64_data UINT32 and UINT64 ones.
  absl::StatusOr<Tensor> w = TensorFromOnnx(Typed(onnx::TensorProto::UINT16, 2, {65535, 7}), {});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->data<uint16_t>()[0], 65535);
  EXPECT_EQ(w->data<uint16_t>()[1], 7);
  absl::StatusOr<Tensor> big = TensorFromOnnx(Typed(onnx::TensorProto::UINT64, 1, {}, {uint64_t{1} << 63}), {});
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->data<uint64_t>()[0], uint64_t{1} << 63);
}

TEST(OnnxNarrowTensors, EveryTypeRoundTripsThroughExport) {
  for (DType t : {DType::kUInt8, DType::kInt8, DType::kInt16, DType::kUInt16, DType::kUInt32,
                  DType::kUInt64, DType::kFloat16, DType::kBFloat16}) {
    absl::StatusOr<Tensor> x = Tensor::Full(t, {3}, 5);
    ASSERT_TRUE(x.ok());
    onnx::TensorProto p;
    TensorToOnnx(*x, "x", &p);
    absl::StatusOr<Tensor> back = TensorFromOnnx(p, {});
    ASSERT_TRUE(back.ok()) << DTypeName(t) << ": " << back.status();
    EXPECT_EQ(back->dtype(), t);
    EXPECT_EQ(back->ElementAsDouble(2), 5.0) << DTypeName(t);
  }
}

TEST(OnnxNarrowTensors, BadPayloadsAreErrors) {
  EXPECT_THAT(std::string(TensorFromOnnx(Stored(onnx::TensorProto::FLOAT16, {3}, Raw16({1, 2})), {})
                              .status().message()),
              HasSubstr("need 6"));
  EXPECT_THAT(std::string(TensorFromOnnx(Typed(onnx::TensorProto::UINT32, 2, {}, {1}), {}).status().message()),
              HasSubstr("holds 1 values"));
  EXPECT_THAT(std::string(TensorFromOnnx(Stored(onnx::TensorProto::STRING, {1}, ""), {}).status().message()),
              HasSubstr("STRING is not supported"));
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

// uint8 arithmetic at run time wraps modulo 256, as ONNX (NumPy) defines it.
TEST(OnnxNarrowTensors, Uint8InputsAddAndWrap) {
  OnnxModelBuilder b(13);
  b.Input("x", DType::kUInt8, {3});
  b.Input("y", DType::kUInt8, {3});
  b.Node("Add", {"x", "y"}, {"z"});
  b.Output("z");
  absl::StatusOr<std::vector<Tensor>> out =
      b.Run({Tensor::FromVector<uint8_t>({3}, {250, 7, 1}), Tensor::FromVector<uint8_t>({3}, {10, 255, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].TypeString(), "u8[3]");
  EXPECT_EQ((*out)[0].data<uint8_t>()[0], 4);
  EXPECT_EQ((*out)[0].data<uint8_t>()[1], 6);
  EXPECT_EQ((*out)[0].data<uint8_t>()[2], 3);
}

// CastLike takes the second input's element type only: double to float16
// rounds to nearest even (1 + 2^-11 is a tie between 1 and 1 + 2^-10: 1), and a
// like of the same type is the identity.
TEST(OnnxNarrowTensors, CastLikeTakesTheElementTypeOfItsSecondInput) {
  OnnxModelBuilder b(15);
  b.Input("x", DType::kFloat64, {3});
  b.Input("like", DType::kFloat16, {1});
  b.Input("same", DType::kFloat64, {5});
  b.Node("CastLike", {"x", "like"}, {"y"});
  b.Node("CastLike", {"x", "same"}, {"z"});
  b.Output("y");
  b.Output("z");
  const Tensor x = Tensor::FromVector<double>({3}, {1 + std::ldexp(1.0, -11), -2.5, 70000});
  absl::StatusOr<std::vector<Tensor>> out =
      b.Run({x, Tensor::Zeros(DType::kFloat16, {1}).value(), Tensor::Zeros(DType::kFloat64, {5}).value()});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].TypeString(), "f16[3]");
  const uint16_t* h = reinterpret_cast<const uint16_t*>((*out)[0].raw_data());
  EXPECT_EQ(h[0], 0x3c00);  // 1
  EXPECT_EQ(h[1], 0xc100);  // -2.5
  EXPECT_EQ(h[2], 0x7c00);  // beyond 65504: +inf
  ASSERT_EQ((*out)[1].TypeString(), "f64[3]");
  EXPECT_EQ((*out)[1].data<double>()[1], -2.5);

  OnnxModelBuilder bad(15);
  bad.Input("x", DType::kFloat32, {2});
  bad.Node("CastLike", {"x"}, {"y"}).set_name("cl");
  bad.Output("y");
  EXPECT_THAT(std::string(bad.Import().status().message()), HasSubstr("cl"));
}

// Ops without 16-bit float kernels refuse them at import, naming the node.
TEST(OnnxNarrowTensors, Float16ReluIsRefusedWithAStatus) {
  OnnxModelBuilder b(13);
  b.Input("x", DType::kFloat16, {2});
  b.Node("Relu", {"x"}, {"y"}).set_name("act");
  b.Output("y");
  std::string m(b.Import().status().message());
  EXPECT_THAT(m, HasSubstr("act"));
  EXPECT_THAT(m, HasSubstr("f16[2]"));
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
