// A service that fine-tunes an exported model in process, with the artifacts of
// `kgrad train-artifacts` (tools/train/training_session.h):
//
//   bazel-bin/examples/finetune_service DIR X.npy TARGET.npy STEPS [BATCH]
//
// trains STEPS steps on batches of BATCH rows (default 8) taken in turn from the
// two arrays (the model's input and the target), resuming from DIR/service.ckpt
// when it exists, evaluates the loss on the first batch before and after, and
// saves DIR/service.ckpt. Errors are the Status of the call that failed.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <sys/stat.h>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "core/status_macros.h"
#include "tools/train/dataset.h"
#include "tools/train/training_session.h"

namespace {

using kgrad::train::Dataset;
using kgrad::train::TrainingSession;

absl::Status Serve(const std::string& dir, const std::string& x, const std::string& target, int64_t steps,
                   int64_t batch) {
  kgrad::train::SessionOptions options;
  const std::string ckpt = dir + "/service.ckpt";
  struct stat st;
  if (::stat(ckpt.c_str(), &st) == 0) options.checkpoint = ckpt;
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<TrainingSession> s, TrainingSession::Open(dir, options));
  kgrad::train::DatasetOptions d;
  d.batch = batch;
  const std::vector<std::string>& names = s->input_names();
  if (names.size() != 2) return absl::InvalidArgumentError("this service feeds one input and a target");
  KGRAD_ASSIGN_OR_RETURN(Dataset data, Dataset::FromNpyFiles({names[0] + "=" + x, names[1] + "=" + target}, d));
  KGRAD_ASSIGN_OR_RETURN(kgrad::train::EvalResult before, s->EvalStep(data.Batch(0, 0)));
  double loss = 0;
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t b = (s->step()) % data.batches_per_epoch();
    KGRAD_ASSIGN_OR_RETURN(loss, s->TrainStep(data.Batch(0, b)));
  }
  KGRAD_ASSIGN_OR_RETURN(kgrad::train::EvalResult after, s->EvalStep(data.Batch(0, 0)));
  KGRAD_RETURN_IF_ERROR(s->SaveCheckpoint(ckpt));
  std::cout << "step " << s->step() << ": last training loss " << loss << "; eval loss on batch 0 "
            << before.loss << " -> " << after.loss << "; saved " << ckpt << "\n";
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 0, batch = 8;
  if ((argc != 5 && argc != 6) || !absl::SimpleAtoi(argv[4], &steps) || steps < 0 ||
      (argc == 6 && (!absl::SimpleAtoi(argv[5], &batch) || batch < 1))) {
    std::cerr << "usage: finetune_service DIR X.npy TARGET.npy STEPS [BATCH]\n";
    return 2;
  }
  absl::Status s = Serve(argv[1], argv[2], argv[3], steps, batch);
  if (!s.ok()) {
    std::cerr << "error: " << s << "\n";
    return 1;
  }
  return 0;
}
