#include "backends/collectives.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "ops/collective.h"
#include "ops/op_util.h"

namespace kgrad {
namespace {

// [outer, len, inner] around `axis`, in bytes for the inner part.
struct Blocks {
  int64_t outer = 1;
  int64_t chunk = 0;  // bytes of one outer row's slice along the axis
};

Blocks AroundAxis(const Tensor& x, int axis, int64_t len) {
  ops::AxisSplit s = ops::SplitAtAxis(x.shape(), axis);
  return Blocks{s.outer, len * s.inner * static_cast<int64_t>(DTypeSize(x.dtype()))};
}

// Rows of `parts` x `outer` chunks, moved from [parts][outer] order to
// [outer][parts] order (or back when `to_parts`).
void Interleave(const char* in, char* out, int64_t parts, const Blocks& b, bool to_parts) {
  for (int64_t p = 0; p < parts; ++p) {
    for (int64_t o = 0; o < b.outer; ++o) {
      const int64_t a = (p * b.outer + o) * b.chunk, c = (o * parts + p) * b.chunk;
      if (to_parts) {
        std::memcpy(out + a, in + c, static_cast<size_t>(b.chunk));
      } else {
        std::memcpy(out + c, in + a, static_cast<size_t>(b.chunk));
      }
    }
  }
}

absl::StatusOr<int> Axis(const Primitive& p, const Tensor& x) {
  return ops::AxisAttr(p, "axis", ops::TensorType(x));
}

absl::Status AllGatherAlong(const Primitive& p, const Tensor& x, Tensor& y, Communicator& comm) {
  KGRAD_ASSIGN_OR_RETURN(int axis, Axis(p, x));
  Blocks b = AroundAxis(x, axis, x.dim(axis));
  if (b.outer == 1) return comm.AllGather(x.raw_data(), y.raw_data(), b.chunk);
  std::vector<char> gathered(static_cast<size_t>(b.chunk * b.outer * comm.size()));
  KGRAD_RETURN_IF_ERROR(comm.AllGather(x.raw_data(), gathered.data(), b.chunk * b.outer));
  Interleave(gathered.data(), static_cast<char*>(y.raw_data()), comm.size(), b, false);
  return absl::OkStatus();
}

absl::Status ReduceScatterAlong(const Primitive& p, const Tensor& x, Tensor& y,
                                Communicator& comm) {
  KGRAD_ASSIGN_OR_RETURN(int axis, Axis(p, x));
  Blocks b = AroundAxis(x, axis, x.dim(axis) / comm.size());
  const int64_t count = y.NumElements();
  if (b.outer == 1) return comm.ReduceScatter(x.raw_data(), y.raw_data(), count, x.dtype());
  std::vector<char> parts(x.nbytes());
  Interleave(static_cast<const char*>(x.raw_data()), parts.data(), comm.size(), b, true);
  return comm.ReduceScatter(parts.data(), y.raw_data(), count, x.dtype());
}

// y /= n, elementwise (all_reduce{mean}: the same division on every rank keeps
// the ranks bit-identical).
void DivideBy(Tensor& y, int n) {
  if (y.dtype() == DType::kFloat32) {
    float* d = y.mutable_data<float>();
    for (int64_t i = 0; i < y.NumElements(); ++i) d[i] /= static_cast<float>(n);
  } else {
    double* d = y.mutable_data<double>();
    for (int64_t i = 0; i < y.NumElements(); ++i) d[i] /= n;
  }
}

absl::Status AllReduce(const Primitive& p, const Tensor& x, Tensor& y, Communicator& comm) {
  KGRAD_ASSIGN_OR_RETURN(ops::CollectiveReduce op, ops::ParseCollectiveReduce(p));
  ReduceOp flat = op == ops::CollectiveReduce::kMax   ? ReduceOp::kMax
                  : op == ops::CollectiveReduce::kMin ? ReduceOp::kMin
                                                      : ReduceOp::kSum;
  KGRAD_RETURN_IF_ERROR(comm.AllReduce(x.raw_data(), y.raw_data(), x.NumElements(), x.dtype(), flat));
  if (op == ops::CollectiveReduce::kMean) DivideBy(y, comm.size());
  return absl::OkStatus();
}

absl::Status Dispatch(const Primitive& p, const Tensor& x, Tensor& y, Communicator& comm) {
  switch (p.id()) {
    case PrimId::kAllReduce:
      return AllReduce(p, x, y, comm);
    case PrimId::kAllGather:
      return AllGatherAlong(p, x, y, comm);
    case PrimId::kReduceScatter:
      return ReduceScatterAlong(p, x, y, comm);
    case PrimId::kBroadcast:
      std::memcpy(y.raw_data(), x.raw_data(), x.nbytes());
      return comm.Broadcast(y.raw_data(), static_cast<int64_t>(y.nbytes()),
                            static_cast<int>(p.GetInt("root")));
    case PrimId::kReduceTo:
      std::memset(y.raw_data(), 0, y.nbytes());
      return comm.Reduce(x.raw_data(), y.raw_data(), x.NumElements(), x.dtype(),
                         static_cast<int>(p.GetInt("root")));
    default:
      return absl::InternalError(absl::StrCat(p.name(), " is not a collective"));
  }
}

}  // namespace

uint64_t StableFingerprint(absl::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

absl::StatusOr<Shape> PrepareCollective(const Primitive& p, const Tensor& x, Communicator& comm) {
  KGRAD_RETURN_IF_ERROR(ops::CheckCollectiveRanks(p, comm.size()));
  KGRAD_ASSIGN_OR_RETURN(Shape out, ops::CollectiveOutShape(p, ops::TensorType(x), comm.size()));
  // Every rank states what it is about to run; a rank with another shape, dtype
  // or collective makes all of them fail here rather than exchange garbage.
  const std::string what = absl::StrCat(p.ToString(), " on ", x.TypeString());
  KGRAD_RETURN_IF_ERROR(comm.Agree(StableFingerprint(what), absl::StrCat("the collective (this rank runs ",
                                                                         what, ")")));
  return out;
}

absl::StatusOr<Tensor> RunCollective(const Primitive& p, const Tensor& x, Communicator& comm) {
  if (comm.memory() != DeviceType::kCpu || x.device() != DeviceType::kCpu) {
    return absl::FailedPreconditionError(absl::StrCat(
        comm.name(), " works on ", DeviceTypeName(comm.memory()), " buffers; ", p.name(),
        " got a tensor on ", DeviceTypeName(x.device()), " for a host collective"));
  }
  KGRAD_ASSIGN_OR_RETURN(Shape out, PrepareCollective(p, x, comm));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, Tensor::Create(x.dtype(), out));
  if (x.NumElements() == 0 && y.NumElements() == 0) return y;
  KGRAD_RETURN_IF_ERROR(Dispatch(p, x, y, comm));
  return y;
}

}  // namespace kgrad
