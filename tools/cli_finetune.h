// Fine-tuning from the command line (tools/train):
//
//   kgrad train-artifacts MODEL --loss L --optimizer O [options] -o DIR
//       the training artifacts of MODEL (.onnx or a graph file): DIR/training.pb
//       (train_step and eval_step) and DIR/checkpoint.ckpt
//   kgrad train DIR --data NAME=FILE.npy ... --batch N --epochs E [options]
//       trains the artifacts in DIR on batches of the arrays, with a progress
//       bar (plain lines when the output is not a terminal), evaluation per
//       epoch, checkpoints (DIR/last.ckpt) and --resume; under mpirun with
//       --data-parallel every rank reads the same data and trains on its share
//       of each batch (tools/train/training_session.h), rank 0 prints and writes.
#ifndef KGRAD_TOOLS_CLI_FINETUNE_H_
#define KGRAD_TOOLS_CLI_FINETUNE_H_

#include <ostream>
#include <string>
#include <vector>

namespace kgrad {
namespace cli {

int TrainArtifactsCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `kgrad train DIR ...` (TrainCommand hands over when its FILE is a directory).
int FinetuneCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace cli
}  // namespace kgrad

#endif  // KGRAD_TOOLS_CLI_FINETUNE_H_
