// The primitives the ONNX export does not write, each with the reason its error
// gives ("<primitive> is <reason>"). Every other primitive has an emitter in one of the family files
// (onnx_exporter.h); a test walks every PrimId and requires exactly one of the two.
#include <initializer_list>
#include <vector>

#include "proto/onnx/onnx_exporter.h"

namespace kgrad {
namespace onnx_export_internal {
absl::Span<const NotExportable> NotExportablePrims() {
  static const std::vector<NotExportable>* const prims = [] {
    auto* v = new std::vector<NotExportable>;
    auto refuse = [v](const char* reason, std::initializer_list<PrimId> ids) {
      for (PrimId id : ids) v->push_back({id, reason});
    };
    refuse("a differentiation operator: expand it first (ad/expand_differentiation.h), then "
           "optimise",
           {PrimId::kJ, PrimId::kGrad, PrimId::kValueAndGrad, PrimId::kJvp, PrimId::kVjp});
    refuse("control flow or a closure: inline and optimise first (export wants one graph of "
           "primitive applications), or unroll",
           {PrimId::kSwitch, PrimId::kPartial});
    refuse("env plumbing (free-variable sensitivities): optimise first, which removes envs from "
           "first-order gradient graphs",
           {PrimId::kEnvSetItem, PrimId::kEnvGetItem, PrimId::kEnvAdd});
    refuse("a list (ops/list_ops.h): the export writes tensors and tuples, not ONNX sequences",
           {PrimId::kMakeList, PrimId::kListLen, PrimId::kListGetItem, PrimId::kListSetItem,
            PrimId::kListInsert, PrimId::kListErase, PrimId::kListConcat, PrimId::kListConcatGrad,
            PrimId::kSplitToList});
    refuse("gradient accumulation over tuples and envs: optimise first (on tensors it becomes add)",
           {PrimId::kHyperAdd});
    refuse("scalar arithmetic (loop counters): kgrad scalars have no ONNX value; fold them or "
           "optimise first",
           {PrimId::kScalarAdd, PrimId::kScalarSub, PrimId::kScalarMul, PrimId::kScalarDiv,
            PrimId::kScalarLt, PrimId::kScalarLe, PrimId::kScalarGt, PrimId::kScalarGe,
            PrimId::kScalarEq, PrimId::kScalarNe, PrimId::kScalarToTensor,
            PrimId::kTensorToScalar});
    refuse("a collective across ranks: no ONNX op (export the per-rank graph before the "
           "data-parallel pass)",
           {PrimId::kAllReduce, PrimId::kAllGather, PrimId::kReduceScatter, PrimId::kBroadcast,
            PrimId::kReduceTo});
    // Randomness that ONNX would draw differently.
    refuse("random: its mask comes from kgrad's counter-based hash of the seed; ONNX Dropout "
           "draws other numbers, so the export would not compute the same values",
           {PrimId::kDropout, PrimId::kDynamicDropout, PrimId::kRandomUniformLike,
            PrimId::kRandomNormalLike});
    // No single ONNX op, and no composition written yet.
    refuse("without an ONNX op: it would be a gather of ddx at MaxPool's Indices output (not "
           "written yet)",
           {PrimId::kMaxPool2dGradGrad});
    refuse("without an ONNX op: the adjoint of Slice with run-time bounds would be Pad for unit "
           "steps and ScatterND otherwise (not written yet)",
           {PrimId::kDynamicSliceGrad});
    refuse("without an ONNX op: the adjoint of Tile would be a Reshape to interleaved run-time "
           "dims and a ReduceSum (not written yet)",
           {PrimId::kDynamicTileGrad});
    refuse("a tensor comprehension (ops/tc_block.h): ONNX has no loop-nest op; its statements "
           "would have to be lowered to Einsum, Gather and ReduceMax compositions (not written)",
           {PrimId::kTc});
    refuse("without an ONNX op: the default domain has no matrix inverse (det's gradient uses it; "
           "com.microsoft's Inverse is a contrib op)",
           {PrimId::kMatrixInverse});
    refuse("without an emitter yet: ONNX Unique has the same four outputs (not written yet)",
           {PrimId::kUnique});
    refuse("not ONNX OneHot: that wraps indices in [-depth, 0), which dynamic_one_hot maps to an "
           "all-off row (the importer wraps them before it)",
           {PrimId::kDynamicOneHot});
    return v;
  }();
  return *prims;
}

}  // namespace onnx_export_internal
}  // namespace kgrad
