// `kgrad train FILE --data-parallel` under mpirun: every rank loads the step
// graph, turns it into its data-parallel form (ad/data_parallel.h), takes its
// share of the batch and trains; the gradients are averaged across ranks by
// all_reduce over MPI (backends/mpi/mpi_communicator.h).
//
//   mpirun -np 4 kgrad train step.pbtxt --data-parallel --steps 20
//       --input x=x.npy --input labels=labels.npy [--collective-timeout S]
//       [--bucket-mb M] [--replicated NAME,...] [--gradient-sum]
//
// Checked across ranks, with an error on every rank: the graph file is the same
// file (its bytes), the inputs have the same types, the batch divides by the
// number of ranks, and after training the weights are bit-identical.
#ifndef KGRAD_TOOLS_CLI_DATA_PARALLEL_H_
#define KGRAD_TOOLS_CLI_DATA_PARALLEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "ad/data_parallel.h"
#include "backends/communicator.h"
#include "core/module.h"
#include "core/value.h"
#include "tools/cli_args.h"

namespace kgrad {
namespace cli {

// The job's communicator (MPI; a group of one outside mpirun), after the ranks
// agreed that they load the same file.
absl::StatusOr<std::unique_ptr<Communicator>> JoinDataParallel(const ParsedArgs& args,
                                                               const std::string& path);

// --bucket-mb M as bytes (25 MiB when absent).
absl::StatusOr<int64_t> BucketBytes(const ParsedArgs& args);

// "data parallel: 2 ranks (1 thread each), 4 gradients in 1 buckets, ..."
std::string DataParallelSummary(const DataParallelReport& report, int ranks);

// The data-parallel form of `step` for `comm`'s ranks, differentiation expanded;
// prints what is all-reduced per step (rank 0).
absl::Status MakeStepDataParallel(Module& m, FuncGraph* step, Communicator& comm,
                                  const ParsedArgs& args, std::ostream& out);

// This rank's rows of every batch input (not --replicated), after checking that
// every rank holds inputs of the same types and that the batch divides.
absl::StatusOr<std::vector<Value>> ShardInputs(FuncGraph* step, std::vector<Value> inputs,
                                               Communicator& comm, const ParsedArgs& args);

// Ok when the weights are bit-identical on every rank.
absl::Status CheckSameWeights(const absl::flat_hash_map<std::string, Tensor>& weights,
                              Communicator& comm);

}  // namespace cli
}  // namespace kgrad

#endif  // KGRAD_TOOLS_CLI_DATA_PARALLEL_H_
