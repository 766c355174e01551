#include "ops/bprop_context.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kgrad {

BpropContext::BpropContext(FuncGraph* tape, const CNode* primal, const Primitive& prim,
                           std::vector<AnfNode*> inputs, std::vector<AbstractPtr> abstracts,
                           AnfNode* out, AbstractPtr out_abstract, AnfNode* dout)
    : builder_(tape),
      primal_(primal),
      prim_(prim),
      inputs_(std::move(inputs)),
      abstracts_(std::move(abstracts)),
      out_(out),
      out_abstract_(std::move(out_abstract)),
      dout_(dout),
      grads_(inputs_.size(), nullptr) {
  abstracts_.resize(inputs_.size());
}

absl::Status BpropContext::Error(const std::string& what) const {
  std::string where = primal_ != nullptr ? primal_->Location() : "a primitive value";
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": cannot differentiate ", prim_.name(), ": ", what));
}

absl::StatusOr<DType> BpropContext::InDType(int i) const {
  if (const AbstractTensor* t = AsTensor(abstracts_[i])) return t->dtype();
  if (const AbstractScalar* s = AsScalar(abstracts_[i])) return s->dtype();
  return Error(absl::StrCat("the gradient rule needs the dtype of input ", i,
                            ", which inference did not determine (declare the graph's "
                            "parameter types)"));
}

absl::StatusOr<Shape> BpropContext::InShape(int i) const {
  if (const AbstractTensor* t = AsTensor(abstracts_[i])) return t->shape();
  return Error(absl::StrCat("the gradient rule needs the shape of input ", i,
                            ", which inference did not determine (declare the graph's "
                            "parameter types)"));
}

absl::StatusOr<int> BpropContext::InRank(int i) const {
  absl::StatusOr<Shape> s = InShape(i);
  if (!s.ok()) return s.status();
  return static_cast<int>(s->size());
}

ResidualForm BpropContext::Form(std::initializer_list<ResidualForm> forms) {
  form_called_ = true;
  for (ResidualForm f : forms) {
    if (f == asked_) return f;
  }
  const ResidualForm fallback = *forms.begin();
  if (asked_by_name_ && asked_ != ResidualForm::kDefault && status_.ok()) {
    std::vector<std::string> names;
    for (ResidualForm f : forms) names.emplace_back(ResidualFormName(f));
    status_ = Error(absl::StrCat("the residual policy asks for ", ResidualFormName(asked_),
                                 ", but its rule has ", absl::StrJoin(names, " and "),
                                 " (the first is its default)"));
  }
  return fallback;
}

absl::Status BpropContext::CheckAskedForm() const {
  if (!asked_by_name_ || asked_ == ResidualForm::kDefault || form_called_) {
    return absl::OkStatus();
  }
  return Error(absl::StrCat("the residual policy asks for ", ResidualFormName(asked_),
                            ", but its rule has no residual forms (it keeps what it reads)"));
}

AnfNode* BpropContext::InForward(PrimId id, std::vector<AnfNode*> args, AttrMap attrs) {
  if (forward_ == nullptr) return Op(id, std::move(args), std::move(attrs));
  GraphBuilder forward(forward_);
  AnfNode* node = forward.Op(id, std::move(args), std::move(attrs));
  if (!forward.status().ok() && status_.ok()) status_ = forward.status();
  return node;
}

AnfNode* BpropContext::Recomputed(PrimId id, std::vector<AnfNode*> args, AttrMap attrs) {
  for (AnfNode*& a : args) a = Op(PrimId::kRematBarrier, {a, Dout()});
  return Op(id, std::move(args), std::move(attrs));
}

AnfNode* BpropContext::OutOrRecomputed() {
  const ResidualForm f =
      Form({ResidualForm::kSaveOutputs, ResidualForm::kSaveInputs, ResidualForm::kRecompute});
  if (f == ResidualForm::kSaveOutputs) return Out();
  return Recomputed(prim_.id(), inputs_, prim_.attrs());
}

AnfNode* BpropContext::Op(PrimId id, std::vector<AnfNode*> args, AttrMap attrs) {
  return builder_.Op(id, std::move(args), std::move(attrs));
}

AnfNode* BpropContext::Const(Value v) { return builder_.Const(std::move(v)); }

AnfNode* BpropContext::Int(int64_t v) { return builder_.Int(v); }

absl::StatusOr<AnfNode*> BpropContext::ScalarLike(double v, int i) {
  absl::StatusOr<DType> t = InDType(i);
  if (!t.ok()) return t.status();
  absl::StatusOr<Tensor> c = Tensor::Full(*t, {}, v);
  if (!c.ok()) return c.status();
  return Const(Value(*std::move(c)));
}

AnfNode* BpropContext::ReduceSum(AnfNode* x, std::vector<int64_t> axes, bool keepdims) {
  return Op(PrimId::kReduceSum, {x}, {{"axes", std::move(axes)}, {"keepdims", keepdims}});
}

AnfNode* BpropContext::Transpose(AnfNode* x, std::vector<int64_t> perm) {
  return Op(PrimId::kTranspose, {x}, {{"perm", std::move(perm)}});
}

AnfNode* BpropContext::SumToInput(AnfNode* d, int i) {
  const AbstractTensor* in = AsTensor(abstracts_[i]);
  const AbstractTensor* out = AsTensor(out_abstract_);
  if (in != nullptr && out != nullptr && in->shape_known() && in->shape() == out->shape()) {
    return d;
  }
  if (in != nullptr && in->shape_known()) {
    return Op(PrimId::kSumTo, {d}, {{"shape", std::vector<int64_t>(in->shape().begin(), in->shape().end())}});
  }
  return Op(PrimId::kSumToLike, {d, inputs_[i]});
}

}  // namespace kgrad
