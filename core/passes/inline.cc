#include "core/passes/inline.h"

#include <functional>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/cloner.h"
#include "core/manager.h"
#include "core/passes/rewrite.h"

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
// primitives; nullopt when it depends on anything else.
std::optional<Scalar> EvalScalar(const AnfNode* n, const absl::flat_hash_map<const AnfNode*, Scalar>& bound,
                                 int depth = 0) {
  if (depth > 32) return std::nullopt;
  if (const Value* v = ConstantOf(n)) {
    if (v->is_scalar()) return v->scalar();
    return std::nullopt;
  }
  auto it = bound.find(n);
  if (it != bound.end()) return it->second;
  const CNode* c = n->AsCNode();
  if (c == nullptr || c->primitive() == nullptr || c->num_args() != 2) return std::nullopt;
  std::optional<Scalar> a = EvalScalar(c->arg(0), bound, depth + 1);
  std::optional<Scalar> b = EvalScalar(c->arg(1), bound, depth + 1);
  if (!a || !b) return std::nullopt;
  double x = a->AsDouble(), y = b->AsDouble();
  bool f = a->is_float() || b->is_float();
  switch (c->primitive()->id()) {
    case PrimId::kScalarAdd: return f ? Scalar::Float(x + y) : Scalar::Int(a->AsInt() + b->AsInt());
    case PrimId::kScalarSub: return f ? Scalar::Float(x - y) : Scalar::Int(a->AsInt() - b->AsInt());
    case PrimId::kScalarMul: return f ? Scalar::Float(x * y) : Scalar::Int(a->AsInt() * b->AsInt());
    case PrimId::kScalarLt: return Scalar::Bool(x < y);
    case PrimId::kScalarLe: return Scalar::Bool(x <= y);
    case PrimId::kScalarGt: return Scalar::Bool(x > y);
    case PrimId::kScalarGe: return Scalar::Bool(x >= y);
    case PrimId::kScalarEq: return Scalar::Bool(x == y);
    case PrimId::kScalarNe: return Scalar::Bool(x != y);
    default: return std::nullopt;
  }
}

// A recursive graph (a loop) whose control the constant arguments decide: a
// switch in its body has a condition that evaluates with them. This covers the
// primal shape `switch(cond, @body, @exit)()` and its K-image, where the switch
// result is called and the call's result taken apart.
bool UnrollDecidable(FuncGraph* callee, const CNode* call, Manager& m) {
  absl::flat_hash_map<const AnfNode*, Scalar> bound;
  for (size_t i = 0; i < callee->parameters().size(); ++i) {
    const Value* v = ConstantOf(call->arg(i));
    if (v != nullptr && v->is_scalar()) bound[callee->parameters()[i]] = v->scalar();
  }
  if (bound.empty()) return false;
  for (const CNode* c : m.Info(callee).order) {
    if (c->IsPrim(PrimId::kSwitch) && EvalScalar(c->arg(0), bound).has_value()) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<bool> InlinePass::Run(Module& module, FuncGraph* root) {
  Manager& m = module.manager();
  std::vector<FuncGraph*> graphs = passes::Graphs(module, root);
  // Recursion is judged over everything reachable, including graphs we may not change.
  absl::flat_hash_set<FuncGraph*> recursive = RecursiveGraphs(m, m.Reachable({root}));
  std::vector<std::pair<FuncGraph*, CNode*>> sites;
  for (FuncGraph* g : graphs) {
    for (CNode* c : m.Info(g).order) {
      FuncGraph* callee = c->called_graph();
      if (callee == nullptr || callee->custom_bprop() != nullptr) continue;
      if (callee->output() == nullptr || c->num_args() != callee->parameters().size()) continue;
      if (recursive.contains(callee) && !UnrollDecidable(callee, c, m)) continue;
      sites.emplace_back(g, c);
    }
  }
  if (sites.empty()) return false;
  Inliner inliner(&module);
  Transaction tr(&module);
  for (auto [g, c] : sites) {
    FuncGraph* callee = c->called_graph();
    int size = static_cast<int>(m.Info(callee).order.size());
    if (recursive.contains(callee)) {
      // Unrolling spends the budget; beyond it loops stay loops.
      if (unrolled_ + size > max_unroll_) continue;
      unrolled_ += size;
    }
    std::vector<AnfNode*> args(c->inputs().begin() + 1, c->inputs().end());
    tr.Replace(c, inliner.Inline(callee, g, args));
  }
  return tr.Commit();
}

absl::StatusOr<bool> PartialEliminatePass::Run(Module& module, FuncGraph* root) {
  Manager& m = module.manager();
  Transaction tr(&module);
  for (FuncGraph* g : passes::Graphs(module, root)) {
    for (CNode* c : m.Info(g).order) {
      if (c->size() == 0) continue;
      CNode* p = passes::Match(c->input(0), PrimId::kPartial);
      if (p == nullptr) continue;
      // partial(f, a...)(b...) => f(a..., b...)
      std::vector<AnfNode*> inputs(p->inputs().begin() + 1, p->inputs().end());
      inputs.insert(inputs.end(), c->inputs().begin() + 1, c->inputs().end());
      CNode* direct = g->NewCNode(std::move(inputs));
      direct->set_abstract(c->abstract());
      tr.Replace(c, direct);
    }
  }
  return tr.Commit();
}

}  // namespace kgrad
