#include "proto/onnx/onnx_export.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/infer.h"
#include "core/manager.h"
#include "core/status_macros.h"
#include "ops/conv_window.h"
#include "proto/onnx/onnx_exporter.h"
#include "proto/onnx/onnx_tensor.h"

namespace kgrad {
namespace onnx_export_internal {

absl::StatusOr<Val> Exporter::ValueOf(AnfNode* n, const CNode* user) {
  auto it = values_.find(n);
  if (it != values_.end()) return it->second;
  if (n->is_parameter() && n->AsParameter()->is_weight()) {
    Val v{n->name()};
    TensorToOnnx(*n->AsParameter()->default_value(), n->name(), out_->add_initializer());
    values_[n] = v;
    return v;
  }
  const Value* k = ConstantOf(n);
  if (k != nullptr && k->is_tensor()) return Val{Const(k->tensor())};
  if (k != nullptr && k->is_scalar()) {
    // A scalar operand takes the dtype of the application's first tensor operand.
    DType t = k->scalar().dtype();
    for (size_t i = 0; user != nullptr && i < user->num_args(); ++i) {
      if (const AbstractTensor* a = AsTensor(user->arg(i)->abstract())) {
        t = a->dtype();
        break;
      }
    }
    return Val{Scalar(t, k->scalar().AsDouble())};
  }
  if (user == nullptr) return absl::InvalidArgumentError(absl::StrCat(n->Location(), ": cannot export the output"));
  return Error(user, absl::StrCat("operand ", n->DebugName(), " is ",
                                  k != nullptr ? k->TypeString() : "not a tensor, weight or parameter",
                                  " (export wants one graph of primitive applications: optimise first)"));
}

absl::StatusOr<std::string> Exporter::TensorArg(const CNode* c, int i) {
  KGRAD_ASSIGN_OR_RETURN(Val v, ValueOf(c->arg(i), c));
  if (v.is_tuple) return Error(c, absl::StrCat("operand ", i, " is a tuple"));
  return v.name;
}

absl::Status Exporter::Emit(CNode* c) {
  const Primitive* p = c->primitive();
  if (p == nullptr) {
    FuncGraph* cg = c->called_graph();
    return Error(c, cg != nullptr
                        ? absl::StrCat("it calls graph @", cg->name(), " (inline it: optimise first)")
                        : std::string("it calls a closure or a computed function (optimise first)"));
  }
  switch (p->id()) {
    case PrimId::kMakeTuple: {
      Val v;
      v.is_tuple = true;
      for (size_t i = 0; i < c->num_args(); ++i) {
        KGRAD_ASSIGN_OR_RETURN(Val e, ValueOf(c->arg(i), c));
        v.elems.push_back(e);
      }
      values_[c] = v;
      return absl::OkStatus();
    }
    case PrimId::kTupleGetItem: {
      KGRAD_ASSIGN_OR_RETURN(Val t, ValueOf(c->arg(0), c));
      const Value* k = ConstantOf(c->arg(1));
      if (!t.is_tuple || k == nullptr || !k->is_scalar()) return Error(c, "tuple_getitem of a non-tuple");
      int64_t i = k->scalar().AsInt();
      if (i < 0 || i >= static_cast<int64_t>(t.elems.size())) return Error(c, "index out of range");
      values_[c] = t.elems[i];
      return absl::OkStatus();
    }
    case PrimId::kDepend:
    case PrimId::kRematBarrier:
    case PrimId::kStopGradient: {
      KGRAD_ASSIGN_OR_RETURN(Val v, ValueOf(c->arg(0), c));
      values_[c] = v;
      return absl::OkStatus();
    }
    case PrimId::kSplit: {
      KGRAD_ASSIGN_OR_RETURN(std::string x, TensorArg(c, 0));
      const std::vector<int64_t>& sizes = p->GetInts("sizes");
      NodeProto* n = Add("Split", {x, Ints(sizes)}, static_cast<int>(sizes.size()));
      SetInt(n, "axis", p->GetInt("axis"));
      Val v;
      v.is_tuple = true;
      for (const std::string& o : n->output()) v.elems.push_back(Val{o});
      values_[c] = v;
      return absl::OkStatus();
    }
    case PrimId::kTopK: {
      KGRAD_ASSIGN_OR_RETURN(Val v, EmitTopK(c, *p));
      values_[c] = v;
      return absl::OkStatus();
    }
    default: break;
  }
  std::vector<std::string> args;
  for (size_t i = 0; i < c->num_args(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(std::string a, TensorArg(c, static_cast<int>(i)));
    args.push_back(a);
  }
  KGRAD_ASSIGN_OR_RETURN(std::string out, EmitPrim(c, *p, args));
  values_[c] = Val{out};
  return absl::OkStatus();
}

absl::StatusOr<std::string> Exporter::EmitSumTo(CNode* c, const std::vector<std::string>& a,
                                                const Shape& target) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, StaticType(c, c->arg(0)));
  const Shape& s = tx->shape();
  std::vector<int64_t> axes;
  int lead = static_cast<int>(s.size()) - static_cast<int>(target.size());
  for (int i = 0; i < static_cast<int>(s.size()); ++i) {
    if (i < lead || (target[i - lead] == 1 && s[i] != 1)) axes.push_back(i);
  }
  std::string y = a[0];
  if (!axes.empty()) {
    NodeProto* n = Add("ReduceSum", {y, Ints(axes)});
    SetInt(n, "keepdims", 1);
    y = n->output(0);
  }
  return Op("Reshape", {y, Ints(std::vector<int64_t>(target.begin(), target.end()))});
}

absl::StatusOr<std::string> Exporter::EmitPrim(CNode* c, const Primitive& p,
                                               const std::vector<std::string>& a) {
  static const absl::flat_hash_map<PrimId, const char*>* const direct =
      new absl::flat_hash_map<PrimId, const char*>{
          {PrimId::kNeg, "Neg"}, {PrimId::kExp, "Exp"}, {PrimId::kLog, "Log"}, {PrimId::kSin, "Sin"},
          {PrimId::kCos, "Cos"}, {PrimId::kTanh, "Tanh"}, {PrimId::kSigmoid, "Sigmoid"},
          {PrimId::kRelu, "Relu"}, {PrimId::kSoftplus, "Softplus"}, {PrimId::kSqrt, "Sqrt"},
          {PrimId::kAbs, "Abs"}, {PrimId::kSign, "Sign"}, {PrimId::kReciprocal, "Reciprocal"},
          {PrimId::kErf, "Erf"}, {PrimId::kLogicalNot, "Not"}, {PrimId::kAdd, "Add"},
          {PrimId::kSub, "Sub"}, {PrimId::kMul, "Mul"}, {PrimId::kDiv, "Div"}, {PrimId::kPow, "Pow"},
          {PrimId::kMaximum, "Max"}, {PrimId::kMinimum, "Min"}, {PrimId::kEqual, "Equal"},
          {PrimId::kLess, "Less"}, {PrimId::kLessEqual, "LessOrEqual"}, {PrimId::kGreater, "Greater"},
          {PrimId::kGreaterEqual, "GreaterOrEqual"}, {PrimId::kLogicalAnd, "And"},
          {PrimId::kLogicalOr, "Or"}, {PrimId::kSelect, "Where"}, {PrimId::kFloor, "Floor"},
          {PrimId::kAsin, "Asin"}, {PrimId::kAcos, "Acos"}, {PrimId::kAtan, "Atan"},
          {PrimId::kSinh, "Sinh"}, {PrimId::kCosh, "Cosh"}, {PrimId::kAsinh, "Asinh"},
          {PrimId::kAcosh, "Acosh"}, {PrimId::kAtanh, "Atanh"},
          {PrimId::kCeil, "Ceil"}, {PrimId::kRound, "Round"}};
  auto it = direct->find(p.id());
  if (it != direct->end()) return Op(it->second, a);
  const AbstractTensor* out = AsTensor(c->abstract());
  DType dt = out != nullptr ? out->dtype() : DType::kFloat32;
  auto attrs_of = [&](NodeProto* n, const char* key, const std::vector<int64_t>& v) {
    if (!v.empty()) SetInts(n, key, v);
    return n->output(0);
  };
  switch (p.id()) {
    case PrimId::kRsqrt: return Op("Reciprocal", {Op("Sqrt", a)});
    case PrimId::kSquare: return Op("Mul", {a[0], a[0]});
    // tanh_grad(y, d) = d (1 - y^2); sigmoid_grad(y, d) = d y (1 - y).
    case PrimId::kTanhGrad: return Op("Mul", {a[1], Op("Sub", {Scalar(dt, 1), Op("Mul", {a[0], a[0]})})});
    case PrimId::kSigmoidGrad:
      return Op("Mul", {Op("Mul", {a[1], a[0]}), Op("Sub", {Scalar(dt, 1), a[0]})});
    // sin_grad(x, d) = d cos x; cos_grad(x, d) = -(d sin x); relu_grad(x, d) = x > 0 ? d : 0.
    case PrimId::kSinGrad: return Op("Mul", {a[1], Op("Cos", {a[0]})});
    case PrimId::kCosGrad: return Op("Neg", {Op("Mul", {a[1], Op("Sin", {a[0]})})});
    case PrimId::kReluGrad:
      return Op("Where", {Op("Greater", {a[0], Scalar(dt, 0)}), a[1], Scalar(dt, 0)});
    case PrimId::kLog1p: return Op("Log", {Op("Add", {a[0], Scalar(dt, 1)})});
    case PrimId::kExpm1: return Op("Sub", {Op("Exp", a), Scalar(dt, 1)});
    case PrimId::kNotEqual: return Op("Not", {Op("Equal", a)});
    case PrimId::kGelu: {
      if (p.GetBool("approximate")) {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        std::string x3 = Op("Mul", {Op("Mul", {a[0], a[0]}), a[0]});
        std::string u = Op("Mul", {Op("Add", {a[0], Op("Mul", {x3, Scalar(dt, 0.044715)})}),
                                   Scalar(dt, std::sqrt(2 / M_PI))});
        return Op("Mul", {Op("Mul", {a[0], Scalar(dt, 0.5)}), Op("Add", {Op("Tanh", {u}), Scalar(dt, 1)})});
      }  // 0.5 x (1 + erf(x / sqrt 2))
      std::string e = Op("Erf", {Op("Mul", {a[0], Scalar(dt, M_SQRT1_2)})});
      return Op("Mul", {Op("Mul", {a[0], Scalar(dt, 0.5)}), Op("Add", {e, Scalar(dt, 1)})});
    }
    case PrimId::kReduceSum: {
      std::vector<std::string> in = {a[0]};
      if (!p.GetInts("axes").empty()) in.push_back(Ints(p.GetInts("axes")));
      NodeProto* n = Add("ReduceSum", in);
      SetInt(n, "keepdims", p.GetBool("keepdims"));
      return n->output(0);
    }
    case PrimId::kReduceMean:
    case PrimId::kReduceMax:
    case PrimId::kReduceMin:
    case PrimId::kReduceProd:
    case PrimId::kLogsumexp: {
      const char* op = p.id() == PrimId::kReduceMean ? "ReduceMean" : p.id() == PrimId::kReduceMax ? "ReduceMax"
                       : p.id() == PrimId::kReduceMin ? "ReduceMin" : p.id() == PrimId::kReduceProd ? "ReduceProd"
                                                                                                   : "ReduceLogSumExp";
      NodeProto* n = Add(op, a);
      SetInt(n, "keepdims", p.GetBool("keepdims"));
      return attrs_of(n, "axes", p.GetInts("axes"));
    }
    case PrimId::kArgmax:
    case PrimId::kArgmin: {
      NodeProto* n = Add(p.id() == PrimId::kArgmax ? "ArgMax" : "ArgMin", a);
      SetInt(n, "axis", p.GetInt("axis"));
      SetInt(n, "keepdims", p.GetBool("keepdims"));
      if (dt == DType::kInt64) return n->output(0);
      NodeProto* cast = Add("Cast", {n->output(0)});
      SetInt(cast, "to", DTypeToOnnx(dt));
      return cast->output(0);
    }
    case PrimId::kReshape: return Op("Reshape", {a[0], Ints(p.GetInts("shape"))});
    case PrimId::kReshapeLike:
    case PrimId::kBroadcastToLike: {
      if (!StaticType(c, c->arg(1)).ok()) return EmitDynamicPrim(c, p, a);
      KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ref, StaticType(c, c->arg(1)));
      std::vector<int64_t> s(ref->shape().begin(), ref->shape().end());
      return Op(p.id() == PrimId::kReshapeLike ? "Reshape" : "Expand", {a[0], Ints(s)});
    }
    case PrimId::kBroadcastTo: return Op("Expand", {a[0], Ints(p.GetInts("shape"))});
    case PrimId::kSumTo: {
      const std::vector<int64_t>& s = p.GetInts("shape");
      return EmitSumTo(c, a, Shape(s.begin(), s.end()));
    }
    case PrimId::kSumToLike: {
      if (!StaticType(c, c->arg(1)).ok() || !StaticType(c, c->arg(0)).ok()) return EmitDynamicPrim(c, p, a);
      KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ref, StaticType(c, c->arg(1)));
      return EmitSumTo(c, a, ref->shape());
    }
    case PrimId::kExpandDims: return Op("Unsqueeze", {a[0], Ints({p.GetInt("axis")})});
    case PrimId::kSqueeze: {
      std::vector<std::string> in = {a[0]};
      if (!p.GetInts("axes").empty()) in.push_back(Ints(p.GetInts("axes")));
      return Op("Squeeze", in);
    }
    case PrimId::kTranspose: return attrs_of(Add("Transpose", a), "perm", p.GetInts("perm"));
    case PrimId::kConcat: {
      NodeProto* n = Add("Concat", a);
      SetInt(n, "axis", p.GetInt("axis"));
      return n->output(0);
    }
    case PrimId::kSlice: {
      const std::vector<int64_t>& b = p.GetInts("begin");
      std::vector<int64_t> axes, steps = p.GetInts("strides");
      for (size_t i = 0; i < b.size(); ++i) axes.push_back(static_cast<int64_t>(i));
      if (steps.empty()) steps.assign(b.size(), 1);
      return Op("Slice", {a[0], Ints(b), Ints(p.GetInts("end")), Ints(axes), Ints(steps)});
    }
    case PrimId::kSliceGrad: {  // zeros around dy: Pad by begin and (dim - end)
      for (int64_t s : p.GetInts("strides")) {
        if (s != 1) return Error(c, "strided slice_grad has no standard-op form");
      }
      if (!StaticType(c, c->arg(1)).ok() || !StaticType(c, c->arg(0)).ok()) {
        return EmitDynamicPrim(c, p, a);
      }
      KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ref, StaticType(c, c->arg(1)));
      KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tdy, StaticType(c, c->arg(0)));
      int r = ref->rank();
      std::vector<int64_t> pads(2 * r);
      for (int i = 0; i < r; ++i) {
        int64_t dim = ref->shape()[i], b = p.GetInts("begin")[i];
        b = std::clamp(b < 0 ? b + dim : b, int64_t{0}, dim);
        pads[i] = b;
        pads[i + r] = dim - b - tdy->shape()[i];
      }
      return Op("Pad", {a[0], Ints(pads), Scalar(dt, 0)});
    }
    case PrimId::kGather: {
      NodeProto* n = Add("Gather", a);
      SetInt(n, "axis", p.GetInt("axis"));
      return n->output(0);
    }
    case PrimId::kPad: {
      const std::vector<int64_t>& pi = p.GetInts("pads");
      size_t r = pi.size() / 2;
      std::vector<int64_t> pads(pi.size());
      for (size_t i = 0; i < r; ++i) {
        pads[i] = pi[2 * i];
        pads[i + r] = pi[2 * i + 1];
      }
      return Op("Pad", {a[0], Ints(pads), Scalar(dt, p.GetFloat("value"))});
    }
    case PrimId::kCast: {
      NodeProto* n = Add("Cast", a);
      SetInt(n, "to", DTypeToOnnx(p.GetDType("dtype")));
      return n->output(0);
    }
    case PrimId::kFill:
    case PrimId::kZerosLike:
    case PrimId::kOnesLike: {
      if (p.id() != PrimId::kFill && !StaticType(c, c).ok()) return EmitDynamicPrim(c, p, a);
      KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, StaticType(c, c));
      double v = p.id() == PrimId::kFill ? p.GetFloat("value") : p.id() == PrimId::kOnesLike ? 1 : 0;
      return Const(Tensor::Full(t->dtype(), t->shape(), v).value());
    }
    case PrimId::kMatMul: {
      std::string x = a[0], y = a[1];
      for (int i = 0; i < 2; ++i) {
        if (!p.GetBool(i == 0 ? "transpose_a" : "transpose_b")) continue;
        const AbstractTensor* t = AsTensor(c->arg(i)->abstract());  // the rank is enough
        if (t == nullptr) return Error(c, "needs tensor types for its operands");
        std::vector<int64_t> perm;
        for (int d = 0; d < t->rank(); ++d) perm.push_back(d);
        std::swap(perm[t->rank() - 1], perm[t->rank() - 2]);
        NodeProto* n = Add("Transpose", {i == 0 ? x : y});
        SetInts(n, "perm", perm);
        (i == 0 ? x : y) = n->output(0);
      }
      return Op("MatMul", {x, y});
    }
    case PrimId::kEinsum: {
      NodeProto* n = Add("Einsum", a);
      SetString(n, "equation", p.GetString("equation"));
      return n->output(0);
    }
    case PrimId::kMod: return EmitMod(p, a, dt);
    case PrimId::kBitShift: {
      NodeProto* n = Add("BitShift", a);
      SetString(n, "direction", p.GetString("direction") == "left" ? "LEFT" : "RIGHT");
      return n->output(0);
    }
    case PrimId::kGatherElements: {
      NodeProto* n = Add("GatherElements", a);
      SetInt(n, "axis", p.GetInt("axis"));
      return n->output(0);
    }
    case PrimId::kScatterElements: return EmitScatterElements(c, p, a);
    case PrimId::kNonZero: return Op("NonZero", a);
    case PrimId::kCumSum: {
      NodeProto* n = Add("CumSum", {a[0], Const(Tensor::FromScalar<int64_t>(p.GetInt("axis")))});
      SetInt(n, "exclusive", p.GetBool("exclusive"));
      SetInt(n, "reverse", p.GetBool("reverse"));
      return n->output(0);
    }
    default: break;
  }
  return EmitNnPrim(c, p, a);
}

