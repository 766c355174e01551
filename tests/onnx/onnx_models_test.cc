// PyTorch models as users export them (tests/onnx/make_model_fixtures.py):
// torchvision classifiers in training mode (BatchNorm with batch statistics,
// cross_entropy; image and video models), a transformer encoder, an embedding
// classifier with padding, zoos of activations and losses, and a scripted loop
// over Python lists (ONNX sequences). Each is imported, run and differentiated
// with respect to its float inputs and every weight, against torch.autograd, in
// float32.
#include <string>

#include "tests/onnx/onnx_fixture_suite.h"
#include "tests/onnx/onnx_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

// The bound: 1e-4 relative to the largest magnitude, float32 (deeper
// graphs than onnx_import_test's, with batch statistics).
constexpr double kTol = 1e-4;

INSTANTIATE_TEST_SUITE_P(
    Torch, OnnxFixtureTest,
    ::testing::Values(Fixture{"resnet_train", 2, kTol}, Fixture{"mobilenet_v2_train", 1, kTol},
                    Fixture{"shufflenet_v2_train", 1, kTol}, Fixture{"squeezenet", 1, kTol},
                    Fixture{"mnasnet_train", 1, kTol}, Fixture{"transformer_encoder", 1, kTol},
                    Fixture{"act_zoo", 1, kTol}, Fixture{"loss_zoo", 3, kTol}, Fixture{"embedding", 2, kTol},
                    Fixture{"groupnorm", 1, kTol}, Fixture{"unet", 1, kTol},
                    // torchvision's video ResNets (3-D windows) at widths 8-16.
                    Fixture{"r3d_18_train", 2, kTol}, Fixture{"mc3_18_train", 2, kTol},
                    Fixture{"r2plus1d_18_train", 2, kTol},
                    // pack_padded_sequence around a bidirectional GRU / LSTM: a
                    // sequence_lens computed in the graph.
                    Fixture{"packed_gru", 2, kTol}, Fixture{"packed_lstm", 2, kTol},
                    // F.grid_sample in every mode, padding and align_corners, 4-D and
                    // 5-D: d/dx and d/dgrid.
                    Fixture{"grid_sample_zoo", 2, kTol}, Fixture{"grid_sample3d_zoo", 2, kTol},
                    // Quantisation-aware training: QuantizeLinear -> DequantizeLinear
                    // pairs with the straight-through gradient.
                    Fixture{"qat_cnn", 1, kTol},
                    // dyn_list_cat's scripted model at [3, 6, 8], for the weight
                    // gradients through ONNX sequences: the Linear runs in a Loop body
                    // whose results reach the output by SequenceInsert, SequenceAt,
                    // SplitToSequence and ConcatFromSequence (d lin.weight, d lin.bias).
                    Fixture{"list_cat", 1, kTol}),
    FixtureName);

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
