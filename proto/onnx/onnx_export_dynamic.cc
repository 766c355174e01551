// ONNX export of run-time shapes: the dynamic_* primitives and shape_of/size_of
// as the standard ops they came from, and the *_like primitives whose reference
// shape is not static (symbolic or unknown dims) through Shape of the reference,
// so that gradient graphs of dynamic-batch models export as one ONNX graph for
// every size.
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_exporter.h"

namespace kgrad {
namespace onnx_export_internal {

absl::StatusOr<std::string> ReshapeLikeAtRunTime(Exporter& e, const ExportCall& call) {
  return e.Op("Reshape", {call.in[0], e.Op("Shape", {call.in[1]})});
}

absl::StatusOr<std::string> BroadcastToLikeAtRunTime(Exporter& e, const ExportCall& call) {
  return e.Op("Expand", {call.in[0], e.Op("Shape", {call.in[1]})});
}

// sum_to_like(x, ref) = ReduceSum over x's leading dims and the dims where ref is
// 1 and x is not statically 1, then Reshape to Shape(ref). A dim of ref that is
// not static must be the same symbol as x's (so not summed); else it is ambiguous.
absl::StatusOr<std::string> SumToLikeAtRunTime(Exporter& e, const ExportCall& call) {
  CNode* c = call.node;
  const AbstractTensor* tx = AsTensor(c->arg(0)->abstract());
  const AbstractTensor* tr = AsTensor(c->arg(1)->abstract());
  if (tx == nullptr || tr == nullptr) return e.Error(c, "needs tensor types for x and the reference");
  const int lead = tx->rank() - tr->rank();
  std::vector<int64_t> axes;
  for (int i = 0; i < tx->rank(); ++i) {
    const int64_t s = tx->shape()[i], t = i < lead ? 1 : tr->shape()[i - lead];
    if (i < lead || (t == 1 && s != 1)) {
      axes.push_back(i);
    } else if (t < 0 && t != s) {
      return e.Error(c, absl::StrCat("cannot tell whether dim ", i, " of ", tx->ToString(), " sums to ",
                                     tr->ToString(), " without static sizes"));
    }
  }
  std::string y = call.in[0];
  if (!axes.empty()) {
    NodeProto* n = e.Add("ReduceSum", {y, e.Ints(axes)});
    SetInt(n, "keepdims", 1);
    y = n->output(0);
  }
  return e.Op("Reshape", {y, e.Op("Shape", {call.in[1]})});
}

// slice_grad(dy, ref){begin, end, strides = 1} with dims that are not static:
// Pad(dy, [b, d - b - n]) with d = Shape(ref), n = Shape(dy) and b the begins
// normalised at run time as the slice normalises them (b < 0 counts from the end,
// then clamped to [0, d]).
absl::StatusOr<std::string> SliceGradAtRunTime(Exporter& e, const ExportCall& call) {
  const std::vector<int64_t>& begins = call.prim.GetInts("begin");
  const std::string zeros = e.Ints(std::vector<int64_t>(begins.size(), 0));
  const std::string dims = e.Op("Shape", {call.in[1]});
  const std::string begin = e.Ints(begins);
  const std::string negative = e.Op("Less", {begin, zeros});
  const std::string from_end = e.Op("Add", {begin, dims});
  std::string b = e.Op("Where", {negative, from_end, begin});
  b = e.Op("Max", {e.Op("Min", {b, dims}), e.Ints(std::vector<int64_t>(begins.size(), 0))});
  const std::string after = e.Op("Sub", {e.Op("Sub", {dims, b}), e.Op("Shape", {call.in[0]})});
  NodeProto* pads = e.Add("Concat", {b, after});
  SetInt(pads, "axis", 0);
  const AbstractTensor* t = AsTensor(call.node->arg(0)->abstract());
  if (t == nullptr) return e.Error(call.node, "needs a tensor type for dy");
  return e.Op("Pad", {call.in[0], pads->output(0), e.Scalar(t->dtype(), 0)});
}

// zeros_like / ones_like(x) of a type that is not static: ConstantOfShape(Shape(x)).
absl::StatusOr<std::string> FillLikeAtRunTime(Exporter& e, const ExportCall& call) {
  const AbstractTensor* t = AsTensor(call.node->abstract());
  if (t == nullptr) return e.Error(call.node, "needs a tensor type");
  NodeProto* n = e.Add("ConstantOfShape", {e.Op("Shape", call.in)});
  const double v = call.prim.id() == PrimId::kOnesLike ? 1 : 0;
  TensorToOnnx(Tensor::Full(t->dtype(), {1}, v).value(), "value", AddTensorAttr(n, "value"));
  return n->output(0);
}

namespace {

// The dynamic primitives that are one ONNX op on the same operands: the forms they
// were imported from, with their bool attributes as INT attributes of the same
// names.
struct OnnxTwin {
  PrimId id;
  const char* op;
  const char* bools[2];  // unused entries are null
};
constexpr OnnxTwin kTwins[] = {
    {PrimId::kShapeOf, "Shape"},
    {PrimId::kSizeOf, "Size"},
    {PrimId::kDynamicReshape, "Reshape", {"allowzero"}},
    {PrimId::kDynamicBroadcastTo, "Expand"},
    {PrimId::kDynamicSlice, "Slice"},
    {PrimId::kDynamicRange, "Range"},
    // Axes counted as ONNX counts them.
    {PrimId::kDynamicUnsqueeze, "Unsqueeze"},
    {PrimId::kDynamicSqueeze, "Squeeze"},
    // ReduceSum-13, axes as an input.
    {PrimId::kDynamicReduceSum, "ReduceSum", {"keepdims", "noop_with_empty_axes"}},
    {PrimId::kDynamicCumSum, "CumSum", {"exclusive", "reverse"}},
    {PrimId::kDynamicTile, "Tile"},
};

absl::StatusOr<std::string> EmitTwin(Exporter& e, const ExportCall& call) {
  for (const OnnxTwin& twin : kTwins) {
    if (twin.id != call.prim.id()) continue;
    NodeProto* n = e.Add(twin.op, call.in);
    for (const char* name : twin.bools) {
      if (name != nullptr) SetInt(n, name, call.prim.GetBool(name));
    }
    return n->output(0);
  }
  return e.Error(call.node, "has no ONNX twin");
}

absl::StatusOr<std::string> EmitDynamicFill(Exporter& e, const ExportCall& call) {
  NodeProto* n = e.Add("ConstantOfShape", call.in);
  const Tensor v = Tensor::Full(call.prim.GetDType("dtype"), {1}, call.prim.GetFloat("value")).value();
  TensorToOnnx(v, "value", AddTensorAttr(n, "value"));
  return n->output(0);
}

absl::StatusOr<std::string> EmitDynamicPad(Exporter& e, const ExportCall& call) {
  const AbstractTensor* t = AsTensor(call.node->arg(0)->abstract());
  if (t == nullptr) return e.Error(call.node, "needs a tensor type");
  return e.Op("Pad", {call.in[0], call.in[1], e.Scalar(t->dtype(), call.prim.GetFloat("value"))});
}

// dynamic_split(x, sizes){axis} = Split(x, sizes){axis}: as many outputs as the
// tuple inference gave (the length of sizes is static).
absl::StatusOr<Val> EmitDynamicSplit(Exporter& e, CNode* c, const Primitive& p) {
  const AbstractTuple* t = AsTuple(c->abstract());
  if (t == nullptr) return e.Error(c, "needs a tuple type (the number of pieces)");
  KGRAD_ASSIGN_OR_RETURN(std::string x, e.TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(std::string sizes, e.TensorArg(c, 1));
  NodeProto* n = e.Add("Split", {x, sizes}, static_cast<int>(t->size()));
  SetInt(n, "axis", p.GetInt("axis"));
  Val v;
  v.is_tuple = true;
  for (const std::string& o : n->output()) v.elems.push_back(Val{o});
  return v;
}

}  // namespace

void AddDynamicEmitters(EmitterTable* t) {
  for (const OnnxTwin& twin : kTwins) t->Emit(twin.id, EmitTwin);
  t->Emit(PrimId::kDynamicFill, EmitDynamicFill);
  t->Emit(PrimId::kDynamicPad, EmitDynamicPad);
  t->EmitValue(PrimId::kDynamicSplit, EmitDynamicSplit);
}

}  // namespace onnx_export_internal
}  // namespace kgrad