// mod{fmod} = Mod{fmod=1} for fmod and integers' Python mod (Mod{fmod=0}). ONNX
// has no floating Python mod: r = Mod{fmod=1}(a, b), moved by b where r != 0 and
// its sign differs from b's, as the kernel computes it (a zero result keeps a's
// sign there, where the kernel gives it b's).
std::string Exporter::EmitMod(const Primitive& p, const std::vector<std::string>& a, DType dt) {
  const bool fmod = p.GetBool("fmod");
  if (fmod || !IsDifferentiable(dt)) {
    NodeProto* n = Add("Mod", a);
    SetInt(n, "fmod", fmod);
    return n->output(0);
  }
  NodeProto* n = Add("Mod", a);
  SetInt(n, "fmod", 1);
  const std::string r = n->output(0);
  const std::string zero = Scalar(dt, 0);
  const std::string nonzero = Op("Not", {Op("Equal", {r, zero})});
  const std::string signs_differ =
      Op("Not", {Op("Equal", {Op("Less", {r, zero}), Op("Less", {a[1], zero})})});
  return Op("Where", {Op("And", {nonzero, signs_differ}), Op("Add", {r, a[1]}), r});
}

// ScatterElements{axis, reduction}: none and add/mul exist at the exported opset
// (reduction from opset 16); max and min need opset 18.
absl::StatusOr<std::string> Exporter::EmitScatterElements(CNode* c, const Primitive& p,
                                                         const std::vector<std::string>& a) {
  const std::string& reduction = p.GetString("reduction");
  if (reduction == "max" || reduction == "min") {
    return Error(c, absl::StrCat("ScatterElements with reduction '", reduction,
                                 "' needs opset 18; export writes opset ", kOnnxExportOpset));
  }
  NodeProto* n = Add("ScatterElements", a);
  SetInt(n, "axis", p.GetInt("axis"));
  if (reduction != "none") SetString(n, "reduction", reduction);
  return n->output(0);
}

