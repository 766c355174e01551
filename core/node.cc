#include "core/node.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/func_graph.h"
#include "core/module.h"
#include "core/status_macros.h"

namespace kgrad {

Parameter* AnfNode::AsParameter() {
  return is_parameter() ? static_cast<Parameter*>(this) : nullptr;
}
ValueNode* AnfNode::AsValue() { return is_value() ? static_cast<ValueNode*>(this) : nullptr; }
CNode* AnfNode::AsCNode() { return is_cnode() ? static_cast<CNode*>(this) : nullptr; }
const CNode* AnfNode::AsCNode() const {
  return is_cnode() ? static_cast<const CNode*>(this) : nullptr;
}
const ValueNode* AnfNode::AsValue() const {
  return is_value() ? static_cast<const ValueNode*>(this) : nullptr;
}
const Parameter* AnfNode::AsParameter() const {
  return is_parameter() ? static_cast<const Parameter*>(this) : nullptr;
}

const std::string& AnfNode::name() const {
  static const std::string* const kNone = new std::string();
  return name_ != nullptr ? *name_ : *kNone;
}

void AnfNode::set_name(std::string name) {
  if (name.empty()) {
    name_.reset();
  } else {
    name_ = std::make_unique<std::string>(std::move(name));
  }
}

std::string AnfNode::DebugName() const {
  if (name_ != nullptr) return *name_;
  return absl::StrCat("%", id_);
}

std::string AnfNode::Location() const {
  if (graph_ == nullptr) return absl::StrCat("weight '", DebugName(), "'");
  return absl::StrCat("graph '", graph_->name(), "', node '", DebugName(), "'");
}

void AnfNode::RemoveUse(const Use& u) {
  auto it = std::find(uses_.begin(), uses_.end(), u);
  KGRAD_CHECK(it != uses_.end());
  *it = uses_.back();
  uses_.pop_back();
}

CNode::CNode(FuncGraph* graph, uint64_t id, absl::Span<AnfNode* const> head,
             absl::Span<AnfNode* const> tail)
    : AnfNode(NodeKind::kCNode, graph, id) {
  inputs_.reserve(head.size() + tail.size());
  inputs_.insert(inputs_.end(), head.begin(), head.end());
  inputs_.insert(inputs_.end(), tail.begin(), tail.end());
  for (size_t i = 0; i < inputs_.size(); ++i) {
    KGRAD_CHECK(inputs_[i] != nullptr);
    inputs_[i]->AddUse(Use{this, static_cast<int>(i), nullptr});
  }
}

void CNode::set_input(size_t i, AnfNode* node) {
  KGRAD_CHECK(node != nullptr && i < inputs_.size());
  if (inputs_[i] == node) return;
  inputs_[i]->RemoveUse(Use{this, static_cast<int>(i), nullptr});
  if (inputs_[i]->graph() != graph()) FuncGraph::TouchOwner(inputs_[i]);
  inputs_[i] = node;
  node->AddUse(Use{this, static_cast<int>(i), nullptr});
  if (node->graph() != graph()) FuncGraph::TouchOwner(node);
  graph()->Touch();
}

const Primitive* CNode::primitive() const {
  if (inputs_.empty()) return nullptr;
  const Value* v = ConstantOf(inputs_[0]);
  return v != nullptr && v->is_primitive() ? v->primitive().get() : nullptr;
}

bool CNode::IsPrim(PrimId id) const {
  const Primitive* p = primitive();
  return p != nullptr && p->id() == id;
}

FuncGraph* CNode::called_graph() const {
  return inputs_.empty() ? nullptr : GraphOf(inputs_[0]);
}

const Value* ConstantOf(const AnfNode* node) {
  const ValueNode* v = node->AsValue();
  return v == nullptr ? nullptr : &v->value();
}

FuncGraph* GraphOf(const AnfNode* node) {
  const Value* v = ConstantOf(node);
  return v != nullptr && v->is_graph() ? v->graph() : nullptr;
}

}  // namespace kgrad
