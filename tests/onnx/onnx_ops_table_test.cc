// README.md's table of supported ONNX ops is the one the importer's registry
// prints (`kgrad onnx-ops`), and the notes behind it cover exactly the mapped ops.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/onnx/onnx_import.h"

namespace kgrad {
namespace {

constexpr char kBegin[] = "<!-- onnx-ops:begin (kgrad onnx-ops) -->\n";
constexpr char kEnd[] = "<!-- onnx-ops:end -->";

TEST(OnnxOpsTable, EveryMappedOpIsDocumentedOnce) {
  std::vector<std::string> documented = DocumentedOnnxOps();
  std::vector<std::string> sorted = documented;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(documented, sorted) << "keep the notes in alphabetical order";
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "an op is noted twice";
  EXPECT_THAT(sorted, ::testing::ContainerEq(SupportedOnnxOps()));
}

TEST(OnnxOpsTable, ReadmeHoldsTheGeneratedTable) {
  std::ifstream in("README.md");
  ASSERT_TRUE(in.good()) << "README.md is a data dependency of this test";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string readme = ss.str();
  size_t b = readme.find(kBegin);
  size_t e = readme.find(kEnd);
  ASSERT_NE(b, std::string::npos) << "README.md lacks " << kBegin;
  ASSERT_NE(e, std::string::npos) << "README.md lacks " << kEnd;
  b += sizeof(kBegin) - 1;
  ASSERT_LE(b, e);
  EXPECT_EQ(readme.substr(b, e - b), SupportedOnnxOpsMarkdown())
      << "README.md's ONNX table is stale: replace it with the output of `kgrad onnx-ops`";
}

TEST(OnnxOpsTable, ListsTheOpsTorchExportsMost) {
  std::vector<std::string> ops = SupportedOnnxOps();
  for (const char* op : {"Conv", "BatchNormalization", "SoftmaxCrossEntropyLoss", "Gemm", "Relu",
                         "MaxPool", "LayerNormalization", "Dropout"}) {
    EXPECT_THAT(ops, ::testing::Contains(std::string(op)));
  }
}

}  // namespace
}  // namespace kgrad
