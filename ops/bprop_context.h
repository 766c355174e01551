// The gradient-rule DSL. A bprop rule of primitive P sees one application
// `y = P(x_0, ..., x_n){attrs}` and emits, into the bprop graph, nodes computing
// the input sensitivities from the output sensitivity:
//
//   I(i)   the forward input x_i          Out()   the forward output y
//   Dout() the sensitivity of y           SetGrad(i, d)   d is dL/dx_i
//
// Inputs whose sensitivity is never set get a symbolic zero (nothing is built).
// Every rule has one signature, absl::Status Rule(BpropContext&), and carries a
// "forward form / backward" comment, e.g.
//
//   // Forward: y = x * z.  Backward: dx = sum_to(dy * z, x), dz = sum_to(dy * x, z).
//
// Because rules emit graph nodes, not numbers, their output can be differentiated
// again (higher order). The sugar below (Mul, SumToInput, ...) keeps rules short
// and reads like the math.
#ifndef KGRAD_OPS_BPROP_CONTEXT_H_
#define KGRAD_OPS_BPROP_CONTEXT_H_

#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/builder.h"
#include "core/primitive.h"
#include "ops/residual_form.h"

namespace kgrad {

class BpropContext {
 public:
  // `inputs` are the forward inputs as seen from `tape` (the graph receiving the
  // rule's nodes); `abstracts` their inferred types (entries may be null).
  BpropContext(FuncGraph* tape, const CNode* primal, const Primitive& prim,
               std::vector<AnfNode*> inputs, std::vector<AbstractPtr> abstracts, AnfNode* out,
               AbstractPtr out_abstract, AnfNode* dout);

