// Data parallelism as a graph transformation: a single-device training step
// (a graph applying grad or value_and_grad, then an update) becomes the graph
// every rank of an N-rank job runs on its share of the batch.
//
//   - Each batch input (an entry parameter not listed as replicated) is declared
//     with 1/N of its rows; so is each parameter of a reachable graph that
//     receives a batch (through a call, or grad / value_and_grad of the graph)
//     and is declared with the full batch as its leading dim (the loss graph the
//     step differentiates). A batch that does not divide by N is an error naming
//     the parameter.
//   - Every gradient a grad/value_and_grad application returns is combined across
//     ranks with all_reduce (mean by default: a loss that averages over the batch
//     has the full batch's gradient as the mean of the shards'), in buckets of
//     up to `bucket_bytes` (gradients flattened, concatenated, reduced, split
//     back), latest gradients first as a backward pass produces them. Gradients
//     with respect to batch inputs stay per rank (they are per example).
//   - value_and_grad's value (or its first element with has_aux) is combined the
//     same way, so every rank reports the full batch's loss.
//   - The update after it is unchanged: it reads identical gradients on every
//     rank, so the weights stay bit-identical across ranks (all_reduce gives
//     every rank the same bits; backends/communicator.h).
//
// Batch normalisation in training mode still normalises over each rank's shard
// (as PyTorch's DistributedDataParallel without SyncBatchNorm).
//
// Run before ExpandDifferentiation: the pass finds the differentiation
// operators, not their expansion.
#ifndef KGRAD_AD_DATA_PARALLEL_H_
#define KGRAD_AD_DATA_PARALLEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/module.h"

namespace kgrad {

enum class GradientReduction { kMean, kSum };

struct DataParallelOptions {
  int ranks = 1;
  GradientReduction reduction = GradientReduction::kMean;
  // Gradients are all-reduced in buckets of at most this many bytes (one
  // gradient larger than this is a bucket of its own); PyTorch DDP's default.
  int64_t bucket_bytes = 25 << 20;
  // Entry parameters every rank receives whole (not split along the batch).
  std::vector<std::string> replicated;
};

struct DataParallelReport {
  int differentiations = 0;  // grad/value_and_grad applications rewritten
  int gradients = 0;         // gradient tensors combined across ranks
  int buckets = 0;           // all_reduce applications for them
  int64_t bytes = 0;         // bytes all-reduced per step (gradients and values)
};

absl::StatusOr<DataParallelReport> MakeDataParallel(Module& module, FuncGraph* step,
                                                    const DataParallelOptions& options);

// Rows [begin, end) of a batch (along its leading dim): rank r of N takes rows
// [r B/N, (r + 1) B/N) of each batch input.
absl::StatusOr<Tensor> BatchRows(const Tensor& batch, int64_t begin, int64_t end);

}  // namespace kgrad

#endif  // KGRAD_AD_DATA_PARALLEL_H_
