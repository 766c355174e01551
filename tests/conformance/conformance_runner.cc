// ONNX's operator conformance suite against kgrad's importer and CPU kernels.
//
// usage: conformance_runner DIR [--only=REGEX] [--verbose] [--json=FILE]
//            [--ops=FILE] [--timeout=SECONDS] [--jobs=N] [--no-check]
//            [--fold-integer-inputs]
//
// DIR is what generate.py wrote (DIR/node/<test>/model.onnx, test_data_set_*/,
// DIR/exporter_ops.txt) or a folder of test folders (e.g. onnx's shipped
// backend/test/data/node). Each test runs in a forked child with a time limit
// (conformance_case.h), so that a crash or a hang is one test's result. Prints a
// per-op table and totals, overall and for the tests whose op types PyTorch's
// exporter can all emit; exits 1 on any wrong result or crash, 0 otherwise
// (refusals are counted, not failures), 2 on bad arguments.
//
// --fold-integer-inputs makes each data set's integer inputs constants before
// import (conformance_case.h): how the tests fare when shapes and axes are
// constants, as in the models PyTorch's exporter writes.
#include <dirent.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "core/status_macros.h"
#include "ops/registry.h"
#include "tests/conformance/conformance_case.h"
#include "tests/conformance/conformance_report.h"
#include "tools/cli_args.h"

namespace kgrad {
namespace conformance {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string dir;
  std::string only;  // regex on the test name; "" for all
  bool verbose = false;
  std::string json;
  std::string ops_file;
  double timeout_s = 60;
  int jobs = 1;
  bool check = true;
  bool fold_integer_inputs = false;
};

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Every op type in `g` and its subgraphs ("domain.Op" outside the default domain).
void CollectOps(const onnx::GraphProto& g, int depth, std::set<std::string>* ops) {
  if (depth > 32) return;
  for (const onnx::NodeProto& n : g.node()) {
    bool std_domain = n.domain().empty() || n.domain() == "ai.onnx";
    ops->insert(std_domain ? n.op_type() : absl::StrCat(n.domain(), ".", n.op_type()));
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.has_g()) CollectOps(a.g(), depth + 1, ops);
      for (const onnx::GraphProto& sub : a.graphs()) CollectOps(sub, depth + 1, ops);
    }
  }
}

bool ReadModel(const std::string& path, onnx::ModelProto* model) {
  std::ifstream in(path, std::ios::binary);
  return in && model->ParseFromIstream(&in);
}

// The op a test is about: its one node's type (ONNX node tests have one node);
// an expanded test (the op's function body) is listed as "Op (expanded)".
std::string TestOp(const std::string& root, const std::string& name, const onnx::ModelProto& model) {
  const std::string suffix = "_expanded";
  if (absl::EndsWith(name, suffix)) {
    onnx::ModelProto base;
    std::string base_name = name.substr(0, name.size() - suffix.size());
    if (ReadModel(absl::StrCat(root, "/", base_name, "/model.onnx"), &base)) {
      return TestOp(root, base_name, base) + " (expanded)";
    }
  }
  const onnx::GraphProto& g = model.graph();
  if (g.node_size() == 1) {
    const onnx::NodeProto& n = g.node(0);
    bool std_domain = n.domain().empty() || n.domain() == "ai.onnx";
    return std_domain ? n.op_type() : absl::StrCat(n.domain(), ".", n.op_type());
  }
  return absl::StrCat("(", g.node_size(), " nodes)");
}

// The tests under opts.dir (or opts.dir/node), by name, filtered by --only.
std::vector<TestInfo> FindTests(const Options& opts, const regex_t* only,
                                const std::set<std::string>* exporter_ops) {
  std::string root = IsDir(opts.dir + "/node") ? opts.dir + "/node" : opts.dir;
  std::vector<std::string> names;
  if (DIR* d = opendir(root.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != ".." && IsFile(absl::StrCat(root, "/", name, "/model.onnx"))) {
        names.push_back(name);
      }
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::vector<TestInfo> tests;
  for (const std::string& name : names) {
    if (only != nullptr && regexec(only, name.c_str(), 0, nullptr, 0) != 0) continue;
    TestInfo t;
    t.name = name;
    t.dir = absl::StrCat(root, "/", name);
    onnx::ModelProto model;
    if (ReadModel(t.dir + "/model.onnx", &model)) {
      CollectOps(model.graph(), 0, &t.ops);
      t.op = TestOp(root, name, model);
    } else {
      t.op = "?";  // the child reports why it cannot be read
    }
    t.exporter = exporter_ops != nullptr && !t.ops.empty();
    for (const std::string& op : t.ops) {
      if (exporter_ops == nullptr || exporter_ops->count(op) == 0) t.exporter = false;
    }
    tests.push_back(std::move(t));
  }
  return tests;
}

// --- the child ------------------------------------------------------------------

// Result lines start with this; anything else in the child's output is its own
// stdout/stderr (e.g. an abort's message), kept for crash reports.
constexpr char kRunTag[] = "@@conformance-run\t";
constexpr char kCheckTag[] = "@@conformance-check\t";

std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  }
  return s;
}

