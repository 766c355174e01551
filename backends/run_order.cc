#include "backends/run_order.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace kgrad {

bool MakesClosures(const FuncGraph* g, const GraphInfo& info) {
  for (const CNode* c : info.order) {
    for (const AnfNode* in : c->inputs()) {
      const FuncGraph* h = GraphOf(in);
      if (h != nullptr && h != g && h->parent() != nullptr && h->IsSelfOrAncestor(g)) return true;
    }
  }
  return false;
}

std::vector<CNode*> RunOrder(FuncGraph* g, const GraphInfo& info) {
  if (MakesClosures(g, info)) return info.order;
  // Longest path from the graph's inputs, in applications.
  absl::flat_hash_map<const CNode*, int> height;
  for (const CNode* c : info.order) {
    int h = 0;
    for (const AnfNode* in : c->inputs()) {
      auto it = in->is_cnode() ? height.find(in->AsCNode()) : height.end();
      if (it != height.end()) h = std::max(h, it->second + 1);
    }
    height[c] = h;
  }
  // Depth-first from the output (then from anything else in info.order), the
  // shallower inputs first; an explicit stack, as graphs may be long chains.
  struct Item {
    CNode* node;
    std::vector<CNode*> inputs;
    size_t next = 0;
  };
  std::vector<CNode*> out;
  out.reserve(info.order.size());
  absl::flat_hash_set<const CNode*> seen;
  std::vector<Item> stack;
  auto push = [&](CNode* c) {
    seen.insert(c);
    Item item{c, {}};
    for (AnfNode* in : c->inputs()) {
      if (in->is_cnode() && height.contains(in->AsCNode())) item.inputs.push_back(in->AsCNode());
    }
    std::stable_sort(item.inputs.begin(), item.inputs.end(),
                     [&](const CNode* a, const CNode* b) { return height.at(a) < height.at(b); });
    stack.push_back(std::move(item));
  };
  auto walk = [&](CNode* root) {
    if (seen.contains(root)) return;
    push(root);
    while (!stack.empty()) {
      Item& top = stack.back();
      if (top.next < top.inputs.size()) {
        CNode* in = top.inputs[top.next++];
        if (!seen.contains(in)) push(in);
        continue;
      }
      out.push_back(top.node);
      stack.pop_back();
    }
  };
  AnfNode* output = g->output();
  if (output != nullptr && output->is_cnode() && height.contains(output->AsCNode())) {
    walk(output->AsCNode());
  }
  for (CNode* c : info.order) walk(c);
  return out;
}

}  // namespace kgrad
