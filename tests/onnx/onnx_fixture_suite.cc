#include "tests/onnx/onnx_fixture_suite.h"

#include "tests/onnx/onnx_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

TEST_P(OnnxFixtureTest, OutputMatchesTorch) {
  CheckFixtureOutput(GetParam().name, GetParam().num_inputs, GetParam().tol);
}

TEST_P(OnnxFixtureTest, GradientsMatchTorch) {
  CheckFixtureGradients(GetParam().name, GetParam().num_inputs, false, GetParam().tol);
}

TEST_P(OnnxFixtureTest, OptimizedGradientsMatchTorch) {
  CheckFixtureGradients(GetParam().name, GetParam().num_inputs, true, GetParam().tol);
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
