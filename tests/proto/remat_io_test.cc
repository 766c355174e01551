// Remat policies in graph files: written as GraphProto.remat, read back in both
// encodings, absent for the default, and an unknown spelling refused with a
// status naming the graph.
#include <fstream>
#include <sstream>

#include "core/builder.h"
#include "core/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "proto/model_io.h"

namespace kgrad {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// main(x) = inner(outer_layer(x)), with outer_layer nothing_saveable and inner
// dots_saveable; main keeps the default.
std::unique_ptr<Module> MarkedModule() {
  auto m = std::make_unique<Module>(DefaultRegistry());
  GraphBuilder lb(m.get(), "layer");
  AnfNode* x = lb.Param("x", DType::kFloat32, {2});
  FuncGraph* layer = lb.Return(lb.Op(PrimId::kTanh, {x})).value();
  layer->set_remat(RematPolicy::kNothingSaveable);
  GraphBuilder ib(m.get(), "inner");
  AnfNode* y = ib.Param("y", DType::kFloat32, {2});
  FuncGraph* inner = ib.Return(ib.Op(PrimId::kExp, {y})).value();
  inner->set_remat(RematPolicy::kDotsSaveable);
  GraphBuilder b(m.get(), "main");
  AnfNode* p = b.Param("p", DType::kFloat32, {2});
  m->set_entry(b.Return(b.Call(inner, {b.Call(layer, {p})})).value());
  return m;
}

void ExpectPolicies(Module& m) {
  ASSERT_NE(m.FindGraph("layer"), nullptr);
  ASSERT_NE(m.FindGraph("inner"), nullptr);
  EXPECT_EQ(m.FindGraph("layer")->remat(), RematPolicy::kNothingSaveable);
  EXPECT_EQ(m.FindGraph("inner")->remat(), RematPolicy::kDotsSaveable);
  EXPECT_EQ(m.entry()->remat(), RematPolicy::kEverythingSaveable);
}

TEST(RematIoTest, TextRoundTrip) {
  std::unique_ptr<Module> m = MarkedModule();
  absl::StatusOr<std::string> text = ModelToText(*m);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("remat: \"nothing_saveable\""));
  EXPECT_THAT(*text, HasSubstr("remat: \"dots_saveable\""));
  EXPECT_THAT(*text, Not(HasSubstr("everything_saveable")));  // the default is not written
  absl::StatusOr<std::unique_ptr<Module>> back = ParseModel(*text, /*text=*/true, DefaultRegistry());
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectPolicies(**back);
  EXPECT_EQ(*ModelToText(**back), *text);
  EXPECT_THAT(PrintModule(**back), HasSubstr("remat=dots_saveable"));
}

TEST(RematIoTest, BinaryRoundTrip) {
  std::unique_ptr<Module> m = MarkedModule();
  absl::StatusOr<proto::ModelProto> p = SaveModel(*m);
  ASSERT_TRUE(p.ok()) << p.status();
  std::string bytes;
  ASSERT_TRUE(p->SerializeToString(&bytes));
  absl::StatusOr<std::unique_ptr<Module>> back = ParseModel(bytes, /*text=*/false, DefaultRegistry());
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectPolicies(**back);
}

TEST(RematIoTest, FilesRoundTrip) {
  for (const char* ext : {".pb", ".pbtxt"}) {
    std::string path = absl::StrCat(::testing::TempDir(), "/remat", ext);
    std::unique_ptr<Module> m = MarkedModule();
    ASSERT_TRUE(SaveModelFile(*m, path).ok());
    absl::StatusOr<std::unique_ptr<Module>> back = LoadModelFile(path, DefaultRegistry());
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectPolicies(**back);
  }
}

TEST(RematIoTest, UnknownPolicyNamesTheGraph) {
  std::unique_ptr<Module> m = MarkedModule();
  absl::StatusOr<std::string> text = ModelToText(*m);
  ASSERT_TRUE(text.ok());
  std::string bad = *text;
  size_t at = bad.find("dots_saveable");
  ASSERT_NE(at, std::string::npos);
  bad.replace(at, 13, "sometimes");
  absl::StatusOr<std::unique_ptr<Module>> back = ParseModel(bad, /*text=*/true, DefaultRegistry(), "bad.pbtxt");
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(back.status().message()), HasSubstr("graph 'inner'"));
  EXPECT_THAT(std::string(back.status().message()), HasSubstr("'sometimes'"));
}

}  // namespace
}  // namespace kgrad
