// Data-parallel training of the MLP (kgrad demo's model, or the suite's
// 784-1024-1024-10) or a small CNN across the ranks of an MPI job:
//
//   mpirun -np 4 bazel-bin/examples/distributed/train --model mlp --batch 64 --steps 20
//   mpirun -np 2 bazel-bin/examples/distributed/train --model cnn --batch 32
//   mpirun -np 2 bazel-bin/examples/distributed/train --model mlp --widths 784,1024,1024,10
//       --batch 128 --steps 30 --timing
//
// Each rank builds the same step graph for the global batch, makes it
// data-parallel (ad/data_parallel.h), takes its rows of the batch and trains;
// rank 0 prints the loss (the whole batch's, averaged across ranks), checks that
// the weights are bit-identical on every rank, and with --timing prints the
// median step time, throughput and the share of it spent in all_reduce.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "ad/data_parallel.h"
#include "backends/collectives.h"
#include "backends/cpu/parallel.h"
#include "backends/mpi/mpi_communicator.h"
#include "core/status_macros.h"
#include "examples/distributed/step_programs.h"

namespace kgrad {
namespace {

struct Flags {
  std::string model = "mlp";
  int64_t batch = 64;
  int steps = 20;
  std::vector<int64_t> widths = {2, 32, 32, 3};  // kgrad demo's spiral classifier
  bool f64 = false;
  bool timing = false;
  bool overlap = true;
  double bucket_mb = 25;
};

bool Parse(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    bool ok = true;
    if (a == "--model") f->model = v, ++i;
    else if (a == "--batch") ok = absl::SimpleAtoi(v, &f->batch), ++i;
    else if (a == "--steps") ok = absl::SimpleAtoi(v, &f->steps), ++i;
    else if (a == "--bucket-mb") ok = absl::SimpleAtod(v, &f->bucket_mb), ++i;
    else if (a == "--f64") f->f64 = true;
    else if (a == "--timing") f->timing = true;
    else if (a == "--no-overlap") f->overlap = false;
    else if (a == "--widths") {
      f->widths.clear();
      for (absl::string_view w : absl::StrSplit(v, ',')) {
        int64_t n = 0;
        ok = ok && absl::SimpleAtoi(w, &n) && n > 0;
        f->widths.push_back(n);
      }
      ++i;
    } else {
      ok = false;
    }
    if (!ok || f->batch <= 0 || f->steps <= 0 || (f->model != "mlp" && f->model != "cnn")) {
      std::fprintf(stderr, "usage: train [--model mlp|cnn] [--batch N] [--steps N] [--widths A,B,...] "
                           "[--f64] [--timing] [--no-overlap] [--bucket-mb M]\n");
      return false;
    }
  }
  return true;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

absl::Status Run(const Flags& f) {
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<MpiCommunicator> comm, MpiCommunicator::Create());
  cpu::SetMaxThreads(comm->ThreadsPerRank());  // the ranks on this machine share its cores
  const DType dtype = f.f64 ? DType::kFloat64 : DType::kFloat32;
  examples::StepProgram p = f.model == "cnn" ? examples::CnnStep(dtype, f.batch)
                                             : examples::MlpStep(dtype, f.batch, f.widths, 0.1);
  std::vector<Value> data = examples::StepData(p, f.batch, 2026);
  DataParallelOptions o;
  o.ranks = comm->size();
  o.bucket_bytes = static_cast<int64_t>(f.bucket_mb * (1 << 20));
  KGRAD_ASSIGN_OR_RETURN(DataParallelReport report, MakeDataParallel(*p.module, p.step, o));
  const int64_t share = f.batch / comm->size();
  std::vector<Profile> profiles;
  KGRAD_ASSIGN_OR_RETURN(
      examples::Trained t,
      examples::Train(p, examples::RowsOf(data, comm->rank() * share, (comm->rank() + 1) * share),
                      f.steps, comm.get(), f.timing ? &profiles : nullptr, f.overlap));
  KGRAD_RETURN_IF_ERROR(comm->Agree(StableFingerprint(examples::WeightBytes(t)), "the weights"));
  if (comm->rank() != 0) return absl::OkStatus();
  for (size_t s = 0; s < t.losses.size(); ++s) {
    if (s == 0 || (s + 1) % 5 == 0 || s + 1 == t.losses.size()) std::printf("step %zu loss %.6f\n", s + 1, t.losses[s]);
  }
  std::printf("%s, global batch %lld on %d ranks (%d thread(s) each): weights bit-identical on every rank; %lld bytes "
              "all-reduced per step in %d all_reduce(s)\n",
              f.model.c_str(), static_cast<long long>(f.batch), comm->size(), cpu::MaxThreads(),
              static_cast<long long>(report.bytes), report.buckets);
  if (f.timing) {
    // Wall-clock steps; the communication the step waited for: all_reduce run
    // in place, or the wait for the overlapped ones.
    std::vector<double> step_ms, comm_ms;
    for (size_t s = std::min<size_t>(3, profiles.size() - 1); s < profiles.size(); ++s) {
      double waited = 0;
      for (const auto& [name, e] : profiles[s].by_primitive) {
        if (name == "all_reduce" || name == "collective wait") waited += e.ms;
      }
      step_ms.push_back(t.step_ms[s]);
      comm_ms.push_back(waited);
    }
    const double ms = Median(step_ms), c = Median(comm_ms);
    std::printf("timing: step %.3f ms (median of %zu), %.0f samples/s, waiting for all_reduce "
                "%.3f ms (%.0f%%), overlap %s\n",
                ms, step_ms.size(), f.batch / ms * 1e3, c, 100 * c / ms, f.overlap ? "on" : "off");
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kgrad

int main(int argc, char** argv) {
  kgrad::Flags f;
  if (!kgrad::Parse(argc, argv, &f)) return 2;
  absl::Status s = kgrad::Run(f);
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
