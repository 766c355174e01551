// kgrad on the GPU against PyTorch on the same GPU (issue 6):
//   ./bazelw run --config=cuda //bench:gpu_suite [-- --quick] [-- --out DIR] [-- --no-torch]
//       [-- --profile]
// The MLP 784-1024-1024-10 (batch 128) and the conv net of //bench:suite, float32:
// forward, training step (loss + every weight's gradient) and the MLP's Jvp on
// the CUDA backend, each step also checked against the CPU backend; then
// bench/torch_side.py with "device": "cuda" on the very same weights and inputs.
// Both sides take the inputs from host memory and hand the loss and gradients
// back to it on every call (kgrad's executor copies at a graph's boundary), and
// both compute f32 matmuls and convolutions without TF32. Writes DIR/gpu.json and
// DIR/gpu.md (also printed); DIR defaults to bench/results in the workspace.
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_device.h"
#include "bench/suite_env.h"
#include "bench/suite_kgrad.h"
#include "bench/suite_report.h"
#include "bench/suite_rows.h"
#include "bench/suite_torch.h"
#include "core/status_macros.h"

namespace kgrad {
namespace bench {
namespace {

namespace fs = std::filesystem;

struct Args : SuiteArgs {
  int ordinal = 0;
};

const char kUsage[] =
    "usage: gpu_suite [--quick] [--out DIR] [--no-torch] [--profile] [--gpu N]\n"
    "  --quick     fewer repetitions (a smoke run)\n"
    "  --out DIR   where gpu.json and gpu.md go (default: bench/results)\n"
    "  --no-torch  skip the PyTorch side (its column shows n/a)\n"
    "  --profile   print kgrad's time per primitive of each forward and step, and\n"
    "              each output's distance from the CPU backend (stderr)\n"
    "  --gpu N     the CUDA device ordinal (default 0)\n";

absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args a;
  KGRAD_RETURN_IF_ERROR(
      ParseSuiteArgs(argc, argv, &a, [&a](const std::string& flag, const char* value) -> absl::StatusOr<int> {
        if (flag != "--gpu" || value == nullptr) return 0;
        const std::string s = value;
        if (s.empty() || s.size() > 3 || s.find_first_not_of("0123456789") != std::string::npos) {
          return absl::InvalidArgumentError(absl::StrCat("--gpu takes a device ordinal, not '", s, "'"));
        }
        a.ordinal = std::stoi(s);
        return 2;
      }));
  a.out = ResultsDir(a.out);
  return a;
}

// The kgrad side; a failure is noted and its rows show n/a.
bool RunKgrad(const KgradRun& run, Metrics* out, TensorManifest* tensors) {
  bool ok = true;
  auto check = [&](const char* what, const absl::Status& s) {
    if (s.ok()) return;
    ok = false;
    run.progress->Note(absl::StrCat("gpu_suite: kgrad ", what, " failed: ", s.ToString()));
  };
  check("MLP", MeasureMlp(run, out, tensors));
  check("conv net", MeasureConvNet(run, out, tensors));
  return ok;
}

Report MakeReport(int argc, char** argv, const KgradRun& run, const std::string& device_name, const Metrics& kgrad,
                  const absl::StatusOr<FlatJson>& torch) {
  Report report;
  report.kgrad = kgrad;
  auto torch_string = [&](const std::string& key) -> std::string {
    if (!torch.ok()) return "";
    auto it = torch->strings.find(key);
    return it == torch->strings.end() ? "" : it->second;
  };
  std::string torch_gpu = torch_string("gpu");
  report.meta = {
      {"date", Now()},
      {"command", CommandLine("./bazelw run --config=cuda //bench:gpu_suite", argc, argv)},
      {"machine", absl::StrCat(device_name, " (kgrad)", torch_gpu.empty() ? "" : ", " + torch_gpu + " (PyTorch)",
                               "; host ", CpuModel(), "; float32, no TF32")},
      {"PyTorch", torch.ok() ? absl::StrCat(torch_string("version"), " (", Python(), ")")
                             : absl::StrCat("missing: ", torch.status().message())},
      {"timing", absl::StrCat("median of ", run.budget.min_reps, "-", run.budget.max_reps, " runs (",
                              run.budget.budget_s, " s budget each) after ", run.budget.warmup,
                              " warm-up runs; each run ends when its results are in host memory")},
  };
  if (torch.ok()) report.torch = torch->numbers;
  AddGpuRows(run.shapes, &report);
  report.notes.insert(report.notes.begin(),
                      {"kgrad / PyTorch: below 1 means kgrad is faster.",
                       "Both sides: inputs copied from host memory, loss and gradients copied back, every run.",
                       "step = loss and the gradients of all weights; PyTorch: torch.autograd.grad. forward: "
                       "PyTorch under no_grad. Jvp tangents: the inputs themselves; PyTorch: forward_ad.",
                       "vs CPU backend: the same optimised step graph run by kgrad's CPU executor."});
  return report;
}

int Main(int argc, char** argv) {
  absl::StatusOr<Args> args = ParseArgs(argc, argv);
  if (!args.ok()) return Fail("gpu_suite", args.status().message(), 2, kUsage);
  absl::StatusOr<Device*> device = CudaDevice(args->ordinal);
  if (!device.ok()) return Fail("gpu_suite", device.status().ToString(), 2);
  absl::StatusOr<std::string> work = MakeDirs(args->out);
  if (!work.ok()) return Fail("gpu_suite", work.status().message(), 1);
  KgradRun run;
  run.device = *device;
  run.tensor_dir = *work;
  run.profile = args->profile;
  // GPU steps take about a millisecond: more repetitions than the CPU suite's.
  run.budget = args->quick ? TimingBudget{1, 0.3, 3, 10} : TimingBudget{5, 2, 10, 200};
  int stages = 3 + 2;
  Progress progress(args->torch ? 2 * stages : stages);
  run.progress = &progress;

  Metrics kgrad;
  TensorManifest tensors;
  bool kgrad_ok = RunKgrad(run, &kgrad, &tensors);
  absl::StatusOr<FlatJson> torch = absl::CancelledError("skipped (--no-torch)");
  if (args->torch) {
    torch = RunTorchSuite(argv[0],
                          TorchSpecJson(run.shapes, run.budget, 1, run.tensor_dir, tensors,
                                        absl::StrCat("cuda:", args->ordinal), {"mlp", "conv"}),
                          *work, progress);
  }
  if (!torch.ok()) progress.Note(absl::StrCat("gpu_suite: PyTorch column missing: ", torch.status().message()));
  progress.Finish();
  std::error_code ec;
  fs::remove_all(*work, ec);

  Report report = MakeReport(argc, argv, run, (*device)->name(), kgrad, torch);
  return Finish("gpu_suite", WriteReport(report, args->out, "gpu"), args->out + "/gpu.{json,md}", kgrad_ok);
}

}  // namespace
}  // namespace bench
}  // namespace kgrad

int main(int argc, char** argv) { return kgrad::bench::Main(argc, argv); }
