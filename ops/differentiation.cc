#include "ops/differentiation.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/status_macros.h"
#include "ops/op_def.h"
#include "ops/op_util.h"
#include "ops/structural.h"

namespace kgrad {
namespace ops {
namespace {

// The operator applied to a function: the same set of functions, each derived.
absl::StatusOr<AbstractPtr> InferDerivedFunction(const InferCall& c) {
  const AbstractFunction* f = AsFunction(c.args[0]);
  if (f == nullptr) return ArgError(c, 0, "a function (a graph, closure or partial application)");
  auto prim = std::make_shared<const Primitive>(c.prim);
  std::vector<FuncAtom> atoms;
  for (const FuncAtom& a : f->atoms()) {
    FuncAtom d;
    d.kind = FuncAtom::Kind::kDerived;
    d.primitive = prim;
    d.fn = std::make_shared<const FuncAtom>(a);
    atoms.push_back(std::move(d));
  }
  return std::make_shared<const AbstractFunction>(std::move(atoms));
}

// The sensitivity type of an input (constant scalars broadened).
AbstractPtr SensOf(const AbstractPtr& a) { return SensitivityOf(Broaden(a)); }

std::vector<AbstractPtr> AllButLast(const DerivedCall& c) {
  return std::vector<AbstractPtr>(c.args.begin(), c.args.end() - (c.args.empty() ? 0 : 1));
}

absl::StatusOr<std::vector<AbstractPtr>> SameArgs(const DerivedCall& c) {
  return std::vector<AbstractPtr>(c.args.begin(), c.args.end());
}

absl::StatusOr<std::vector<AbstractPtr>> ArgsBeforeLast(const DerivedCall& c, const char* last) {
  if (c.args.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the derived function takes the inputs and ",
                                                   last, " last; it was called with nothing"));
  }
  return AllButLast(c);
}

// grad: the inputs, without the sensitivity when `sens` is set.
absl::StatusOr<std::vector<AbstractPtr>> GradArgs(const DerivedCall& c) {
  if (c.prim.GetBool("sens")) return ArgsBeforeLast(c, "the output's sensitivity");
  return SameArgs(c);
}

absl::StatusOr<std::vector<AbstractPtr>> VjpArgs(const DerivedCall& c) {
  return ArgsBeforeLast(c, "the cotangent");
}

// jvp: (x..., v...): as many tangents as inputs.
absl::StatusOr<std::vector<AbstractPtr>> JvpArgs(const DerivedCall& c) {
  if (c.args.size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the jvp of a function takes its inputs and one tangent per input, got ", c.args.size(),
        " arguments"));
  }
  return std::vector<AbstractPtr>(c.args.begin(), c.args.begin() + c.args.size() / 2);
}

// (value, aux) for has_aux; error when the function does not return a pair.
absl::StatusOr<const AbstractTuple*> AuxPair(const AbstractPtr& out) {
  const AbstractTuple* t = AsTuple(out);
  if (t == nullptr || t->size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "with has_aux the function must return a pair (value, aux); it returns ", out->ToString()));
  }
  return t;
}

// The gradient part of grad/value_and_grad's result.
absl::StatusOr<AbstractPtr> GradsType(const DerivedCall& c, absl::Span<const AbstractPtr> inputs) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<int> wrt,
                         DifferentiatedInputs(c.prim, static_cast<int>(inputs.size())));
  std::vector<AbstractPtr> dxs;
  for (int i : wrt) {
    const AbstractPtr& a = inputs[i];
    const AbstractTensor* t = AsTensor(a);
    const AbstractScalar* s = AsScalar(a);
    if ((t != nullptr && !IsDifferentiable(t->dtype())) || (s != nullptr && !IsFloating(s->dtype()))) {
      return absl::InvalidArgumentError(absl::StrCat("cannot differentiate with respect to input ", i,
                                                     ": it is ", a->ToString(),
                                                     ", not a floating-point value"));
    }
    dxs.push_back(SensOf(a));
  }
  AbstractPtr input_grads = dxs.size() == 1 ? dxs[0] : MakeAbstractTuple(dxs);
  std::vector<AbstractPtr> dws;
  if (!c.prim.GetString("weights").empty()) {
    if (c.module == nullptr) return absl::InvalidArgumentError("weights need a module");
    KGRAD_ASSIGN_OR_RETURN(std::vector<Parameter*> ws, DifferentiatedWeights(c.prim, *c.module));
    for (Parameter* w : ws) dws.push_back(SensOf(w->abstract()));
    AbstractPtr weight_grads = MakeAbstractTuple(std::move(dws));
    if (wrt.empty()) return weight_grads;
    return MakeAbstractTuple({input_grads, weight_grads});
  }
  return input_grads;
}

absl::StatusOr<AbstractPtr> GradResult(const DerivedCall& c, const AbstractPtr& out) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<AbstractPtr> inputs, GradArgs(c));
  KGRAD_ASSIGN_OR_RETURN(AbstractPtr grads, GradsType(c, inputs));
  if (!c.prim.GetBool("has_aux")) return grads;
  KGRAD_ASSIGN_OR_RETURN(const AbstractTuple* pair, AuxPair(out));
  return MakeAbstractTuple({grads, pair->elements()[1]});
}

