// The conformance runner's results: the per-op table and totals on stdout, and
// the same as JSON.
#ifndef KGRAD_TESTS_CONFORMANCE_CONFORMANCE_REPORT_H_
#define KGRAD_TESTS_CONFORMANCE_CONFORMANCE_REPORT_H_

#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/conformance/conformance_case.h"

namespace kgrad {
namespace conformance {

struct TestInfo {
  std::string name;  // the folder's name, e.g. test_add_bcast
  std::string dir;
  std::string op;    // the op the test is about ("Softmax (expanded)" for a function body)
  std::set<std::string> ops;  // every op type in the model, subgraphs included
  bool exporter = false;      // every one of `ops` is in PyTorch's exporter op set
};

struct TestResult {
  TestInfo info;
  Verdict verdict;
  CheckVerdict check;
  double seconds = 0;
};

struct ReportOptions {
  std::string exporter_ops;  // the op set's file; "" when there is none
  int exporter_op_count = 0;
  double seconds = 0;        // the whole run
  bool check = true;         // gradient checks were run
  bool fold_integer_inputs = false;
};

// Prints the table, the wrong and crashed tests, the gradient-check failures,
// the most refused ops and the totals. True when any test was wrong or crashed
// (its run or its gradient check).
bool PrintReport(const std::vector<TestResult>& results, const ReportOptions& options, std::ostream& out);

absl::Status WriteJson(const std::vector<TestResult>& results, const ReportOptions& options,
                       const std::string& path);

}  // namespace conformance
}  // namespace kgrad

#endif  // KGRAD_TESTS_CONFORMANCE_CONFORMANCE_REPORT_H_
