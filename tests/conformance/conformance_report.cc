#include "tests/conformance/conformance_report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kgrad {
namespace conformance {
namespace {

struct Counts {
  int tests = 0, pass = 0, wrong = 0, refused = 0, crash = 0;
  int check_pass = 0, check_fail = 0, check_refused = 0, check_crash = 0;
  std::string first_refusal;

  void Add(const TestResult& r) {
    ++tests;
    switch (r.verdict.outcome) {
      case Outcome::kPass: ++pass; break;
      case Outcome::kWrong: ++wrong; break;
      case Outcome::kRefused:
        ++refused;
        if (first_refusal.empty()) first_refusal = r.verdict.detail;
        break;
      case Outcome::kCrash: ++crash; break;
    }
    switch (r.check.outcome) {
      case CheckOutcome::kNotRun: break;
      case CheckOutcome::kPass: ++check_pass; break;
      case CheckOutcome::kFail: ++check_fail; break;
      case CheckOutcome::kRefused: ++check_refused; break;
      case CheckOutcome::kCrash: ++check_crash; break;
    }
  }
  int checked() const { return check_pass + check_fail + check_refused + check_crash; }
};

std::string Clip(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

std::string Percent(int part, int whole) {
  return whole == 0 ? "-" : absl::StrFormat("%.1f%%", 100.0 * part / whole);
}

std::string TotalsLine(const Counts& c) {
  return absl::StrCat(c.tests, " tests: ", c.pass, " pass (", Percent(c.pass, c.tests), "), ", c.wrong, " wrong, ",
                      c.refused, " refused, ", c.crash, " crash");
}

std::string CheckLine(const Counts& c) {
  return absl::StrCat(c.checked(), " checked: ", c.check_pass, " pass, ", c.check_fail, " fail, ", c.check_refused,
                      " refused, ", c.check_crash, " crash");
}

void PrintTable(const std::map<std::string, Counts>& by_op, std::ostream& out) {
  out << absl::StrFormat("%-34s %5s %5s %5s %7s %5s | %5s %5s %7s  %s\n", "op", "tests", "pass", "wrong",
                         "refused", "crash", "c.ok", "c.bad", "c.refus", "first refusal");
  for (const auto& [op, c] : by_op) {
    out << absl::StrFormat("%-34s %5d %5d %5d %7d %5d | %5d %5d %7d  %s\n", Clip(op, 34), c.tests, c.pass, c.wrong,
                           c.refused, c.crash, c.check_pass, c.check_fail + c.check_crash, c.check_refused,
                           Clip(c.first_refusal, 110));
  }
}

void PrintList(const std::vector<TestResult>& results, const char* title,
               bool (*pick)(const TestResult&), std::ostream& out) {
  std::vector<const TestResult*> picked;
  for (const TestResult& r : results) {
    if (pick(r)) picked.push_back(&r);
  }
  if (picked.empty()) return;
  out << "\n" << title << " (" << picked.size() << "):\n";
  for (const TestResult* r : picked) {
    bool run_problem = r->verdict.outcome == Outcome::kWrong || r->verdict.outcome == Outcome::kCrash;
    out << "  " << r->info.name << " [" << r->info.op << "]: "
        << (run_problem ? absl::StrCat(OutcomeName(r->verdict.outcome), ": ", r->verdict.detail)
                        : absl::StrCat("check ", CheckOutcomeName(r->check.outcome), ": ", r->check.detail))
        << "\n";
  }
}

void PrintTopRefused(const std::map<std::string, Counts>& by_op, std::ostream& out) {
  std::vector<std::pair<std::string, const Counts*>> refused;
  for (const auto& [op, c] : by_op) {
    if (c.refused > 0) refused.push_back({op, &c});
  }
  std::stable_sort(refused.begin(), refused.end(),
                   [](const auto& a, const auto& b) { return a.second->refused > b.second->refused; });
  if (refused.empty()) return;
  out << "\nmost refused ops (by tests):\n";
  for (size_t i = 0; i < refused.size() && i < 20; ++i) {
    out << absl::StrFormat("  %-34s %4d  %s\n", Clip(refused[i].first, 34), refused[i].second->refused,
                           Clip(refused[i].second->first_refusal, 120));
  }
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string JsonCounts(const Counts& c) {
  return absl::StrCat("{\"tests\": ", c.tests, ", \"pass\": ", c.pass, ", \"wrong\": ", c.wrong,
                      ", \"refused\": ", c.refused, ", \"crash\": ", c.crash, ", \"check_pass\": ", c.check_pass,
                      ", \"check_fail\": ", c.check_fail, ", \"check_refused\": ", c.check_refused,
                      ", \"check_crash\": ", c.check_crash, "}");
}

bool Failed(const TestResult& r) {
  return r.verdict.outcome == Outcome::kWrong || r.verdict.outcome == Outcome::kCrash ||
         r.check.outcome == CheckOutcome::kCrash;
}

}  // namespace

bool PrintReport(const std::vector<TestResult>& results, const ReportOptions& options, std::ostream& out) {
  std::map<std::string, Counts> by_op;
  Counts all, exporter;
  for (const TestResult& r : results) {
    by_op[r.info.op].Add(r);
    all.Add(r);
    if (r.info.exporter) exporter.Add(r);
  }
  PrintTable(by_op, out);
  PrintTopRefused(by_op, out);
  PrintList(results, "wrong or crashed", Failed, out);
  if (options.check) {
    PrintList(results, "gradient check failures",
              [](const TestResult& r) { return r.check.outcome == CheckOutcome::kFail; }, out);
  }
  if (options.fold_integer_inputs) {
    out << "\nmode: integer inputs folded into the model as constants (--fold-integer-inputs)";
  }
  out << "\noverall: " << TotalsLine(all) << "\n";
  if (options.exporter_ops.empty()) {
    out << "exporter subset: not available (no exporter op set: generate.py writes it when torch is installed)\n";
  } else {
    out << "exporter subset (every op type among the " << options.exporter_op_count
        << " PyTorch's exporter emits): " << TotalsLine(exporter) << "\n";
  }
  if (options.check) {
    out << "gradient check (passing tests with floating-point inputs): " << CheckLine(all) << "\n";
    if (!options.exporter_ops.empty()) out << "gradient check, exporter subset: " << CheckLine(exporter) << "\n";
  }
  out << absl::StrFormat("time: %.1f s\n", options.seconds);
  bool failed = all.wrong > 0 || all.crash > 0 || all.check_crash > 0;
  out << (failed ? "FAILED: " : "OK: ") << all.wrong << " wrong, " << all.crash << " crash, " << all.check_crash
      << " gradient-check crash\n";
  return failed;
}

absl::Status WriteJson(const std::vector<TestResult>& results, const ReportOptions& options,
                       const std::string& path) {
  Counts all, exporter;
  for (const TestResult& r : results) {
    all.Add(r);
    if (r.info.exporter) exporter.Add(r);
  }
  std::ofstream out(path);
  if (!out) return absl::InvalidArgumentError(absl::StrCat("--json: cannot write ", path));
  out << "{\n  \"totals\": " << JsonCounts(all) << ",\n  \"exporter_totals\": "
      << (options.exporter_ops.empty() ? "null" : JsonCounts(exporter)) << ",\n  \"fold_integer_inputs\": "
      << (options.fold_integer_inputs ? "true" : "false") << ",\n  \"seconds\": " << options.seconds
      << ",\n  \"tests\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const TestResult& r = results[i];
    std::string ops;
    for (const std::string& op : r.info.ops) absl::StrAppend(&ops, ops.empty() ? "" : ", ", JsonString(op));
    out << (i == 0 ? "\n" : ",\n") << "    {\"name\": " << JsonString(r.info.name) << ", \"op\": "
        << JsonString(r.info.op) << ", \"ops\": [" << ops << "], \"exporter\": " << (r.info.exporter ? "true" : "false")
        << ", \"outcome\": " << JsonString(OutcomeName(r.verdict.outcome)) << ", \"detail\": "
        << JsonString(r.verdict.detail) << ", \"check\": " << JsonString(CheckOutcomeName(r.check.outcome))
        << ", \"check_detail\": " << JsonString(r.check.detail) << ", \"seconds\": "
        << absl::StrFormat("%.3f", r.seconds) << "}";
  }
  out << "\n  ]\n}\n";
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("--json: writing ", path, " failed"));
  return absl::OkStatus();
}

}  // namespace conformance
}  // namespace kgrad
