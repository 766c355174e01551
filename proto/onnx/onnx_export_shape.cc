// ONNX export of the shape family: shapes and data movement (reshape, transpose,
// broadcasts, sum_to, slices, pads, casts, fills), indexing (gather, scatters,
// one_hot, cumsum) and selection by value (topk, nonzero). The *_like primitives
// and slice_grad read static reference shapes; without them they fall back on the
// run-time forms of onnx_export_dynamic.cc.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/status_macros.h"
#include "proto/onnx/onnx_export.h"
#include "proto/onnx/onnx_exporter.h"

namespace kgrad {
namespace onnx_export_internal {
namespace {

// A node `op`(in...) with one INT attribute.
absl::StatusOr<std::string> WithInt(Exporter& e, const ExportCall& call, const char* op,
                                    const char* key, int64_t v) {
  NodeProto* n = e.Add(op, call.in);
  SetInt(n, key, v);
  return n->output(0);
}

// sum_to(x, target): ReduceSum over x's leading dims and the dims where the target
// is 1 and x is not (keepdims), then Reshape to the target.
absl::StatusOr<std::string> EmitSumTo(Exporter& e, const ExportCall& call, const Shape& target) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, e.StaticType(call.node, call.node->arg(0)));
  const Shape& s = tx->shape();
  std::vector<int64_t> axes;
  int lead = static_cast<int>(s.size()) - static_cast<int>(target.size());
  for (int i = 0; i < static_cast<int>(s.size()); ++i) {
    if (i < lead || (target[i - lead] == 1 && s[i] != 1)) axes.push_back(i);
  }
  std::string y = call.in[0];
  if (!axes.empty()) {
    NodeProto* n = e.Add("ReduceSum", {y, e.Ints(axes)});
    SetInt(n, "keepdims", 1);
    y = n->output(0);
  }
  return e.Op("Reshape", {y, e.Ints(std::vector<int64_t>(target.begin(), target.end()))});
}

absl::StatusOr<std::string> EmitReshape(Exporter& e, const ExportCall& call) {
  return e.Op("Reshape", {call.in[0], e.Ints(call.prim.GetInts("shape"))});
}

absl::StatusOr<std::string> EmitBroadcastTo(Exporter& e, const ExportCall& call) {
  return e.Op("Expand", {call.in[0], e.Ints(call.prim.GetInts("shape"))});
}

// reshape_like / broadcast_to_like(x, ref): Reshape / Expand to ref's static shape.
absl::StatusOr<std::string> EmitToShapeOfRef(Exporter& e, const ExportCall& call) {
  const bool reshape = call.prim.id() == PrimId::kReshapeLike;
  if (!e.StaticType(call.node, call.node->arg(1)).ok()) {
    return reshape ? ReshapeLikeAtRunTime(e, call) : BroadcastToLikeAtRunTime(e, call);
  }
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ref, e.StaticType(call.node, call.node->arg(1)));
  std::vector<int64_t> s(ref->shape().begin(), ref->shape().end());
  return e.Op(reshape ? "Reshape" : "Expand", {call.in[0], e.Ints(s)});
}

absl::StatusOr<std::string> EmitSumToShape(Exporter& e, const ExportCall& call) {
  const std::vector<int64_t>& s = call.prim.GetInts("shape");
  return EmitSumTo(e, call, Shape(s.begin(), s.end()));
}

absl::StatusOr<std::string> EmitSumToLike(Exporter& e, const ExportCall& call) {
  if (!e.StaticType(call.node, call.node->arg(1)).ok() || !e.StaticType(call.node, call.node->arg(0)).ok()) {
    return SumToLikeAtRunTime(e, call);
  }
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ref, e.StaticType(call.node, call.node->arg(1)));
  return EmitSumTo(e, call, ref->shape());
}

absl::StatusOr<std::string> EmitExpandDims(Exporter& e, const ExportCall& call) {
  return e.Op("Unsqueeze", {call.in[0], e.Ints({call.prim.GetInt("axis")})});
}

absl::StatusOr<std::string> EmitSqueeze(Exporter& e, const ExportCall& call) {
  std::vector<std::string> in = {call.in[0]};
  if (!call.prim.GetInts("axes").empty()) in.push_back(e.Ints(call.prim.GetInts("axes")));
  return e.Op("Squeeze", in);
}

