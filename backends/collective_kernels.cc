#include "backends/collective_kernels.h"

#include "absl/strings/str_cat.h"
#include "backends/collectives.h"
#include "backends/communicator.h"
#include "core/status_macros.h"
#include "ops/collective.h"

namespace kgrad {
namespace {

absl::StatusOr<Value> CollectiveKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  if (ctx.communicator() == nullptr) {
    // Not a group of one by default: evaluating a collective without its ranks
    // (for instance while folding constants) would give one rank's answer.
    return absl::FailedPreconditionError(absl::StrCat(
        ctx.prim().name(), " runs across ranks and needs a communicator "
        "(ExecutorOptions::communicator: an MpiCommunicator under mpirun, or a LocalCommunicator "
        "for one process)"));
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor y, RunCollective(ctx.prim(), *x, *ctx.communicator()));
  return Value(std::move(y));
}

}  // namespace

void SetCollectiveKernel(KernelTable* table, KernelFn kernel) {
  for (int i = 0; i < kNumPrimIds; ++i) {
    if (ops::IsCollective(static_cast<PrimId>(i))) table->Set(static_cast<PrimId>(i), kernel);
  }
}

void RegisterCollectiveKernels(KernelTable* table) { SetCollectiveKernel(table, CollectiveKernel); }

}  // namespace kgrad
