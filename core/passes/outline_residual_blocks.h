// Outlining residual blocks of a flat graph (an imported ONNX model) into called
// graphs, so that each can carry a checkpoint policy (ad/remat.h): a model
// imported from PyTorch is one flat graph, and rematerialisation works per
// called graph.
//
// A residual block ends in add(a, b) where a and b both depend on a value x (the
// block's input) through different paths: a = x and b = f(x) (identity
// shortcut), or a = g(x) and b = f(x) (a projection shortcut, torchvision's
// downsample). x is the latest common ancestor of a and b. The block is every
// application on a path from x to the add; it is outlined when
//   - it contains a contraction (PrimitiveDef::dot: matmul, einsum, conv2d; a
//     layer, not `x + 0.04 x^3`),
//   - nothing computed inside it is used outside it except the add's result.
// The add becomes a call `@residual_block_N(x, other inputs...)`; constants are
// copied into the block, weights are read as they are, any other outside value
// becomes a parameter. Blocks are found in order, so a later block may start at
// an earlier block's call (a transformer's attention then its MLP).
#ifndef KGRAD_CORE_PASSES_OUTLINE_RESIDUAL_BLOCKS_H_
#define KGRAD_CORE_PASSES_OUTLINE_RESIDUAL_BLOCKS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/module.h"

namespace kgrad {

// Outlines the residual blocks of `g` (which must not create closures) and gives
// each outlined graph `policy`. Returns the new graphs in order.
absl::StatusOr<std::vector<FuncGraph*>> OutlineResidualBlocks(Module& module, FuncGraph* g,
                                                              RematPolicy policy);

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_OUTLINE_RESIDUAL_BLOCKS_H_