void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

[[noreturn]] void ChildMain(const TestInfo& test, const Options& opts, int fd) {
  dup2(fd, STDOUT_FILENO);
  dup2(fd, STDERR_FILENO);
  CaseRun run = RunTest(test.dir, Tolerance{}, opts.fold_integer_inputs);
  // The run's verdict goes out before the check, so that a check that crashes
  // does not take the run's result with it.
  WriteAll(fd, absl::StrCat(kRunTag, OutcomeName(run.verdict.outcome), "\t", OneLine(run.verdict.detail), "\n"));
  if (opts.check) {
    CheckVerdict c = CheckTest(run);
    WriteAll(fd, absl::StrCat(kCheckTag, CheckOutcomeName(c.outcome), "\t", OneLine(c.detail), "\n"));
  }
  std::fflush(nullptr);
  _exit(0);
}

// --- the parent -----------------------------------------------------------------

struct Child {
  pid_t pid = -1;
  int fd = -1;
  size_t index = 0;
  Clock::time_point start, deadline;
  std::string output;
};

Outcome ParseOutcome(const std::string& s) {
  for (Outcome o : {Outcome::kPass, Outcome::kWrong, Outcome::kRefused, Outcome::kCrash}) {
    if (s == OutcomeName(o)) return o;
  }
  return Outcome::kCrash;
}

CheckOutcome ParseCheckOutcome(const std::string& s) {
  for (CheckOutcome o : {CheckOutcome::kNotRun, CheckOutcome::kPass, CheckOutcome::kFail, CheckOutcome::kRefused,
                         CheckOutcome::kCrash}) {
    if (s == CheckOutcomeName(o)) return o;
  }
  return CheckOutcome::kCrash;
}

// Why the child ended without a result: a timeout, a signal or an exit status,
// with the last line it printed.
std::string DeathReason(int status, bool timed_out, double timeout_s, const std::string& last_line) {
  std::string why;
  if (timed_out) {
    why = absl::StrCat("timeout after ", timeout_s, " s");
  } else if (WIFSIGNALED(status)) {
    why = absl::StrCat("signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  } else if (WIFEXITED(status)) {
    why = absl::StrCat("exit status ", WEXITSTATUS(status), " without a result");
  } else {
    why = "ended without a result";
  }
  if (!last_line.empty()) absl::StrAppend(&why, ": ", last_line.substr(0, 300));
  return why;
}

void Finish(Child& c, int status, bool timed_out, const Options& opts, TestResult* r) {
  bool have_run = false, have_check = false;
  std::string last_line;
  for (absl::string_view line : absl::StrSplit(c.output, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, kRunTag)) {
      std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits('\t', 1));
      r->verdict = Verdict{ParseOutcome(f[0]), f.size() > 1 ? f[1] : ""};
      have_run = true;
    } else if (absl::ConsumePrefix(&line, kCheckTag)) {
      std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits('\t', 1));
      r->check = CheckVerdict{ParseCheckOutcome(f[0]), f.size() > 1 ? f[1] : ""};
      have_check = true;
    } else {
      last_line = std::string(line);
    }
  }
  bool clean = !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::string reason = DeathReason(status, timed_out, opts.timeout_s, last_line);
  if (!have_run) {
    r->verdict = Verdict{Outcome::kCrash, reason};
  } else if (opts.check && !have_check && !clean) {
    r->check = CheckVerdict{CheckOutcome::kCrash, reason};
  }
  r->seconds = std::chrono::duration<double>(Clock::now() - c.start).count();
}

bool Spawn(const TestInfo& test, size_t index, const Options& opts, Child* c) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  std::fflush(nullptr);  // nothing buffered is printed twice
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return false;
  }
  if (pid == 0) {
    close(fds[0]);
    ChildMain(test, opts, fds[1]);
  }
  close(fds[1]);
  c->pid = pid;
  c->fd = fds[0];
  c->index = index;
  c->start = Clock::now();
  c->deadline = c->start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opts.timeout_s));
  return true;
}

// Reads what is there; true at the end of the child's output.
bool Drain(Child& c) {
  char buf[4096];
  ssize_t n = read(c.fd, buf, sizeof buf);
  if (n > 0) {
    // A child that floods its output is cut off at 1 MB (the last line is what matters).
    if (c.output.size() < (1 << 20)) c.output.append(buf, static_cast<size_t>(n));
    return false;
  }
  return true;
}

