#include "backends/run_order.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/abstract.h"
#include "core/dtype.h"
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

namespace {

// Bytes of a tensor of static shape, else -1.
int64_t TensorBytes(const AnfNode* n) {
  const AbstractTensor* t = AsTensor(n->abstract());
  if (t == nullptr || !t->shape_known()) return -1;
  int64_t elements = 1;
  for (int64_t d : t->shape()) elements *= d;
  return elements * static_cast<int64_t>(DTypeSize(t->dtype()));
}

// An application whose output is at most a quarter of its largest input (a
// sum_to, a reduction, a weight gradient's GEMM), or a remat_barrier: running it
// early holds only its small output longer, and may free the large input sooner.
bool Reduces(const CNode* c) {
  // remat_barrier(x, t) is x once t exists: early, it no longer holds t (a
  // layer's activation gradient, when t is one) until a recomputation reads it.
  if (c->IsPrim(PrimId::kRematBarrier)) return true;
  const int64_t out = TensorBytes(c);
  if (out < 0) return false;
  int64_t largest = 0;
  for (size_t i = 1; i < c->size(); ++i) largest = std::max(largest, TensorBytes(c->input(i)));
  return 4 * out <= largest;
}

// `order` with each reducing application moved to right after the last of its
// inputs (a stable sort on (major, minor) keys: an application keeps its own
// position, a reduction takes its latest input's major key and one more minor
// step, so every application stays after its inputs). A depth-first order
// reaches the sum that accumulates a weight's gradient over the layers sharing
// it only after the deepest layer, and every sum_to feeding it kept its
// layer's activation gradient alive until then (PyTorch's TransformerEncoder
// export, whose layers share initialisers: three f32[8,128,1024] held at the
// peak).
std::vector<CNode*> ReductionsEarly(std::vector<CNode*> order) {
  // Early: the reductions, and the reshapes that only feed them (the rows of a
  // weight gradient's GEMM: matmul's bprop flattens the activation gradient).
  absl::flat_hash_set<const CNode*> early;
  for (size_t p = order.size(); p-- > 0;) {
    CNode* c = order[p];
    bool feeds_early = c->IsPrim(PrimId::kReshape) && !c->uses().empty();
    for (const Use& u : c->uses()) feeds_early &= u.user != nullptr && early.contains(u.user);
    if (Reduces(c) || feeds_early) early.insert(c);
  }
  struct Key {
    size_t major, minor, position;
  };
  absl::flat_hash_map<const CNode*, Key> key;
  std::vector<std::pair<Key, CNode*>> keyed;
  keyed.reserve(order.size());
  for (size_t p = 0; p < order.size(); ++p) {
    CNode* c = order[p];
    Key k{p, 0, p};
    if (early.contains(c)) {
      k = {0, 0, p};
      for (const AnfNode* in : c->inputs()) {
        auto it = in->is_cnode() ? key.find(in->AsCNode()) : key.end();
        if (it == key.end()) continue;
        const Key& ik = it->second;
        if (ik.major > k.major || (ik.major == k.major && ik.minor + 1 > k.minor)) {
          k.major = ik.major;
          k.minor = ik.minor + 1;
        }
      }
    }
    key[c] = k;
    keyed.push_back({k, c});
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    if (a.first.major != b.first.major) return a.first.major < b.first.major;
    if (a.first.minor != b.first.minor) return a.first.minor < b.first.minor;
    return a.first.position < b.first.position;
  });
  for (size_t p = 0; p < order.size(); ++p) order[p] = keyed[p].second;
  return order;
}

}  // namespace

std::vector<CNode*> RunOrder(FuncGraph* g, const GraphInfo& info) {
  if (MakesClosures(g, info)) return info.order;
  // Longest path from the graph's inputs, in applications; but a tuple is as
  // shallow as its shallowest element. A value_and_grad step returns (value,
  // (dx, (dW...))): by its longest path the tuple of weight gradients is deeper
  // than dx, which was visited first and computed the whole backward chain with
  // every dW_k (and its layer's activation and dout) left for the end (torchvision
  // resnet18, batch 8: 194 MiB at the peak, its first dW; 2026-12-07).
  absl::flat_hash_map<const CNode*, int> height;
  for (const CNode* c : info.order) {
    const bool tuple = c->IsPrim(PrimId::kMakeTuple);
    int h = 0, shallowest = -1;
    for (const AnfNode* in : c->inputs()) {
      auto it = in->is_cnode() ? height.find(in->AsCNode()) : height.end();
      if (it == height.end()) continue;
      h = std::max(h, it->second + 1);
      if (shallowest < 0 || it->second < shallowest) shallowest = it->second;
    }
    height[c] = tuple && shallowest >= 0 ? shallowest : h;
  }
  // Depth-first from the output (then from anything else in info.order), the
  // shallower inputs first (`height` only orders the visits); an explicit stack, as graphs may be long chains.
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
  return ReductionsEarly(std::move(out));
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
