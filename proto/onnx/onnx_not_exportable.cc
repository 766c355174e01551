// The primitives the ONNX export does not write, each with the reason its error
// gives ("<primitive> is <reason>"). Every other primitive has an emitter in one of the family files
// (onnx_exporter.h); a test walks every PrimId and requires exactly one of the two.
#include "proto/onnx/onnx_exporter.h"

namespace kgrad {
namespace onnx_export_internal {
namespace {

constexpr char kDifferentiation[] =
    "a differentiation operator: expand it first (ad/expand_differentiation.h), then optimise";
constexpr char kControlFlow[] =
    "control flow or a closure: inline and optimise first (export wants one graph of primitive "
    "applications), or unroll";
constexpr char kEnv[] =
    "env plumbing (free-variable sensitivities): optimise first, which removes envs from "
    "first-order gradient graphs";
constexpr char kScalar[] =
    "scalar arithmetic (loop counters): kgrad scalars have no ONNX value; fold them or optimise "
    "first";
constexpr char kCollective[] =
    "a collective across ranks: no ONNX op (export the per-rank graph before the data-parallel "
    "pass)";
constexpr char kDropout[] =
    "random: its mask comes from kgrad's counter-based hash of the seed; ONNX Dropout draws other "
    "numbers, so the export would not compute the same values";

constexpr NotExportable kNotExportable[] = {
    // Differentiation operators.
    {PrimId::kJ, kDifferentiation},
    {PrimId::kGrad, kDifferentiation},
    {PrimId::kValueAndGrad, kDifferentiation},
    {PrimId::kJvp, kDifferentiation},
    {PrimId::kVjp, kDifferentiation},
    // Control flow, closures, envs and gradient plumbing.
    {PrimId::kSwitch, kControlFlow},
    {PrimId::kPartial, kControlFlow},
    {PrimId::kEnvSetItem, kEnv},
    {PrimId::kEnvGetItem, kEnv},
    {PrimId::kEnvAdd, kEnv},
    {PrimId::kHyperAdd,
     "gradient accumulation over tuples and envs: optimise first (on tensors it becomes add)"},
    // Scalars.
    {PrimId::kScalarAdd, kScalar},
    {PrimId::kScalarSub, kScalar},
    {PrimId::kScalarMul, kScalar},
    {PrimId::kScalarDiv, kScalar},
    {PrimId::kScalarLt, kScalar},
    {PrimId::kScalarLe, kScalar},
    {PrimId::kScalarGt, kScalar},
    {PrimId::kScalarGe, kScalar},
    {PrimId::kScalarEq, kScalar},
    {PrimId::kScalarNe, kScalar},
    {PrimId::kScalarToTensor, kScalar},
    {PrimId::kTensorToScalar, kScalar},
    // Collectives.
    {PrimId::kAllReduce, kCollective},
    {PrimId::kAllGather, kCollective},
    {PrimId::kReduceScatter, kCollective},
    {PrimId::kBroadcast, kCollective},
    {PrimId::kReduceTo, kCollective},
    // Randomness that ONNX would draw differently.
    {PrimId::kDropout, kDropout},
    {PrimId::kDynamicDropout, kDropout},
    // No single ONNX op, and no composition written yet.
    {PrimId::kMaxPool2dGradGrad,
     "without an ONNX op: it would be a gather of ddx at MaxPool's Indices output (not written "
     "yet)"},
    {PrimId::kDynamicSliceGrad,
     "without an ONNX op: the adjoint of Slice with run-time bounds would be Pad for unit steps and "
     "ScatterND otherwise (not written yet)"},
    {PrimId::kDynamicTileGrad,
     "without an ONNX op: the adjoint of Tile would be a Reshape to interleaved run-time dims and a "
     "ReduceSum (not written yet)"},
    {PrimId::kDynamicOneHot,
     "not ONNX OneHot: that wraps indices in [-depth, 0), which dynamic_one_hot maps to an all-off "
     "row (the importer wraps them before it)"},
};

}  // namespace

absl::Span<const NotExportable> NotExportablePrims() { return kNotExportable; }

}  // namespace onnx_export_internal
}  // namespace kgrad
