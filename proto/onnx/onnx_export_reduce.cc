// ONNX export of the reductions (axes and keepdims as opset 17 takes them: an
// input for ReduceSum, the attribute for the others) and of argmax / argmin.
#include <string>

#include "core/status_macros.h"
#include "proto/onnx/onnx_exporter.h"

namespace kgrad {
namespace onnx_export_internal {
namespace {

// reduce_sum(x){axes, keepdims} = ReduceSum(x[, axes]){keepdims}; no axes: all.
absl::StatusOr<std::string> EmitReduceSum(Exporter& e, const ExportCall& call) {
  std::vector<std::string> in = {call.in[0]};
  if (!call.prim.GetInts("axes").empty()) in.push_back(e.Ints(call.prim.GetInts("axes")));
  NodeProto* n = e.Add("ReduceSum", in);
  SetInt(n, "keepdims", call.prim.GetBool("keepdims"));
  return n->output(0);
}

const char* ReduceOp(PrimId id) {
  switch (id) {
    case PrimId::kReduceMean: return "ReduceMean";
    case PrimId::kReduceMax: return "ReduceMax";
    case PrimId::kReduceMin: return "ReduceMin";
    case PrimId::kReduceProd: return "ReduceProd";
    default: return "ReduceLogSumExp";
  }
}

// reduce_mean / max / min / prod and logsumexp: Reduce*(x){axes, keepdims}.
absl::StatusOr<std::string> EmitReduce(Exporter& e, const ExportCall& call) {
  NodeProto* n = e.Add(ReduceOp(call.prim.id()), call.in);
  SetInt(n, "keepdims", call.prim.GetBool("keepdims"));
  if (!call.prim.GetInts("axes").empty()) SetInts(n, "axes", call.prim.GetInts("axes"));
  return n->output(0);
}

// argmax / argmin(x){axis, keepdims}: ArgMax / ArgMin give int64, cast to the
// primitive's index dtype when it is another.
absl::StatusOr<std::string> EmitArgReduce(Exporter& e, const ExportCall& call) {
  NodeProto* n = e.Add(call.prim.id() == PrimId::kArgmax ? "ArgMax" : "ArgMin", call.in);
  SetInt(n, "axis", call.prim.GetInt("axis"));
  SetInt(n, "keepdims", call.prim.GetBool("keepdims"));
  if (call.dtype == DType::kInt64) return n->output(0);
  NodeProto* cast = e.Add("Cast", {n->output(0)});
  SetInt(cast, "to", DTypeToOnnx(call.dtype));
  return cast->output(0);
}

}  // namespace

void AddReduceEmitters(EmitterTable* t) {
  t->Emit(PrimId::kReduceSum, EmitReduceSum);
  for (PrimId id : {PrimId::kReduceMean, PrimId::kReduceMax, PrimId::kReduceMin,
                    PrimId::kReduceProd, PrimId::kLogsumexp}) {
    t->Emit(id, EmitReduce);
  }
  t->Emit(PrimId::kArgmax, EmitArgReduce);
  t->Emit(PrimId::kArgmin, EmitArgReduce);
}

}  // namespace onnx_export_internal
}  // namespace kgrad
