#include "bench/suite_torch.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "bench/suite_env.h"
#include "core/status_macros.h"

namespace kgrad {
namespace bench {
namespace {

bool TorchImports() {
  std::string cmd = absl::StrCat(Python(), " -c 'import torch, numpy' >/dev/null 2>&1");
  return std::system(cmd.c_str()) == 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream is(path);
  std::stringstream ss;
  ss << is.rdbuf();
  return ss.str();
}

std::string Tail(const std::string& text, size_t n) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

std::string IntList(const std::vector<int64_t>& v) { return absl::StrCat("[", absl::StrJoin(v, ", "), "]"); }

}  // namespace

std::string Python() {
  const char* p = std::getenv("KGRAD_SUITE_PYTHON");
  return p != nullptr && *p != '\0' ? p : kPython;
}

namespace {

// apt-get install of one Debian package, the route bazelw takes for its own
// packages (through sudo when not root); returns the shell's status.
int AptInstall(const std::string& package) {
  std::string sudo = getuid() == 0 ? "" : "sudo -n ";
  std::string env = absl::StrCat("DEBIAN_FRONTEND=noninteractive ", sudo);
  std::string cmd = absl::StrCat(env, "apt-get update -qq >/dev/null 2>&1 && ", env,
                                 "apt-get install -y -qq --no-install-recommends ", package,
                                 " >/dev/null 2>&1");
  return std::system(cmd.c_str());
}

// Debian's python3-torch does its matmuls through libblas.so.3, which is the
// reference BLAS (~7.5 GFLOP/s here) unless an optimised one is installed:
// libopenblas0-pthread switches the alternative (~220 GFLOP/s), a fair peer for
// kgrad's MLP. Installed like python3-torch; without it the suite still runs, and
// the report names the BLAS torch used either way.
void EnsureOpenBlas(Progress& progress) {
  if (std::system("dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null | "
                  "grep -q 'install ok installed'") == 0) {
    return;
  }
  progress.Note("suite: installing libopenblas0-pthread with apt-get (PyTorch's BLAS)");
  if (AptInstall("libopenblas0-pthread") != 0) {
    progress.Note("suite: libopenblas0-pthread could not be installed; PyTorch keeps the reference BLAS");
  }
}

}  // namespace

absl::Status EnsureTorch(Progress& progress) {
  if (access(Python().c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(Python(), " not found"));
  }
  EnsureOpenBlas(progress);
  if (TorchImports()) return absl::OkStatus();
  progress.Note(absl::StrCat("suite: python3-torch is missing for ", Python(),
                             "; installing it with apt-get (as bazelw installs its packages, ~640 MB)"));
  int rc = AptInstall("python3-torch");
  if (TorchImports()) return absl::OkStatus();
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("python3-torch is missing and `apt-get install python3-torch` failed (status ", rc, ")"));
  }
  return absl::UnavailableError(absl::StrCat("`import torch` fails in ", Python(),
                                             " even with python3-torch installed (it serves ", kPython, ")"));
}

std::string TorchSpecJson(const SuiteShapes& s, const TimingBudget& budget, int threads,
                          const std::string& tensor_dir, const TensorManifest& tensors,
                          const std::string& device, const std::vector<std::string>& programs) {
  auto manifest = [&](const std::string& program) {
    std::vector<std::string> entries;
    auto it = tensors.find(program);
    if (it != tensors.end()) {
      for (const TensorFile& f : it->second) {
        entries.push_back(absl::StrCat(JsonString(f.name), ": {\"file\": ", JsonString(f.file),
                                       ", \"shape\": ", IntList(f.shape), "}"));
      }
    }
    return absl::StrCat("{", absl::StrJoin(entries, ", "), "}");
  };
  std::vector<int64_t> build(s.build_sizes.begin(), s.build_sizes.end());
  std::string selection;
  if (!programs.empty()) {
    std::vector<std::string> quoted;
    for (const std::string& p : programs) quoted.push_back(JsonString(p));
    selection = absl::StrCat(", \"programs\": [", absl::StrJoin(quoted, ", "), "]");
  }
  return absl::StrCat(
      "{\n \"device\": ", JsonString(device), selection, ",\n \"threads\": ", threads, ", \"seed\": ", s.seed,
      ", \"sgemm_n\": ", s.sgemm_n,
      ",\n \"warmup\": ", budget.warmup, ", \"budget_s\": ", budget.budget_s, ", \"min_reps\": ", budget.min_reps,
      ", \"max_reps\": ", budget.max_reps, ",\n \"tensor_dir\": ", JsonString(tensor_dir),
      ",\n \"mlp\": {\"batch\": ", s.mlp_batch, ", \"sizes\": ", IntList(s.mlp_sizes), ", \"tensors\": ",
      manifest("mlp"), "},\n \"conv\": {\"batch\": ", s.conv_batch, ", \"hw\": ", s.conv_hw, ", \"c1\": ", s.conv_c1,
      ", \"c2\": ", s.conv_c2, ", \"classes\": ", s.conv_classes, ", \"tensors\": ", manifest("conv"),
      "},\n \"chain\": {\"n\": ", s.chain_ops, ", \"width\": ", s.chain_width, ", \"tensors\": ", manifest("chain"),
      "},\n \"ad_build\": {\"sizes\": ", IntList(build), ", \"width\": ", s.chain_width, "}\n}\n");
}

absl::StatusOr<FlatJson> RunTorchSide(const std::string& script, const std::string& spec_path,
                                      const std::string& result_path, const std::string& log_path,
                                      Progress& progress) {
  std::string cmd = absl::StrCat(Python(), " '", script, "' '", spec_path, "' '", result_path, "' 2>'", log_path, "'");
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("cannot start: ", cmd));
  char line[512];
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    absl::string_view l = absl::StripTrailingAsciiWhitespace(line);
    if (absl::ConsumePrefix(&l, "stage ")) progress.Done(absl::StrCat(l, " (PyTorch)"));
  }
  int rc = pclose(pipe);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat(script, " failed (status ", rc, "): ", Tail(ReadFile(log_path), 800)));
  }
  std::string text = ReadFile(result_path);
  if (text.empty()) return absl::InternalError(absl::StrCat(script, " wrote no results to ", result_path));
  return ParseFlatJson(text, result_path);
}

absl::StatusOr<FlatJson> RunTorchSuite(const char* argv0, const std::string& spec_json, const std::string& work,
                                       Progress& progress) {
  std::string script = FindTorchScript(argv0);
  if (script.empty()) return absl::NotFoundError("bench/torch_side.py not found");
  KGRAD_RETURN_IF_ERROR(EnsureTorch(progress));
  std::string spec = work + "/spec.json";
  KGRAD_RETURN_IF_ERROR(WriteText(spec, spec_json));
  return RunTorchSide(script, spec, work + "/pytorch.json", work + "/pytorch.log", progress);
}

}  // namespace bench
}  // namespace kgrad
