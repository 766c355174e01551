// The collective primitives on CUDA tensors. With an NCCL communicator (device
// buffers) they run on the device; with a host communicator (MPI) they stage
// through the host and run the CPU kernel. NCCL moves whole buffers, so
// all_gather and reduce_scatter run on the device along a leading axis (every
// dim before it of size 1); other axes are refused with the way out (transpose
// the axis to the front), not silently staged.
#include "absl/strings/str_cat.h"
#include "backends/collective_kernels.h"
#include "backends/collectives.h"
#include "backends/communicator.h"
#include "backends/cuda/cuda_context.h"
#include "core/status_macros.h"
#include "ops/collective.h"
#include "ops/op_util.h"
#include "ops/registry.h"

namespace kgrad {
namespace cuda {
namespace {

// y /= n on the device, through the CUDA div kernel.
absl::StatusOr<Tensor> DivideBy(KernelContext& ctx, Tensor y, int n) {
  KGRAD_ASSIGN_OR_RETURN(PrimitivePtr div, DefaultRegistry().Make(PrimId::kDiv));
  KGRAD_ASSIGN_OR_RETURN(Tensor count, ctx.device()->Fill(y.dtype(), {}, n));
  std::vector<Value> args = {Value(std::move(y)), Value(std::move(count))};
  KernelContext c(*div, absl::MakeSpan(args), ctx.device());
  KGRAD_ASSIGN_OR_RETURN(Value out, ctx.device()->kernel(PrimId::kDiv)(c));
  return out.tensor();
}

// all_gather / reduce_scatter move whole buffers: the axis must lead.
absl::Status CheckLeadingAxis(const Primitive& p, const Tensor& x) {
  KGRAD_ASSIGN_OR_RETURN(int axis, ops::AxisAttr(p, "axis", ops::TensorType(x)));
  if (ops::SplitAtAxis(x.shape(), axis).outer == 1) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      p.name(), " along axis ", axis, " of ", x.TypeString(),
      " on CUDA: NCCL exchanges whole buffers, so the axis must come first (transpose it to the "
      "front, or run this collective on the CPU)"));
}

absl::StatusOr<Tensor> RunOnDevice(KernelContext& ctx, const Tensor& x, Tensor y, Communicator& comm) {
  const Primitive& p = ctx.prim();
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  switch (p.id()) {
    case PrimId::kAllReduce: {
      KGRAD_ASSIGN_OR_RETURN(ops::CollectiveReduce op, ops::ParseCollectiveReduce(p));
      const ::kgrad::ReduceOp flat = op == ops::CollectiveReduce::kMax   ? ::kgrad::ReduceOp::kMax
                                     : op == ops::CollectiveReduce::kMin ? ::kgrad::ReduceOp::kMin
                                                                         : ::kgrad::ReduceOp::kSum;
      KGRAD_RETURN_IF_ERROR(comm.AllReduce(x.raw_data(), y.raw_data(), x.NumElements(), x.dtype(), flat));
      if (op == ops::CollectiveReduce::kMean) return DivideBy(ctx, std::move(y), comm.size());
      return y;
    }
    case PrimId::kAllGather:
      KGRAD_RETURN_IF_ERROR(CheckLeadingAxis(p, x));
      KGRAD_RETURN_IF_ERROR(comm.AllGather(x.raw_data(), y.raw_data(), static_cast<int64_t>(x.nbytes())));
      return y;
    case PrimId::kReduceScatter:
      KGRAD_RETURN_IF_ERROR(CheckLeadingAxis(p, x));
      KGRAD_RETURN_IF_ERROR(comm.ReduceScatter(x.raw_data(), y.raw_data(), y.NumElements(), x.dtype()));
      return y;
    case PrimId::kBroadcast:
      KGRAD_CUDA_CALL(cudaMemcpyAsync(y.raw_data(), x.raw_data(), x.nbytes(), cudaMemcpyDeviceToDevice,
                                      gpu.stream));
      KGRAD_RETURN_IF_ERROR(comm.Broadcast(y.raw_data(), static_cast<int64_t>(y.nbytes()),
                                           static_cast<int>(p.GetInt("root"))));
      return y;
    case PrimId::kReduceTo:
      KGRAD_CUDA_CALL(cudaMemsetAsync(y.raw_data(), 0, y.nbytes(), gpu.stream));
      KGRAD_RETURN_IF_ERROR(comm.Reduce(x.raw_data(), y.raw_data(), x.NumElements(), x.dtype(),
                                        static_cast<int>(p.GetInt("root"))));
      return y;
    default:
      return absl::InternalError(absl::StrCat(p.name(), " is not a collective"));
  }
}

absl::StatusOr<Value> Collective(KernelContext& ctx) {
  Communicator* comm = ctx.communicator();
  // Host communicators (and the missing-communicator error) are the CPU kernel's.
  if (comm == nullptr || comm->memory() != DeviceType::kCuda) return CpuFallback(ctx);
  KGRAD_RETURN_IF_ERROR(MoveInputsToDevice(ctx));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(Shape out, PrepareCollective(ctx.prim(), *x, *comm));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.Allocate(x->dtype(), out));
  if (x->NumElements() == 0 && y.NumElements() == 0) return Value(std::move(y));
  KGRAD_ASSIGN_OR_RETURN(Tensor result, RunOnDevice(ctx, *x, std::move(y), *comm));
  return Value(std::move(result));
}

}  // namespace

void RegisterCollectiveKernels(KernelTable* t) { SetCollectiveKernel(t, Collective); }

}  // namespace cuda
}  // namespace kgrad