absl::StatusOr<std::string> EmitTranspose(Exporter& e, const ExportCall& call) {
  NodeProto* n = e.Add("Transpose", call.in);
  if (!call.prim.GetInts("perm").empty()) SetInts(n, "perm", call.prim.GetInts("perm"));
  return n->output(0);
}

absl::StatusOr<std::string> EmitConcat(Exporter& e, const ExportCall& call) {
  return WithInt(e, call, "Concat", "axis", call.prim.GetInt("axis"));
}

// slice(x){begin, end, strides}: Slice over the leading axes (steps 1 by default).
absl::StatusOr<std::string> EmitSlice(Exporter& e, const ExportCall& call) {
  const std::vector<int64_t>& b = call.prim.GetInts("begin");
  std::vector<int64_t> axes, steps = call.prim.GetInts("strides");
  for (size_t i = 0; i < b.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(b.size(), 1);
  return e.Op("Slice", {call.in[0], e.Ints(b), e.Ints(call.prim.GetInts("end")), e.Ints(axes), e.Ints(steps)});
}

// slice_grad(dy, ref){begin, end, strides = 1}: zeros around dy, Pad by the
// clamped begins and (dim - end).
absl::StatusOr<std::string> EmitSliceGrad(Exporter& e, const ExportCall& call) {
  CNode* c = call.node;
  for (int64_t s : call.prim.GetInts("strides")) {
    if (s != 1) return e.Error(c, "strided slice_grad has no standard-op form");
  }
  if (!e.StaticType(c, c->arg(1)).ok() || !e.StaticType(c, c->arg(0)).ok()) {
    return SliceGradAtRunTime(e, call);
  }
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ref, e.StaticType(c, c->arg(1)));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tdy, e.StaticType(c, c->arg(0)));
  int r = ref->rank();
  std::vector<int64_t> pads(2 * r);
  for (int i = 0; i < r; ++i) {
    int64_t dim = ref->shape()[i], b = call.prim.GetInts("begin")[i];
    b = std::clamp(b < 0 ? b + dim : b, int64_t{0}, dim);
    pads[i] = b;
    pads[i + r] = dim - b - tdy->shape()[i];
  }
  return e.Op("Pad", {call.in[0], e.Ints(pads), e.Scalar(call.dtype, 0)});
}

absl::StatusOr<std::string> EmitGather(Exporter& e, const ExportCall& call) {
  return WithInt(e, call, "Gather", "axis", call.prim.GetInt("axis"));
}

absl::StatusOr<std::string> EmitGatherElements(Exporter& e, const ExportCall& call) {
  return WithInt(e, call, "GatherElements", "axis", call.prim.GetInt("axis"));
}

// ScatterElements{axis, reduction}: none and add/mul exist at the exported opset
// (reduction from opset 16); max and min need opset 18.
absl::StatusOr<std::string> EmitScatterElements(Exporter& e, const ExportCall& call) {
  const std::string& reduction = call.prim.GetString("reduction");
  if (reduction == "max" || reduction == "min") {
    return e.Error(call.node, absl::StrCat("ScatterElements with reduction '", reduction,
                                           "' needs opset 18; export writes opset ", kOnnxExportOpset));
  }
  NodeProto* n = e.Add("ScatterElements", call.in);
  SetInt(n, "axis", call.prim.GetInt("axis"));
  if (reduction != "none") SetString(n, "reduction", reduction);
  return n->output(0);
}

