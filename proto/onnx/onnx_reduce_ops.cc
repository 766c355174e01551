// ONNX op mappings of the reductions: Reduce* (axes as an input or an attribute,
// computed at run time for the sums) and ArgMax / ArgMin. Each states the ONNX form
// it accepts and the kgrad primitives it becomes.
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"
#include "proto/onnx/onnx_dynamic_shape_ops.h"

namespace kgrad {
namespace onnx_import {
namespace {

// The reduction of a Reduce* node: axes from the input (ReduceSum from opset 13,
// the others from 18) or the attribute; empty means all, or nothing with
// noop_with_empty_axes=1 (`noop`).
struct ReduceSpec {
  AttrMap attrs;
  bool noop = false;
};

absl::StatusOr<ReduceSpec> ReadReduce(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 2));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  std::vector<int64_t> axes;
  if (c.HasInput(1)) {
    KGRAD_ASSIGN_OR_RETURN(axes, c.ConstInts(1));
  } else {
    KGRAD_ASSIGN_OR_RETURN(axes, c.Ints("axes", {}));
  }
  KGRAD_ASSIGN_OR_RETURN(int64_t keepdims, c.Int("keepdims", 1));
  KGRAD_ASSIGN_OR_RETURN(int64_t noop, c.Int("noop_with_empty_axes", 0));
  ReduceSpec r;
  r.noop = axes.empty() && noop != 0;
  r.attrs = {{"axes", axes}, {"keepdims", keepdims != 0}};
  return r;
}

// Reduce* whose axes input is computed at run time: the sums (ReduceSum and the
// L1, L2, SumSquare and LogSum built on it) become dynamic_reduce_sum, ReduceMean
// that sum over its count; max, min, prod and logsumexp have no run-time form.
absl::StatusOr<ImportedValue> RunTimeReduce(NodeContext& c, PrimId id, const ImportedValue& x) {
  if (id != PrimId::kReduceSum && id != PrimId::kReduceMean) {
    return c.Error("axes computed at run time (input 1 is not a constant) are supported by "
                   "ReduceSum, ReduceMean, ReduceL1, ReduceL2, ReduceSumSquare and ReduceLogSum "
                   "only");
  }
  KGRAD_ASSIGN_OR_RETURN(int64_t keepdims, c.Int("keepdims", 1));
  KGRAD_ASSIGN_OR_RETURN(int64_t noop, c.Int("noop_with_empty_axes", 0));
  return DynamicReduceSum(c, x, keepdims != 0, noop != 0, id == PrimId::kReduceMean);
}

// Reduce*(x[, axes]){axes, keepdims=1, noop_with_empty_axes=0} = `id` over the axes
// of `pre`(x), then `post` (kNeg as "none" for either).
template <PrimId id, PrimId pre = PrimId::kNeg, PrimId post = PrimId::kNeg>
Outputs Reduce(NodeContext& c) {
  const bool run_time = !IsConstantInput(c, 1);
  ReduceSpec r;
  if (run_time) {
    KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 2));
    KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  } else {
    KGRAD_ASSIGN_OR_RETURN(r, ReadReduce(c));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  if (pre != PrimId::kNeg) {
    KGRAD_ASSIGN_OR_RETURN(x, c.Emit(pre, {x}));
  }
  if (run_time) {
    KGRAD_ASSIGN_OR_RETURN(x, RunTimeReduce(c, id, x));
  } else if (!r.noop) {
    KGRAD_ASSIGN_OR_RETURN(x, c.Emit(id, {x}, r.attrs));
  }
  if (post != PrimId::kNeg) {
    KGRAD_ASSIGN_OR_RETURN(x, c.Emit(post, {x}));
  }
  return std::vector<ImportedValue>{x};
}

// ArgMax/ArgMin(x){axis=0, keepdims=1, select_last_index=0}. The last index among
// ties is (n - 1) - the first one along the reversed axis (a gather of the
// reversed positions; the axis must be static).
template <PrimId id>
Outputs ArgReduce(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t keepdims, c.Int("keepdims", 1));
  KGRAD_ASSIGN_OR_RETURN(int64_t last, c.Int("select_last_index", 0));
  AttrMap attrs = {{"axis", axis}, {"keepdims", keepdims != 0}};
  if (last == 0) return OneOutput(c.Emit(id, {x}, std::move(attrs)));
  KGRAD_ASSIGN_OR_RETURN(int64_t n, c.StaticDim(x, axis, "reduced dim"));
  std::vector<int64_t> reversed;
  for (int64_t i = n - 1; i >= 0; --i) reversed.push_back(i);
  ImportedValue idx = c.Const(Tensor::FromVector<int64_t>({n}, reversed));
  KGRAD_ASSIGN_OR_RETURN(x, c.Emit(PrimId::kGather, {x, idx}, {{"axis", axis}}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue first, c.Emit(id, {x}, std::move(attrs)));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue top, c.ScalarLike(first, static_cast<double>(n - 1)));
  return OneOutput(c.Emit(PrimId::kSub, {top, first}));
}

}  // namespace

void AddReduceOps(OpTable* t) {
  AddMappings(t, {{"ReduceSum", Reduce<PrimId::kReduceSum>},
                  {"ReduceMean", Reduce<PrimId::kReduceMean>},
                  {"ReduceMax", Reduce<PrimId::kReduceMax>},
                  {"ReduceMin", Reduce<PrimId::kReduceMin>},
                  {"ReduceProd", Reduce<PrimId::kReduceProd>},
                  {"ReduceLogSumExp", Reduce<PrimId::kLogsumexp>},
                  // ReduceL1 = sum |x|, ReduceL2 = sqrt(sum x^2), ReduceSumSquare = sum x^2,
                  // ReduceLogSum = log(sum x).
                  {"ReduceL1", Reduce<PrimId::kReduceSum, PrimId::kAbs>},
                  {"ReduceL2", Reduce<PrimId::kReduceSum, PrimId::kSquare, PrimId::kSqrt>},
                  {"ReduceSumSquare", Reduce<PrimId::kReduceSum, PrimId::kSquare>},
                  {"ReduceLogSum", Reduce<PrimId::kReduceSum, PrimId::kNeg, PrimId::kLog>},
                  {"ArgMax", ArgReduce<PrimId::kArgmax>}, {"ArgMin", ArgReduce<PrimId::kArgmin>}});
}

}  // namespace onnx_import
}  // namespace kgrad