absl::StatusOr<AbstractPtr> ValueAndGradResult(const DerivedCall& c, const AbstractPtr& out) {
  if (c.prim.GetBool("has_aux")) KGRAD_RETURN_IF_ERROR(AuxPair(out).status());
  KGRAD_ASSIGN_OR_RETURN(AbstractPtr grads, GradsType(c, c.args));
  return MakeAbstractTuple({out, grads});
}

// J(f)(x...) = (out, bprop), bprop(dout) = (env, dx...).
absl::StatusOr<AbstractPtr> JResult(const DerivedCall& c, const AbstractPtr& out) {
  std::vector<AbstractPtr> sens = {MakeAbstractEnv()};
  for (const AbstractPtr& a : c.args) sens.push_back(SensOf(a));
  FuncAtom bprop;
  bprop.kind = FuncAtom::Kind::kResult;
  bprop.bound = {MakeAbstractTuple(std::move(sens))};
  auto fn = std::make_shared<const AbstractFunction>(std::vector<FuncAtom>{std::move(bprop)});
  return MakeAbstractTuple({out, fn});
}

absl::StatusOr<AbstractPtr> JvpResult(const DerivedCall& c, const AbstractPtr& out) {
  return MakeAbstractTuple({out, SensOf(out)});
}

absl::StatusOr<AbstractPtr> VjpResult(const DerivedCall& c, const AbstractPtr& out) {
  std::vector<AbstractPtr> dxs;
  for (const AbstractPtr& a : AllButLast(c)) dxs.push_back(SensOf(a));
  return MakeAbstractTuple({out, MakeAbstractTuple(std::move(dxs))});
}

AttrSpec StringAttr(std::string name, std::string default_value) {
  return AttrSpec{std::move(name), AttrType::kString, AttrValue(std::move(default_value))};
}

PrimitiveDef Derived(PrimId id, DerivedArgsFn args, DerivedResultFn result,
                     std::vector<AttrSpec> attrs = {}) {
  PrimitiveDef def = OpDef(id, 1, 1, InferDerivedFunction, std::move(attrs)).Structural();
  def.derived_args = args;
  def.derived_result = result;
  return def;
}

}  // namespace

absl::StatusOr<std::vector<Parameter*>> DifferentiatedWeights(const Primitive& prim,
                                                              const Module& module) {
  std::vector<Parameter*> out;
  if (prim.attrs().count("weights") == 0) return out;
  const std::string& spec = prim.GetString("weights");
  if (spec.empty()) return out;
  if (spec == "*") {
    for (const auto& w : module.weights()) out.push_back(w.get());
    return out;
  }
  for (absl::string_view name : absl::StrSplit(spec, ',')) {
    Parameter* w = module.FindWeight(name);
    if (w == nullptr) {
      std::vector<std::string> names;
      for (const auto& x : module.weights()) names.push_back(x->name());
      return absl::InvalidArgumentError(absl::StrCat(
          "weights=\"", spec, "\" names '", name, "', which is not a weight of the module (",
          names.empty() ? "it has none" : absl::StrCat("weights: ", absl::StrJoin(names, ", ")),
          ")"));
    }
    out.push_back(w);
  }
  return out;
}

absl::StatusOr<std::vector<int>> DifferentiatedInputs(const Primitive& prim, int num_inputs) {
  std::vector<int> out;
  for (int64_t i : prim.GetInts("wrt")) {
    if (i < -num_inputs || i >= num_inputs) {
      return absl::InvalidArgumentError(absl::StrCat(
          "wrt names input ", i, " but the function is called with ", num_inputs, " input",
          num_inputs == 1 ? "" : "s"));
    }
    out.push_back(static_cast<int>(i < 0 ? i + num_inputs : i));
  }
  return out;
}

void RegisterDifferentiationOps(std::vector<PrimitiveDef>* defs) {
  defs->push_back(Derived(PrimId::kJ, SameArgs, JResult));
  // residuals: the residual policy of the transform (ad/residual_policy.h).
  defs->push_back(Derived(PrimId::kGrad, GradArgs, GradResult,
                          {IntsAttr("wrt", {0}), StringAttr("weights", ""), BoolAttr("sens", false),
                           BoolAttr("has_aux", false), StringAttr("residuals", "")}));
  defs->push_back(Derived(PrimId::kValueAndGrad, SameArgs, ValueAndGradResult,
                          {IntsAttr("wrt", {0}), StringAttr("weights", ""), BoolAttr("has_aux", false),
                           StringAttr("residuals", "")}));
  defs->push_back(Derived(PrimId::kJvp, JvpArgs, JvpResult));
  defs->push_back(Derived(PrimId::kVjp, VjpArgs, VjpResult));
}

}  // namespace ops
}  // namespace kgrad
