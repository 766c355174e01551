// The storage dtypes in graph files: DT_UINT8 ... DT_BFLOAT16 written by hand
// (int_data checked against the dtype's range, double_data rounded to the 16-bit
// floats), kept by save/load in both encodings, shown by the printer, run, and
// differentiated through cast (an f16 weight gets an f16 gradient).
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/half.h"
#include "core/printer.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "proto/convert.h"
#include "proto/model_io.h"

namespace kgrad {
namespace {

using ::testing::HasSubstr;

// out = sum(x * cast(s) * cast(u + k)): u + k wraps modulo 256.
constexpr char kNarrow[] = R"pb(
  format_version: 1
  entry: "f"
  weights { name: "s" value { dtype: DT_FLOAT16 dims: 3 double_data: [0.5, 1.5, 65504] } }
  weights { name: "k" value { dtype: DT_UINT8 dims: 3 int_data: [250, 7, 255] } }
  graphs {
    name: "f"
    parameters { name: "x" type { tensor { dtype: DT_FLOAT32 dims: 3 } } }
    parameters { name: "u" type { tensor { dtype: DT_UINT8 dims: 3 } } }
    nodes { name: "add" constant { primitive { name: "add" } } }
    nodes { name: "mul" constant { primitive { name: "mul" } } }
    nodes { name: "sum" constant { primitive { name: "reduce_sum" } } }
    nodes {
      name: "c32"
      constant { primitive { name: "cast" attrs { key: "dtype" value { dtype: DT_FLOAT32 } } } }
    }
    nodes { name: "uk" apply { inputs: ["add", "u", "k"] } }
    nodes { name: "ukf" apply { inputs: ["c32", "uk"] } }
    nodes { name: "sf" apply { inputs: ["c32", "s"] } }
    nodes { name: "xs" apply { inputs: ["mul", "x", "sf"] } }
    nodes { name: "y" apply { inputs: ["mul", "xs", "ukf"] } }
    nodes { name: "out" apply { inputs: ["sum", "y"] } }
    output: "out"
  }
)pb";

absl::StatusOr<std::unique_ptr<Module>> Load(const std::string& text) {
  proto::ModelProto p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p));
  return LoadModel(p, DefaultRegistry(), "narrow.pbtxt");
}

std::vector<Value> Inputs() {
  return {Value(Tensor::FromVector<float>({3}, {1, 2, 3})),
          Value(Tensor::FromVector<uint8_t>({3}, {10, 250, 1}))};
}

TEST(NarrowDTypeIoTest, LoadsPrintsAndRuns) {
  absl::StatusOr<std::unique_ptr<Module>> m = Load(kNarrow);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string text = PrintModule(**m);
  EXPECT_THAT(text, HasSubstr("$s : f16[3]"));
  EXPECT_THAT(text, HasSubstr("%u : u8[3]"));
  absl::StatusOr<std::unique_ptr<Executor>> ex = Executor::Create((*m)->entry());
  ASSERT_TRUE(ex.ok()) << ex.status();
  absl::StatusOr<Value> r = (*ex)->Run(Inputs());
  ASSERT_TRUE(r.ok()) << r.status();
  // u + k = [260, 257, 256] mod 256 = [4, 1, 0]: 1*0.5*4 + 2*1.5*1 + 3*65504*0.
  EXPECT_EQ(r->tensor().data<float>()[0], 5.0f);
}

TEST(NarrowDTypeIoTest, SaveAndLoadKeepTypesAndBits) {
  absl::StatusOr<std::unique_ptr<Module>> m = Load(kNarrow);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<proto::ModelProto> saved = SaveModel(**m);
  ASSERT_TRUE(saved.ok()) << saved.status();
  for (bool text : {false, true}) {
    std::string bytes;
    if (text) {
      ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(*saved, &bytes));
    } else {
      ASSERT_TRUE(saved->SerializeToString(&bytes));
    }
    absl::StatusOr<std::unique_ptr<Module>> back = ParseModel(bytes, text, DefaultRegistry());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(PrintModule(**back), PrintModule(**m));
    absl::StatusOr<std::unique_ptr<Executor>> ex = Executor::Create((*back)->entry());
    ASSERT_TRUE(ex.ok()) << ex.status();
    absl::StatusOr<Value> r = (*ex)->Run(Inputs());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->tensor().data<float>()[0], 5.0f);
  }
  // Every storage dtype through TensorProto's raw_data.
  for (DType t : {DType::kUInt8, DType::kInt8, DType::kInt16, DType::kUInt16, DType::kUInt32,
                  DType::kUInt64, DType::kFloat16, DType::kBFloat16}) {
    proto::TensorProto p;
    TensorToProto(Tensor::Full(t, {2}, 3).value(), &p);
    absl::StatusOr<Tensor> back = TensorFromProto(p, {});
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->TypeString(), absl::StrCat(DTypeName(t), "[2]"));
    EXPECT_EQ(back->ElementAsDouble(1), 3.0);
  }
}

TEST(NarrowDTypeIoTest, HandWrittenValuesMustFit) {
  proto::TensorProto p;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "dtype: DT_UINT8 dims: 2 int_data: [255, 256]", &p));
  absl::StatusOr<Tensor> t = TensorFromProto(p, {});
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("int_data[1] = 256 does not fit u8"));
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString("dtype: DT_INT8 dims: 1 int_data: [-129]", &p));
  EXPECT_FALSE(TensorFromProto(p, {}).ok());
  // A 16-bit float takes double_data, rounded to nearest even.
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "dtype: DT_BFLOAT16 dims: 1 double_data: [1.00390625]", &p));
  absl::StatusOr<Tensor> b = TensorFromProto(p, {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->data<BFloat16>()[0].bits, 0x3f80);  // 1 + 2^-8: a tie, to even
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString("dtype: DT_FLOAT16 dims: 1 int_data: [1]", &p));
  EXPECT_THAT(std::string(TensorFromProto(p, {}).status().message()), HasSubstr("double_data"));
}

TEST(NarrowDTypeIoTest, Float16WeightGetsItsGradientThroughCast) {
  absl::StatusOr<std::unique_ptr<Module>> m = Load(kNarrow);
  ASSERT_TRUE(m.ok()) << m.status();
  GradOperation grad(/*get_all=*/false, /*get_by_list=*/true);
  absl::StatusOr<FuncGraph*> g = grad(**m, (*m)->entry());
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::unique_ptr<Executor>> ex = Executor::Create(*g);
  ASSERT_TRUE(ex.ok()) << ex.status();
  absl::StatusOr<Value> r = (*ex)->Run(Inputs());
  ASSERT_TRUE(r.ok()) << r.status();
  // d out / d s_i = x_i * (u + k)_i = [4, 2, 0], in f16; k (u8) gets zeros.
  const Value& ds = r->tuple()[0];
  ASSERT_EQ(ds.tensor().TypeString(), "f16[3]");
  EXPECT_EQ(ds.tensor().ElementAsDouble(0), 4.0);
  EXPECT_EQ(ds.tensor().ElementAsDouble(1), 2.0);
  EXPECT_EQ(ds.tensor().ElementAsDouble(2), 0.0);
  EXPECT_EQ(r->tuple()[1].tensor().TypeString(), "u8[3]");
}

}  // namespace
}  // namespace kgrad
