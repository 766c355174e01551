// kgrad's benchmark suite, side by side with PyTorch (issue 7):
//   ./bazelw run //bench:suite [-- --quick] [-- --out DIR] [-- --no-torch]
// Measures six scenarios on kgrad (bench/suite_kgrad.h), then runs
// bench/torch_side.py under /usr/bin/python3 on the very same weights and inputs,
// and writes DIR/latest.json, DIR/latest.md (also printed) and DIR/ad_build.svg.
// DIR defaults to bench/results in the workspace. Progress goes to stderr.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "backends/cpu/eigen.h"  // Eigen, as the kernels see it
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/suite_env.h"
#include "bench/suite_kgrad.h"
#include "bench/suite_report.h"
#include "bench/suite_rows.h"
#include "bench/suite_torch.h"
#include "core/status_macros.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace kgrad {
namespace bench {
namespace {

namespace fs = std::filesystem;

// Both sides run on this many threads unless --threads says otherwise (the
// machines have 2 cores).
constexpr int kDefaultThreads = 2;

struct Args : SuiteArgs {
  int threads = kDefaultThreads;
  std::string only;  // one kgrad scenario (for profiling); implies --no-torch
};

const char kUsage[] =
    "usage: suite [--quick] [--out DIR] [--no-torch] [--profile] [--threads N]\n"
    "             [--only mlp|conv|chain|build]\n"
    "  --quick     fewer repetitions (a smoke run, ~1-2 minutes)\n"
    "  --out DIR   where latest.json, latest.md, ad_build.svg go (default: bench/results)\n"
    "  --no-torch  skip the PyTorch side (its column shows n/a)\n"
    "  --profile   print kgrad's time per primitive of each step (stderr)\n"
    "  --threads N both sides on N threads (default 2)\n"
    "  --only S    run one kgrad scenario only, no PyTorch (for perf record)\n";

// --threads N, --only S and --out=DIR.
absl::StatusOr<int> ParseOwnFlag(const std::string& flag, const char* value, Args* a) {
  if (flag.rfind("--out=", 0) == 0) {
    a->out = flag.substr(6);
    return 1;
  }
  if (value == nullptr) return 0;
  if (flag == "--threads") {
    a->threads = std::atoi(value);
    if (a->threads < 1 || a->threads > 256) {
      return absl::InvalidArgumentError(absl::StrCat("--threads takes 1..256, not '", value, "'"));
    }
    return 2;
  }
  if (flag == "--only") {
    a->only = value;
    a->torch = false;
    if (a->only != "mlp" && a->only != "conv" && a->only != "chain" && a->only != "build") {
      return absl::InvalidArgumentError(absl::StrCat("--only takes mlp, conv, chain or build, not '", a->only, "'"));
    }
    return 2;
  }
  return 0;
}

absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args a;
  KGRAD_RETURN_IF_ERROR(ParseSuiteArgs(argc, argv, &a, [&a](const std::string& flag, const char* value) {
    return ParseOwnFlag(flag, value, &a);
  }));
  // A partial run must not replace the suite's results.
  if (a.out.empty() && !a.only.empty()) a.out = "/tmp/kgrad_suite_" + a.only;
  a.out = ResultsDir(a.out);
  return a;
}

// The kgrad side: every scenario, failures noted (the report shows n/a) rather
// than ending the run.
bool RunKgrad(const KgradRun& run, const std::string& only, Metrics* out, TensorManifest* tensors) {
  bool ok = true;
  auto check = [&](const std::string& what, const absl::Status& s) {
    if (s.ok()) return;
    ok = false;
    run.progress->Note(absl::StrCat("suite: kgrad ", what, " failed: ", s.ToString()));
  };
  auto wanted = [&](const char* s) { return only.empty() || only == s; };
  if (only.empty()) MeasureSgemm(run, out);
  if (wanted("mlp")) check("MLP", MeasureMlp(run, out, tensors));
  if (wanted("conv")) check("conv net", MeasureConvNet(run, out, tensors));
  if (wanted("chain")) check("chain", MeasureChain(run, out, tensors));
  if (wanted("build")) check("AD build", MeasureAdBuild(run, out));
  return ok;
}

// The PyTorch side; its status says why the column is missing.
absl::Status RunTorch(const Args& args, const char* argv0, const KgradRun& run, const TensorManifest& tensors,
                      const std::string& work, Metrics* out, std::string* version) {
  if (!args.torch) return absl::CancelledError("skipped (--no-torch)");
  KGRAD_ASSIGN_OR_RETURN(
      FlatJson r, RunTorchSuite(argv0, TorchSpecJson(run.shapes, run.budget, args.threads, run.tensor_dir, tensors),
                                work, *run.progress));
  *out = r.numbers;
  *version = r.strings["version"];
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  absl::StatusOr<Args> args = ParseArgs(argc, argv);
  if (!args.ok()) return Fail("suite", args.status().message(), 2, kUsage);
#ifdef _OPENMP
  omp_set_num_threads(args->threads);
#endif
  Eigen::setNbThreads(args->threads);
  KgradRun run;
  run.profile = args->profile;
  if (args->quick) run.budget = TimingBudget{1, 0.3, 3, 10};
  absl::StatusOr<std::string> work_dir = MakeDirs(args->out);
  if (!work_dir.ok()) return Fail("suite", work_dir.status().message(), 1);
  std::string work = *work_dir;
  run.tensor_dir = work;
  int stages = 1 + 4 + 2 + 3 + static_cast<int>(run.shapes.build_sizes.size());  // MLP: 4
  Progress progress(args->torch ? 2 * stages : stages);
  run.progress = &progress;

  Report report;
  report.build_sizes = run.shapes.build_sizes;
  TensorManifest tensors;
  bool kgrad_ok = RunKgrad(run, args->only, &report.kgrad, &tensors);
  std::string version;
  absl::Status torch = RunTorch(*args, argv[0], run, tensors, work, &report.torch, &version);
  if (!torch.ok()) progress.Note(absl::StrCat("suite: PyTorch column missing: ", torch.message()));
  progress.Finish();
  std::error_code ec;
  fs::remove_all(work, ec);

  report.meta = {
      {"date", Now()},
      {"command", CommandLine("./bazelw run //bench:suite", argc, argv)},
      {"machine", absl::StrCat(CpuModel(), ", ", sysconf(_SC_NPROCESSORS_ONLN), " cores; both sides on ", args->threads,
                               " threads, float32")},
      {"PyTorch", torch.ok() ? absl::StrCat(version, " (", Python(), ")")
                             : absl::StrCat("missing: ", torch.message())},
      {"timing", absl::StrCat("median of ", run.budget.min_reps, "-", run.budget.max_reps, " runs (", run.budget.budget_s,
                              " s budget each) after ", run.budget.warmup, " warm-up runs")},
  };
  AddRows(run.shapes, &report);
  report.notes.insert(report.notes.begin(),
                      {"kgrad / PyTorch: below 1 means kgrad is faster (for times) or smaller.",
                       "step = loss and the gradients of all weights (MLP, conv) or of x (chain); PyTorch: "
                       "torch.autograd.grad. forward: PyTorch under no_grad. Jvp tangents: the inputs themselves; "
                       "PyTorch: torch.autograd.forward_ad.",
                       "MLP FLOPs = forward + weight-gradient + input-gradient matmuls (no dx for layer 1).",
                       "Chain per-node overhead: step time / nodes kgrad executes, for both sides.",
                       "Grad build, PyTorch column: eager forward + backward of the same chain (PyTorch builds its "
                       "tape while running), a reference only."});
  absl::Status written = WriteReport(report, args->out, "latest");
  written.Update(WriteText(args->out + "/ad_build.svg", BuildTimeSvg(report)));
  return Finish("suite", written, args->out + "/latest.{json,md} and ad_build.svg", kgrad_ok);
}

}  // namespace
}  // namespace bench
}  // namespace kgrad

int main(int argc, char** argv) { return kgrad::bench::Main(argc, argv); }
