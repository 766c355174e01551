#include "backends/fusion_planner.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/abstract.h"
#include "ops/elementwise.h"

namespace kgrad {
namespace {

// Static facts, where inference left them: a floating tensor of a known shape
// computed from operands of that shape or of rank 0 (broadcast scalars). Unknown
// types are allowed (the executor checks the operands when it runs and falls
// back to the kernels).
bool Fusable(const CNode* c) {
  const Primitive* prim = c->primitive();
  if (prim == nullptr) return false;
  std::optional<FusedCode> code = FusedCodeOf(prim->id());
  if (!code.has_value() || c->num_args() != (IsBinary(*code) ? 2u : 1u)) return false;
  const AbstractTensor* out = AsTensor(c->abstract());
  if (c->abstract() == nullptr) return true;
  if (out == nullptr || !IsFloating(out->dtype())) return false;
  for (size_t i = 0; i < c->num_args(); ++i) {
    const AbstractTensor* in = AsTensor(c->arg(i)->abstract());
    if (c->arg(i)->abstract() == nullptr) continue;
    if (in == nullptr || in->dtype() != out->dtype()) return false;
    if (in->shape_known() && out->shape_known() && in->shape() != out->shape() && !in->shape().empty()) {
      return false;
    }
  }
  return true;
}

using MinHeap = std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>>;
using MaxHeap = std::priority_queue<size_t>;

}  // namespace

FusionPlan PlanFusion(const std::vector<CNode*>& order, bool may_reorder) {
  FusionPlan plan;
  const size_t n = order.size();
  absl::flat_hash_map<const CNode*, size_t> pos;
  for (size_t i = 0; i < n; ++i) pos[order[i]] = i;
  std::vector<bool> fusable(n);
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) count += (fusable[i] = Fusable(order[i]));
  if (count < 2 || !may_reorder) {
    plan.order = order;
    for (size_t b = 0; b < n;) {
      size_t e = b;
      while (e < n && fusable[e]) ++e;
      if (e - b >= 2) plan.runs.emplace_back(b, e);
      b = std::max(e, b + 1);
    }
    return plan;
  }
  // Dependencies among the applications being ordered.
  std::vector<int> waiting(n, 0);
  std::vector<std::vector<size_t>> users(n);
  for (size_t i = 0; i < n; ++i) {
    absl::flat_hash_set<size_t> seen;
    for (AnfNode* in : order[i]->inputs()) {
      const CNode* c = in->AsCNode();
      auto it = c != nullptr ? pos.find(c) : pos.end();
      if (it == pos.end() || !seen.insert(it->second).second) continue;
      ++waiting[i];
      users[it->second].push_back(i);
    }
  }
  // Applications that depend on no fusable one (a constant seed broadcast for a
  // gradient, say) run before a run opens, so that they do not split it.
  std::vector<bool> independent(n, false);
  for (size_t i = 0; i < n; ++i) {
    bool indep = !fusable[i];
    for (AnfNode* in : order[i]->inputs()) {
      const CNode* c = in->AsCNode();
      auto it = c != nullptr ? pos.find(c) : pos.end();
      if (it != pos.end()) indep = indep && independent[it->second];
    }
    independent[i] = indep;
  }
  MinHeap ready, fusable_ready, independent_ready;
  // Within a run, the latest application of the run order first among those
  // reading the run's values: a Jvp's tangent steps run right after the primal
  // step they read, so few values are live at once.
  MaxHeap run_ready;
  for (size_t i = 0; i < n; ++i) {
    if (waiting[i] != 0) continue;
    ready.push(i);
    if (fusable[i]) fusable_ready.push(i);
    if (independent[i]) independent_ready.push(i);
  }
  std::vector<bool> done(n, false);
  std::vector<int> run_of(n, -1);
  int run = -1;  // the open run (-1: none)
  int runs = 0;
  auto pop = [&](auto& h) -> std::optional<size_t> {
    while (!h.empty() && done[h.top()]) h.pop();
    if (h.empty()) return std::nullopt;
    size_t i = h.top();
    h.pop();
    return i;
  };
  while (plan.order.size() < n) {
    std::optional<size_t> next = run >= 0 ? pop(run_ready) : std::nullopt;
    if (!next.has_value() && run >= 0) next = pop(fusable_ready);
    if (!next.has_value() && run < 0) next = pop(independent_ready);
    if (!next.has_value()) {
      next = pop(ready);
      if (!fusable[*next]) {
        run = -1;
        run_ready = MaxHeap();
      } else if (run < 0) {
        run = runs++;
      }
    }
    const size_t i = *next;
    done[i] = true;
    run_of[i] = run;
    plan.order.push_back(order[i]);
    for (size_t u : users[i]) {
      if (--waiting[u] != 0) continue;
      ready.push(u);
      if (independent[u]) independent_ready.push(u);
      if (!fusable[u]) continue;
      fusable_ready.push(u);
      if (run < 0) continue;
      for (AnfNode* in : order[u]->inputs()) {
        const CNode* c = in->AsCNode();
        auto it = c != nullptr ? pos.find(c) : pos.end();
        if (it != pos.end() && run_of[it->second] == run) {
          run_ready.push(u);
          break;
        }
      }
    }
  }
  // Contiguous applications of one run, two or more.
  for (size_t b = 0; b < n;) {
    const int r = run_of[pos.at(plan.order[b])];
    size_t e = b + 1;
    while (r >= 0 && e < n && run_of[pos.at(plan.order[e])] == r) ++e;
    if (r >= 0 && e - b >= 2) plan.runs.emplace_back(b, e);
    b = e;
  }
  return plan;
}