// scatter_add(data, indices, updates){axis} (gather's adjoint): ScatterND with
// reduction=add (opset 16) on the indices as [..., 1] tuples, with `axis` moved to
// the front of data, and the indices' dims to the front of updates, by Transposes.
absl::StatusOr<std::string> EmitScatterAdd(Exporter& e, const ExportCall& call) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* td, e.StaticType(call.node, call.node->arg(0)));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ti, e.StaticType(call.node, call.node->arg(1)));
  const int r = td->rank(), k = ti->rank();
  const int axis = static_cast<int>(call.prim.GetInt("axis")) + (call.prim.GetInt("axis") < 0 ? r : 0);
  std::string data = call.in[0], updates = call.in[2], idx = call.in[1];
  if (ti->dtype() != DType::kInt64) {
    NodeProto* cast = e.Add("Cast", {idx});
    SetInt(cast, "to", DTypeToOnnx(DType::kInt64));
    idx = cast->output(0);
  }
  idx = e.Op("Unsqueeze", {idx, e.Ints({-1})});
  std::vector<int64_t> to_front = {axis}, back(r), u_perm;
  for (int d = 0; d < r; ++d) {
    if (d != axis) to_front.push_back(d);
  }
  for (int d = 0; d < r; ++d) back[to_front[d]] = d;
  for (int d = axis; d < axis + k; ++d) u_perm.push_back(d);
  for (int d = 0; d < axis; ++d) u_perm.push_back(d);
  for (int d = axis + k; d < r - 1 + k; ++d) u_perm.push_back(d);
  if (axis != 0) {
    NodeProto* t = e.Add("Transpose", {data});
    SetInts(t, "perm", to_front);
    data = t->output(0);
    NodeProto* u = e.Add("Transpose", {updates});
    SetInts(u, "perm", u_perm);
    updates = u->output(0);
  }
  NodeProto* n = e.Add("ScatterND", {data, idx, updates});
  SetString(n, "reduction", "add");
  if (axis == 0) return n->output(0);
  NodeProto* t = e.Add("Transpose", {n->output(0)});
  SetInts(t, "perm", back);
  return t->output(0);
}

// one_hot(indices){depth, on_value, off_value, dtype, axis}: OneHot(indices', depth,
// [off, on]) in the output dtype. kgrad gives a negative index a row of off_value,
// where ONNX's OneHot counts it from the end: indices' = negative ? depth : index
// (out of range, so off_value in both).
absl::StatusOr<std::string> EmitOneHot(Exporter& e, const ExportCall& call) {
  const Primitive& p = call.prim;
  Tensor values = Tensor::Full(p.GetDType("dtype"), {2}, p.GetFloat("off_value")).value();
  Tensor on = Tensor::Full(p.GetDType("dtype"), {1}, p.GetFloat("on_value")).value();
  std::memcpy(static_cast<char*>(values.raw_data()) + DTypeSize(values.dtype()), on.raw_data(),
              DTypeSize(values.dtype()));
  const AbstractTensor* ti = AsTensor(call.node->arg(0)->abstract());
  if (ti == nullptr) return e.Error(call.node, "needs the indices' tensor type");
  const double depth = static_cast<double>(p.GetInt("depth"));
  const std::string negative = e.Op("Less", {call.in[0], e.Scalar(ti->dtype(), 0)});
  const std::string indices = e.Op("Where", {negative, e.Scalar(ti->dtype(), depth), call.in[0]});
  NodeProto* n = e.Add("OneHot", {indices, e.Ints({p.GetInt("depth")}), e.Const(values)});
  SetInt(n, "axis", p.GetInt("axis"));
  return n->output(0);
}

absl::StatusOr<std::string> EmitCumSum(Exporter& e, const ExportCall& call) {
  NodeProto* n = e.Add("CumSum", {call.in[0], e.Const(Tensor::FromScalar<int64_t>(call.prim.GetInt("axis")))});
  SetInt(n, "exclusive", call.prim.GetBool("exclusive"));
  SetInt(n, "reverse", call.prim.GetBool("reverse"));
  return n->output(0);
}

absl::StatusOr<std::string> EmitNonZero(Exporter& e, const ExportCall& call) {
  return e.Op("NonZero", call.in);
}

// pad(x){pads: [lo0, hi0, lo1, hi1, ...], value}: ONNX orders all the starts first.
absl::StatusOr<std::string> EmitPad(Exporter& e, const ExportCall& call) {
  const std::vector<int64_t>& pi = call.prim.GetInts("pads");
  size_t r = pi.size() / 2;
  std::vector<int64_t> pads(pi.size());
  for (size_t i = 0; i < r; ++i) {
    pads[i] = pi[2 * i];
    pads[i + r] = pi[2 * i + 1];
  }
  return e.Op("Pad", {call.in[0], e.Ints(pads), e.Scalar(call.dtype, call.prim.GetFloat("value"))});
}

absl::StatusOr<std::string> EmitCast(Exporter& e, const ExportCall& call) {
  return WithInt(e, call, "Cast", "to", DTypeToOnnx(call.prim.GetDType("dtype")));
}

