// Imports each PyTorch-exported fixture, runs it and compares with torch's output;
// then differentiates it with kgrad (inputs and weights, torch's cotangent) and
// compares with torch.autograd's gradients. float32 throughout.
#include <vector>

#include "tests/onnx/onnx_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

struct Fixture {
  const char* name;
  int num_inputs;
};

std::ostream& operator<<(std::ostream& os, const Fixture& f) { return os << f.name; }

// Float32 round-off over these small graphs stays near 1e-6 of the tensor scale;
// the bound leaves a margin for different summation orders.
constexpr double kTol = 1e-5;

class OnnxFixtureTest : public testing::TestWithParam<Fixture> {};

TEST_P(OnnxFixtureTest, OutputMatchesTorch) {
  CheckFixtureOutput(GetParam().name, GetParam().num_inputs, kTol);
}

TEST_P(OnnxFixtureTest, GradientsMatchTorch) {
  CheckFixtureGradients(GetParam().name, GetParam().num_inputs, false, kTol);
}

TEST_P(OnnxFixtureTest, OptimizedGradientsMatchTorch) {
  CheckFixtureGradients(GetParam().name, GetParam().num_inputs, true, kTol);
}

INSTANTIATE_TEST_SUITE_P(Torch, OnnxFixtureTest,
                         testing::Values(Fixture{"mlp", 1}, Fixture{"cnn", 1}, Fixture{"block13", 1},
                                         Fixture{"block17", 1}, Fixture{"if_pos", 1},
                                         Fixture{"if_neg", 1}, Fixture{"loop", 1}),
                         [](const testing::TestParamInfo<Fixture>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