namespace {

// Indices (in the run) of the products an add absorbs: both of its operands are
// multiplications of the run that nothing else reads.
std::vector<bool> AbsorbedProducts(absl::Span<CNode* const> run, const FusedRunProgram& out,
                                   const std::vector<bool>& is_output) {
  const int32_t k = out.program.num_inputs;
  std::vector<int> reads(run.size(), 0);
  for (const auto& ops : out.node_operands) {
    for (int32_t v : ops) {
      if (v >= k) ++reads[v - k];
    }
  }
  auto single_product = [&](int32_t v) {
    return v >= k && run[v - k]->IsPrim(PrimId::kMul) && reads[v - k] == 1 && !is_output[v - k];
  };
  std::vector<bool> absorbed(run.size(), false);
  for (size_t i = 0; i < run.size(); ++i) {
    const auto& ops = out.node_operands[i];
    if (!run[i]->IsPrim(PrimId::kAdd) || ops[0] == ops[1]) continue;
    if (single_product(ops[0]) && single_product(ops[1])) absorbed[ops[0] - k] = absorbed[ops[1] - k] = true;
  }
  return absorbed;
}

}  // namespace

FusedRunProgram BuildFusedProgram(absl::Span<CNode* const> run) {
  FusedRunProgram out;
  absl::flat_hash_map<const AnfNode*, int32_t> value;
  absl::flat_hash_set<const CNode*> members(run.begin(), run.end());
  // External inputs first (value ids 0..k-1), in first-read order.
  for (CNode* c : run) {
    for (size_t i = 0; i < c->num_args(); ++i) {
      AnfNode* in = c->arg(i);
      const CNode* ic = in->AsCNode();
      if ((ic != nullptr && members.contains(ic)) || value.contains(in)) continue;
      value[in] = static_cast<int32_t>(out.inputs.size());
      out.inputs.push_back(in);
    }
  }
  const int32_t k = static_cast<int32_t>(out.inputs.size());
  out.program.num_inputs = k;
  std::vector<bool> is_output(run.size(), false);
  for (size_t i = 0; i < run.size(); ++i) {
    CNode* c = run[i];
    out.node_operands.push_back({value.at(c->arg(0)), c->num_args() > 1 ? value.at(c->arg(1)) : -1});
    value[c] = k + static_cast<int32_t>(i);
    for (const Use& u : c->uses()) is_output[i] = is_output[i] || u.user == nullptr || !members.contains(u.user);
    if (!is_output[i]) continue;
    out.outputs.push_back(c);
    out.node_outputs.push_back(k + static_cast<int32_t>(i));
  }
  // The program: absorbed products dropped, their adds made kMulAdd.
  const std::vector<bool> absorbed = AbsorbedProducts(run, out, is_output);
  std::vector<int32_t> id(k + run.size(), -1);
  for (int32_t v = 0; v < k; ++v) id[v] = v;
  for (size_t i = 0; i < run.size(); ++i) {
    if (absorbed[i]) continue;
    const auto& ops = out.node_operands[i];
    FusedInstr instr{*FusedCodeOf(run[i]->primitive()->id())};
    instr.attrs = ops::ElementwiseAttrs(*run[i]->primitive());
    const bool mul_add = instr.code == FusedCode::kAdd && ops[0] >= k && absorbed[ops[0] - k];
    if (mul_add) {
      const auto& m1 = out.node_operands[ops[0] - k];
      const auto& m2 = out.node_operands[ops[1] - k];
      instr = FusedInstr{FusedCode::kMulAdd, id[m1[0]], id[m1[1]], id[m2[0]], id[m2[1]]};
    } else {
      instr.a = id[ops[0]];
      if (IsBinary(instr.code)) instr.b = id[ops[1]];
    }
    id[k + i] = k + static_cast<int32_t>(out.program.instrs.size());
    out.program.instrs.push_back(instr);
  }
  for (int32_t v : out.node_outputs) out.program.outputs.push_back(id[v]);
  AssignRows(&out.program);
  return out;
}

}  // namespace kgrad
