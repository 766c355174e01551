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

// One sweep of the inline pass over the graphs a root reaches; all its state
// lives here, for the length of one Run.
class InlineSweep {
 public:
  InlineSweep(Module& module, FuncGraph* root, UnrollBudget* budget)
      : module_(module), root_(root), budget_(budget), inliner_(&module, &start_orders_), tr_(&module) {}

  // 1. Recursion and orders as the sweep starts; 2. every application queued;
  // 3. each one inlined when its callee is known (loops unroll as whole chains);
  // 4. the replacements committed.
  bool Run() {
    Manager& m = module_.manager();
    std::vector<FuncGraph*> graphs = passes::Graphs(module_, root_);
    // Recursion is judged over everything reachable, including graphs we may not change.
    recursive_ = RecursiveGraphs(m, m.Reachable({root_}));
    // Orders as the sweep starts: Manager queries inside the sweep would recompute
    // its indices after every inlined call.
    for (FuncGraph* g : m.Reachable({root_})) start_orders_[g] = m.Info(g).order;
    for (FuncGraph* g : graphs) {
      for (CNode* c : start_orders_[g]) work_.push_back(Site{g, c, false});
    }
    while (!work_.empty()) {
      Site site = work_.front();
      work_.pop_front();
      site.g = site.c->graph();  // an application moved by a transplant is its new graph's
      if (!site.unrolling && chain_root_ != nullptr) {
        EndChain(true);
        chain_root_ = nullptr;
      }
      Visit(site);
    }
    EndChain(true);
    tr_.Commit();
    return changed_;
  }
  bool incomplete() const { return inliner_.copied_calls(); }

 private:
  struct Site {
    FuncGraph* g;
    CNode* c;
    bool unrolling;  // found inside a body inlined while unrolling
  };

  // Calls inlined earlier in this sweep stand for their results, (a, b)[i] for
  // its element, and switch on a condition that folds for the chosen branch, so that
  // `K(f)(x)[1](dy)` (the fprop taken apart and its bprop called) inlines both in
  // one sweep, and a loop with a constant trip count unrolls in one sweep.
  AnfNode* Resolve(AnfNode* n) const {
    for (int guard = 0; guard < 64; ++guard) {
      auto it = replaced_.find(n);
      if (it != replaced_.end()) {
        n = it->second;
        continue;
      }
      CNode* c = n->AsCNode();
      if (c == nullptr) break;
      if (c->IsPrim(PrimId::kSwitch)) {
        std::optional<Scalar> cond = EvalScalar(Resolved(c->arg(0), replaced_), {});
        if (!cond.has_value()) break;
        n = c->arg(cond->AsBool() ? 1 : 2);
        continue;
      }
      if (!c->IsPrim(PrimId::kTupleGetItem)) break;
      std::optional<int64_t> i = passes::ConstInt(c->arg(1));
      CNode* tuple = passes::Match(Resolved(c->arg(0), replaced_), PrimId::kMakeTuple);
      if (tuple == nullptr || !i.has_value() || *i < 0 ||
          *i >= static_cast<int64_t>(tuple->num_args())) {
        break;
      }
      n = tuple->arg(*i);
    }
    return n;
  }

  // The call's arguments, resolved; scalar arguments that fold become constants (a
  // loop counter stays a constant from one unrolled iteration to the next).
  std::vector<AnfNode*> BindArgs(const Site& site) const {
    std::vector<AnfNode*> args;
    for (size_t i = 1; i < site.c->size(); ++i) {
      AnfNode* a = Resolve(site.c->input(i));
      if (!a->is_value() && a->is_cnode()) {
        if (std::optional<Scalar> v = EvalScalar(a, {})) a = site.g->NewValueNode(Value(*v));
      }
      args.push_back(a);
    }
    return args;
  }

  // The graph `site` calls when it may be inlined there, else nullptr.
  FuncGraph* Callee(const Site& site) const {
    CNode* c = site.c;
    if (c->size() == 0 || replaced_.contains(c)) return nullptr;
    FuncGraph* callee = GraphOf(Resolve(c->input(0)));
    if (callee == nullptr || callee->custom_bprop() != nullptr) return nullptr;
    if (callee->output() == nullptr || c->num_args() != callee->parameters().size()) {
      return nullptr;
    }
    return inliner_.Knows(callee) ? callee : nullptr;
  }

  void Visit(const Site& site) {
    FuncGraph* callee = Callee(site);
    if (callee == nullptr) return;
    std::vector<AnfNode*> args = BindArgs(site);
    bool recursive_callee = recursive_.contains(callee);
    auto order_it = start_orders_.find(callee);
    if (recursive_callee && (too_long_.contains(callee) || order_it == start_orders_.end() ||
                             !UnrollDecidable(callee, args, order_it->second))) {
      return;
    }
    bool unroll = site.unrolling || recursive_callee;
    if (unroll) {
      if (!site.unrolling) chain_root_ = callee;
      int size = order_it != start_orders_.end() ? static_cast<int>(order_it->second.size())
                                                 : static_cast<int>(callee->owned_nodes().size());
      if (!Charge(size)) return;
    }
    std::vector<CNode*> copies;
    AnfNode* result = nullptr;
    if (!unroll && CalledOnlyHere(callee, site)) {
      // The only call: the body moves here instead of being copied; its
      // parameters stand for the arguments.
      result = inliner_.Transplant(callee, site.g, &copies);
      for (size_t i = 0; i < args.size(); ++i) {
        replaced_[callee->parameters()[i]] = args[i];
        tr_.Replace(callee->parameters()[i], args[i]);
      }
      result = Resolved(result, replaced_);
    } else {
      result = inliner_.Inline(callee, site.g, args, &copies);
    }
    replaced_[site.c] = result;
    sources_[result].push_back(site.c);
    if (unroll) {
      chain_.emplace_back(site.c, result);
    } else {
      tr_.Replace(site.c, result);
      changed_ = true;
    }
    // The inlined body's own calls (the next iteration of a loop, the bprop of the
    // next step of an unrolled chain) are inlined right away, in this sweep.
    for (auto it = copies.rbegin(); it != copies.rend(); ++it) {
      if ((*it)->primitive() == nullptr) work_.push_front(Site{site.g, *it, unroll});
    }
  }

