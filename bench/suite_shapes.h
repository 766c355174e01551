// The suite's programs and what follows from their shapes alone: FLOPs of a
// training step and the planned minimum memory of one (the yardstick for the
// allocator's measured high-water mark).
#ifndef KGRAD_BENCH_SUITE_SHAPES_H_
#define KGRAD_BENCH_SUITE_SHAPES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace kgrad {
namespace bench {

struct SuiteShapes {
  // 1. MLP with softmax cross-entropy (examples/programs.h: Mlp).
  int64_t mlp_batch = 128;
  std::vector<int64_t> mlp_sizes = {784, 1024, 1024, 10};
  // 2. Conv net (programs::ConvNet): conv 3x3 c1 -> relu -> pool 2 -> conv 3x3 c2
  //    -> relu -> pool 2 -> dense classes.
  int64_t conv_batch = 64, conv_hw = 28, conv_c1 = 32, conv_c2 = 64, conv_classes = 10;
  // 3. Elementwise chain (bench/chain_program.h).
  int chain_ops = 1000;
  int64_t chain_width = 16;
  // 5. Generated graphs for gradient build + optimise.
  std::vector<int> build_sizes = {1000, 10000, 100000};
  // Reference sgemm (n^3).
  int64_t sgemm_n = 2048;
  uint64_t seed = 5;  // inputs; weights come from the programs' own seeds
};

// Multiply-add FLOPs (2 per MAC) of the MLP's matrix products in one step: the
// forward, the weight gradients (same count) and the input gradients of every
// layer but the first (x needs none). Elementwise work is not counted.
double MlpStepFlops(const SuiteShapes& s);

// Planned minimum bytes of a step (f32), with its terms for the report.
struct MemoryPlan {
  double weights = 0, inputs = 0, saved = 0, grads = 0, temporaries = 0;
  double total() const { return weights + inputs + saved + grads + temporaries; }
  std::string formula;  // the terms in words
};
MemoryPlan MlpStepPlan(const SuiteShapes& s);
MemoryPlan ConvStepPlan(const SuiteShapes& s);

}  // namespace bench
}  // namespace kgrad

#endif  // KGRAD_BENCH_SUITE_SHAPES_H_
