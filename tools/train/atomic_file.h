// Whole-file writes that either happen or leave the old file as it was: the
// bytes go to PATH.tmp, are flushed to disk (fsync) and renamed over PATH.
#ifndef KGRAD_TOOLS_TRAIN_ATOMIC_FILE_H_
#define KGRAD_TOOLS_TRAIN_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kgrad {
namespace train {

absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes);
// The whole file, refusing one over max_bytes; errors name the file.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, int64_t max_bytes);

}  // namespace train
}  // namespace kgrad

#endif  // KGRAD_TOOLS_TRAIN_ATOMIC_FILE_H_