// topk(x, k){axis, largest, sorted} = TopK(x, K){axis, largest, sorted} with K
// the i64 [1] that ONNX wants (k may be i32 and of rank 0); a tuple of its two
// outputs.
absl::StatusOr<Val> Exporter::EmitTopK(CNode* c, const Primitive& p) {
  KGRAD_ASSIGN_OR_RETURN(std::string x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(std::string k, TensorArg(c, 1));
  const AbstractTensor* tk = AsTensor(c->arg(1)->abstract());
  if (tk == nullptr) return Error(c, "needs a tensor type for k");
  if (tk->dtype() != DType::kInt64) {
    NodeProto* cast = Add("Cast", {k});
    SetInt(cast, "to", DTypeToOnnx(DType::kInt64));
    k = cast->output(0);
  }
  if (tk->rank() == 0) k = Op("Reshape", {k, Ints({1})});
  NodeProto* n = Add("TopK", {x, k}, 2);
  SetInt(n, "axis", p.GetInt("axis"));
  SetInt(n, "largest", p.GetBool("largest"));
  SetInt(n, "sorted", p.GetBool("sorted"));
  Val v;
  v.is_tuple = true;
  for (const std::string& o : n->output()) v.elems.push_back(Val{o});
  return v;
}

absl::Status Exporter::Run() {
  out_->set_name(g_->name());
  for (Parameter* prm : g_->parameters()) {
    const AbstractTensor* t = AsTensor(prm->declared());
    if (t == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(prm->Location(), ": an ONNX input needs a declared tensor type"));
    }
    onnx::ValueInfoProto* in = out_->add_input();
    in->set_name(prm->name().empty() ? Fresh("input") : prm->name());
    TypeToOnnx(*t, in->mutable_type());
    values_[prm] = Val{in->name()};
  }
  Module& m = *g_->module();
  const GraphInfo& info = m.manager().Info(g_);
  for (AnfNode* fv : info.fvs) {
    if (!(fv->is_parameter() && fv->AsParameter()->is_weight())) {
      return absl::InvalidArgumentError(absl::StrCat(fv->Location(), ": graph @", g_->name(),
                                                     " uses a free variable; export wants a top-level graph"));
    }
  }
  std::vector<CNode*> order = info.order;  // copied: emitting reads the manager again
  // Calls and switch first: they are why a graph is not exportable.
  for (CNode* c : order) {
    const Primitive* p = c->primitive();
    if (p == nullptr) KGRAD_RETURN_IF_ERROR(Emit(c));
    if (p != nullptr && (p->id() == PrimId::kSwitch || p->id() == PrimId::kPartial)) {
      return Error(c, absl::StrCat(p->name(), " is control flow or a closure; export wants one graph of "
                                   "primitive applications (optimise first, or unroll)"));
    }
  }
  for (CNode* c : order) {
    const Primitive* p = c->primitive();
    bool plumbing = p != nullptr && (p->id() == PrimId::kMakeTuple || p->id() == PrimId::kTupleGetItem ||
                                     p->id() == PrimId::kDepend || p->id() == PrimId::kRematBarrier ||
                                     p->id() == PrimId::kStopGradient ||
                                     p->id() == PrimId::kZerosLike || p->id() == PrimId::kOnesLike);
    if (p != nullptr && p->def().structural && !plumbing) {
      return Error(c, absl::StrCat(p->name(), " is control flow or closure plumbing; export wants one "
                                   "graph of primitive applications (optimise first)"));
    }
  }
  for (CNode* c : order) KGRAD_RETURN_IF_ERROR(Emit(c));
  KGRAD_ASSIGN_OR_RETURN(Val result, ValueOf(g_->output(), nullptr));
  std::vector<std::string> leaves;
  Flatten(result, &leaves);
  for (size_t i = 0; i < leaves.size(); ++i) {
    NodeProto* n = Add("Identity", {leaves[i]});
    n->set_output(0, absl::StrCat("out_", i));
    onnx::ValueInfoProto* o = out_->add_output();
    o->set_name(n->output(0));
  }
  return absl::OkStatus();
}

