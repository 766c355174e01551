#include "ops/structural.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/scalar_arith.h"
#include "core/status_macros.h"
#include "ops/bprop_context.h"
#include "ops/op_def.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {

AbstractPtr SensitivityOf(const AbstractPtr& a) {
  switch (a->kind()) {
    case AbstractKind::kFunction:
    case AbstractKind::kEnv:
      return MakeAbstractEnv();
    case AbstractKind::kTuple: {
      std::vector<AbstractPtr> elems;
      for (const AbstractPtr& e : AsTuple(a)->elements()) elems.push_back(SensitivityOf(e));
      return MakeAbstractTuple(std::move(elems));
    }
    case AbstractKind::kList: {
      const AbstractPtr& e = AsList(a)->element();
      return MakeAbstractList(e == nullptr ? nullptr : SensitivityOf(e));
    }
    case AbstractKind::kScalar:
      return MakeAbstractScalar(AsScalar(a)->dtype());
    default:
      return a;
  }
}

namespace {

// ----- Tuples -------------------------------------------------------------------
absl::StatusOr<AbstractPtr> InferMakeTuple(const InferCall& c) {
  return MakeAbstractTuple(std::vector<AbstractPtr>(c.args.begin(), c.args.end()));
}

absl::StatusOr<const AbstractTuple*> TupleArg(const InferCall& c, int i) {
  const AbstractTuple* t = AsTuple(c.args[i]);
  if (t == nullptr) return ArgError(c, i, "a tuple");
  return t;
}

absl::StatusOr<int64_t> TupleIndex(const InferCall& c, const AbstractTuple* t) {
  KGRAD_ASSIGN_OR_RETURN(int64_t i, ConstIntArg(c, 1));
  int64_t n = static_cast<int64_t>(t->size());
  if (i < -n || i >= n) {
    return absl::OutOfRangeError(
        absl::StrCat("tuple index ", i, " is out of range for a tuple of ", n));
  }
  return i < 0 ? i + n : i;
}

absl::StatusOr<AbstractPtr> InferTupleGetItem(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTuple* t, TupleArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t i, TupleIndex(c, t));
  return t->elements()[i];
}

absl::StatusOr<AbstractPtr> InferTupleSetItem(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTuple* t, TupleArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t i, TupleIndex(c, t));
  std::vector<AbstractPtr> elems = t->elements();
  elems[i] = c.args[2];
  return MakeAbstractTuple(std::move(elems));
}

// ----- Control flow and closures --------------------------------------------------
// switch(cond, a, b): a if cond else b. The inference driver handles switch
// itself (it is not strict in its branches); this is its plain form.
absl::StatusOr<AbstractPtr> InferSwitch(const InferCall& c) {
  if (const AbstractScalar* s = AsScalar(c.args[0]); s != nullptr && s->value().has_value()) {
    return s->value()->AsBool() ? c.args[1] : c.args[2];
  }
  return Join(c.args[1], c.args[2]);
}

// partial(f, a...): f with its first arguments bound.
absl::StatusOr<AbstractPtr> InferPartial(const InferCall& c) {
  const AbstractFunction* f = AsFunction(c.args[0]);
  if (f == nullptr) return ArgError(c, 0, "a function");
  std::vector<FuncAtom> atoms;
  for (const FuncAtom& a : f->atoms()) {
    FuncAtom p;
    p.kind = FuncAtom::Kind::kPartial;
    p.fn = std::make_shared<const FuncAtom>(a);
    p.bound.assign(c.args.begin() + 1, c.args.end());
    atoms.push_back(std::move(p));
  }
  return std::make_shared<const AbstractFunction>(std::move(atoms));
}

absl::StatusOr<AbstractPtr> InferFirst(const InferCall& c) { return c.args[0]; }

// ----- Envs ---------------------------------------------------------------------------
absl::Status EnvArg(const InferCall& c, int i) {
  if (c.args[i]->kind() != AbstractKind::kEnv) return ArgError(c, i, "an env");
  return absl::OkStatus();
}

absl::Status KeyArg(const InferCall& c, int i) {
  if (AsString(c.args[i]) == nullptr) return ArgError(c, i, "a string key");
  return absl::OkStatus();
}

absl::StatusOr<AbstractPtr> InferEnvSetItem(const InferCall& c) {
  KGRAD_RETURN_IF_ERROR(EnvArg(c, 0));
  KGRAD_RETURN_IF_ERROR(KeyArg(c, 1));
  return MakeAbstractEnv();
}

