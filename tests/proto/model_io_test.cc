#include "proto/model_io.h"

#include <random>

#include "backends/executor.h"
#include "core/builder.h"
#include "core/printer.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "ops/registry.h"

namespace kgrad {
namespace {

using ::testing::HasSubstr;

// A module with weights, a closure over a weight, a switch, a recursive loop and
// nested tuples: everything the format must carry.
std::unique_ptr<Module> BuildRichModule() {
  auto m = std::make_unique<Module>(DefaultRegistry());
  GraphBuilder b(m.get(), "main");
  AnfNode* n = b.Param("n", MakeAbstractScalar(DType::kInt64));
  AnfNode* w = b.Weight("w", Tensor::FromVector<float>({2}, {1.5f, -2.0f}));
  ValueNode* get_w = b.Closure("get_w", 0, [&](GraphBuilder& c, auto) {
    return c.Tuple({w, n});
  });
  AnfNode* captured = b.Call(get_w, {});
  std::vector<AnfNode*> loop = b.While(
      {b.Int(0)},
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) { return c.Op(PrimId::kScalarLt, {s[0], n}); },
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) {
        return std::vector<AnfNode*>{c.Op(PrimId::kScalarAdd, {s[0], c.Int(2)})};
      });
  CNode* picked = b.If(
      b.Op(PrimId::kScalarGt, {n, b.Int(3)}), [&](GraphBuilder& t) { return t.Int(1); },
      [&](GraphBuilder& e) { return e.Int(-1); });
  picked->set_name("picked");
  CNode* out = b.Tuple({captured, b.Tuple({loop[0], picked}), b.Const(Value::String("key"))});
  m->set_entry(b.Return(out).value());
  return m;
}

std::string Bytes(const proto::ModelProto& p) {
  std::string s;
  p.SerializeToString(&s);
  return s;
}

TEST(ModelIoTest, SaveLoadSaveIsIdentical) {
  std::unique_ptr<Module> m = BuildRichModule();
  absl::StatusOr<proto::ModelProto> p1 = SaveModel(*m);
  ASSERT_TRUE(p1.ok()) << p1.status();
  absl::StatusOr<std::unique_ptr<Module>> m2 = LoadModel(*p1, DefaultRegistry());
  ASSERT_TRUE(m2.ok()) << m2.status();
  absl::StatusOr<proto::ModelProto> p2 = SaveModel(**m2);
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(Bytes(*p1), Bytes(*p2));
  absl::StatusOr<std::unique_ptr<Module>> m3 = LoadModel(*p2, DefaultRegistry());
  ASSERT_TRUE(m3.ok());
  EXPECT_EQ(PrintModule(**m2), PrintModule(**m3));
  EXPECT_EQ((*m2)->graphs().size(), m->graphs().size());
  ASSERT_NE((*m2)->FindWeight("w"), nullptr);
  EXPECT_TRUE(TensorsEqual(*(*m2)->FindWeight("w")->default_value(),
                           *m->FindWeight("w")->default_value()));
}

TEST(ModelIoTest, LoadedModuleComputesTheSameValues) {
  std::unique_ptr<Module> m = BuildRichModule();
  absl::StatusOr<std::string> text = ModelToText(*m);
  ASSERT_TRUE(text.ok());
  absl::StatusOr<std::unique_ptr<Module>> m2 = ParseModel(*text, true, DefaultRegistry());
  ASSERT_TRUE(m2.ok()) << m2.status();
  for (int64_t n : {0, 3, 7}) {
    absl::StatusOr<Value> a = RunGraph(m->entry(), {Value(Scalar::Int(n))});
    absl::StatusOr<Value> b = RunGraph((*m2)->entry(), {Value(Scalar::Int(n))});
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(ValuesEqual(*a, *b)) << a->ToString() << " vs " << b->ToString();
  }
  absl::StatusOr<Value> r = RunGraph((*m2)->entry(), {Value(Scalar::Int(7))});
  EXPECT_EQ(r->tuple()[1].ToString(), "(8, 1)");
}

