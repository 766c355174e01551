// The generated programs of the AD benchmarks: a chain of `n` elementwise ops on a
// small f32 vector (tanh, mul, add, sin in turn) with a side branch every four
// nodes, so that sensitivities add up, ending in a sum. Shared by ad_bench and the
// suite (bench/suite_main.cc); bench/torch_side.py builds the same chain.
#ifndef KGRAD_BENCH_CHAIN_PROGRAM_H_
#define KGRAD_BENCH_CHAIN_PROGRAM_H_

#include <cstdint>

#include "core/module.h"

namespace kgrad {
namespace bench {

// loss(x[width]) = sum(chain_n(x)): for i in [0, n), by i % 4:
//   0: y = tanh(y)   1: y = y * side   2: y = y + x   3: side = y; y = sin(y)
// (side and y start as x).
FuncGraph* BuildChain(Module* m, int n, int64_t width = 16);

}  // namespace bench
}  // namespace kgrad

#endif  // KGRAD_BENCH_CHAIN_PROGRAM_H_