absl::StatusOr<AbstractPtr> InferEnvGetItem(const InferCall& c) {
  KGRAD_RETURN_IF_ERROR(EnvArg(c, 0));
  KGRAD_RETURN_IF_ERROR(KeyArg(c, 1));
  return c.args[2];
}

absl::StatusOr<AbstractPtr> InferEnvAdd(const InferCall& c) {
  KGRAD_RETURN_IF_ERROR(EnvArg(c, 0));
  KGRAD_RETURN_IF_ERROR(EnvArg(c, 1));
  return MakeAbstractEnv();
}

// ----- Gradient plumbing -------------------------------------------------------------
// hyper_add(a, b): a + b for tensors and scalars, elementwise for tuples and lists
// (of one length at run time), env_add for envs. Both sides have the same structure (sensitivities of one value).
absl::StatusOr<AbstractPtr> InferHyperAdd(const InferCall& c) {
  absl::StatusOr<AbstractPtr> j = Join(SensitivityOf(c.args[0]), SensitivityOf(c.args[1]));
  if (!j.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hyper_add needs two values of one structure: ", j.status().message()));
  }
  return *j;
}

absl::StatusOr<AbstractPtr> InferZerosLike(const InferCall& c) {
  return SensitivityOf(c.args[0]);
}

absl::StatusOr<AbstractPtr> InferOnesLike(const InferCall& c) {
  const AbstractPtr& a = c.args[0];
  if (a->kind() != AbstractKind::kTensor && a->kind() != AbstractKind::kScalar &&
      a->kind() != AbstractKind::kTuple && a->kind() != AbstractKind::kList) {
    return ArgError(c, 0, "a tensor, scalar, tuple or list");
  }
  return SensitivityOf(a);
}

// ----- Scalars -------------------------------------------------------------------------
absl::StatusOr<std::pair<const AbstractScalar*, const AbstractScalar*>> ScalarPair(
    const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractScalar* a, ScalarArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractScalar* b, ScalarArg(c, 1));
  return std::make_pair(a, b);
}

// Constants fold (loop bounds and tuple indices stay constant through arithmetic)
// with the run-time semantics (core/scalar_arith.h); integer division by zero is
// left to fail at run time.
std::optional<Scalar> FoldScalar(PrimId id, const Scalar& a, const Scalar& b) {
  absl::StatusOr<Scalar> r = ApplyScalarOp(id, a, b);
  if (!r.ok()) return std::nullopt;
  return *r;
}

absl::StatusOr<AbstractPtr> InferScalarArith(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(auto ab, ScalarPair(c));
  DType out = ScalarResultType(c.prim.id(), ab.first->dtype(), ab.second->dtype());
  if (ab.first->value().has_value() && ab.second->value().has_value()) {
    if (std::optional<Scalar> v = FoldScalar(c.prim.id(), *ab.first->value(),
                                             *ab.second->value())) {
      return MakeAbstractScalarValue(*v);
    }
  }
  return MakeAbstractScalar(out);
}

absl::StatusOr<AbstractPtr> InferScalarCompare(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(auto ab, ScalarPair(c));
  if (ab.first->value().has_value() && ab.second->value().has_value()) {
    if (std::optional<Scalar> v = FoldScalar(c.prim.id(), *ab.first->value(),
                                             *ab.second->value())) {
      return MakeAbstractScalarValue(*v);
    }
  }
  return MakeAbstractScalar(DType::kBool);
}

// scalar_to_tensor(s){dtype}: the scalar as a rank-0 tensor of `dtype` (default f32).
absl::StatusOr<AbstractPtr> InferScalarToTensor(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractScalar* s, ScalarArg(c, 0));
  (void)s;
  return MakeAbstractTensor(c.prim.GetDType("dtype"), {});
}

// tensor_to_scalar(t): the single element of a rank-0 (or one-element) tensor.
absl::StatusOr<AbstractPtr> InferTensorToScalar(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorArg(c, 0));
  for (int64_t d : t->shape()) {
    if (d != 1 && d >= 0) return ArgError(c, 0, "a tensor with one element");
  }
  return MakeAbstractScalar(t->dtype());
}

