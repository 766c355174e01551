#include "ad/grad_operation.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ad/ad_context.h"
#include "ad/prepare.h"
#include "ad/residual_policy.h"
#include "ad/typing.h"
#include "core/builder.h"
#include "core/status_macros.h"

namespace kgrad {
namespace {

// What a gradient graph returns; every variant is assembled from the same pieces.
struct GradSpec {
  std::string name;
  std::vector<int> argnums;
  bool tuple_inputs = true;       // argnum grads as a tuple (else the single grad)
  std::vector<Parameter*> weights;
  bool weights_only = false;      // return only the weight grads
  bool sens_param = false;
  bool has_aux = false;
  bool with_value = false;        // return (value, grads)
  bool integer_inputs_ok = false;  // integer inputs get zero sensitivities (Vjp)
  std::vector<AbstractPtr> arg_types;
  std::string residuals;  // the residual policy's spec
};

absl::Status CheckDifferentiable(FuncGraph* prepared, FuncGraph* fg, const std::vector<int>& argnums) {
  for (int i : argnums) {
    if (i < 0 || i >= static_cast<int>(fg->parameters().size())) {
      return absl::InvalidArgumentError(absl::StrCat("graph '", fg->name(), "' has no input ", i,
                                                     " (it takes ", fg->parameters().size(), ")"));
    }
    const AbstractPtr& a = prepared->parameters()[i]->abstract();
    const AbstractTensor* t = AsTensor(a);
    const AbstractScalar* s = AsScalar(a);
    if ((t != nullptr && !IsDifferentiable(t->dtype())) || (s != nullptr && !IsFloating(s->dtype()))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot differentiate graph '", fg->name(), "' with respect to input ", i, " ('",
          fg->parameters()[i]->name(), "'): it is ", a->ToString(),
          ", not a floating-point value"));
    }
  }
  return absl::OkStatus();
}

// has_aux: fg returns (value, aux). Checked when the output's type is known
// (inferred); otherwise taking the pair apart fails when the graph runs.
absl::Status CheckAuxPair(FuncGraph* prepared, FuncGraph* fg) {
  const AbstractPtr& a = prepared->output()->abstract();
  if (a == nullptr) return absl::OkStatus();
  const AbstractTuple* t = AsTuple(a);
  if (t != nullptr && t->size() == 2) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "has_aux: graph '", fg->name(), "' must return a pair (value, aux), but returns ", a->ToString(),
      t != nullptr ? absl::StrCat(" (a tuple of ", t->size(), "; wrap the aux values in one tuple)") : ""));
}

absl::StatusOr<FuncGraph*> BuildGradGraph(Module& module, FuncGraph* fg, const GradSpec& spec) {
  if (fg == nullptr || fg->module() != &module) {
    return absl::InvalidArgumentError("the graph to differentiate must belong to the module");
  }
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* prepared, PrepareForAd(fg, spec.arg_types));
  if (!spec.integer_inputs_ok) KGRAD_RETURN_IF_ERROR(CheckDifferentiable(prepared, fg, spec.argnums));
  if (spec.has_aux) KGRAD_RETURN_IF_ERROR(CheckAuxPair(prepared, fg));
  KGRAD_ASSIGN_OR_RETURN(ResidualPolicy residuals,
                         ResidualPolicy::Parse(spec.residuals, module.registry()));
  AdContext ctx(&module, prepared);
  ctx.SetResidualPolicy(&residuals);
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* k, ctx.K(prepared));
  KGRAD_RETURN_IF_ERROR(ctx.CheckResidualNames());

  GraphBuilder b(&module, spec.name, fg->parent());
  std::vector<AnfNode*> xs;
  for (Parameter* p : fg->parameters()) xs.push_back(b.Param(p->name(), p->declared()));
  AnfNode* app = b.Call(k, xs);
  AnfNode* out = b.GetItem(app, 0);
  AnfNode* bprop = b.GetItem(app, 1);
  AnfNode* value = spec.has_aux ? b.GetItem(out, 0) : out;
  // The sensitivity has the type of the (differentiated) output, when known.
  AbstractPtr out_type = Broaden(prepared->output()->abstract());
  if (spec.has_aux && AsTuple(out_type) != nullptr && AsTuple(out_type)->size() == 2) {
    out_type = AsTuple(out_type)->elements()[0];
  }
  AnfNode* sens = spec.sens_param ? static_cast<AnfNode*>(b.Param("sens", out_type))
                                   : b.Op(PrimId::kOnesLike, {value});
  if (spec.has_aux) sens = b.Tuple({sens, b.Op(PrimId::kZerosLike, {b.GetItem(out, 1)})});
  AnfNode* din = b.Call(bprop, {sens});

  std::vector<AnfNode*> dxs;
  for (int i : spec.argnums) dxs.push_back(b.GetItem(din, i + 1));
  AnfNode* input_grads = spec.tuple_inputs ? b.Tuple(dxs) : dxs.at(0);
  AnfNode* grads = input_grads;
  if (!spec.weights.empty() || spec.weights_only) {
    AnfNode* env = b.GetItem(din, 0);
    std::vector<AnfNode*> dws;
    for (Parameter* w : spec.weights) {
      AnfNode* key = b.Const(Value::String(AdContext::KeyOf(w)));
      dws.push_back(b.Op(PrimId::kEnvGetItem, {env, key, b.Op(PrimId::kZerosLike, {w})}));
    }
    AnfNode* weight_grads = b.Tuple(dws);
    grads = spec.weights_only ? weight_grads : b.Tuple({input_grads, weight_grads});
  }
  KGRAD_ASSIGN_OR_RETURN(
      FuncGraph* g, b.Return(spec.with_value  ? b.Tuple({out, grads})
                             : spec.has_aux ? b.Tuple({grads, b.GetItem(out, 1)})
                                            : grads));
  // Typed as inference would (when one context per graph is all it takes), so
  // that the optimiser need not infer the whole gradient again.
  TypeFromInputs(g);
  return g;
}

