#include "backends/run_order.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "ops/collective.h"

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

namespace {

bool AppliesCollective(const CNode* c) {
  return c->primitive() != nullptr && ops::IsCollective(c->primitive()->id());
}

// 0: a collective or what only feeds collectives; 2: what reads a collective's
// result (directly or not); 1: the rest.
std::vector<int> CollectivePriorities(const std::vector<CNode*>& order,
                                      const absl::flat_hash_map<const CNode*, int>& index,
                                      const std::vector<std::vector<int>>& users) {
  const int n = static_cast<int>(order.size());
  std::vector<bool> downstream(n, false), feeder(n, false);
  for (int i = 0; i < n; ++i) {
    for (const AnfNode* in : order[i]->inputs()) {
      auto it = in->is_cnode() ? index.find(in->AsCNode()) : index.end();
      if (it != index.end() && (downstream[it->second] || AppliesCollective(order[it->second]))) {
        downstream[i] = true;
      }
    }
  }
  for (int i = n - 1; i >= 0; --i) {
    feeder[i] = !users[i].empty() && std::all_of(users[i].begin(), users[i].end(), [&](int u) {
      return feeder[u] || AppliesCollective(order[u]);
    });
  }
  std::vector<int> priority(n, 1);
  for (int i = 0; i < n; ++i) {
    if (AppliesCollective(order[i]) || feeder[i]) {
      priority[i] = 0;
    } else if (downstream[i]) {
      priority[i] = 2;
    }
  }
  return priority;
}

}  // namespace

std::vector<CNode*> CollectivesEarly(const std::vector<CNode*>& order) {
  if (std::none_of(order.begin(), order.end(), AppliesCollective)) return order;
  const int n = static_cast<int>(order.size());
  absl::flat_hash_map<const CNode*, int> index;
  for (int i = 0; i < n; ++i) index[order[i]] = i;
  std::vector<std::vector<int>> users(n);
  std::vector<int> pending(n, 0);
  for (int i = 0; i < n; ++i) {
    for (const AnfNode* in : order[i]->inputs()) {
      auto it = in->is_cnode() ? index.find(in->AsCNode()) : index.end();
      if (it == index.end()) continue;
      users[it->second].push_back(i);
      ++pending[i];
    }
  }
  const std::vector<int> priority = CollectivePriorities(order, index, users);
  // Ready applications by (priority, position in `order`).
  std::set<std::pair<int, int>> ready;
  for (int i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.insert({priority[i], i});
  }
  std::vector<CNode*> out;
  out.reserve(n);
  while (!ready.empty()) {
    const int i = ready.begin()->second;
    ready.erase(ready.begin());
    out.push_back(order[i]);
    for (int u : users[i]) {
      if (--pending[u] == 0) ready.insert({priority[u], u});
    }
  }
  return out;
}

}  // namespace kgrad