// ----- Gradient rules ----------------------------------------------------------------
// Forward: t = (x_0, ..., x_n).  Backward: dx_i = dt[i].
// (The K-transform handles make_tuple/tuple_getitem pairs element-wise itself; these
// rules serve the general case.)
absl::Status BpropMakeTuple(BpropContext& c) {
  for (int i = 0; i < c.num_inputs(); ++i) c.SetGrad(i, c.GetItem(c.Dout(), i));
  return absl::OkStatus();
}

// Forward: y = t[i].  Backward: dt = zeros_like(t) with element i set to dy.
absl::Status BpropTupleGetItem(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kTupleSetItem, {c.ZerosLike(c.I(0)), c.I(1), c.Dout()}));
  return absl::OkStatus();
}

// Forward: y = t with element i replaced by v.  Backward: dt = dy with element i
// zeroed, dv = dy[i].
absl::Status BpropTupleSetItem(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kTupleSetItem, {c.Dout(), c.I(1), c.ZerosLike(c.I(2))}));
  c.SetGrad(2, c.Op(PrimId::kTupleGetItem, {c.Dout(), c.I(1)}));
  return absl::OkStatus();
}

// Forward: y = cond ? a : b.  Backward: da = cond ? dy : 0, db = cond ? 0 : dy.
// (For closures dy is an env and 0 the empty env.)
absl::Status BpropSwitch(BpropContext& c) {
  c.SetGrad(1, c.Op(PrimId::kSwitch, {c.I(0), c.Dout(), c.ZerosLike(c.I(1))}));
  c.SetGrad(2, c.Op(PrimId::kSwitch, {c.I(0), c.ZerosLike(c.I(2)), c.Dout()}));
  return absl::OkStatus();
}

// Forward: y = x (after y's dependency on z).  Backward: dx = dy.
absl::Status BpropDepend(BpropContext& c) {
  c.SetGrad(0, c.Dout());
  return absl::OkStatus();
}

// Forward: y = x, computed only once `after` exists (a rematerialised value's
// leaf, ad/remat.h).  Backward: dx = dy; `after` gets nothing (y does not depend
// on its value).
absl::Status BpropRematBarrier(BpropContext& c) {
  c.SetGrad(0, c.Dout());
  return absl::OkStatus();
}

// Forward: e' = e with e'[k] = v.  Backward: de = dy with dy[k] zeroed, dv = dy[k].
absl::Status BpropEnvSetItem(BpropContext& c) {
  AnfNode* zeros = c.ZerosLike(c.I(2));
  c.SetGrad(0, c.Op(PrimId::kEnvSetItem, {c.Dout(), c.I(1), zeros}));
  c.SetGrad(2, c.Op(PrimId::kEnvGetItem, {c.Dout(), c.I(1), zeros}));
  return absl::OkStatus();
}

// Forward: y = e[k] (or the default, a zero).  Backward: de = {k: dy}.
absl::Status BpropEnvGetItem(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kEnvSetItem, {c.Const(Value::EmptyEnv()), c.I(1), c.Dout()}));
  return absl::OkStatus();
}

// Forward: y = a + b (tensors, tuples or envs).  Backward: da = db = dy.
absl::Status BpropSumOfTwo(BpropContext& c) {
  c.SetGrad(0, c.Dout());
  c.SetGrad(1, c.Dout());
  return absl::OkStatus();
}

// Forward: y = a - b.  Backward: da = dy, db = -dy.
absl::Status BpropScalarSub(BpropContext& c) {
  c.SetGrad(0, c.Dout());
  c.SetGrad(1, c.Op(PrimId::kScalarMul, {c.Dout(), c.Const(Value(Scalar::Float(-1.0)))}));
  return absl::OkStatus();
}

// Forward: y = a * b.  Backward: da = dy * b, db = dy * a.
absl::Status BpropScalarMul(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kScalarMul, {c.Dout(), c.I(1)}));
  c.SetGrad(1, c.Op(PrimId::kScalarMul, {c.Dout(), c.I(0)}));
  return absl::OkStatus();
}

// Forward: y = a / b.  Backward: da = dy / b, db = -dy * y / b.
absl::Status BpropScalarDiv(BpropContext& c) {
  AnfNode* da = c.Op(PrimId::kScalarDiv, {c.Dout(), c.I(1)});
  c.SetGrad(0, da);
  AnfNode* t = c.Op(PrimId::kScalarMul, {da, c.Out()});
  c.SetGrad(1, c.Op(PrimId::kScalarMul, {t, c.Const(Value(Scalar::Float(-1.0)))}));
  return absl::OkStatus();
}