absl::Status CheckWeights(Module& module, const FuncGraph* fg, const std::vector<Parameter*>& weights) {
  for (Parameter* w : weights) {
    if (w == nullptr || !w->is_weight() || module.FindWeight(w->name()) != w) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot differentiate graph '", fg->name(), "' with respect to ",
          w == nullptr ? std::string("a null weight") : absl::StrCat("'", w->name(), "'"),
          ": weights to differentiate must be weights of the graph's module"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FuncGraph*> GradOperation::operator()(Module& module, FuncGraph* fg) const {
  std::vector<Parameter*> weights;
  if (get_by_list_) {
    for (const auto& w : module.weights()) weights.push_back(w.get());
  }
  return (*this)(module, fg, weights);
}

absl::StatusOr<FuncGraph*> GradOperation::operator()(Module& module, FuncGraph* fg,
                                                     const std::vector<Parameter*>& weights,
                                                     const std::vector<AbstractPtr>& arg_types) const {
  if (fg == nullptr) return absl::InvalidArgumentError("no graph to differentiate");
  KGRAD_RETURN_IF_ERROR(CheckWeights(module, fg, weights));
  GradSpec spec;
  spec.name = absl::StrCat("grad_", fg->name());
  spec.sens_param = sens_param_;
  spec.arg_types = arg_types;
  if (get_all_) {
    for (size_t i = 0; i < fg->parameters().size(); ++i) spec.argnums.push_back(static_cast<int>(i));
  } else if (!get_by_list_) {
    if (fg->parameters().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("graph '", fg->name(), "' has no input to differentiate"));
    }
    spec.argnums = {0};
    spec.tuple_inputs = false;
  }
  if (get_by_list_) {
    spec.weights = weights;
    spec.weights_only = !get_all_;
  }
  return BuildGradGraph(module, fg, spec);
}

// argnums as positions from the start; an out-of-range one is reported as the
// caller wrote it ("input -5", not "input -4").
absl::StatusOr<std::vector<int>> NormalizeArgnums(const FuncGraph* fg, const std::vector<int>& argnums) {
  int n = static_cast<int>(fg->parameters().size());
  std::vector<int> out;
  for (int i : argnums) {
    if (i < -n || i >= n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph '", fg->name(), "' has no input ", i, ": it takes ", n, " input",
          n == 1 ? "" : "s", n == 0 ? "" : absl::StrCat(" (valid positions ", -n, " to ", n - 1, ")")));
    }
    out.push_back(i < 0 ? i + n : i);
  }
  return out;
}

