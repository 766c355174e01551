// `kgrad bench FILE`: times a user's own graph or ONNX model.
//
//   kgrad bench FILE [--graph G] [--input NAME=X.npy ...] [--dim NAME=N ...]
//         [--grad] [--jvp] [--repeat N] [--warmup N] [--seed N]
//
// Inputs not given are drawn at random from their declared types (floating
// values in [-1, 1), integers in {0, 1, 2}, bools at random); a symbolic dim
// ("batch") takes its size from --dim. It prints the median and the spread
// (min, max) of --repeat runs after --warmup runs, of the forward pass, and with
// --grad of the training step (the optimised value-and-gradient graph with respect
// to every weight and floating input), with --jvp of the optimised Jvp, and their
// ratios to the forward.
#ifndef KGRAD_TOOLS_CLI_BENCH_H_
#define KGRAD_TOOLS_CLI_BENCH_H_

#include <ostream>
#include <string>
#include <vector>

namespace kgrad {
namespace cli {

int BenchCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace cli
}  // namespace kgrad

#endif  // KGRAD_TOOLS_CLI_BENCH_H_
