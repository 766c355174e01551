// Sample programs built with the C++ builder, shared by tests and benchmarks:
// an MLP with a softmax cross-entropy loss, a small conv network, and a tanh RNN
// written as a while loop. Weights are module weights initialised from a seed.
#ifndef KGRAD_EXAMPLES_PROGRAMS_H_
#define KGRAD_EXAMPLES_PROGRAMS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "core/module.h"

namespace kgrad {
namespace programs {

// loss(x[batch, sizes[0]], labels[batch, sizes.back()]) =
//   mean(softmax_cross_entropy(layers(x), labels)), tanh between layers.
FuncGraph* Mlp(Module* m, int64_t batch, const std::vector<int64_t>& sizes, DType dtype,
               uint64_t seed = 1);

// loss(x[batch, 1, hw, hw], labels[batch, classes]): conv 3x3 (c1) -> relu ->
// max_pool 2 -> conv 3x3 (c2) -> relu -> max_pool 2 -> dense -> softmax CE. With
// `batch_norm`, a batch_norm after the first convolution.
FuncGraph* ConvNet(Module* m, int64_t batch, int64_t hw, int64_t c1, int64_t c2, int64_t classes,
                   DType dtype, bool batch_norm = false, uint64_t seed = 2);

// loss(xs[steps, batch, input], h0[batch, hidden]) = sum(h_T) where
// h_{t+1} = tanh(xs[t] @ wx + h_t @ wh + b), as a while loop over t (a constant
// trip count: the optimiser may unroll it).
FuncGraph* TanhRnn(Module* m, int64_t steps, int64_t batch, int64_t input, int64_t hidden,
                   DType dtype, uint64_t seed = 3);

// f(x[batch, width], w_0, b_0, ..., w_{n-1}, b_{n-1}) = sum(layer(...layer(x, w_0, b_0)...))
// with layer(x, w, b) = tanh(x w + b) a graph of its own, called `layers` times
// (the unit a remat policy checkpoints); the weights are parameters.
FuncGraph* LayeredTanhMlp(Module* m, int layers, int64_t batch, int64_t width, DType dtype);

// f(x[k], n) = sum(acc_n) with acc_0 = 0, acc_{t+1} = acc_t * x + 1: a while loop
// whose trip count n is an input (never unrolled), examples/while_loop.pbtxt in
// the builder. acc_n = (1 - x^n) / (1 - x) elementwise, so for |x| < 1 and large
// n: f = sum 1/(1-x), df/dx = 1/(1-x)^2, d2f/dx2 = 2/(1-x)^3.
FuncGraph* HornerLoop(Module* m, int64_t k, DType dtype);

// g(n) = n after a loop of n iterations whose state starts at 0 and is wrapped in
// one more level every iteration: (state,) or, with `partial`, a partial
// application of an identity graph to the state. The state is dropped at the end.
// Its type grows with n, so it runs only without the executor's type check.
FuncGraph* WrappingLoop(Module* m, bool partial);
// A float32 or float64 tensor of `shape` whose element i (row-major) is f(i),
// with f called for i = 0, 1, ... in turn.
Tensor FloatTensor(DType dtype, Shape shape, const std::function<double(int64_t)>& f);

// Uniform values in [-scale, scale) with the parameter types of `g`, one-hot
// labels for parameters named "labels".
std::vector<Value> RandomInputs(FuncGraph* g, uint64_t seed, double scale = 1.0);

}  // namespace programs
}  // namespace kgrad

#endif  // KGRAD_EXAMPLES_PROGRAMS_H_
