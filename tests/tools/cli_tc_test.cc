// Tensor comprehensions through the CLI: every example of examples/tc passes
// `kgrad check --order 2` (float64, reverse and forward mode), its gradient
// graph holds the adjoint as another `tc`, and malformed blocks fail naming the
// graph, node, block and statement.
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/cli_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

const char* const kExamples[] = {"mv",         "sgemm",        "maxmv",        "maxpool2x2", "conv3x3",
                                 "avgpool2x2", "batch_matmul", "dilated_conv1d", "softmax",  "layernorm"};

TEST(CliTcTest, ExamplesPassTheSecondOrderCheck) {
  for (const char* name : kExamples) {
    std::string file = std::string("examples/tc/") + name + ".pbtxt";
    CliResult r = Cli({"check", file, "--order", "2", "--seed", "3"});
    EXPECT_EQ(r.status, 0) << file << ":\n" << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("PASSED")) << file;
    EXPECT_THAT(r.out, HasSubstr("jvp order 1")) << file;
  }
}

TEST(CliTcTest, ThirdOrderOfConvolutionAndSoftmax) {
  for (const char* name : {"conv3x3", "softmax"}) {
    CliResult r = Cli({"check", std::string("examples/tc/") + name + ".pbtxt", "--order", "3", "--seed", "1"});
    EXPECT_EQ(r.status, 0) << name << ":\n" << r.out << r.err;
  }
}

TEST(CliTcTest, TheGradientGraphHoldsTheAdjointBlock) {
  std::string out = TempPath("mv_grad.pbtxt");
  CliResult g = Cli({"grad", "examples/tc/mv.pbtxt", "-o", out, "--optimize"});
  ASSERT_EQ(g.status, 0) << g.err;
  CliResult p = Cli({"print", out});
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_THAT(p.out, HasSubstr("def mv_grad(float(M,N) A, float(N) B, float(M) Cx) -> (Ax, Bx)"));
  EXPECT_THAT(p.out, HasSubstr("Ax(i, j) +=! Cx(i) * B(j)"));
}

std::string BlockFile(const std::string& name, const std::string& def, const std::string& params) {
  std::string path = TempPath(name + ".pbtxt");
  std::ofstream f(path);
  f << "format_version: 1\nentry: \"f\"\ngraphs {\n  name: \"f\"\n" << params
    << "  nodes { name: \"block\" constant { primitive { name: \"tc\" attrs { key: \"def\" value { s: \"" << def
    << "\" } } } } }\n  nodes { name: \"y\" apply { inputs: [\"block\", \"A\"] } }\n  output: \"y\"\n}\n";
  return path;
}

TEST(CliTcTest, MalformedBlocksNameGraphNodeBlockAndStatement) {
  const std::string a = "  parameters { name: \"A\" type { tensor { dtype: DT_FLOAT32 dims: 3 } } }\n";
  struct Case {
    std::string def, fragment;
  };
  for (const Case& c : std::vector<Case>{
           {"def bad(float(N) A) -> (O) { O(i) +=! A(i) * k }",
            "statement 1 (`O(i) +=! A(i) * k`): index k has no range: add `where k in a:b`"},
           {"def bad(float(N) A) -> (O) { O(i) = A(i / 2 + 1) }", "non-affine index in the read of A"},
           {"def bad(float(N) A) -> (O, P) { O(i) = P(i); P(i) = A(i) }",
            "reads output 'P' before any statement writes it"},
           {"def bad(double(N) A) -> (O) { O(i) = A(i) }", "input 0 (double A) must be f64, got f32[3]"},
           {"def bad(float(N) A) -> (O) { O(i) = A(i + 1) where i in 0:N }", "reaches 3 in dim 0, of size 3"},
       }) {
    ExpectCliError({"grad", BlockFile("bad", c.def, a), "-o", TempPath("bad_grad.pbtxt")}, 1,
                   {"tc block 'bad'", c.fragment, "block"});
  }
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