  // Whether `site` is the only place the callee can be called from: it is not a
  // graph the caller holds, it is named by one constant and no constant tuple,
  // and that constant's value reaches no application but this one, as its callee.
  bool CalledOnlyHere(FuncGraph* callee, const Site& site) const {
    if (callee == root_ || callee->is_public() || !passes::MayModify(callee, root_) ||
        site.g->IsSelfOrAncestor(callee)) {
      return false;
    }
    if (callee->tuple_referrers() != 0 || callee->referrers().size() != 1) return false;
    return FlowsOnlyTo(callee->referrers()[0], site.c);
  }

  // Follows the value of `v` forward: into tuples (make_tuple) and out of them
  // (tuple_getitem with a constant index), and from a call inlined in this sweep
  // to what reads its result. True when the only application reached is `site`,
  // reading the value as its callee; anything else (a graph output, another call,
  // a primitive) may keep or call it elsewhere.
  bool FlowsOnlyTo(AnfNode* v, const CNode* site) const {
    struct Item {
      AnfNode* node;
      std::vector<int64_t> path;  // tuple indices from `node` down to the value
    };
    std::vector<Item> work{{v, {}}};
    int calls = 0;
    for (int steps = 0; !work.empty(); ++steps) {
      if (steps > 256) return false;
      Item item = std::move(work.back());
      work.pop_back();
      std::vector<const NodeUses*> use_lists{&item.node->uses()};
      auto src = sources_.find(item.node);
      if (src != sources_.end()) {
        for (const CNode* x : src->second) use_lists.push_back(&x->uses());
      }
      for (const NodeUses* uses : use_lists) {
        for (const Use& u : *uses) {
          CNode* user = u.user;
          if (user == nullptr) return false;
          if (user == site && u.index == 0 && item.path.empty()) {
            ++calls;
          } else if (user->IsPrim(PrimId::kMakeTuple) && u.index >= 1) {
            std::vector<int64_t> path{u.index - 1};
            path.insert(path.end(), item.path.begin(), item.path.end());
            work.push_back(Item{user, std::move(path)});
          } else if (user->IsPrim(PrimId::kTupleGetItem) && u.index == 1 && !item.path.empty()) {
            std::optional<int64_t> j = passes::ConstInt(user->input(2));
            if (!j.has_value() || *j < 0) return false;
            if (*j != item.path[0]) continue;  // another element
            work.push_back(Item{user, std::vector<int64_t>(item.path.begin() + 1, item.path.end())});
          } else {
            return false;
          }
        }
      }
    }
    return calls == 1;
  }

  // Takes `size` nodes from the budget for the current chain; when they do not
  // fit, the whole loop is given up: its iterations so far and those queued.
  bool Charge(int size) {
    if (budget_->used + size > budget_->max_nodes) {
      EndChain(false);
      while (!work_.empty() && work_.front().unrolling) work_.pop_front();
      too_long_.insert(chain_root_);
      chain_root_ = nullptr;
      return false;
    }
    budget_->used += size;
    chain_cost_ += size;
    return true;
  }

  // A loop unrolls completely or not at all: a partly unrolled loop is still a
  // loop, only bigger. Its replacements wait in `chain_` until the chain of
  // iterations ends; past the budget they are dropped (the copies become garbage).
  void EndChain(bool keep) {
    changed_ |= keep && !chain_.empty();
    for (const auto& [c, r] : chain_) {
      if (keep) {
        tr_.Replace(c, r);
      } else {
        replaced_.erase(c);
      }
    }
    if (!keep) budget_->used -= chain_cost_;
    chain_.clear();
    chain_cost_ = 0;
  }

  Module& module_;
  FuncGraph* root_;
  UnrollBudget* budget_;
  // Before inliner_, which keeps a pointer to it: members are constructed in
  // this order.
  Inliner::Orders start_orders_;
  Inliner inliner_;
  Transaction tr_;
  absl::flat_hash_set<FuncGraph*> recursive_;
  absl::flat_hash_map<const AnfNode*, AnfNode*> replaced_;
  // The calls inlined in this sweep, by the node standing for their result.
  absl::flat_hash_map<const AnfNode*, std::vector<const CNode*>> sources_;
  std::deque<Site> work_;
  std::vector<std::pair<CNode*, AnfNode*>> chain_;
  int chain_cost_ = 0;
  absl::flat_hash_set<FuncGraph*> too_long_;  // loops that did not fit
  FuncGraph* chain_root_ = nullptr;
  bool changed_ = false;
};

}  // namespace

absl::StatusOr<bool> InlinePass::Run(Module& module, FuncGraph* root) {
  UnrollBudget own{max_unroll_, 0};
  InlineSweep sweep(module, root, shared_ != nullptr ? shared_ : &own);
  bool changed = sweep.Run();
  incomplete_ = sweep.incomplete();
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
