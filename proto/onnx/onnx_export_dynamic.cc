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

// sum_to_like(x, ref) = ReduceSum over x's leading dims and the dims where ref is
// 1 and x is not statically 1, then Reshape to Shape(ref). A dim of ref that is
// not static must be the same symbol as x's (so not summed); else it is ambiguous.
absl::StatusOr<std::string> Exporter::EmitSumToLikeAtRunTime(CNode* c,
                                                            const std::vector<std::string>& a) {
  const AbstractTensor* tx = AsTensor(c->arg(0)->abstract());
  const AbstractTensor* tr = AsTensor(c->arg(1)->abstract());
  if (tx == nullptr || tr == nullptr) return Error(c, "needs tensor types for x and the reference");
  const int lead = tx->rank() - tr->rank();
  std::vector<int64_t> axes;
  for (int i = 0; i < tx->rank(); ++i) {
    const int64_t s = tx->shape()[i], t = i < lead ? 1 : tr->shape()[i - lead];
    if (i < lead || (t == 1 && s != 1)) {
      axes.push_back(i);
    } else if (t < 0 && t != s) {
      return Error(c, absl::StrCat("cannot tell whether dim ", i, " of ", tx->ToString(), " sums to ",
                                   tr->ToString(), " without static sizes"));
    }
  }
  std::string y = a[0];
  if (!axes.empty()) {
    NodeProto* n = Add("ReduceSum", {y, Ints(axes)});
    SetInt(n, "keepdims", 1);
    y = n->output(0);
  }
  return Op("Reshape", {y, Op("Shape", {a[1]})});
}

// slice_grad(dy, ref){begin, end, strides = 1} with dims that are not static:
// Pad(dy, [b, d - b - n]) with d = Shape(ref), n = Shape(dy) and b the begins
// normalised at run time as the slice normalises them (b < 0 counts from the end,
// then clamped to [0, d]).
absl::StatusOr<std::string> Exporter::EmitSliceGradAtRunTime(CNode* c, const Primitive& p,
                                                            const std::vector<std::string>& a) {
  const std::string dims = Op("Shape", {a[1]});
  const std::string begin = Ints(p.GetInts("begin"));
  const std::string negative = Op("Less", {begin, Ints(std::vector<int64_t>(p.GetInts("begin").size(), 0))});
  const std::string from_end = Op("Add", {begin, dims});
  std::string b = Op("Where", {negative, from_end, begin});
  b = Op("Max", {Op("Min", {b, dims}), Ints(std::vector<int64_t>(p.GetInts("begin").size(), 0))});
  const std::string after = Op("Sub", {Op("Sub", {dims, b}), Op("Shape", {a[0]})});
  NodeProto* pads = Add("Concat", {b, after});
  SetInt(pads, "axis", 0);
  const AbstractTensor* t = AsTensor(c->arg(0)->abstract());
  if (t == nullptr) return Error(c, "needs a tensor type for dy");
  return Op("Pad", {a[0], pads->output(0), Scalar(t->dtype(), 0)});
}

absl::StatusOr<std::string> Exporter::EmitDynamicPrim(CNode* c, const Primitive& p,
                                                     const std::vector<std::string>& a) {
  switch (p.id()) {
    case PrimId::kShapeOf: return Op("Shape", a);
    case PrimId::kSliceGrad: return EmitSliceGradAtRunTime(c, p, a);
    case PrimId::kSizeOf: return Op("Size", a);
    case PrimId::kReshapeLike: return Op("Reshape", {a[0], Op("Shape", {a[1]})});
    case PrimId::kBroadcastToLike: return Op("Expand", {a[0], Op("Shape", {a[1]})});
    case PrimId::kSumToLike: return EmitSumToLikeAtRunTime(c, a);
    case PrimId::kZerosLike:
    case PrimId::kOnesLike: {
      const AbstractTensor* t = AsTensor(c->abstract());
      if (t == nullptr) return Error(c, "needs a tensor type");
      NodeProto* n = Add("ConstantOfShape", {Op("Shape", a)});
      const double v = p.id() == PrimId::kOnesLike ? 1 : 0;
      TensorToOnnx(Tensor::Full(t->dtype(), {1}, v).value(), "value", AddAttr(n, "value"));
      return n->output(0);
    }
    case PrimId::kDynamicReshape: {
      NodeProto* n = Add("Reshape", a);
      SetInt(n, "allowzero", p.GetBool("allowzero"));
      return n->output(0);
    }
    case PrimId::kDynamicBroadcastTo: return Op("Expand", a);
    case PrimId::kDynamicFill: {
      NodeProto* n = Add("ConstantOfShape", a);
      const Tensor v = Tensor::Full(p.GetDType("dtype"), {1}, p.GetFloat("value")).value();
      TensorToOnnx(v, "value", AddAttr(n, "value"));
      return n->output(0);
    }
    case PrimId::kDynamicSlice: return Op("Slice", a);
    case PrimId::kDynamicPad: {
      const AbstractTensor* t = AsTensor(c->arg(0)->abstract());
      if (t == nullptr) return Error(c, "needs a tensor type");
      return Op("Pad", {a[0], a[1], Scalar(t->dtype(), p.GetFloat("value"))});
    }
    case PrimId::kDynamicRange: return Op("Range", a);
    default: break;
  }
  return Error(c, "no standard ONNX form for this primitive");
}

}  // namespace onnx_export_internal
}  // namespace kgrad
