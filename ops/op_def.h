// Declaring primitives: every op family registers its definitions in this one
// style, a definition and its facts on one line,
//
//   defs->push_back(OpDef(PrimId::kAdd, 2, 2, InferArith).Bprop(BpropAdd).ZeroIfAll({0, 1}));
//
// The facts live here, in ops/, next to the op; core reads them through
// PrimitiveDef (the K-transform the rule, the optimiser the zero propagation,
// constant folding the structural flag, the executor the moves-only flag).
// Some passes still name primitives for facts no declaration carries
// (docs/ARCHITECTURE.md, "Facts that passes and AD read").
#ifndef KGRAD_OPS_OP_DEF_H_
#define KGRAD_OPS_OP_DEF_H_

#include <initializer_list>
#include <vector>

#include "core/primitive.h"

namespace kgrad {
namespace ops {

class OpDef {
 public:
  // Arity [min_inputs, max_inputs] (max -1: variadic).
  OpDef(PrimId id, int min_inputs, int max_inputs, InferFn infer,
        std::vector<AttrSpec> attrs = {});

  // The reverse-mode rule (ops/bprop_context.h); without one (and without
  // ZeroGradient) differentiating through the op is an error.
  OpDef& Bprop(BpropFn rule) { return Set(&PrimitiveDef::bprop, rule); }
  // Outputs carry no gradient (integer/bool results, constants): every input
  // gets a zero sensitivity without a rule.
  OpDef& ZeroGradient() { return Set(&PrimitiveDef::zero_gradient, true); }
  // Linear in every differentiable input (PrimitiveDef::linear).
  OpDef& Linear() { return Set(&PrimitiveDef::linear, true); }
  // The output is zero when any one of `inputs` is zero (products, f(0) = 0
  // maps): the optimiser folds such an application to zeros.
  OpDef& ZeroIfAny(std::initializer_list<int> inputs);
  // The output is zero when all of `inputs` are zero (sums).
  OpDef& ZeroIfAll(std::initializer_list<int> inputs);
  // Run by the executor itself on Values (tuples, closures, scalars): no kernel.
  OpDef& Structural() { return Set(&PrimitiveDef::structural, true); }
  // Only passes on (parts of) its inputs or scalars, never a new tensor.
  OpDef& MovesOnly() { return Set(&PrimitiveDef::moves_only, true); }
  // A contraction (PrimitiveDef::dot).
  OpDef& Dot() { return Set(&PrimitiveDef::dot, true); }

  operator PrimitiveDef() const { return def_; }  // NOLINT: the builder's product

 private:
  template <typename T, typename V>
  OpDef& Set(T PrimitiveDef::*field, V value) {
    def_.*field = value;
    return *this;
  }

  PrimitiveDef def_;
};

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_OP_DEF_H_
