// `kgrad train FILE --steps N`: runs a training-step graph again and again.
//
// The step graph (the entry, or --graph) takes the data (--input, fixed for every
// step: full-batch training) and returns (loss, new_weights), where new_weights
// holds one value per weight of the module, in the file's weight order; after
// each step the weights take those values. A training step written as one graph
// file (value_and_grad{weights="*"}(@loss) and an SGD update) is trained this
// way. Prints the loss of each step (or every --print-every steps) and, with
// --output DIR, writes the final weights as DIR/<weight>.npy.
#ifndef KGRAD_TOOLS_CLI_TRAIN_H_
#define KGRAD_TOOLS_CLI_TRAIN_H_

#include <ostream>
#include <string>
#include <vector>

namespace kgrad {
namespace cli {

int TrainCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace cli
}  // namespace kgrad

#endif  // KGRAD_TOOLS_CLI_TRAIN_H_
