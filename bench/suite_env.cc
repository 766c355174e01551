#include "bench/suite_env.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kgrad {
namespace bench {

namespace fs = std::filesystem;

absl::Status ParseSuiteArgs(int argc, char** argv, SuiteArgs* a, const SuiteFlagParser& more) {
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (s == "--quick") {
      a->quick = true;
    } else if (s == "--no-torch") {
      a->torch = false;
    } else if (s == "--profile") {
      a->profile = true;
    } else if (s == "--out" && value != nullptr) {
      a->out = argv[++i];
    } else {
      absl::StatusOr<int> taken = more(s, value);
      if (!taken.ok()) return taken.status();
      if (*taken == 0) return absl::InvalidArgumentError(absl::StrCat("unknown argument '", s, "'"));
      i += *taken - 1;
    }
  }
  return absl::OkStatus();
}

std::string ResultsDir(const std::string& requested) {
  const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  std::string root = ws != nullptr ? ws : ".";
  if (requested.empty()) return root + "/bench/results";
  if (ws != nullptr && fs::path(requested).is_relative()) return root + "/" + requested;
  return requested;
}

std::string FindTorchScript(const char* argv0) {
  std::vector<std::string> candidates;
  if (const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY")) candidates.push_back(std::string(ws) + "/bench");
  candidates.push_back("bench");  // runfiles (bazel run's working directory) or the workspace
  candidates.push_back(std::string(argv0) + ".runfiles/kgrad/bench");
  for (const std::string& dir : candidates) {
    std::string path = dir + "/torch_side.py";
    if (access(path.c_str(), R_OK) == 0) return fs::absolute(path).string();
  }
  return "";
}

absl::StatusOr<std::string> MakeDirs(const std::string& out) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", out, ": ", ec.message()));
  char work_template[] = "/tmp/kgrad_suite_XXXXXX";
  if (mkdtemp(work_template) == nullptr) return absl::InternalError("cannot create a work directory in /tmp");
  return std::string(work_template);
}

std::string CommandLine(const std::string& bazel_run, int argc, char** argv) {
  std::string command = bazel_run;
  if (argc > 1) absl::StrAppend(&command, " --");
  for (int i = 1; i < argc; ++i) absl::StrAppend(&command, " ", argv[i]);
  return command;
}

std::string Now() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&t));
  return buf;
}

std::string CpuModel() {
  std::ifstream is("/proc/cpuinfo");
  std::string line;
  while (std::getline(is, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream os(path);
  os << text;
  os.close();
  if (!os) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

int Fail(absl::string_view program, absl::string_view message, int exit_code, absl::string_view more) {
  std::fprintf(stderr, "%s", absl::StrCat(program, ": ", message, "\n", more).c_str());
  return exit_code;
}

int Finish(absl::string_view program, const absl::Status& written, absl::string_view what, bool kgrad_ok) {
  if (!written.ok()) return Fail(program, written.message(), 1);
  std::fprintf(stderr, "%s", absl::StrCat(program, ": wrote ", what, "\n").c_str());
  return kgrad_ok ? 0 : 1;
}

}  // namespace bench
}  // namespace kgrad
