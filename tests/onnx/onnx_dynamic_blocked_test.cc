// Dynamic-axes fixtures that do not import yet (tagged "manual" in BUILD.bazel):
// torch's exports read sizes at run time, which needs the run-time shape
// primitives (shape_of, dynamic_reshape, dynamic_fill, ...). Once they exist,
// drop the tag; the checks are those of onnx_dynamic_models_test.
//   dyn_transformer: Shape of the [seq,batch,16] activations in self_attn feeds
//     the shape input of 10 Reshapes (to [seq, batch * heads, 8] and back) and the
//     starts/ends of 10 Slices: shape_of + dynamic_reshape + dynamic_slice.
//   dyn_lstm: h0/c0 = ConstantOfShape(Concat(2, Gather(Shape(x), 1), 12)):
//     shape_of + dynamic_fill (the LSTM node itself imports with symbolic seq
//     and batch, see onnx_rnn_test's *_symbolic cases).
#include <string>

#include "tests/onnx/onnx_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

constexpr double kTol = 1e-4;  // as onnx_models_test

TEST(OnnxDynamicBlockedTest, TransformerEncoderAtThreeSizes) {
  CheckDynamicFixture("dyn_transformer", {"b1s5", "b3s17", "b8s5"}, kTol);
}

TEST(OnnxDynamicBlockedTest, LstmAtThreeSizes) {
  CheckDynamicFixture("dyn_lstm", {"b1s5", "b3s17", "b8s5"}, kTol);
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
