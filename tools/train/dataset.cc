#include "tools/train/dataset.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "tools/npy.h"

namespace kgrad {
namespace train {
namespace {

// Rows `rows` of t (its first dim), in that order.
Tensor Rows(const Tensor& t, const std::vector<int64_t>& rows) {
  Shape shape = t.shape();
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out = *Tensor::Create(t.dtype(), shape);
  const size_t row_bytes = t.NumElements() == 0 ? 0 : t.nbytes() / t.dim(0);
  const char* from = static_cast<const char*>(t.raw_data());
  char* to = static_cast<char*>(out.raw_data());
  for (size_t i = 0; i < rows.size(); ++i) std::memcpy(to + i * row_bytes, from + rows[i] * row_bytes, row_bytes);
  return out;
}

// A uniform draw in [0, n) without modulo bias.
uint64_t Below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return x % n;
}

}  // namespace

absl::StatusOr<Dataset> Dataset::Create(std::vector<std::string> names, std::vector<Tensor> arrays,
                                        std::vector<std::string> files, const DatasetOptions& o) {
  if (o.batch <= 0) return absl::InvalidArgumentError(absl::StrCat("--batch must be positive, got ", o.batch));
  if (arrays.empty()) return absl::InvalidArgumentError("no data (--data NAME=FILE.npy)");
  Dataset d;
  d.options_ = o;
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (arrays[i].rank() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(files[i], ": '", names[i], "' is one number; data needs a dim of examples"));
    }
    if (i > 0 && arrays[i].dim(0) != arrays[0].dim(0)) {
      return absl::InvalidArgumentError(absl::StrCat(files[i], ": '", names[i], "' holds ", arrays[i].dim(0),
                                                     " examples, ", files[0], " ('", names[0], "') ",
                                                     arrays[0].dim(0)));
    }
    for (size_t j = 0; j < i; ++j) {
      if (names[j] == names[i]) return absl::InvalidArgumentError(absl::StrCat("data '", names[i], "' given twice"));
    }
  }
  d.examples_ = arrays[0].dim(0);
  if (d.examples_ == 0) return absl::InvalidArgumentError(absl::StrCat(files[0], ": no examples"));
  if (o.drop_last && d.examples_ < o.batch) {
    return absl::InvalidArgumentError(absl::StrCat(d.examples_, " examples make no whole batch of ", o.batch,
                                                   " (--drop-last)"));
  }
  d.names_ = std::move(names);
  d.arrays_ = std::move(arrays);
  d.files_ = std::move(files);
  return d;
}

absl::StatusOr<Dataset> Dataset::FromNpyFiles(const std::vector<std::string>& name_eq_file,
                                              const DatasetOptions& o) {
  std::vector<std::string> names, files;
  std::vector<Tensor> arrays;
  for (const std::string& spec : name_eq_file) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("data '", spec, "': want NAME=FILE.npy"));
    }
    names.push_back(spec.substr(0, eq));
    files.push_back(spec.substr(eq + 1));
    KGRAD_ASSIGN_OR_RETURN(Tensor t, ReadNpyFile(files.back()));
    arrays.push_back(std::move(t));
  }
  return Create(std::move(names), std::move(arrays), std::move(files), o);
}

int64_t Dataset::batches_per_epoch() const {
  return options_.drop_last ? examples_ / options_.batch : (examples_ + options_.batch - 1) / options_.batch;
}

const std::vector<int64_t>& Dataset::Order(int64_t epoch) const {
  if (order_epoch_ == epoch) return order_;
  order_epoch_ = epoch;
  std::vector<int64_t>& order = order_;
  order.resize(examples_);
  for (int64_t i = 0; i < examples_; ++i) order[i] = i;
  if (!options_.shuffle) return order;
  std::seed_seq seq{static_cast<uint32_t>(options_.seed), static_cast<uint32_t>(options_.seed >> 32),
                    static_cast<uint32_t>(epoch), static_cast<uint32_t>(static_cast<uint64_t>(epoch) >> 32)};
  std::mt19937_64 rng(seq);
  for (int64_t i = examples_ - 1; i > 0; --i) std::swap(order[i], order[Below(rng, i + 1)]);
  return order;
}

std::vector<Value> Dataset::Batch(int64_t epoch, int64_t b) const {
  const std::vector<int64_t>& order = Order(epoch);
  const int64_t begin = b * options_.batch;
  const int64_t end = std::min(examples_, begin + options_.batch);
  const std::vector<int64_t> rows(order.begin() + begin, order.begin() + end);
  std::vector<Value> out;
  for (const Tensor& t : arrays_) out.push_back(Value(Rows(t, rows)));
  return out;
}

absl::Status Dataset::Reorder(const std::vector<std::string>& names) {
  std::vector<Tensor> arrays;
  std::vector<std::string> files;
  for (const std::string& n : names) {
    auto it = std::find(names_.begin(), names_.end(), n);
    if (it == names_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("no data for input '", n, "' (the steps take ",
                                                     absl::StrJoin(names, ", "), "; given ",
                                                     absl::StrJoin(names_, ", "), ")"));
    }
    arrays.push_back(arrays_[it - names_.begin()]);
    files.push_back(files_[it - names_.begin()]);
  }
  if (names.size() != names_.size()) {
    for (const std::string& n : names_) {
      if (std::find(names.begin(), names.end(), n) == names.end()) {
        return absl::InvalidArgumentError(absl::StrCat("data '", n, "' is not an input of the steps (",
                                                       absl::StrJoin(names, ", "), ")"));
      }
    }
  }
  names_ = names;
  arrays_ = std::move(arrays);
  files_ = std::move(files);
  order_epoch_ = -1;
  return absl::OkStatus();
}

}  // namespace train
}  // namespace kgrad