namespace {

// What GradOptions and ValueAndGradOptions share: the inputs and weights to
// differentiate with respect to, checked, and the argument types.
template <typename Options>
absl::StatusOr<GradSpec> CommonSpec(Module& module, FuncGraph* fg, absl::string_view prefix,
                                    const Options& options) {
  if (fg == nullptr) return absl::InvalidArgumentError("no graph to differentiate");
  KGRAD_RETURN_IF_ERROR(CheckWeights(module, fg, options.weights));
  GradSpec spec;
  spec.name = absl::StrCat(prefix, fg->name());
  KGRAD_ASSIGN_OR_RETURN(spec.argnums, NormalizeArgnums(fg, options.argnums));
  spec.tuple_inputs = options.argnums.size() != 1;
  spec.weights = options.weights;
  spec.weights_only = options.argnums.empty() && !options.weights.empty();
  spec.arg_types = options.arg_types;
  spec.residuals = options.residuals;
  return spec;
}

}  // namespace

namespace {

// The wrt/weights/has_aux attributes of grad and value_and_grad for `spec`.
absl::StatusOr<FuncGraph*> OperatorFor(Module& module, FuncGraph* fg, PrimId id, const GradSpec& spec,
                                       const std::vector<int>& argnums) {
  std::vector<std::string> names;
  for (Parameter* w : spec.weights) names.push_back(w->name());
  AttrMap attrs = {{"wrt", std::vector<int64_t>(argnums.begin(), argnums.end())},
                   {"weights", absl::StrJoin(names, ",")},
                   {"has_aux", spec.has_aux},
                   {"residuals", spec.residuals}};
  if (id == PrimId::kGrad) attrs["sens"] = spec.sens_param;
  absl::StatusOr<PrimitivePtr> op = module.registry().Make(id, attrs);
  if (!op.ok()) return op.status();
  return DifferentiationOperatorGraph(module, fg, *op,
                                      spec.sens_param ? std::vector<std::string>{"sens"}
                                                      : std::vector<std::string>{});
}

}  // namespace

absl::StatusOr<FuncGraph*> DifferentiationOperatorGraph(Module& module, FuncGraph* fg,
                                                        const PrimitivePtr& op,
                                                        const std::vector<std::string>& extra_names) {
  if (op == nullptr || op->def().derived_args == nullptr) {
    return absl::InvalidArgumentError("not a differentiation operator");
  }
  if (fg == nullptr || fg->module() != &module) {
    return absl::InvalidArgumentError("the graph to differentiate must belong to the module");
  }
  GraphBuilder b(&module, absl::StrCat(op->name(), "_", fg->name()), fg->parent());
  std::vector<AnfNode*> args;
  for (Parameter* p : fg->parameters()) args.push_back(b.Param(p->name(), p->declared()));
  for (const std::string& name : extra_names) args.push_back(b.Param(name));
  return b.Return(b.Call(b.Op(op, {b.GraphRef(fg)}), args));
}

absl::StatusOr<FuncGraph*> ValueAndGrad(Module& module, FuncGraph* fg, const ValueAndGradOptions& options) {
  KGRAD_ASSIGN_OR_RETURN(GradSpec spec, CommonSpec(module, fg, "value_and_grad_", options));
  if (options.as_operator) {
    if (options.sens_param) {
      return absl::InvalidArgumentError("value_and_grad: the operator takes no sensitivity");
    }
    spec.has_aux = options.has_aux;
    return OperatorFor(module, fg, PrimId::kValueAndGrad, spec, options.argnums);
  }
  if (options.sens_param && options.has_aux) {
    return absl::InvalidArgumentError("value_and_grad: sens_param with has_aux is not supported");
  }
  spec.has_aux = options.has_aux;
  spec.sens_param = options.sens_param;
  spec.with_value = true;
  return BuildGradGraph(module, fg, spec);
}

absl::StatusOr<FuncGraph*> Grad(Module& module, FuncGraph* fg, const GradOptions& options) {
  KGRAD_ASSIGN_OR_RETURN(GradSpec spec, CommonSpec(module, fg, "grad_", options));
  spec.sens_param = options.sens_param;
  spec.has_aux = options.has_aux;
  if (options.as_operator) return OperatorFor(module, fg, PrimId::kGrad, spec, options.argnums);
  return BuildGradGraph(module, fg, spec);
}

absl::StatusOr<FuncGraph*> Vjp(Module& module, FuncGraph* fg, const std::vector<AbstractPtr>& arg_types) {
  GradSpec spec;
  spec.name = absl::StrCat("vjp_", fg->name());
  spec.integer_inputs_ok = true;  // like JAX: their cotangents are zeros
  for (size_t i = 0; i < fg->parameters().size(); ++i) spec.argnums.push_back(static_cast<int>(i));
  spec.sens_param = true;
  spec.with_value = true;
  spec.arg_types = arg_types;
  return BuildGradGraph(module, fg, spec);
}

}  // namespace kgrad
