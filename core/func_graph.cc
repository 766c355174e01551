#include "core/func_graph.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/module.h"
#include "core/status_macros.h"
#include "core/value_walk.h"

namespace kgrad {

absl::string_view RematPolicyName(RematPolicy p) {
  switch (p) {
    case RematPolicy::kEverythingSaveable:
      return "everything_saveable";
    case RematPolicy::kNothingSaveable:
      return "nothing_saveable";
    case RematPolicy::kDotsSaveable:
      return "dots_saveable";
  }
  return "everything_saveable";
}

absl::StatusOr<RematPolicy> ParseRematPolicy(absl::string_view name) {
  for (RematPolicy p : {RematPolicy::kEverythingSaveable, RematPolicy::kNothingSaveable,
                        RematPolicy::kDotsSaveable}) {
    if (name == RematPolicyName(p)) return p;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown remat policy '", name,
      "' (expected everything_saveable, nothing_saveable or dots_saveable)"));
}

void FuncGraph::Touch() {
  ++version_;
  module_->Touch();
}

bool FuncGraph::types_current() const { return types_version_ == module_->version(); }

void FuncGraph::set_types_current() { types_version_ = module_->version(); }

void FuncGraph::TouchOwner(const AnfNode* n) {
  // Only an application's uses by other graphs matter to its owner (the manager
  // schedules applications that nested graphs read); constants and parameters
  // used from elsewhere leave the owner as it was.
  if (n != nullptr && n->graph() != nullptr && n->is_cnode()) n->graph()->Touch();
}

void FuncGraph::set_parent(FuncGraph* parent) {
  parent_ = parent;
  Touch();
}

bool FuncGraph::IsSelfOrAncestor(const FuncGraph* g) const {
  for (const FuncGraph* p = this; p != nullptr; p = p->parent_) {
    if (p == g) return true;
  }
  return false;
}

int FuncGraph::depth() const {
  int d = 0;
  for (const FuncGraph* p = parent_; p != nullptr; p = p->parent_) ++d;
  return d;
}

Parameter* FuncGraph::AddParameter(std::string name, AbstractPtr declared) {
  auto p = std::make_unique<Parameter>(this, module_->NewNodeId());
  p->set_name(std::move(name));
  p->set_declared(declared);
  if (declared != nullptr) p->set_abstract(std::move(declared));
  Parameter* raw = p.get();
  nodes_.push_back(std::move(p));
  parameters_.push_back(raw);
  Touch();
  return raw;
}

void FuncGraph::set_output(AnfNode* node) {
  KGRAD_CHECK(node != nullptr);
  if (output_ == node) return;
  if (output_ != nullptr) {
    output_->RemoveUse(Use{nullptr, -1, this});
    if (output_->graph() != this) TouchOwner(output_);
  }
  output_ = node;
  node->AddUse(Use{nullptr, -1, this});
  if (node->graph() != this) TouchOwner(node);
  Touch();
}

CNode* FuncGraph::NewCNode(absl::Span<AnfNode* const> inputs) { return NewCNode(inputs, {}); }

CNode* FuncGraph::NewCNode(AnfNode* callee, absl::Span<AnfNode* const> args) {
  return NewCNode(absl::Span<AnfNode* const>(&callee, 1), args);
}

CNode* FuncGraph::NewCNode(absl::Span<AnfNode* const> head, absl::Span<AnfNode* const> tail) {
  std::unique_ptr<CNode> c(new CNode(this, module_->NewNodeId(), head, tail));
  CNode* raw = c.get();
  nodes_.push_back(std::move(c));
  // Nodes of other graphs gain a use from here (they may become free variables).
  for (AnfNode* in : raw->inputs()) {
    if (in->graph() != this) TouchOwner(in);
  }
  Touch();
  return raw;
}

ValueNode* FuncGraph::NewValueNode(Value v) {
  auto n = std::make_unique<ValueNode>(this, module_->NewNodeId(), std::move(v));
  ValueNode* raw = n.get();
  raw->set_abstract(AbstractOfValue(raw->value()));
  const Value& value = raw->value();
  if (value.is_graph()) {
    value.graph()->referrers_.push_back(raw);
  } else if (value.is_sequence()) {
    (void)ForEachLeaf(value, [](const Value& leaf, absl::Span<const size_t>) {
      if (leaf.is_graph()) ++leaf.graph()->tuple_referrers_;
      return absl::OkStatus();
    });
  }
  nodes_.push_back(std::move(n));
  return raw;
}

void FuncGraph::ForgetReferrer(const ValueNode* v) {
  const Value& value = v->value();
  if (value.is_graph()) {
    std::vector<ValueNode*>& r = value.graph()->referrers_;
    auto it = std::find(r.begin(), r.end(), v);
    if (it != r.end()) {
      *it = r.back();
      r.pop_back();
    }
  } else if (value.is_sequence()) {
    (void)ForEachLeaf(value, [](const Value& leaf, absl::Span<const size_t>) {
      if (leaf.is_graph()) --leaf.graph()->tuple_referrers_;
      return absl::OkStatus();
    });
  }
}

AnfNode* FuncGraph::MoveBodyTo(FuncGraph* target, const std::vector<FuncGraph*>& children) {
  std::vector<std::unique_ptr<AnfNode>> keep;
  for (auto& n : nodes_) {
    if (n->is_parameter()) {
      keep.push_back(std::move(n));
      continue;
    }
    n->graph_ = target;
    target->nodes_.push_back(std::move(n));
  }
  nodes_ = std::move(keep);
  prim_nodes_.clear();  // its constants belong to `target` now
  for (FuncGraph* c : children) c->set_parent(target);
  AnfNode* out = output_;
  if (out != nullptr) {
    out->RemoveUse(Use{nullptr, -1, this});
    output_ = nullptr;
  }
  target->Touch();
  Touch();
  return out;
}

ValueNode* FuncGraph::PrimitiveNode(const PrimitivePtr& p) {
  std::vector<ValueNode*>& bucket = prim_nodes_[{&p->def(), AttrMapHash(p->attrs())}];
  for (ValueNode* v : bucket) {
    if (PrimitivesEqual(*v->value().primitive(), *p)) return v;
  }
  ValueNode* v = NewValueNode(Value::Prim(p));
  bucket.push_back(v);
  return v;
}

void FuncGraph::set_custom_bprop(FuncGraph* g) {
  custom_bprop_ = g;
  Touch();
}

}  // namespace kgrad
