// Training data for a session: named arrays (from .npy files) sharing their first
// dim, the examples, cut into batches in order or in a shuffled order per epoch.
// The shuffle is Fisher-Yates over a 64-bit Mersenne Twister seeded by
// (seed, epoch): the same order on every machine and at every resume. Not
// thread-safe (Batch caches the epoch's order).
#ifndef KGRAD_TOOLS_TRAIN_DATASET_H_
#define KGRAD_TOOLS_TRAIN_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "core/value.h"

namespace kgrad {
namespace train {

struct DatasetOptions {
  int64_t batch = 32;
  bool shuffle = false;
  uint64_t seed = 0;
  bool drop_last = false;  // false: the last, partial batch is kept (torch's DataLoader default)
};

class Dataset {
 public:
  // `arrays` in the order the batches give them; `files` name them in errors.
  static absl::StatusOr<Dataset> Create(std::vector<std::string> names, std::vector<Tensor> arrays,
                                        std::vector<std::string> files, const DatasetOptions& o);
  // Reads NAME=FILE.npy pairs.
  static absl::StatusOr<Dataset> FromNpyFiles(const std::vector<std::string>& name_eq_file,
                                              const DatasetOptions& o);

  const std::vector<std::string>& names() const { return names_; }
  // The file each array came from, in names() order.
  const std::vector<std::string>& files() const { return files_; }
  int64_t examples() const { return examples_; }
  int64_t batches_per_epoch() const;
  // Batch `b` of epoch `epoch` (b < batches_per_epoch()), one value per array.
  std::vector<Value> Batch(int64_t epoch, int64_t b) const;
  // The arrays in another order (the steps' input order); every name must exist.
  absl::Status Reorder(const std::vector<std::string>& names);

 private:
  const std::vector<int64_t>& Order(int64_t epoch) const;

  std::vector<std::string> names_;
  std::vector<Tensor> arrays_;
  std::vector<std::string> files_;
  DatasetOptions options_;
  int64_t examples_ = 0;
  // The last epoch's order (Batch is called for each batch of an epoch in turn).
  mutable int64_t order_epoch_ = -1;
  mutable std::vector<int64_t> order_;
};

}  // namespace train
}  // namespace kgrad

#endif  // KGRAD_TOOLS_TRAIN_DATASET_H_
