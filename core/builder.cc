#include "core/builder.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kgrad {

GraphBuilder::GraphBuilder(Module* module, absl::string_view name, FuncGraph* parent)
    : module_(module), graph_(module->NewGraph(name, parent)) {
  if (parent == nullptr) graph_->set_public(true);
}

GraphBuilder::GraphBuilder(FuncGraph* graph)
    : module_(graph->module()), graph_(graph) {}

GraphBuilder::GraphBuilder(Module* module, FuncGraph* graph,
                           std::shared_ptr<absl::Status> status)
    : module_(module), graph_(graph), status_(std::move(status)) {}

GraphBuilder GraphBuilder::Nested(absl::string_view name) {
  if (status_ == nullptr) status_ = std::make_shared<absl::Status>();
  return GraphBuilder(module_, module_->NewGraph(name, graph_), status_);
}

const absl::Status& GraphBuilder::status() const {
  static const absl::Status* const kOk = new absl::Status();
  return status_ != nullptr ? *status_ : *kOk;
}

void GraphBuilder::SetError(absl::Status s) {
  if (status_ == nullptr) status_ = std::make_shared<absl::Status>();
  if (status_->ok() && !s.ok()) {
    *status_ = absl::Status(s.code(), absl::StrCat("building graph '", graph_->name(),
                                                   "': ", s.message()));
  }
}

ValueNode* GraphBuilder::Placeholder() { return graph_->NewValueNode(Value::None()); }

Parameter* GraphBuilder::Param(std::string name, AbstractPtr declared) {
  return graph_->AddParameter(std::move(name), std::move(declared));
}

Parameter* GraphBuilder::Param(std::string name, DType dtype, Shape shape) {
  return Param(std::move(name), MakeAbstractTensor(dtype, std::move(shape)));
}

AnfNode* GraphBuilder::Weight(const std::string& name, const Tensor& init) {
  if (Parameter* w = module_->FindWeight(name)) return w;
  absl::StatusOr<Parameter*> w = module_->AddWeight(name, init);
  if (!w.ok()) {
    SetError(w.status());
    return Placeholder();
  }
  return *w;
}

ValueNode* GraphBuilder::Const(Value v) { return graph_->NewValueNode(std::move(v)); }

ValueNode* GraphBuilder::PrimRef(PrimId id, AttrMap attrs) {
  absl::StatusOr<PrimitivePtr> p = module_->registry().Make(id, std::move(attrs));
  if (!p.ok()) {
    SetError(p.status());
    return Placeholder();
  }
  return graph_->PrimitiveNode(*p);
}

CNode* GraphBuilder::Op(PrimId id, std::vector<AnfNode*> args, AttrMap attrs) {
  return graph_->NewCNode(PrimRef(id, std::move(attrs)), args);
}

CNode* GraphBuilder::Op(const PrimitivePtr& prim, std::vector<AnfNode*> args) {
  return graph_->NewCNode(graph_->PrimitiveNode(prim), args);
}

CNode* GraphBuilder::Call(AnfNode* fn, std::vector<AnfNode*> args) { return graph_->NewCNode(fn, args); }

CNode* GraphBuilder::Partial(AnfNode* fn, std::vector<AnfNode*> bound) {
  bound.insert(bound.begin(), fn);
  return Op(PrimId::kPartial, std::move(bound));
}

CNode* GraphBuilder::If(AnfNode* cond, const BranchFn& then_fn, const BranchFn& else_fn) {
  GraphBuilder then_b = Nested(absl::StrCat(graph_->name(), "_then"));
  then_b.graph()->set_output(then_fn(then_b));
  GraphBuilder else_b = Nested(absl::StrCat(graph_->name(), "_else"));
  else_b.graph()->set_output(else_fn(else_b));
  CNode* chosen = Switch(cond, GraphRef(then_b.graph()), GraphRef(else_b.graph()));
  return Call(chosen, {});
}

std::vector<AnfNode*> GraphBuilder::While(std::vector<AnfNode*> init, const LoopCondFn& cond,
                                          const LoopBodyFn& body, absl::string_view name) {
  const size_t n = init.size();
  return While(
      n, [&init](GraphBuilder&) { return std::move(init); }, cond, body, name);
}

std::vector<AnfNode*> GraphBuilder::While(size_t num_state, const LoopInitFn& init,
                                          const LoopCondFn& cond, const LoopBodyFn& body,
                                          absl::string_view name) {
  GraphBuilder loop = Nested(name);
  std::vector<AnfNode*> state;
  for (size_t i = 0; i < num_state; ++i) {
    state.push_back(loop.Param(absl::StrCat("s", i)));
  }
  AnfNode* c = cond(loop, state);

  GraphBuilder body_b = loop.Nested(absl::StrCat(name, "_body"));
  std::vector<AnfNode*> next = body(body_b, state);
  if (next.size() != state.size()) {
    SetError(absl::InvalidArgumentError(absl::StrCat(
        "while body returns ", next.size(), " values for ", state.size(), " state variables")));
    next = state;
  }
  body_b.graph()->set_output(body_b.Call(loop.graph(), next));

  GraphBuilder exit_b = loop.Nested(absl::StrCat(name, "_exit"));
  exit_b.graph()->set_output(exit_b.Tuple(state));

  CNode* chosen = loop.Switch(c, loop.GraphRef(body_b.graph()), loop.GraphRef(exit_b.graph()));
  loop.graph()->set_output(loop.Call(chosen, {}));

  std::vector<AnfNode*> start = init(*this);
  if (start.size() != state.size()) {
    SetError(absl::InvalidArgumentError(absl::StrCat(
        "while loop starts with ", start.size(), " values for ", state.size(), " state variables")));
    start.assign(state.size(), Placeholder());
  }
  CNode* result = Call(loop.graph(), std::move(start));
  std::vector<AnfNode*> out;
  for (size_t i = 0; i < state.size(); ++i) out.push_back(GetItem(result, i));
  return out;
}

ValueNode* GraphBuilder::Closure(absl::string_view name, int num_params, const ClosureFn& fn) {
  GraphBuilder b = Nested(name);
  std::vector<AnfNode*> params;
  for (int i = 0; i < num_params; ++i) params.push_back(b.Param(absl::StrCat("p", i)));
  b.graph()->set_output(fn(b, params));
  return GraphRef(b.graph());
}

absl::StatusOr<FuncGraph*> GraphBuilder::Return(AnfNode* output) {
  if (!status().ok()) return status();
  graph_->set_output(output);
  return graph_;
}

}  // namespace kgrad
