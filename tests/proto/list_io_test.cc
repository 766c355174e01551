// Lists in graph files: a list-typed parameter (with and without a known
// element type) and a list constant load, run, and survive save/load in the
// binary and text encodings with their types; a list constant whose elements'
// types differ is refused with a message.
#include <memory>
#include <string>

#include "backends/executor.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "proto/convert.h"
#include "proto/model_io.h"

namespace kgrad {
namespace {

using ::testing::HasSubstr;

// f(xs, extra) = list_concat(list_insert(xs, 0, c[1])) with c = [[1, 2], [3]]:
// the constant's second element put in front of the parameter's elements.
constexpr char kListModel[] = R"pb(
  format_version: 1
  entry: "f"
  graphs {
    name: "f"
    parameters { name: "xs" type { list { element { tensor { dtype: DT_FLOAT64 dims: -1 } } } } }
    parameters { name: "empty" type { list {} } }
    nodes { name: "ins" constant { primitive { name: "list_insert" } } }
    nodes { name: "get" constant { primitive { name: "list_getitem" } } }
    nodes { name: "cat" constant { primitive { name: "list_concat" } } }
    nodes {
      name: "c"
      constant {
        list {
          elements { tensor { dtype: DT_FLOAT64 dims: 2 double_data: [1, 2] } }
          elements { tensor { dtype: DT_FLOAT64 dims: 1 double_data: [3] } }
        }
      }
    }
    nodes { name: "zero" constant { scalar { dtype: DT_INT64 i: 0 } } }
    nodes { name: "one" constant { scalar { dtype: DT_INT64 i: 1 } } }
    nodes { name: "c1" apply { inputs: ["get", "c", "one"] } }
    nodes { name: "l" apply { inputs: ["ins", "xs", "zero", "c1"] } }
    nodes { name: "out" apply { inputs: ["cat", "l"] } }
    output: "out"
  }
)pb";

absl::StatusOr<std::unique_ptr<Module>> Load(const std::string& text) {
  proto::ModelProto p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p));
  return LoadModel(p, DefaultRegistry(), "list.pbtxt");
}

std::vector<double> RunModel(Module& m) {
  absl::StatusOr<std::unique_ptr<Executor>> e = Executor::Create(m.entry());
  EXPECT_TRUE(e.ok()) << e.status();
  Value xs = Value::List({Value(Tensor::FromVector<double>({2}, {4, 5})), Value(Tensor::FromVector<double>({1}, {6}))});
  absl::StatusOr<Value> out = (*e)->Run({xs, Value::List({})});
  EXPECT_TRUE(out.ok()) << out.status();
  const Tensor& t = out->tensor();
  return std::vector<double>(t.data<double>(), t.data<double>() + t.NumElements());
}

TEST(ListIoTest, LoadsRunsAndRoundTrips) {
  absl::StatusOr<std::unique_ptr<Module>> m = Load(kListModel);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(RunModel(**m), (std::vector<double>{3, 4, 5, 6}));
  absl::StatusOr<proto::ModelProto> saved = SaveModel(**m);
  ASSERT_TRUE(saved.ok()) << saved.status();
  // Binary, then text: the parameter types and the constant come back.
  proto::ModelProto binary;
  ASSERT_TRUE(binary.ParseFromString(saved->SerializeAsString()));
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(binary, &text));
  EXPECT_THAT(text, HasSubstr("list {"));
  absl::StatusOr<std::unique_ptr<Module>> again = Load(text);
  ASSERT_TRUE(again.ok()) << again.status();
  const auto& params = (*again)->entry()->parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0]->declared()->ToString(), "list<f64[?]>");
  EXPECT_EQ(params[1]->declared()->ToString(), "list<?>");
  EXPECT_EQ(RunModel(**again), (std::vector<double>{3, 4, 5, 6}));
}

TEST(ListIoTest, AListConstantOfMixedTypesIsRefused) {
  std::string text = kListModel;
  const std::string one = "elements { tensor { dtype: DT_FLOAT64 dims: 1 double_data: [3] } }";
  text.replace(text.find(one), one.size(), "elements { scalar { dtype: DT_INT64 i: 3 } }");
  absl::StatusOr<std::unique_ptr<Module>> m = Load(text);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("list constant: its elements have different types"));
}

}  // namespace
}  // namespace kgrad
