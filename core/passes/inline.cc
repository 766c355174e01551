#include "core/passes/inline.h"

#include <deque>
#include <functional>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/cloner.h"
#include "core/manager.h"
#include "core/passes/rewrite.h"
#include "core/scalar_arith.h"

namespace kgrad {
namespace {

// Graphs on a cycle of references (Tarjan's SCC, iterative).
absl::flat_hash_set<FuncGraph*> RecursiveGraphs(Manager& m, const std::vector<FuncGraph*>& graphs) {
  absl::flat_hash_map<FuncGraph*, int> index, low;
  absl::flat_hash_set<FuncGraph*> on_stack, recursive;
  std::vector<FuncGraph*> stack;
  int counter = 0;
  for (FuncGraph* root : graphs) {
    if (index.contains(root)) continue;
    std::vector<std::pair<FuncGraph*, size_t>> work{{root, 0}};
    index[root] = low[root] = counter++;
    stack.push_back(root);
    on_stack.insert(root);
    while (!work.empty()) {
      auto& [g, next] = work.back();
      const std::vector<FuncGraph*>& succ = m.Info(g).used_graphs;
      if (next < succ.size()) {
        FuncGraph* h = succ[next++];
        if (h == g) recursive.insert(g);
        if (!index.contains(h)) {
          index[h] = low[h] = counter++;
          stack.push_back(h);
          on_stack.insert(h);
          work.emplace_back(h, 0);
        } else if (on_stack.contains(h)) {
          low[g] = std::min(low[g], index[h]);
        }
        continue;
      }
      FuncGraph* done = g;
      work.pop_back();
      if (!work.empty()) low[work.back().first] = std::min(low[work.back().first], low[done]);
      if (low[done] == index[done]) {
        std::vector<FuncGraph*> scc;
        FuncGraph* x;
        do {
          x = stack.back();
          stack.pop_back();
          on_stack.erase(x);
          scc.push_back(x);
        } while (x != done);
        if (scc.size() > 1) recursive.insert(scc.begin(), scc.end());
      }
    }
  }
  return recursive;
}

// Evaluates a scalar expression made of constants, bound parameters and scalar
// primitives; nullopt when it depends on anything else. Memoised per node (a
// shared subexpression is evaluated once, not once per path) and bounded in depth.
class ScalarEvaluator {
 public:
  explicit ScalarEvaluator(const absl::flat_hash_map<const AnfNode*, Scalar>& bound)
      : bound_(bound) {}

  std::optional<Scalar> Eval(const AnfNode* n, int depth = 0) {
    if (depth > 32) return std::nullopt;
    if (const Value* v = ConstantOf(n)) {
      if (v->is_scalar()) return v->scalar();
      return std::nullopt;
    }
    auto it = bound_.find(n);
    if (it != bound_.end()) return it->second;
    const CNode* c = n->AsCNode();
    if (c == nullptr || c->primitive() == nullptr || c->num_args() != 2 ||
        !IsScalarBinaryOp(c->primitive()->id())) {
      return std::nullopt;
    }
    auto memo = memo_.find(n);
    if (memo != memo_.end()) return memo->second;
    std::optional<Scalar> a = Eval(c->arg(0), depth + 1);
    std::optional<Scalar> b = a.has_value() ? Eval(c->arg(1), depth + 1) : std::nullopt;
    std::optional<Scalar> out;
    if (a && b) {
      absl::StatusOr<Scalar> r = ApplyScalarOp(c->primitive()->id(), *a, *b);
      if (r.ok()) out = *r;
    }
    memo_[n] = out;
    return out;
  }

