// Imports each PyTorch-exported fixture, runs it and compares with torch's output;
// then differentiates it with kgrad (inputs and weights, torch's cotangent) and
// compares with torch.autograd's gradients. float32 throughout.
#include "tests/onnx/onnx_fixture_suite.h"

namespace kgrad {
namespace onnx_test {
namespace {

// Float32 round-off over these small graphs stays near 1e-6 of the tensor scale;
// the bound leaves a margin for different summation orders.
constexpr double kTol = 1e-5;

INSTANTIATE_TEST_SUITE_P(Torch, OnnxFixtureTest,
                         ::testing::Values(Fixture{"mlp", 1, kTol}, Fixture{"cnn", 1, kTol},
                                         Fixture{"block13", 1, kTol}, Fixture{"block17", 1, kTol},
                                         Fixture{"if_pos", 1, kTol}, Fixture{"if_neg", 1, kTol},
                                         Fixture{"loop", 1, kTol}),
                         FixtureName);

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
