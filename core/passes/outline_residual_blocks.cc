#include "core/passes/outline_residual_blocks.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/manager.h"

namespace kgrad {
namespace {

using NodeSet = absl::flat_hash_set<const AnfNode*>;

// The nodes a depth-first walk from `n` reaches (not `n` itself): from each node
// x it reached, next(x, reach) calls reach(y) for the neighbours y it steps to.
template <typename Next>
NodeSet Reached(AnfNode* n, Next&& next) {
  NodeSet seen;
  std::vector<AnfNode*> work = {n};
  auto reach = [&](AnfNode* y) {
    if (seen.insert(y).second) work.push_back(y);
  };
  while (!work.empty()) {
    AnfNode* x = work.back();
    work.pop_back();
    next(x, reach);
  }
  return seen;
}

// Applications and parameters of `g` that `n` depends on, `n` included.
NodeSet Ancestors(const FuncGraph* g, AnfNode* n) {
  auto inside = [g](const AnfNode* x) { return x->graph() == g && !x->is_value(); };
  if (!inside(n)) return {};
  NodeSet seen = Reached(n, [&](AnfNode* x, auto& reach) {
    if (!x->is_cnode()) return;
    for (size_t i = 0; i < x->AsCNode()->num_args(); ++i) {
      if (inside(x->AsCNode()->arg(i))) reach(x->AsCNode()->arg(i));
    }
  });
  seen.insert(n);
  return seen;
}

// Applications of `g` that depend on `n`.
NodeSet Descendants(const FuncGraph* g, AnfNode* n) {
  return Reached(n, [g](AnfNode* x, auto& reach) {
    for (const Use& u : x->uses()) {
      // (A graph's output is a use without a user.)
      if (u.user != nullptr && u.user->graph() == g) reach(u.user);
    }
  });
}

// A contraction (PrimitiveDef::dot): what makes a block a layer.
bool IsDot(const CNode* c) { return c->primitive() != nullptr && c->primitive()->def().dot; }

struct Block {
  AnfNode* input = nullptr;
  std::vector<CNode*> nodes;  // in run order, the add last
};

// The block ending at `add`, if it is one (see the header).
bool FindBlock(FuncGraph* g, CNode* add, const std::vector<CNode*>& order,
               const absl::flat_hash_map<const AnfNode*, int>& pos, Block* block) {
  if (add->num_args() != 2) return false;
  NodeSet a = Ancestors(g, add->arg(0));
  NodeSet b = Ancestors(g, add->arg(1));
  AnfNode* x = nullptr;
  int best = -2;
  for (const AnfNode* n : a) {
    if (!b.contains(n)) continue;
    auto it = pos.find(n);
    int p = it == pos.end() ? -1 : it->second;  // parameters come first
    if (p > best) {
      best = p;
      x = const_cast<AnfNode*>(n);
    }
  }
  if (x == nullptr) return false;
  NodeSet after_x = Descendants(g, x);
  NodeSet inside;
  bool has_dot = false;
  for (CNode* c : order) {
    if (c == add || (!a.contains(c) && !b.contains(c)) || !after_x.contains(c)) continue;
    inside.insert(c);
    has_dot |= IsDot(c);
  }
  if (!has_dot) return false;
  for (const AnfNode* n : inside) {
    if (n == g->output()) return false;
    for (const Use& u : n->uses()) {
      if (u.user == nullptr || (u.user != add && !inside.contains(u.user))) return false;
    }
  }
  block->input = x;
  block->nodes.clear();
  for (CNode* c : order) {
    if (inside.contains(c)) block->nodes.push_back(c);
  }
  block->nodes.push_back(add);
  return true;
}

// Copies `block` into a new graph and replaces its add by a call of it.
FuncGraph* Outline(Module& m, FuncGraph* g, const Block& block, int index, RematPolicy policy) {
  FuncGraph* h = m.NewGraph(absl::StrCat("residual_block_", index));  // made unique
  absl::flat_hash_map<const AnfNode*, AnfNode*> copy;
  std::vector<AnfNode*> call_args;
  auto param_for = [&](AnfNode* outside) {
    Parameter* p = h->AddParameter(outside->DebugName(), nullptr);
    p->set_abstract(outside->abstract());
    copy[outside] = p;
    call_args.push_back(outside);
    return p;
  };
  param_for(block.input);
  for (CNode* c : block.nodes) {
    std::vector<AnfNode*> inputs;
    for (AnfNode* in : c->inputs()) {
      auto it = copy.find(in);
      if (it != copy.end()) {
        inputs.push_back(it->second);
      } else if (in->is_value()) {
        inputs.push_back(h->NewValueNode(static_cast<ValueNode*>(in)->value()));
      } else if (in->is_parameter() && in->AsParameter()->is_weight()) {
        inputs.push_back(in);
      } else {
        inputs.push_back(param_for(in));
      }
    }
    CNode* n = h->NewCNode(std::move(inputs));
    n->set_abstract(c->abstract());
    copy[c] = n;
  }
  h->set_output(copy.at(block.nodes.back()));
  h->set_remat(policy);
  std::vector<AnfNode*> call = {g->NewValueNode(Value::Graph(h))};
  call.insert(call.end(), call_args.begin(), call_args.end());
  CNode* site = g->NewCNode(std::move(call));
  site->set_abstract(block.nodes.back()->abstract());
  Transaction tr(&m);
  tr.Replace(block.nodes.back(), site);
  tr.Commit();
  return h;
}

bool MakesClosures(FuncGraph* g, const std::vector<CNode*>& order) {
  for (const CNode* c : order) {
    for (const AnfNode* in : c->inputs()) {
      const FuncGraph* h = GraphOf(in);
      if (h != nullptr && h->parent() != nullptr) return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<std::vector<FuncGraph*>> OutlineResidualBlocks(Module& module, FuncGraph* g,
                                                              RematPolicy policy) {
  if (g == nullptr || g->module() != &module) {
    return absl::InvalidArgumentError("the graph to outline must belong to the module");
  }
  std::vector<FuncGraph*> blocks;
  if (MakesClosures(g, module.manager().Info(g).order)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "graph '", g->name(), "' creates closures; residual blocks are outlined only in flat graphs"));
  }
  // One block per round: outlining changes the order and the users.
  for (bool found = true; found;) {
    found = false;
    std::vector<CNode*> order = module.manager().Info(g).order;
    absl::flat_hash_map<const AnfNode*, int> pos;
    for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<int>(i);
    for (CNode* c : order) {
      Block block;
      if (!c->IsPrim(PrimId::kAdd) || !FindBlock(g, c, order, pos, &block)) continue;
      blocks.push_back(Outline(module, g, block, static_cast<int>(blocks.size()), policy));
      found = true;
      break;
    }
  }
  return blocks;
}

}  // namespace kgrad
