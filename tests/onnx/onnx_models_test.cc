// PyTorch models as users export them (tests/onnx/make_model_fixtures.py):
// torchvision classifiers in training mode (BatchNorm with batch statistics,
// cross_entropy), a transformer encoder, an embedding classifier with padding, and
// zoos of activations and losses. Each is imported, run and differentiated with
// respect to its float inputs and every weight, against torch.autograd, in float32.
#include <string>

#include "tests/onnx/onnx_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

struct Model {
  const char* name;
  int num_inputs;
};

std::ostream& operator<<(std::ostream& os, const Model& m) { return os << m.name; }

// The bound: 1e-4 relative to the largest magnitude, float32 (deeper
// graphs than onnx_import_test's, with batch statistics).
constexpr double kTol = 1e-4;

class OnnxModelTest : public testing::TestWithParam<Model> {};

TEST_P(OnnxModelTest, OutputMatchesTorch) {
  CheckFixtureOutput(GetParam().name, GetParam().num_inputs, kTol);
}

TEST_P(OnnxModelTest, GradientsMatchTorch) {
  CheckFixtureGradients(GetParam().name, GetParam().num_inputs, false, kTol);
}

TEST_P(OnnxModelTest, OptimizedGradientsMatchTorch) {
  CheckFixtureGradients(GetParam().name, GetParam().num_inputs, true, kTol);
}

INSTANTIATE_TEST_SUITE_P(
    Torch, OnnxModelTest,
    testing::Values(Model{"resnet_train", 2}, Model{"mobilenet_v2_train", 1},
                    Model{"shufflenet_v2_train", 1}, Model{"squeezenet", 1},
                    Model{"mnasnet_train", 1}, Model{"transformer_encoder", 1},
                    Model{"act_zoo", 1}, Model{"loss_zoo", 3}, Model{"embedding", 2},
                    Model{"groupnorm", 1}, Model{"unet", 1}),
    [](const testing::TestParamInfo<Model>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
