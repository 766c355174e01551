// Reverse-mode public API, with MindSpore semantics.
//
//   GradOperation grad(/*get_all=*/true, /*get_by_list=*/false, /*sens_param=*/false);
//   absl::StatusOr<FuncGraph*> g = grad(module, fg);  // (x...) -> (dx...)
//
// get_all: gradients of every input (a tuple); otherwise of the first input only.
// get_by_list: gradients of the module's weights (a tuple), like MindSpore's
//   ParameterTuple; with get_all too the result is (input grads, weight grads).
// sens_param: the gradient graph takes the output sensitivity as a last input;
//   otherwise it is ones_like(output).
// The results are ordinary graphs of the caller's module: differentiating them
// again gives higher derivatives.
#ifndef KGRAD_AD_GRAD_OPERATION_H_
#define KGRAD_AD_GRAD_OPERATION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/module.h"

namespace kgrad {

class GradOperation {
 public:
  explicit GradOperation(bool get_all = false, bool get_by_list = false, bool sens_param = false)
      : get_all_(get_all), get_by_list_(get_by_list), sens_param_(sens_param) {}

  // With get_by_list, differentiates with respect to every weight of the module.
  absl::StatusOr<FuncGraph*> operator()(Module& module, FuncGraph* fg) const;
  // With respect to `weights` (weights of the module); `arg_types` are fg's
  // argument types when its parameters are not declared (else empty).
  absl::StatusOr<FuncGraph*> operator()(Module& module, FuncGraph* fg,
                                        const std::vector<Parameter*>& weights,
                                        const std::vector<AbstractPtr>& arg_types = {}) const;

 private:
  bool get_all_;
  bool get_by_list_;
  bool sens_param_;
};

struct ValueAndGradOptions {
  std::vector<int> argnums = {0};   // inputs to differentiate (negative: from the end)
  std::vector<Parameter*> weights;  // weights to differentiate too
  bool has_aux = false;             // fg returns (value, aux); only value is differentiated
  std::vector<AbstractPtr> arg_types;
  // Return @value_and_grad_f(x...) = value_and_grad{...}(@f)(x...), the operator
  // itself, for a graph that others load (ad/expand_differentiation.h expands it).
  bool as_operator = false;
  // The output sensitivity is a last input "sens" instead of ones (the value and
  // the vector-Jacobian product of that sensitivity); not with as_operator.
  bool sens_param = false;
  // The residual policy (ad/residual_policy.h), e.g. "save_outputs" or
  // "sin=save_outputs,@h1=recompute"; empty: each rule's default. The
  // operator carries it as its `residuals` attribute.
  std::string residuals;
};

// (x...) -> (value, grads): grads is dx for a single argnum, else the tuple of
// them; with weights it is (input grads, weight grads), or only the weight grads
// when argnums is empty (as Grad). With has_aux, value is (value, aux).
absl::StatusOr<FuncGraph*> ValueAndGrad(Module& module, FuncGraph* fg,
                                        const ValueAndGradOptions& options = {});

struct GradOptions {
  std::vector<int> argnums = {0};   // inputs to differentiate (negative: from the end)
  std::vector<Parameter*> weights;  // weights to differentiate too
  bool sens_param = false;          // the output sensitivity is a last input
  bool has_aux = false;             // fg returns (value, aux); only value is differentiated
  std::vector<AbstractPtr> arg_types;
  bool as_operator = false;         // as in ValueAndGradOptions
  std::string residuals;            // as in ValueAndGradOptions
};

// (x...) -> grads: dx for a single argnum, else the tuple of them; with weights,
// (input grads, weight grads), or only the weight grads when argnums is empty.
// With has_aux, (grads, aux), as JAX's grad(f, has_aux=True).
//
// has_aux (here and in ValueAndGrad) wants fg to return a pair (value, aux), like
// JAX; an output of another type, when it is known, is an InvalidArgument error
// naming the graph.
absl::StatusOr<FuncGraph*> Grad(Module& module, FuncGraph* fg, const GradOptions& options);

// (x..., cotangent) -> (out, (dx...)): the vector-Jacobian product. Integer and
// bool inputs get zero sensitivities.
absl::StatusOr<FuncGraph*> Vjp(Module& module, FuncGraph* fg,
                               const std::vector<AbstractPtr>& arg_types = {});

// @<op>_f(x..., extra...) = op(@fg)(x..., extra...): a graph that applies the
// differentiation operator `op` (J, grad, value_and_grad, jvp, vjp;
// ops/differentiation.h) to fg instead of expanding it, with fg's parameters and
// then `extra_names` more (a sensitivity, tangents, a cotangent). Saved to a
// file it carries the operator; expanding it gives what the C++ API gives.
absl::StatusOr<FuncGraph*> DifferentiationOperatorGraph(Module& module, FuncGraph* fg,
                                                        const PrimitivePtr& op,
                                                        const std::vector<std::string>& extra_names);

}  // namespace kgrad

#endif  // KGRAD_AD_GRAD_OPERATION_H_
