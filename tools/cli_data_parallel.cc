#include "tools/cli_data_parallel.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ad/data_parallel.h"
#include "ad/expand_differentiation.h"
#include "backends/collectives.h"
#include "backends/cpu/parallel.h"
#include "backends/mpi/mpi_communicator.h"
#include "core/status_macros.h"

namespace kgrad {
namespace cli {
namespace {

std::vector<std::string> Replicated(const ParsedArgs& args) {
  if (!args.Has("replicated")) return {};
  return absl::StrSplit(args.Get("replicated"), ',', absl::SkipEmpty());
}

absl::StatusOr<double> PositiveNumber(const ParsedArgs& args, const std::string& name, double fallback) {
  if (!args.Has(name)) return fallback;
  double v = 0;
  if (!absl::SimpleAtod(args.Get(name), &v) || !(v > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " wants a positive number, got '", args.Get(name), "'"));
  }
  return v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> JoinDataParallel(const ParsedArgs& args,
                                                               const std::string& path) {
  KGRAD_ASSIGN_OR_RETURN(double timeout, PositiveNumber(args, "collective-timeout", 300));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<MpiCommunicator> comm,
                         MpiCommunicator::Create(MpiOptions{timeout}));
  // The ranks on this machine share its cores.
  cpu::SetMaxThreads(comm->ThreadsPerRank());
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  KGRAD_RETURN_IF_ERROR(comm->Agree(StableFingerprint(bytes.str()),
                                    absl::StrCat("the graph file (this rank loaded '", path,
                                                 "'): every rank must train the same step graph")));
  return std::unique_ptr<Communicator>(std::move(comm));
}

absl::StatusOr<int64_t> BucketBytes(const ParsedArgs& args) {
  KGRAD_ASSIGN_OR_RETURN(double mb, PositiveNumber(args, "bucket-mb", 25));
  return std::max<int64_t>(1, static_cast<int64_t>(mb * (1 << 20)));
}

std::string DataParallelSummary(const DataParallelReport& r, int ranks) {
  const int threads = cpu::MaxThreads();
  return absl::StrCat("data parallel: ", ranks, " ranks (", threads, threads == 1 ? " thread" : " threads",
                      " each), ", r.gradients, " gradients in ", r.buckets - r.differentiations, " buckets, ",
                      r.bytes, " bytes all-reduced per step");
}

absl::Status MakeStepDataParallel(Module& m, FuncGraph* step, Communicator& comm,
                                  const ParsedArgs& args, std::ostream& out) {
  DataParallelOptions o;
  o.ranks = comm.size();
  o.replicated = Replicated(args);
  if (args.Has("gradient-sum")) o.reduction = GradientReduction::kSum;
  KGRAD_ASSIGN_OR_RETURN(o.bucket_bytes, BucketBytes(args));
  KGRAD_ASSIGN_OR_RETURN(DataParallelReport r, MakeDataParallel(m, step, o));
  KGRAD_RETURN_IF_ERROR(ExpandDifferentiation(m).status());
  if (comm.rank() == 0) out << DataParallelSummary(r, comm.size()) << "\n";
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Value>> ShardInputs(FuncGraph* step, std::vector<Value> inputs,
                                               Communicator& comm, const ParsedArgs& args) {
  const std::vector<std::string> replicated = Replicated(args);
  std::string types;
  for (const Value& v : inputs) absl::StrAppend(&types, v.TypeString(), ";");
  KGRAD_RETURN_IF_ERROR(comm.Agree(StableFingerprint(types),
                                   absl::StrCat("the inputs' types (this rank read ", types, ")")));
  const auto& params = step->parameters();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& name = params[i]->name();
    if (std::find(replicated.begin(), replicated.end(), name) != replicated.end()) continue;
    if (!inputs[i].is_tensor() || inputs[i].tensor().rank() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", name, "' is ", inputs[i].TypeString(), ", not a batch with a leading dim "
          "(pass --replicated ", name, " to give every rank all of it)"));
    }
    const Tensor& t = inputs[i].tensor();
    const int64_t rows = t.dim(0), n = comm.size();
    if (rows % n != 0) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "': its batch of ", rows,
                                                     " rows does not divide among ", n, " ranks"));
    }
    const int64_t share = rows / n;
    KGRAD_ASSIGN_OR_RETURN(Tensor mine, BatchRows(t, comm.rank() * share, (comm.rank() + 1) * share));
    inputs[i] = Value(std::move(mine));
  }
  return inputs;
}

absl::Status CheckSameWeights(const absl::flat_hash_map<std::string, Tensor>& weights,
                              Communicator& comm) {
  std::map<std::string, Tensor> sorted(weights.begin(), weights.end());
  std::string bytes;
  for (const auto& [name, t] : sorted) {
    absl::StrAppend(&bytes, name, ":", t.TypeString(), ":");
    bytes.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  }
  return comm.Agree(StableFingerprint(bytes), "the trained weights (they must be bit-identical)");
}

}  // namespace cli
}  // namespace kgrad
