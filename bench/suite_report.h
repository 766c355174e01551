// The suite's report: rows of kgrad vs PyTorch with targets, written as JSON,
// a Markdown table, and an SVG plot of gradient build time against graph size.
#ifndef KGRAD_BENCH_SUITE_REPORT_H_
#define KGRAD_BENCH_SUITE_REPORT_H_

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "bench/suite_kgrad.h"

namespace kgrad {
namespace bench {

struct Row {
  std::string scenario;  // "1. MLP"
  std::string metric;    // "step (ms)"
  std::string key;       // JSON name, e.g. "mlp.step_ms"
  double kgrad = std::nan("");
  double torch = std::nan("");  // NaN: no PyTorch counterpart or PyTorch missing
  std::string target;           // e.g. "<= 3.0"; empty: none
  std::optional<bool> pass;     // against the target, when there is one
};

struct Report {
  std::vector<std::pair<std::string, std::string>> meta;  // shown above the table
  std::vector<Row> rows;
  std::vector<std::string> notes;  // footnotes: formulas, checks
  Metrics kgrad, torch;            // raw measurements of both sides
  std::vector<int> build_sizes;    // for the plot
};

std::string ToJson(const Report& r);
std::string ToMarkdown(const Report& r);
// Log-log plot of build + optimise time (ms) against nodes: kgrad's polyline, and
// PyTorch's eager forward + backward of the same chain when present.
std::string BuildTimeSvg(const Report& r);

// Writes DIR/STEM.json and DIR/STEM.md and prints the Markdown on stdout.
absl::Status WriteReport(const Report& r, const std::string& dir, const std::string& stem);

}  // namespace bench
}  // namespace kgrad

#endif  // KGRAD_BENCH_SUITE_REPORT_H_
