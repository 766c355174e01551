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

// Every residual block outlined into a checkpointed graph at import
// (OnnxImportOptions::remat_residual_blocks): the blocks are found, and the
// gradients, recomputed inside each block's backward pass, still match torch.
TEST(OnnxRematTest, ResidualBlocksOfImportedModelsAreCheckpointed) {
  struct Case {
    const char* name;
    int num_inputs;
    size_t min_blocks;  // resnet_train: its BasicBlocks; the encoder: attention and MLP
  };
  for (const Case& c : {Case{"resnet_train", 2, 2}, Case{"transformer_encoder", 1, 2}}) {
    for (RematPolicy policy : {RematPolicy::kNothingSaveable, RematPolicy::kDotsSaveable}) {
      OnnxImportOptions o;
      o.remat_residual_blocks = policy;
      absl::StatusOr<std::unique_ptr<Module>> m = ImportFixture(c.name, o);
      ASSERT_TRUE(m.ok()) << m.status();
      size_t blocks = 0;
      for (const auto& g : (*m)->graphs()) blocks += g->remat() == policy ? 1 : 0;
      EXPECT_GE(blocks, c.min_blocks) << c.name;
      CheckFixtureOutput(c.name, c.num_inputs, kTol);
      CheckFixtureGradients(c.name, c.num_inputs, /*optimize=*/true, kTol, o);
    }
    OnnxImportOptions o;
    o.remat_residual_blocks = RematPolicy::kNothingSaveable;
    CheckFixtureGradients(c.name, c.num_inputs, /*optimize=*/false, kTol, o);
  }
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