// Output types, from the abstracts inference left on the output's leaves.
void SetOutputTypes(const AbstractPtr& a, onnx::GraphProto* g, int* next) {
  if (const AbstractTuple* t = AsTuple(a)) {
    for (const AbstractPtr& e : t->elements()) SetOutputTypes(e, g, next);
    return;
  }
  if (*next < g->output_size()) {
    if (const AbstractTensor* t = AsTensor(a)) TypeToOnnx(*t, g->mutable_output(*next)->mutable_type());
  }
  ++*next;
}

}  // namespace onnx_export_internal

using onnx_export_internal::Exporter;
using onnx_export_internal::SetOutputTypes;

absl::StatusOr<onnx::ModelProto> ExportOnnx(Module& module, FuncGraph* graph) {
  absl::StatusOr<AbstractPtr> out_type = InferGraph(graph);
  if (!out_type.ok()) {
    return absl::Status(out_type.status().code(), absl::StrCat("graph @", graph->name(), ": inference before export: ",
                                                               out_type.status().message()));
  }
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("kgrad");
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxExportOpset);
  Exporter e(graph, model.mutable_graph());
  KGRAD_RETURN_IF_ERROR(e.Run());
  int next = 0;
  SetOutputTypes(*out_type, model.mutable_graph(), &next);
  return model;
}

absl::Status ExportOnnxFile(Module& module, FuncGraph* graph, const std::string& path) {
  KGRAD_ASSIGN_OR_RETURN(onnx::ModelProto model, ExportOnnx(module, graph));
  std::ofstream out(path, std::ios::binary);
  if (!out || !model.SerializeToOstream(&out)) {
    return absl::InternalError(absl::StrCat(path, ": cannot write"));
  }
  return absl::OkStatus();
}

}  // namespace kgrad
