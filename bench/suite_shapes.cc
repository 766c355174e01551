#include "bench/suite_shapes.h"

#include <algorithm>

namespace kgrad {
namespace bench {

// Every plan below is: weights + inputs + saved activations + weight gradients +
// the largest live temporaries, where
//   saved = what the backward pass reads from the forward one; we assume all of
//     it is still alive when the backward pass starts (the peak of a plain
//     reverse sweep: nothing is recomputed, nothing freed early),
//   grads = one gradient per weight (the step's result),
//   temporaries = the largest pair of sensitivities alive at once: the incoming
//     one of a layer and the outgoing one it produces (elementwise backward
//     steps can work in place). Kernel scratch (im2col tiles, a few hundred KB
//     here) is not counted: a direct convolution needs none.
// A clever plan could go lower (free saved values as the sweep passes them);
// this is the minimum of the straightforward plan every framework here uses.

double MlpStepFlops(const SuiteShapes& s) {
  const std::vector<int64_t>& n = s.mlp_sizes;
  double fwd = 0;
  for (size_t l = 0; l + 1 < n.size(); ++l) fwd += 2.0 * s.mlp_batch * n[l] * n[l + 1];
  double dx = fwd - 2.0 * s.mlp_batch * n[0] * n[1];
  return fwd + fwd + dx;
}

MemoryPlan MlpStepPlan(const SuiteShapes& s) {
  const std::vector<int64_t>& n = s.mlp_sizes;
  const double b = static_cast<double>(s.mlp_batch), f = 4;
  MemoryPlan p;
  int64_t widest = 0;
  for (size_t l = 0; l + 1 < n.size(); ++l) p.weights += f * (n[l] * n[l + 1] + n[l + 1]);
  p.inputs = f * b * (n.front() + n.back());
  // tanh outputs of the hidden layers (the next matmul's dW and tanh' both read
  // them) and the softmax of the logits.
  for (size_t l = 1; l + 1 < n.size(); ++l) {
    p.saved += f * b * n[l];
    widest = std::max(widest, n[l]);
  }
  p.saved += f * b * n.back();
  p.grads = p.weights;
  p.temporaries = 2 * f * b * widest;
  p.formula =
      "weights + inputs (x, labels) + saved (hidden tanh outputs, softmax) + weight grads + "
      "2 x widest hidden sensitivity (batch x width)";
  return p;
}

MemoryPlan ConvStepPlan(const SuiteShapes& s) {
  const double b = static_cast<double>(s.conv_batch), f = 4;
  const double hw = static_cast<double>(s.conv_hw * s.conv_hw);
  const double c1 = static_cast<double>(s.conv_c1), c2 = static_cast<double>(s.conv_c2);
  const double k = static_cast<double>(s.conv_classes);
  const double features = c2 * hw / 16;  // after two 2x2 pools
  MemoryPlan p;
  p.weights = f * (c1 * 9 + c2 * c1 * 9 + features * k + k);
  p.inputs = f * b * (hw + k);
  // relu1 output (relu' and pool1's backward), pool1 output (conv2's dK), relu2
  // output (relu' and pool2's backward), pool2 output (dense dW), softmax.
  p.saved = f * b * (c1 * hw + c1 * hw / 4 + c2 * hw / 4 + features + k);
  p.grads = p.weights;
  // The largest pair: pool1's backward reads d(pool1 out) [B,c1,hw/4] and
  // writes d(relu1 out) [B,c1,hw].
  p.temporaries = f * b * std::max(c1 * hw + c1 * hw / 4, c2 * hw / 4 + c1 * hw / 4);
  p.formula =
      "weights + inputs + saved (relu1, pool1, relu2, pool2 outputs, softmax) + weight grads + "
      "largest sensitivity pair (pool1 backward: [B,c1,H/2,W/2] in, [B,c1,H,W] out)";
  return p;
}

}  // namespace bench
}  // namespace kgrad