  // ----- What the rule reads ------------------------------------------------------------
  const Primitive& prim() const { return prim_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  AnfNode* I(int i) const { return inputs_[i]; }
  const AbstractPtr& IAbs(int i) const { return abstracts_[i]; }
  AnfNode* Out() const { return out_; }
  const AbstractPtr& OutAbs() const { return out_abstract_; }
  AnfNode* Dout() const { return dout_; }
  const CNode* primal() const { return primal_; }

  // Static facts, with an error naming the primitive and node when unknown.
  absl::StatusOr<DType> InDType(int i) const;
  absl::StatusOr<Shape> InShape(int i) const;  // rank known; dims may be unknown
  absl::StatusOr<int> InRank(int i) const;

  // ----- Residual forms (ops/residual_form.h) --------------------------------------------
  // Set by the K-transform before the rule runs: the form a policy asks of this
  // application (kDefault: none), `named` when the policy named this op or node
  // (so that a form the rule lacks is an error, not a fallback), and K(g), the
  // graph of the forward pass (null: InForward builds in the tape).
  void AskForm(ResidualForm form, bool named) {
    asked_ = form;
    asked_by_name_ = named;
  }
  void SetForwardGraph(FuncGraph* forward) { forward_ = forward; }
  // The form the rule builds, from `forms` (the rule's own, its default first):
  // the one asked when the rule has it, else the default; asked by name and
  // missing, the default with an error (status()) naming the node and the forms.
  ResidualForm Form(std::initializer_list<ResidualForm> forms);
  // After the rule: an error when the policy named this application's op or
  // node but the rule has no forms (never called Form).
  absl::Status CheckAskedForm() const;
  // A node of the forward pass, so that the backward reads it as a residual
  // (save_outputs: sin's cos x computed beside sin x).
  AnfNode* InForward(PrimId id, std::vector<AnfNode*> args, AttrMap attrs = {});
  // A forward value computed again in the backward from `args`, each entering as
  // remat_barrier(arg, Dout()): the copy differs from the forward's (CSE cannot
  // merge it back into a saved output) and waits for the backward pass to reach
  // it (save_inputs: tanh's y = tanh x).
  AnfNode* Recomputed(PrimId id, std::vector<AnfNode*> args, AttrMap attrs = {});
  // The output y for a rule that reads it (tanh, sigmoid, exp, the softmaxes):
  // save_outputs, the default, reads y itself; save_inputs and recompute keep the
  // inputs and compute y again from them (Recomputed), the same arithmetic.
  AnfNode* OutOrRecomputed();

  // ----- What the rule writes -------------------------------------------------------------
  void SetGrad(int i, AnfNode* d) { grads_[i] = d; }
  AnfNode* grad(int i) const { return grads_[i]; }
  const std::vector<AnfNode*>& grads() const { return grads_; }
  // A rule that cannot differentiate this use reports why.
  absl::Status Error(const std::string& what) const;
  // Errors from building nodes (bad attributes) and from Form are kept here.
  const absl::Status& status() const { return status_.ok() ? builder_.status() : status_; }

  // ----- Emitting ----------------------------------------------------------------------
  AnfNode* Op(PrimId id, std::vector<AnfNode*> args, AttrMap attrs = {});
  // A rank-0 tensor constant of input i's dtype.
  absl::StatusOr<AnfNode*> ScalarLike(double v, int i);
  AnfNode* Const(Value v);
  AnfNode* Int(int64_t v);

  AnfNode* Add(AnfNode* a, AnfNode* b) { return Op(PrimId::kAdd, {a, b}); }
  AnfNode* Sub(AnfNode* a, AnfNode* b) { return Op(PrimId::kSub, {a, b}); }
  AnfNode* Mul(AnfNode* a, AnfNode* b) { return Op(PrimId::kMul, {a, b}); }
  AnfNode* Div(AnfNode* a, AnfNode* b) { return Op(PrimId::kDiv, {a, b}); }
  AnfNode* Neg(AnfNode* a) { return Op(PrimId::kNeg, {a}); }
  AnfNode* Exp(AnfNode* a) { return Op(PrimId::kExp, {a}); }
  AnfNode* Log(AnfNode* a) { return Op(PrimId::kLog, {a}); }
  AnfNode* Square(AnfNode* a) { return Op(PrimId::kSquare, {a}); }
  AnfNode* Sqrt(AnfNode* a) { return Op(PrimId::kSqrt, {a}); }
  AnfNode* Reciprocal(AnfNode* a) { return Op(PrimId::kReciprocal, {a}); }
  AnfNode* Select(AnfNode* c, AnfNode* a, AnfNode* b) { return Op(PrimId::kSelect, {c, a, b}); }
  AnfNode* ZerosLike(AnfNode* a) { return Op(PrimId::kZerosLike, {a}); }
  AnfNode* OnesLike(AnfNode* a) { return Op(PrimId::kOnesLike, {a}); }
  AnfNode* Tuple(std::vector<AnfNode*> elems) { return Op(PrimId::kMakeTuple, std::move(elems)); }
  AnfNode* GetItem(AnfNode* t, int64_t i) { return Op(PrimId::kTupleGetItem, {t, Int(i)}); }
  AnfNode* ReduceSum(AnfNode* x, std::vector<int64_t> axes, bool keepdims);
  AnfNode* BroadcastToLike(AnfNode* x, AnfNode* ref) { return Op(PrimId::kBroadcastToLike, {x, ref}); }
  AnfNode* ReshapeLike(AnfNode* x, AnfNode* ref) { return Op(PrimId::kReshapeLike, {x, ref}); }
  AnfNode* Transpose(AnfNode* x, std::vector<int64_t> perm);
  AnfNode* Cast(AnfNode* x, DType t) { return Op(PrimId::kCast, {x}, {{"dtype", t}}); }

  // `d` (shaped like the output of a broadcasting op) summed back to input i's
  // shape: the identity when the shapes are statically equal, sum_to with a static
  // shape when known, else sum_to_like(d, I(i)).
  AnfNode* SumToInput(AnfNode* d, int i);

 private:
  GraphBuilder builder_;
  const CNode* primal_;
  const Primitive& prim_;
  std::vector<AnfNode*> inputs_;
  std::vector<AbstractPtr> abstracts_;
  AnfNode* out_;
  AbstractPtr out_abstract_;
  AnfNode* dout_;
  std::vector<AnfNode*> grads_;
  ResidualForm asked_ = ResidualForm::kDefault;
  bool asked_by_name_ = false;
  bool form_called_ = false;
  FuncGraph* forward_ = nullptr;
  absl::Status status_;
};

}  // namespace kgrad

#endif  // KGRAD_OPS_BPROP_CONTEXT_H_