// ----- Validation ----------------------------------------------------------------------
proto::ModelProto ParseText(const std::string& text) {
  proto::ModelProto p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

absl::Status LoadText(const std::string& text) {
  return LoadModel(ParseText(text), DefaultRegistry(), "test.pbtxt").status();
}

constexpr char kValid[] = R"pb(
  format_version: 1
  entry: "f"
  graphs {
    name: "f"
    parameters { name: "x" }
    nodes { name: "one" constant { scalar { dtype: DT_INT64 i: 1 } } }
    nodes { name: "add" constant { primitive { name: "scalar_add" } } }
    nodes { name: "y" apply { inputs: "add" inputs: "x" inputs: "one" } }
    output: "y"
  }
)pb";

TEST(ModelIoValidationTest, ValidTextLoadsAndRuns) {
  absl::StatusOr<std::unique_ptr<Module>> m = LoadModel(ParseText(kValid), DefaultRegistry());
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Value> r = RunGraph((*m)->entry(), {Value(Scalar::Int(41))});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->scalar().AsInt(), 42);
}

struct BadCase {
  const char* name;
  std::string text;
  absl::StatusCode code;
  std::vector<std::string> substrings;
};

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  size_t i = s.find(from);
  EXPECT_NE(i, std::string::npos) << from;
  return s.replace(i, from.size(), to);
}

class BadModelTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadModelTest, IsRejectedWithAClearStatus) {
  absl::Status s = LoadText(GetParam().text);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), GetParam().code) << s;
  EXPECT_THAT(s.message(), HasSubstr("test.pbtxt")) << s;
  for (const std::string& sub : GetParam().substrings) EXPECT_THAT(s.message(), HasSubstr(sub)) << s;
}

std::vector<BadCase> BadCases() {
  std::string v = kValid;
  return {
      {"unknown_primitive", Replace(v, "scalar_add", "frobnicate"), absl::StatusCode::kNotFound,
       {"node 'add'", "unknown primitive 'frobnicate'", "known primitives:", "scalar_add"}},
      {"dangling_reference", Replace(v, "inputs: \"one\"", "inputs: \"two\""),
       absl::StatusCode::kInvalidArgument, {"graph 'f', node 'y'", "unknown name 'two'"}},
      {"cycle",
       Replace(v, "nodes { name: \"y\" apply { inputs: \"add\" inputs: \"x\" inputs: \"one\" } }",
               "nodes { name: \"y\" apply { inputs: \"add\" inputs: \"x\" inputs: \"z\" } }"
               "nodes { name: \"z\" apply { inputs: \"add\" inputs: \"y\" inputs: \"one\" } }"),
       absl::StatusCode::kInvalidArgument, {"node 'y'", "cycle"}},
      {"bad_dtype", Replace(v, "dtype: DT_INT64", "dtype: DT_INVALID"),
       absl::StatusCode::kInvalidArgument, {"node 'one'", "bad dtype"}},
      {"byte_count_mismatch",
       Replace(v, "scalar { dtype: DT_INT64 i: 1 }",
               "tensor { dtype: DT_FLOAT32 dims: 2 dims: 3 raw_data: \"abc\" }"),
       absl::StatusCode::kInvalidArgument, {"node 'one'", "needs 24 bytes", "has 3"}},
      {"negative_dim",
       Replace(v, "scalar { dtype: DT_INT64 i: 1 }", "tensor { dtype: DT_FLOAT32 dims: -2 }"),
       absl::StatusCode::kInvalidArgument, {"node 'one'", "negative dimension -2"}},
      {"overflowing_dims",
       Replace(v, "scalar { dtype: DT_INT64 i: 1 }",
               "tensor { dtype: DT_FLOAT32 dims: 4611686018427387904 dims: 8 }"),
       absl::StatusCode::kInvalidArgument, {"node 'one'", "more than"}},
      {"unresolved_free_variable",
       v + R"pb(graphs { name: "g" parent: "f" free_variables: "nope" output: "nope" })pb",
       absl::StatusCode::kInvalidArgument, {"graph 'g'", "free variable 'nope'", "searched f"}},
      {"duplicate_names",
       Replace(v, "nodes { name: \"one\"", "nodes { name: \"x\""),
       absl::StatusCode::kInvalidArgument, {"node 'x'", "duplicate name"}},
      {"duplicate_graphs", v + R"pb(graphs { name: "f" output: "x" })pb",
       absl::StatusCode::kInvalidArgument, {"graph 'f'", "duplicate graph name"}},
      {"unsupported_version", Replace(v, "format_version: 1", "format_version: 7"),
       absl::StatusCode::kUnimplemented, {"unsupported format_version 7"}},
      {"missing_version", Replace(v, "format_version: 1", ""),
       absl::StatusCode::kInvalidArgument, {"format_version is missing"}},
      {"wrong_attribute",
       Replace(v, "primitive { name: \"scalar_add\" }",
               "primitive { name: \"scalar_to_tensor\" attrs { key: \"dtype\" value { i: 3 } } }"),
       absl::StatusCode::kInvalidArgument, {"node 'add'", "attribute 'dtype'", "must be dtype"}},
      {"wrong_arity", Replace(v, "inputs: \"x\" inputs: \"one\"", "inputs: \"x\""),
       absl::StatusCode::kFailedPrecondition, {"node 'y'", "takes 2 inputs, got 1"}},
      {"unknown_parent", v + R"pb(graphs { name: "g" parent: "zz" output: "x" })pb",
       absl::StatusCode::kInvalidArgument, {"graph 'g'", "parent 'zz'"}},
      {"unknown_graph_constant",
       Replace(v, "primitive { name: \"scalar_add\" }", "graph: \"missing\""),
       absl::StatusCode::kInvalidArgument, {"node 'add'", "unknown graph 'missing'"}},
      {"no_output", Replace(v, "output: \"y\"", ""), absl::StatusCode::kInvalidArgument,
       {"graph 'f'", "has no output"}},
  };
}

