// Neural-network primitives (softmax, log_softmax, the cross-entropies,
// batch_norm, layer_norm, dropout, dynamic_dropout): definitions (attributes, inference, bprop
// rules), and the checks and parsed attributes that inference and the CPU and
// CUDA kernels share.
#ifndef KGRAD_OPS_NN_H_
#define KGRAD_OPS_NN_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {

void RegisterNnOps(std::vector<PrimitiveDef>* defs);

// softmax / log_softmax{axis}(x): x floating; the axis, normalised.
absl::StatusOr<int> ParseSoftmax(const Primitive& p, TensorType x);

// softmax_cross_entropy{axis}(logits, labels): both floating, of one dtype and
// one shape (unknown dims of either filled from the other).
struct CrossEntropyAxis {
  int axis;   // normalised: the dim summed over
  Shape out;  // the loss: the common shape without `axis`
};
absl::StatusOr<CrossEntropyAxis> ParseSoftmaxCrossEntropy(const Primitive& p, TensorType logits,
                                                          TensorType labels, CheckedBy by);
// The same for a kernel's inputs (logits, labels), with the kernels' wording.
absl::StatusOr<CrossEntropyAxis> ParseSoftmaxCrossEntropyKernel(
    const Primitive& p, const std::array<const Tensor*, 2>& in);

// sparse_softmax_cross_entropy(logits[N, C], labels[N]): logits floating of rank
// 2, labels i32 or i64 of rank 1, one per row. The loss's shape [N].
absl::StatusOr<Shape> SparseSoftmaxCrossEntropyShape(TensorType logits, TensorType labels);
// The kernels' error for a label outside [0, C), found at run time.
absl::Status LabelOutOfRange(int64_t label, int64_t position, int64_t classes);

// batch_norm{epsilon, axis}(x, scale[C], bias[C]), x of rank >= 2 with C at
// `axis`; layer_norm{begin_norm_axis, epsilon}(x, scale, bias), scale and bias
// shaped like x's dims from begin_norm_axis on. All floating, of x's dtype;
// epsilon finite and >= 0.
struct NormAttrs {
  int axis;  // normalised: batch_norm's channel dim, layer_norm's first normalised dim
  double epsilon;
};
absl::StatusOr<NormAttrs> ParseBatchNorm(const Primitive& p, TensorType x, TensorType scale,
                                         TensorType bias, CheckedBy by);
absl::StatusOr<NormAttrs> ParseLayerNorm(const Primitive& p, TensorType x, TensorType scale,
                                         TensorType bias, CheckedBy by);
// The same for a kernel's inputs (x, scale, bias), with the kernels' wording.
absl::StatusOr<NormAttrs> ParseBatchNormKernel(const Primitive& p,
                                               const std::array<const Tensor*, 3>& in);
absl::StatusOr<NormAttrs> ParseLayerNormKernel(const Primitive& p,
                                               const std::array<const Tensor*, 3>& in);

// batch_norm_grad{epsilon, axis}(x, scale, dy) and layer_norm_grad{begin_norm_axis,
// epsilon}(x, scale, dy): the norms' (dx, dscale, dbias), dy of x's dtype and
// shape; the attributes and x and scale as their forward ops check them.
absl::StatusOr<NormAttrs> ParseBatchNormGrad(const Primitive& p, TensorType x, TensorType scale,
                                             TensorType dy, CheckedBy by);
absl::StatusOr<NormAttrs> ParseLayerNormGrad(const Primitive& p, TensorType x, TensorType scale,
                                             TensorType dy, CheckedBy by);
absl::StatusOr<NormAttrs> ParseBatchNormGradKernel(const Primitive& p,
                                                   const std::array<const Tensor*, 3>& in);
absl::StatusOr<NormAttrs> ParseLayerNormGradKernel(const Primitive& p,
                                                   const std::array<const Tensor*, 3>& in);

// dropout{rate, seed}(x): x floating, rate in [0, 1).
struct DropoutAttrs {
  double rate;
  uint64_t seed;  // the mask's (backends/cpu/dropout_hash.h)
};
absl::StatusOr<DropoutAttrs> ParseDropout(const Primitive& p, TensorType x);

// dynamic_dropout{seed}(x, rate): dropout with the rate an operand computed at run
// time (ONNX Dropout's ratio and training_mode inputs when they are not
// constants), a one-element tensor (rank 0 or [1]) of x's floating dtype.
// Inference checks the types; the kernels read the rate and check it is in
// [0, 1). Rate 0 is exactly the identity (every element kept, scale 1).
absl::Status CheckDynamicDropout(const Primitive& p, TensorType x, TensorType rate);
absl::StatusOr<DropoutAttrs> ParseDynamicDropout(const Primitive& p, const Tensor& x, const Tensor& rate);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_NN_H_