// Runs every test, `opts.jobs` children at a time.
std::vector<TestResult> RunAll(const std::vector<TestInfo>& tests, const Options& opts) {
  std::vector<TestResult> results(tests.size());
  std::vector<Child> running;
  size_t next = 0;
  auto done = [&](Child& c, int status, bool timed_out) {
    close(c.fd);
    TestResult& r = results[c.index];
    r.info = tests[c.index];
    Finish(c, status, timed_out, opts, &r);
    if (opts.verbose) {
      std::cout << r.info.name << ": " << OutcomeName(r.verdict.outcome)
                << (r.verdict.detail.empty() ? "" : " (" + r.verdict.detail + ")") << "; check "
                << CheckOutcomeName(r.check.outcome)
                << (r.check.detail.empty() ? "" : " (" + r.check.detail + ")") << "; "
                << absl::StrFormat("%.2f s", r.seconds) << "\n"
                << std::flush;
    }
  };
  while (next < tests.size() || !running.empty()) {
    while (next < tests.size() && static_cast<int>(running.size()) < opts.jobs) {
      Child c;
      if (!Spawn(tests[next], next, opts, &c)) {
        results[next].info = tests[next];
        results[next].verdict = Verdict{Outcome::kCrash, "runner: fork failed"};
        ++next;
        continue;
      }
      running.push_back(std::move(c));
      ++next;
    }
    if (running.empty()) break;
    Clock::time_point soonest = running[0].deadline;
    std::vector<pollfd> fds;
    for (const Child& c : running) {
      fds.push_back(pollfd{c.fd, POLLIN, 0});
      soonest = std::min(soonest, c.deadline);
    }
    auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(soonest - Clock::now()).count();
    poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(wait_ms + 1, 1000))));
    std::vector<Child> still;
    for (size_t i = 0; i < running.size(); ++i) {
      Child& c = running[i];
      int status = 0;
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && Drain(c)) {
        waitpid(c.pid, &status, 0);
        done(c, status, false);
      } else if (Clock::now() >= c.deadline) {
        kill(c.pid, SIGKILL);
        waitpid(c.pid, &status, 0);
        while (!Drain(c)) {
        }
        done(c, status, true);
      } else {
        still.push_back(std::move(c));
      }
    }
    running = std::move(still);
  }
  return results;
}

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& argv) {
  KGRAD_ASSIGN_OR_RETURN(cli::ParsedArgs args,
                         cli::ParseArgs(argv, {"only", "json", "ops", "timeout", "jobs"}, {"verbose", "no-check", "fold-integer-inputs"}));
  if (args.positional.size() != 1) return absl::InvalidArgumentError("conformance_runner takes one DIR");
  Options o;
  o.dir = args.positional[0];
  o.only = args.Get("only");
  o.verbose = args.Has("verbose");
  o.json = args.Get("json");
  o.check = !args.Has("no-check");
  o.fold_integer_inputs = args.Has("fold-integer-inputs");
  o.ops_file = args.Get("ops", o.dir + "/exporter_ops.txt");
  if (args.Has("timeout") && (!absl::SimpleAtod(args.Get("timeout"), &o.timeout_s) || !(o.timeout_s > 0))) {
    return absl::InvalidArgumentError("--timeout wants a positive number of seconds");
  }
  if (args.Has("jobs") && (!absl::SimpleAtoi(args.Get("jobs"), &o.jobs) || o.jobs < 1 || o.jobs > 64)) {
    return absl::InvalidArgumentError("--jobs wants a number from 1 to 64");
  }
  return o;
}

int Main(const std::vector<std::string>& argv) {
  absl::StatusOr<Options> opts = ParseOptions(argv);
  if (!opts.ok()) {
    std::cerr << "error: " << opts.status().message() << "\n";
    return 2;
  }
  if (!IsDir(opts->dir)) {
    std::cerr << "error: " << opts->dir << " is not a directory\n";
    return 2;
  }
  std::set<std::string> exporter_ops;
  bool have_ops = false;
  if (std::ifstream in(opts->ops_file); in) {
    have_ops = true;
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) exporter_ops.insert(line);
    }
  }
  // POSIX extended regular expressions: regcomp reports a bad pattern as a
  // value (std::regex would throw).
  regex_t only;
  if (!opts->only.empty()) {
    int rc = regcomp(&only, opts->only.c_str(), REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
      char message[256];
      regerror(rc, &only, message, sizeof message);
      std::cerr << "error: --only '" << opts->only << "': " << message << "\n";
      return 2;
    }
  }
  std::vector<TestInfo> tests = FindTests(*opts, opts->only.empty() ? nullptr : &only,
                                          have_ops ? &exporter_ops : nullptr);
  if (!opts->only.empty()) regfree(&only);
  if (tests.empty()) {
    std::cerr << "error: no test (a folder with model.onnx) under " << opts->dir
              << (opts->only.empty() ? "" : " matching --only") << "\n";
    return 2;
  }
  // The registry is built once here and shared with every child (copy-on-write),
  // not rebuilt in each.
  (void)DefaultRegistry();
  Clock::time_point start = Clock::now();
  std::vector<TestResult> results = RunAll(tests, *opts);
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ReportOptions report;
  report.exporter_ops = have_ops ? opts->ops_file : "";
  report.exporter_op_count = static_cast<int>(exporter_ops.size());
  report.seconds = seconds;
  report.check = opts->check;
  report.fold_integer_inputs = opts->fold_integer_inputs;
  bool failed = PrintReport(results, report, std::cout);
  if (!opts->json.empty()) {
    absl::Status s = WriteJson(results, report, opts->json);
    if (!s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      return 2;
    }
  }
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace conformance
}  // namespace kgrad

int main(int argc, char** argv) {
  return kgrad::conformance::Main(std::vector<std::string>(argv + 1, argv + argc));
}