INSTANTIATE_TEST_SUITE_P(All, BadModelTest, ::testing::ValuesIn(BadCases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ModelIoValidationTest, TruncatedFilesAreRejectedNeverCrash) {
  std::unique_ptr<Module> m = BuildRichModule();
  std::string bytes = Bytes(*SaveModel(*m));
  ASSERT_GT(bytes.size(), 100u);
  int rejected = 0;
  for (size_t len = 0; len < bytes.size(); ++len) {
    absl::StatusOr<std::unique_ptr<Module>> r =
        ParseModel(absl::string_view(bytes.data(), len), false, DefaultRegistry(), "cut.pb");
    if (!r.ok()) {
      ++rejected;
      EXPECT_THAT(r.status().message(), HasSubstr("cut.pb"));
    }
  }
  // A prefix that ends on a field boundary may parse and validate (it is a valid
  // smaller model) but almost all prefixes cannot.
  EXPECT_GT(rejected, static_cast<int>(bytes.size() * 9 / 10));
}

TEST(ModelIoValidationTest, RandomAndMutatedBytesAreRejectedNeverCrash) {
  std::mt19937_64 rng(1234);
  std::unique_ptr<Module> m = BuildRichModule();
  std::string good = Bytes(*SaveModel(*m));
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes;
    if (trial % 2 == 0) {
      bytes.resize(rng() % 512);
      for (char& c : bytes) c = static_cast<char>(rng());
    } else {
      bytes = good;
      for (int k = 0; k < 1 + static_cast<int>(rng() % 8); ++k) {
        bytes[rng() % bytes.size()] = static_cast<char>(rng());
      }
    }
    absl::StatusOr<std::unique_ptr<Module>> r =
        ParseModel(bytes, trial % 3 == 0, DefaultRegistry(), "fuzz.pb");
    if (!r.ok()) {
      EXPECT_THAT(r.status().message(), HasSubstr("fuzz.pb"));
    }
  }
}

}  // namespace
}  // namespace kgrad
