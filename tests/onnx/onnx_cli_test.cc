// The ONNX round trip through the CLI: import-onnx, run on .onnx directly, grad
// --optimize, export-onnx, and run the exported file against torch's gradients.
#include <cstdlib>
#include <sstream>
#include <vector>

#include "tests/onnx/onnx_test_util.h"
#include "tests/testing/cli_test_util.h"
#include "tools/cli.h"

namespace kgrad {
namespace onnx_test {
namespace {

using ::testing::HasSubstr;

using kgrad::testing::Cli;
using kgrad::testing::ExpectCliError;
using Result = kgrad::testing::CliResult;

std::string Tmp(const std::string& f) { return kgrad::testing::TempPath(f); }

TEST(OnnxCli, RoundTripGivesTorchGradients) {
  std::string d = DataPath("mlp");
  Result r = Cli({"import-onnx", d + ".onnx", "-o", Tmp("mlp.pb")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("4 weights"));
  r = Cli({"grad", Tmp("mlp.pb"), "--wrt", "0", "--sens", "--optimize", "-o", Tmp("mlp_grad.pb")});
  ASSERT_EQ(r.status, 0) << r.err;
  r = Cli({"export-onnx", Tmp("mlp_grad.pb"), "-o", Tmp("mlp_grad.onnx")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("opset 17"));
  // The exported gradient graph's inputs keep their names: x0 and the sensitivity.
  absl::StatusOr<std::unique_ptr<Module>> m = ImportOnnxFile(Tmp("mlp_grad.onnx"), DefaultRegistry(), [] {
    OnnxImportOptions o;
    return o;
  }());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ((*m)->entry()->parameters().size(), 2u);
  std::string sens = (*m)->entry()->parameters()[1]->name();
  r = Cli({"run", Tmp("mlp_grad.onnx"), "--input", "x0=" + d + "_in0.npy", "--input",
           sens + "=" + d + "_ct.npy", "--output", Tmp("mlp_out")});
  ASSERT_EQ(r.status, 0) << r.err;
  absl::StatusOr<Tensor> got = ReadNpyFile(Tmp("mlp_out/out.npy"));
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectClose(Value(*got), Npy("mlp_din0.npy"), 1e-5, "dx via the CLI");
}

// import-onnx --remat and grad MODEL.onnx --remat: residual blocks become
// checkpointed graphs; the gradient graph recomputes inside them and still gives
// torch's input gradient.
TEST(OnnxCli, RematMarksResidualBlocks) {
  Result r = Cli({"import-onnx", DataPath("resnet_train.onnx"), "-o", Tmp("resnet.pbtxt"), "--remat",
                  "nothing_saveable"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 residual blocks marked nothing_saveable"));
  r = Cli({"print", Tmp("resnet.pbtxt")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("remat=nothing_saveable"));
  r = Cli({"grad", DataPath("resnet_train.onnx"), "--wrt", "0", "--sens", "--remat", "dots_saveable",
           "--optimize", "-o", Tmp("resnet_grad.pbtxt")});
  ASSERT_EQ(r.status, 0) << r.err;
  r = Cli({"print", Tmp("resnet_grad.pbtxt")});
  EXPECT_THAT(r.out, HasSubstr("remat_barrier("));
  r = Cli({"import-onnx", DataPath("resnet_train.onnx"), "-o", Tmp("x.pbtxt"), "--remat", "some"});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("some"));
}

TEST(OnnxCli, RunAcceptsOnnxDirectly) {
  Result r = Cli({"run", DataPath("block13.onnx"), "--input", "x0=" + DataPath("block13_in0.npy"),
                  "--output", Tmp("block13_out")});
  ASSERT_EQ(r.status, 0) << r.err;
  absl::StatusOr<Tensor> got = ReadNpyFile(Tmp("block13_out/out.npy"));
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectClose(Value(*got), Npy("block13_out.npy"), 1e-5, "output via the CLI");
}

TEST(OnnxCli, ExportRefusesControlFlow) {
  ExpectCliError({"export-onnx", DataPath("if_pos.onnx"), "-o", Tmp("x.onnx")}, 1, {"switch is control flow"});
}

TEST(OnnxCli, HelpListsTheOnnxCommands) {
  Result r = Cli({"help"});
  EXPECT_THAT(r.out, HasSubstr("import-onnx MODEL.onnx -o OUT"));
  EXPECT_THAT(r.out, HasSubstr("export-onnx FILE -o OUT.onnx"));
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