// fill, zeros_like, ones_like of a static type: a constant; zeros_like and
// ones_like of another, ConstantOfShape at run time.
absl::StatusOr<std::string> EmitFill(Exporter& e, const ExportCall& call) {
  const PrimId id = call.prim.id();
  if (id != PrimId::kFill && !e.StaticType(call.node, call.node).ok()) return FillLikeAtRunTime(e, call);
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, e.StaticType(call.node, call.node));
  double v = id == PrimId::kFill ? call.prim.GetFloat("value") : id == PrimId::kOnesLike ? 1 : 0;
  return e.Const(Tensor::Full(t->dtype(), t->shape(), v).value());
}

// A tuple of a node's outputs.
Val TupleOf(const NodeProto& n) {
  Val v;
  v.is_tuple = true;
  for (const std::string& o : n.output()) v.elems.push_back(Val{o});
  return v;
}

// split(x){sizes, axis}: Split's outputs as a tuple.
absl::StatusOr<Val> EmitSplit(Exporter& e, CNode* c, const Primitive& p) {
  KGRAD_ASSIGN_OR_RETURN(std::string x, e.TensorArg(c, 0));
  const std::vector<int64_t>& sizes = p.GetInts("sizes");
  NodeProto* n = e.Add("Split", {x, e.Ints(sizes)}, static_cast<int>(sizes.size()));
  SetInt(n, "axis", p.GetInt("axis"));
  return TupleOf(*n);
}

// topk(x, k){axis, largest, sorted} = TopK(x, K){axis, largest, sorted} with K
// the i64 [1] that ONNX wants (k may be i32 and of rank 0); a tuple of its two
// outputs.
absl::StatusOr<Val> EmitTopK(Exporter& e, CNode* c, const Primitive& p) {
  KGRAD_ASSIGN_OR_RETURN(std::string x, e.TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(std::string k, e.TensorArg(c, 1));
  const AbstractTensor* tk = AsTensor(c->arg(1)->abstract());
  if (tk == nullptr) return e.Error(c, "needs a tensor type for k");
  if (tk->dtype() != DType::kInt64) {
    NodeProto* cast = e.Add("Cast", {k});
    SetInt(cast, "to", DTypeToOnnx(DType::kInt64));
    k = cast->output(0);
  }
  if (tk->rank() == 0) k = e.Op("Reshape", {k, e.Ints({1})});
  NodeProto* n = e.Add("TopK", {x, k}, 2);
  SetInt(n, "axis", p.GetInt("axis"));
  SetInt(n, "largest", p.GetBool("largest"));
  SetInt(n, "sorted", p.GetBool("sorted"));
  return TupleOf(*n);
}

}  // namespace

void AddShapeEmitters(EmitterTable* t) {
  t->Emit(PrimId::kReshape, EmitReshape);
  t->Emit(PrimId::kReshapeLike, EmitToShapeOfRef);
  t->Emit(PrimId::kTranspose, EmitTranspose);
  t->Emit(PrimId::kBroadcastTo, EmitBroadcastTo);
  t->Emit(PrimId::kBroadcastToLike, EmitToShapeOfRef);
  t->Emit(PrimId::kSumTo, EmitSumToShape);
  t->Emit(PrimId::kSumToLike, EmitSumToLike);
  t->Emit(PrimId::kExpandDims, EmitExpandDims);
  t->Emit(PrimId::kSqueeze, EmitSqueeze);
  t->Emit(PrimId::kConcat, EmitConcat);
  t->EmitValue(PrimId::kSplit, EmitSplit);
  t->Emit(PrimId::kSlice, EmitSlice);
  t->Emit(PrimId::kSliceGrad, EmitSliceGrad);
  t->Emit(PrimId::kGather, EmitGather);
  t->Emit(PrimId::kScatterAdd, EmitScatterAdd);
  t->Emit(PrimId::kGatherElements, EmitGatherElements);
  t->Emit(PrimId::kScatterElements, EmitScatterElements);
  t->Emit(PrimId::kCumSum, EmitCumSum);
  t->EmitValue(PrimId::kTopK, EmitTopK);
  t->Emit(PrimId::kNonZero, EmitNonZero);
  t->Emit(PrimId::kPad, EmitPad);
  t->Emit(PrimId::kOneHot, EmitOneHot);
  t->Emit(PrimId::kCast, EmitCast);
  t->Emit(PrimId::kZerosLike, EmitFill);
  t->Emit(PrimId::kOnesLike, EmitFill);
  t->Emit(PrimId::kFill, EmitFill);
}

}  // namespace onnx_export_internal
}  // namespace kgrad
