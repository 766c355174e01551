#include "backends/peak_trace.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kgrad {
namespace {

std::string MiB(int64_t bytes) {
  return absl::StrFormat("%9.3f MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

int64_t PeakTrace::HeldBytes() const {
  int64_t sum = 0;
  for (const Held& h : held) sum += h.bytes;
  return sum;
}

std::string PeakTrace::ToString(int rows) const {
  if (step < 0) return "  no allocation above the run's inputs\n";
  std::string s = absl::StrCat("  peak ", MiB(peak_bytes), " above the run's inputs, during step ",
                               step + 1, " of ", steps, ": ", at, "\n");
  absl::StrAppend(&s, "  ", MiB(scratch_bytes), "  the step's scratch (freed before it returned)\n");
  const int shown = std::min<int>(rows, static_cast<int>(held.size()));
  for (int i = 0; i < shown; ++i) {
    absl::StrAppend(&s, "  ", MiB(held[i].bytes), "  ", held[i].what,
                    held[i].step_input ? " (read by the step)" : "", "\n");
  }
  int64_t rest = 0;
  for (size_t i = shown; i < held.size(); ++i) rest += held[i].bytes;
  if (held.size() > static_cast<size_t>(shown)) {
    absl::StrAppend(&s, "  ", MiB(rest), "  ", held.size() - shown, " more buffers\n");
  }
  const int64_t other = peak_bytes - scratch_bytes - HeldBytes();
  if (other != 0) {
    absl::StrAppend(&s, "  ", MiB(other),
                    "  not in a frame's slots (closures, caches, allocator rounding)\n");
  }
  return s;
}

}  // namespace kgrad