 private:
  const absl::flat_hash_map<const AnfNode*, Scalar>& bound_;
  absl::flat_hash_map<const AnfNode*, std::optional<Scalar>> memo_;
};

std::optional<Scalar> EvalScalar(const AnfNode* n,
                                 const absl::flat_hash_map<const AnfNode*, Scalar>& bound) {
  return ScalarEvaluator(bound).Eval(n);
}

// A recursive graph (a loop) whose control the constant arguments decide: a
// switch in its body has a condition that evaluates with them. This covers the
// primal shape `switch(cond, @body, @exit)()` and its K-image, where the switch
// result is called and the call's result taken apart.
bool UnrollDecidable(FuncGraph* callee, const std::vector<AnfNode*>& args, const std::vector<CNode*>& order) {
  absl::flat_hash_map<const AnfNode*, Scalar> bound;
  for (size_t i = 0; i < callee->parameters().size(); ++i) {
    const Value* v = ConstantOf(args[i]);
    if (v != nullptr && v->is_scalar()) bound[callee->parameters()[i]] = v->scalar();
  }
  if (bound.empty()) return false;
  for (const CNode* c : order) {
    if (c->IsPrim(PrimId::kSwitch) && EvalScalar(c->arg(0), bound).has_value()) return true;
  }
  return false;
}

AnfNode* Resolved(AnfNode* n, const absl::flat_hash_map<const AnfNode*, AnfNode*>& replaced) {
  for (auto it = replaced.find(n); it != replaced.end(); it = replaced.find(n)) n = it->second;
  return n;
}

}  // namespace

absl::StatusOr<bool> InlinePass::Run(Module& module, FuncGraph* root) {
  Manager& m = module.manager();
  std::vector<FuncGraph*> graphs = passes::Graphs(module, root);
  // Recursion is judged over everything reachable, including graphs we may not change.
  absl::flat_hash_set<FuncGraph*> recursive = RecursiveGraphs(m, m.Reachable({root}));
  std::vector<std::vector<CNode*>> orders;
  for (FuncGraph* g : graphs) orders.push_back(m.Info(g).order);
  // Orders as the sweep starts: Manager queries inside the sweep would recompute
  // its indices after every inlined call.
  absl::flat_hash_map<FuncGraph*, std::vector<CNode*>> start_orders;
  for (FuncGraph* g : m.Reachable({root})) start_orders[g] = m.Info(g).order;
  Inliner inliner(&module);
  Transaction tr(&module);
  // Calls inlined earlier in this sweep stand for their results, (a, b)[i] for
  // its element, and switch on a condition that folds for the chosen branch, so that
  // `K(f)(x)[1](dy)` (the fprop taken apart and its bprop called) inlines both in
  // one sweep, and a loop with a constant trip count unrolls in one sweep.
  absl::flat_hash_map<const AnfNode*, AnfNode*> replaced;
  auto resolve = [&](AnfNode* n) {
    for (int guard = 0; guard < 64; ++guard) {
      auto it = replaced.find(n);
      if (it != replaced.end()) {
        n = it->second;
        continue;
      }
      CNode* c = n->AsCNode();
      if (c == nullptr) break;
      if (c->IsPrim(PrimId::kSwitch)) {
        std::optional<Scalar> cond = EvalScalar(Resolved(c->arg(0), replaced), {});
        if (!cond.has_value()) break;
        n = c->arg(cond->AsBool() ? 1 : 2);
        continue;
      }
      if (!c->IsPrim(PrimId::kTupleGetItem)) break;
      std::optional<int64_t> i = passes::ConstInt(c->arg(1));
      CNode* tuple = passes::Match(Resolved(c->arg(0), replaced), PrimId::kMakeTuple);
      if (tuple == nullptr || !i.has_value() || *i < 0 || *i >= static_cast<int64_t>(tuple->num_args())) break;
      n = tuple->arg(*i);
    }
    return n;
  };
  struct Site {
    FuncGraph* g;
    CNode* c;
    bool unrolling;  // found inside a body inlined while unrolling
  };
  std::deque<Site> work;
  for (size_t k = 0; k < graphs.size(); ++k) {
    for (CNode* c : orders[k]) work.push_back(Site{graphs[k], c, false});
  }
  // A loop unrolls completely or not at all: a partly unrolled loop is still a
  // loop, only bigger. Its replacements wait in `chain` until the chain of
  // iterations ends; past the budget they are dropped (the copies become garbage).
  std::vector<std::pair<CNode*, AnfNode*>> chain;
  int chain_cost = 0;
  absl::flat_hash_set<FuncGraph*> too_long;  // loops that did not fit
  bool changed = false;
  auto end_chain = [&](bool keep) {
    changed |= keep && !chain.empty();
    for (const auto& [c, r] : chain) {
      if (keep) {
        tr.Replace(c, r);
      } else {
        replaced.erase(c);
      }
    }
    if (!keep) unrolled_ -= chain_cost;
    chain.clear();
    chain_cost = 0;
  };
  FuncGraph* chain_root = nullptr;
  while (!work.empty()) {
    Site site = work.front();
    work.pop_front();
    if (!site.unrolling && chain_root != nullptr) {
      end_chain(true);
      chain_root = nullptr;
    }
    CNode* c = site.c;
    if (c->size() == 0 || replaced.contains(c)) continue;
    FuncGraph* callee = GraphOf(resolve(c->input(0)));
    if (callee == nullptr || callee->custom_bprop() != nullptr) continue;
    if (callee->output() == nullptr || c->num_args() != callee->parameters().size()) continue;
    if (!inliner.Knows(callee)) continue;
    // Scalar arguments that fold become constants (a loop counter stays a constant
    // from one unrolled iteration to the next).
    std::vector<AnfNode*> args;
    for (size_t i = 1; i < c->size(); ++i) {
      AnfNode* a = resolve(c->input(i));
      if (!a->is_value() && a->is_cnode()) {
        if (std::optional<Scalar> v = EvalScalar(a, {})) a = site.g->NewValueNode(Value(*v));
      }
      args.push_back(a);
    }
    bool recursive_callee = recursive.contains(callee);
    auto order_it = start_orders.find(callee);
    if (recursive_callee && (too_long.contains(callee) || order_it == start_orders.end() ||
                             !UnrollDecidable(callee, args, order_it->second))) {
      continue;
    }
    bool unroll = site.unrolling || recursive_callee;
    if (unroll) {
      if (!site.unrolling) chain_root = callee;
      int size = order_it != start_orders.end() ? static_cast<int>(order_it->second.size())
                                                : static_cast<int>(callee->owned_nodes().size());
      if (unrolled_ + size > max_unroll_) {
        // Give the whole loop up: drop its iterations so far and the ones queued.
        end_chain(false);
        while (!work.empty() && work.front().unrolling) work.pop_front();
        too_long.insert(chain_root);
        chain_root = nullptr;
        continue;
      }
      unrolled_ += size;
      chain_cost += size;
    }
    std::vector<CNode*> copies;
    AnfNode* result = inliner.Inline(callee, site.g, args, &copies);
    replaced[c] = result;
    if (unroll) {
      chain.emplace_back(c, result);
    } else {
      tr.Replace(c, result);
      changed = true;
    }
    // The inlined body's own calls (the next iteration of a loop, the bprop of the
    // next step of an unrolled chain) are inlined right away, in this sweep.
    for (auto it = copies.rbegin(); it != copies.rend(); ++it) {
      if ((*it)->primitive() == nullptr) work.push_front(Site{site.g, *it, unroll});
    }
  }
  end_chain(true);
  tr.Commit();
  return changed;
}

AnfNode* PartialEliminatePass::Rewrite(CNode* c) {
  if (c->size() == 0) return nullptr;
  CNode* p = passes::Match(In(c, 0), PrimId::kPartial);
  if (p == nullptr) return nullptr;
  // partial(f, a...)(b...) => f(a..., b...)
  std::vector<AnfNode*> inputs;
  for (size_t i = 1; i < p->size(); ++i) inputs.push_back(In(p, i));
  for (size_t i = 1; i < c->size(); ++i) inputs.push_back(In(c, i));
  CNode* direct = c->graph()->NewCNode(std::move(inputs));
  direct->set_abstract(c->abstract());
  return direct;
}

}  // namespace kgrad