// Forward: t = tensor(s).  Backward: ds = scalar(dt).
absl::Status BpropScalarToTensor(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kTensorToScalar, {c.Dout()}));
  return absl::OkStatus();
}

// Forward: s = the single element of t.  Backward: dt = ds as a tensor shaped like t.
absl::Status BpropTensorToScalar(BpropContext& c) {
  absl::StatusOr<DType> t = c.InDType(0);
  if (!t.ok()) return t.status();
  AnfNode* d = c.Op(PrimId::kScalarToTensor, {c.Dout()}, {{"dtype", *t}});
  c.SetGrad(0, c.ReshapeLike(d, c.I(0)));
  return absl::OkStatus();
}

// Run by the executor on Values; passes on what it is given (no new tensor).
OpDef Mover(PrimId id, int min_inputs, int max_inputs, InferFn infer) {
  return OpDef(id, min_inputs, max_inputs, infer).Structural().MovesOnly();
}

}  // namespace

void RegisterStructuralOps(std::vector<PrimitiveDef>* defs) {
  defs->push_back(Mover(PrimId::kMakeTuple, 0, -1, InferMakeTuple).Bprop(BpropMakeTuple));
  defs->push_back(Mover(PrimId::kTupleGetItem, 2, 2, InferTupleGetItem).Bprop(BpropTupleGetItem));
  defs->push_back(Mover(PrimId::kTupleSetItem, 3, 3, InferTupleSetItem).Bprop(BpropTupleSetItem));
  defs->push_back(Mover(PrimId::kSwitch, 3, 3, InferSwitch).Bprop(BpropSwitch));
  // partial is lowered to a closure before differentiation (ad/prepare.cc).
  defs->push_back(Mover(PrimId::kPartial, 1, -1, InferPartial));
  defs->push_back(Mover(PrimId::kStopGradient, 1, 1, InferFirst).ZeroGradient());
  defs->push_back(Mover(PrimId::kDepend, 2, 2, InferFirst).Bprop(BpropDepend));
  defs->push_back(Mover(PrimId::kRematBarrier, 2, 2, InferFirst).Bprop(BpropRematBarrier));
  defs->push_back(Mover(PrimId::kEnvSetItem, 3, 3, InferEnvSetItem).Bprop(BpropEnvSetItem));
  defs->push_back(Mover(PrimId::kEnvGetItem, 3, 3, InferEnvGetItem).Bprop(BpropEnvGetItem));
  defs->push_back(OpDef(PrimId::kEnvAdd, 2, 2, InferEnvAdd).Structural().Bprop(BpropSumOfTwo));
  // hyper_add(a, b) = a + b leaf by leaf: zero when both are.
  defs->push_back(OpDef(PrimId::kHyperAdd, 2, 2, InferHyperAdd)
                      .Structural()
                      .Bprop(BpropSumOfTwo)
                      .ZeroIfAll({0, 1}));
  defs->push_back(OpDef(PrimId::kZerosLike, 1, 1, InferZerosLike).Structural().ZeroGradient());
  defs->push_back(OpDef(PrimId::kOnesLike, 1, 1, InferOnesLike).Structural().ZeroGradient());
  defs->push_back(Mover(PrimId::kScalarAdd, 2, 2, InferScalarArith).Bprop(BpropSumOfTwo));
  defs->push_back(Mover(PrimId::kScalarSub, 2, 2, InferScalarArith).Bprop(BpropScalarSub));
  defs->push_back(Mover(PrimId::kScalarMul, 2, 2, InferScalarArith).Bprop(BpropScalarMul));
  defs->push_back(Mover(PrimId::kScalarDiv, 2, 2, InferScalarArith).Bprop(BpropScalarDiv));
  for (PrimId id : {PrimId::kScalarLt, PrimId::kScalarLe, PrimId::kScalarGt, PrimId::kScalarGe,
                    PrimId::kScalarEq, PrimId::kScalarNe}) {
    defs->push_back(Mover(id, 2, 2, InferScalarCompare).ZeroGradient());
  }
  defs->push_back(OpDef(PrimId::kScalarToTensor, 1, 1, InferScalarToTensor,
                        {DTypeAttr("dtype", DType::kFloat32)})
                      .Structural()
                      .Bprop(BpropScalarToTensor));
  defs->push_back(
      Mover(PrimId::kTensorToScalar, 1, 1, InferTensorToScalar).Bprop(BpropTensorToScalar));
}

}  // namespace ops
}  // namespace kgrad
