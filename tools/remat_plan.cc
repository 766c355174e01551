#include "tools/remat_plan.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "ad/split.h"
#include "backends/executor.h"
#include "backends/run_peak.h"
#include "core/builder.h"
#include "core/cloner.h"
#include "core/manager.h"
#include "core/passes/optimize.h"
#include "core/status_macros.h"

namespace kgrad {
namespace {

int64_t Elements(const AbstractPtr& a) {
  const AbstractTensor* t = AsTensor(a);
  if (t == nullptr || !t->shape_known()) return 1;
  int64_t n = 1;
  for (int64_t d : t->shape()) n *= d;
  return n;
}

// A static count of an application's FLOPs, for ranking recomputations: a GEMM
// 2 m n k, a convolution 2 * outputs * (its filter's elements per output
// channel), another contraction 2 * outputs * sqrt(in_a * in_b / outputs) (its
// depth for a GEMM), anything else its largest operand's or output's elements.
double Flops(const CNode* c) {
  const int64_t out = Elements(c->abstract());
  const Primitive* p = c->primitive();
  if (p != nullptr && p->def().dot && c->num_args() >= 2) {
    const double a = static_cast<double>(Elements(c->arg(0)->abstract()));
    const double b = static_cast<double>(Elements(c->arg(1)->abstract()));
    if (p->id() == PrimId::kConv2d) {
      const AbstractTensor* w = AsTensor(c->arg(1)->abstract());
      const double per_channel = w != nullptr && w->shape_known() && !w->shape().empty()
                                     ? b / static_cast<double>(std::max<int64_t>(w->shape()[0], 1))
                                     : 1;
      return 2.0 * static_cast<double>(out) * per_channel;
    }
    return 2.0 * static_cast<double>(out) * std::sqrt(a * b / std::max<double>(out, 1));
  }
  int64_t n = out;
  for (const AnfNode* in : c->inputs()) n = std::max(n, in->is_value() ? 0 : Elements(in->abstract()));
  return static_cast<double>(n);
}

bool IsDot(const AnfNode* n) {
  const CNode* c = n->AsCNode();
  return c != nullptr && c->primitive() != nullptr && c->primitive()->def().dot;
}

// The step: `whole`(x..., ones) for f's inputs, optimised (a copy of `whole` is
// inlined, so `whole` stays as it is).
absl::StatusOr<FuncGraph*> StepOf(Module& m, FuncGraph* whole, const std::string& name) {
  CloneMap copy = CloneGraphs({whole}, "_step");
  FuncGraph* inner = copy.Graph(whole);
  GraphBuilder b(&m, name);
  std::vector<AnfNode*> args;
  const auto& params = whole->parameters();
  for (size_t i = 0; i + 1 < params.size(); ++i) {
    args.push_back(b.Param(params[i]->name(), params[i]->declared()));
  }
  const AbstractTensor* sens = AsTensor(params.back()->declared());
  if (sens == nullptr || !sens->shape_known()) {
    return absl::UnimplementedError("--remat auto: the value's type is not a static tensor");
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor ones, Tensor::Full(sens->dtype(), sens->shape(), 1.0));
  args.push_back(b.Const(Value(std::move(ones))));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* step, b.Return(b.Call(inner, args)));
  KGRAD_RETURN_IF_ERROR(Optimize(m, step).status());
  inner->set_public(false);
  return step;
}

// The step's memory above its inputs and outputs (as `kgrad bench` reports it).
absl::StatusOr<int64_t> StepPeak(FuncGraph* step, const std::vector<Value>& inputs) {
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> e, Executor::Create(step));
  // A first run fills the executor's caches (weight layouts, plans), which
  // later runs find in use: as `kgrad bench` measures after its warm-up.
  KGRAD_RETURN_IF_ERROR(e->Run(inputs).status());
  return RunPeakAboveOutputs(*e, inputs, 2);
}

class Planner {
 public:
  // `shared`: residuals whose chains overlap share one recomputation
  // (Groups); otherwise each residual has its own, and a chain that reads a
  // dropped residual recomputes that one's chain too.
  Planner(const GradientCut& cut, bool shared) : cut_(cut), shared_(shared) {
    for (size_t i = 0; i < cut.order.size(); ++i) position_[cut.order[i]] = i;
    for (AnfNode* r : cut.residuals) {
      const int64_t bytes = r->is_cnode() ? std::max<int64_t>(StaticBytes(r->abstract()), 0) : 0;
      bytes_[r] = bytes;
      residual_bytes_ += bytes;
      if (r->is_cnode()) kept_.insert(r);
    }
    for (const CNode* c : cut.order) {
      if (!cut.backward.contains(c)) step_flops_ += Flops(c);
    }
  }

  int64_t residual_bytes() const { return residual_bytes_; }
  double step_flops() const { return step_flops_; }
  int64_t KeptBytes() const {
    int64_t n = 0;
    for (const AnfNode* r : kept_) n += BytesOf(r);
    return n;
  }
  const std::vector<AnfNode*>& dropped() const { return dropped_; }
  double added_flops() const { return cost_.flops; }
  // The memory the plan is estimated to hold for residuals at its high point
  // (Evaluate).
  int64_t Estimate() const { return dropped_.empty() ? KeptBytes() : cost_.peak; }

  // Drops residuals until the estimate is at most `target`; false when no
  // residual can be dropped any more.
  bool Reduce(int64_t target) {
    while (Estimate() > target) {
      if (!DropBest(/*through_dots=*/false) && !DropBest(/*through_dots=*/true)) return false;
    }
    return true;
  }

  // The nodes a recomputation of r computes given the kept set, and the forward
  // values it reads that must then be kept (`needs`): kept residuals, inputs,
  // weights and constants are read; without `through_dots` a contraction is
  // kept rather than recomputed.
  void Chain(AnfNode* r, bool through_dots, std::vector<CNode*>* nodes,
             std::vector<AnfNode*>* needs) const {
    absl::flat_hash_set<const AnfNode*> seen = {r};
    std::vector<AnfNode*> stack = {r};
    while (!stack.empty()) {
      AnfNode* n = stack.back();
      stack.pop_back();
      CNode* c = n->AsCNode();
      const bool leaf = n != r && (c == nullptr || kept_.contains(n) || (IsDot(n) && !through_dots));
      if (leaf) {
        if (c != nullptr && !kept_.contains(n)) needs->push_back(n);
        continue;
      }
      nodes->push_back(c);
      for (size_t i = 1; i < c->size(); ++i) {
        AnfNode* in = c->input(i);
        if (seen.insert(in).second) stack.push_back(in);
      }
    }
  }

  const absl::flat_hash_set<const AnfNode*>& kept() const { return kept_; }
  size_t Position(const AnfNode* n) const {
    auto it = position_.find(n);
    return it == position_.end() ? 0 : it->second;
  }


  // Which recomputation each of `dropped` belongs to: residuals whose chains
  // share a node share one recomputation (Rewrite computes each node once
  // per group), so groups are the connected components of overlapping chains.
  std::vector<int> Groups(const std::vector<AnfNode*>& dropped,
                          std::vector<std::vector<CNode*>>* chains = nullptr) const {
    std::vector<int> parent(dropped.size());
    for (size_t i = 0; i < parent.size(); ++i) parent[i] = static_cast<int>(i);
    auto find = [&](int i) {
      while (parent[i] != i) i = parent[i] = parent[parent[i]];
      return i;
    };
    absl::flat_hash_map<const CNode*, int> owner;
    std::vector<std::vector<CNode*>> local(dropped.size());
    for (size_t i = 0; i < dropped.size(); ++i) {
      std::vector<AnfNode*> needs;
      Chain(dropped[i], /*through_dots=*/true, &local[i], &needs);
      for (const CNode* c : local[i]) {
        auto [it, fresh] = owner.try_emplace(c, static_cast<int>(i));
        if (!fresh) parent[find(static_cast<int>(i))] = find(it->second);
      }
    }
    std::vector<int> group(dropped.size());
    for (size_t i = 0; i < dropped.size(); ++i) {
      group[i] = shared_ ? find(static_cast<int>(i)) : static_cast<int>(i);
    }
    if (chains != nullptr) *chains = std::move(local);
    return group;
  }

 private:
  int64_t BytesOf(const AnfNode* n) const {
    auto it = bytes_.find(n);
    if (it != bytes_.end()) return it->second;
    return std::max<int64_t>(StaticBytes(n->abstract()), 0);
  }

  // Whether every reader of r is an application (not the graph's output).
  bool Droppable(const AnfNode* r) const {
    if (r == cut_.value || r == cut_.grads) return false;
    for (const Use& u : r->uses()) {
      if (u.user == nullptr) return false;
    }
    return true;
  }

  // What the recomputations of `dropped` cost under kept_: each group's chains'
  // union once; and the estimated peak of residuals: at the start of the
  // backward the kept ones, and when the backward enters a group (its earliest
  // reader) the group's residuals, recomputed together, beside the kept ones
  // read after that point.
  struct Cost {
    double flops = 0;
    int64_t peak = 0;
  };
  Cost Evaluate(const std::vector<AnfNode*>& dropped) const {
    struct Group {
      absl::flat_hash_set<const CNode*> nodes;
      int64_t bytes = 0;
      size_t enter = SIZE_MAX;
    };
    std::vector<std::vector<CNode*>> chains;
    const std::vector<int> group_of = Groups(dropped, &chains);
    absl::flat_hash_map<int, Group> groups;
    for (size_t i = 0; i < dropped.size(); ++i) {
      Group& g = groups[group_of[i]];
      g.nodes.insert(chains[i].begin(), chains[i].end());
      g.bytes += BytesOf(dropped[i]);
      g.enter = std::min(g.enter, BackwardReads(dropped[i]).first);
    }
    Cost cost;
    cost.peak = KeptBytes();
    for (const auto& [id, g] : groups) {
      for (const CNode* c : g.nodes) cost.flops += Flops(c);
      int64_t alive = g.bytes;
      for (const AnfNode* k : kept_) {
        if (BackwardReads(k).second > g.enter) alive += BytesOf(k);
      }
      cost.peak = std::max(cost.peak, alive);
    }
    return cost;
  }

  // The positions of n's first and last readers in the backward (SIZE_MAX, 0
  // when none).
  std::pair<size_t, size_t> BackwardReads(const AnfNode* n) const {
    std::pair<size_t, size_t> span = {SIZE_MAX, 0};
    for (const Use& u : n->uses()) {
      if (u.user == nullptr || !cut_.backward.contains(u.user)) continue;
      span.first = std::min(span.first, Position(u.user));
      span.second = std::max(span.second, Position(u.user));
    }
    return span;
  }

  // Drops the kept residual that frees the most estimated memory per added
  // FLOP (with its `needs` kept instead).
  bool DropBest(bool through_dots) {
    AnfNode* best = nullptr;
    double best_score = 0;
    std::vector<AnfNode*> best_needs;
    Cost best_cost;
    const int64_t before = Estimate();
    const std::vector<const AnfNode*> candidates = SortedKept();
    for (const AnfNode* k : candidates) {
      AnfNode* r = const_cast<AnfNode*>(k);
      if (!Droppable(r) || (IsDot(r) && !through_dots)) continue;
      std::vector<CNode*> nodes;
      std::vector<AnfNode*> needs;
      Chain(r, through_dots, &nodes, &needs);
      // Tentatively: r dropped, its needs kept.
      kept_.erase(r);
      std::vector<const AnfNode*> added;
      for (AnfNode* n : needs) {
        if (kept_.insert(n).second) added.push_back(n);
      }
      dropped_.push_back(r);
      const Cost cost = Evaluate(dropped_);
      const int64_t after = cost.peak;
      dropped_.pop_back();
      for (const AnfNode* n : added) kept_.erase(n);
      kept_.insert(r);
      const int64_t freed = before - after;
      if (freed <= 0) continue;
      const double score = static_cast<double>(freed) / std::max(cost.flops - cost_.flops, 1.0);
      if (best == nullptr || score > best_score) {
        best = r;
        best_score = score;
        best_needs = needs;
        best_cost = cost;
      }
    }
    if (best == nullptr) return false;
    kept_.erase(best);
    for (AnfNode* n : best_needs) kept_.insert(n);
    dropped_.push_back(best);
    cost_ = best_cost;
    return true;
  }

  // kept_ in the cut's order, so that ties go to the earliest and plans do not
  // depend on hash order.
  std::vector<const AnfNode*> SortedKept() const {
    std::vector<const AnfNode*> v(kept_.begin(), kept_.end());
    std::sort(v.begin(), v.end(), [&](const AnfNode* a, const AnfNode* b) {
      const size_t pa = Position(a), pb = Position(b);
      return pa != pb ? pa < pb : a->id() < b->id();
    });
    return v;
  }

  const GradientCut& cut_;
  const bool shared_;
  absl::flat_hash_map<const AnfNode*, size_t> position_;
  absl::flat_hash_map<const AnfNode*, int64_t> bytes_;
  absl::flat_hash_set<const AnfNode*> kept_;
  std::vector<AnfNode*> dropped_;
  Cost cost_;  // of dropped_
  int64_t residual_bytes_ = 0;
  double step_flops_ = 0;
};

// The first reader of r in the backward (in the cut's order), or null.
const CNode* FirstBackwardReader(const GradientCut& cut, const Planner& plan, const AnfNode* r) {
  const CNode* first = nullptr;
  for (const Use& u : r->uses()) {
    if (u.user == nullptr || !cut.backward.contains(u.user)) continue;
    if (first == nullptr || plan.Position(u.user) < plan.Position(first)) first = u.user;
  }
  return first;
}

// A copy of `whole` in which each dropped residual's backward readers read a
// recomputation of it instead. The residuals whose chains overlap (a segment
// between checkpoints: Planner::Groups) share one recomputation, each node
// once, entering through remat_barrier(leaf, t) on the
// tangent t of the group's earliest backward reader (in the cut's order), so
// that it runs when the backward reaches the segment. A recomputation per
// residual ran resnet18's stem convolution six times for one plan (51
// convolutions in a step of 20); one shared by all residuals kept what it
// recomputed alive across the backward (0.78x of the save-everything peak
// where the groups reach 0.49x).
absl::StatusOr<FuncGraph*> Rewrite(Module& m, const GradientCut& cut, const Planner& plan) {
  CloneMap copy = CloneGraphs({cut.whole}, "_remat");
  FuncGraph* g = copy.Graph(cut.whole);
  GraphBuilder b(g);
  struct Todo {
    size_t at;  // position of the first backward reader
    AnfNode* r;
    const CNode* first;
    int group;
  };
  std::vector<Todo> todo;
  const std::vector<int> group_of = plan.Groups(plan.dropped());
  for (size_t i = 0; i < plan.dropped().size(); ++i) {
    AnfNode* r = plan.dropped()[i];
    const CNode* first = FirstBackwardReader(cut, plan, r);
    if (first != nullptr) todo.push_back({plan.Position(first), r, first, group_of[i]});
  }
  std::stable_sort(todo.begin(), todo.end(), [](const Todo& x, const Todo& y) { return x.at < y.at; });
  struct Group {
    AnfNode* tangent = nullptr;
    absl::flat_hash_map<const AnfNode*, AnfNode*> made;  // forward node -> its copy
  };
  absl::flat_hash_map<int, Group> groups;
  for (const Todo& t : todo) {
    AnfNode* tangent = nullptr;
    for (size_t i = 1; i < t.first->size() && tangent == nullptr; ++i) {
      if (cut.backward.contains(t.first->input(i))) tangent = copy.Node(t.first->input(i));
    }
    if (tangent == nullptr) continue;  // a reader of forward values only: keep r
    Group& group = groups[t.group];
    if (group.tangent == nullptr) group.tangent = tangent;
    std::vector<CNode*> nodes;
    std::vector<AnfNode*> needs;
    plan.Chain(t.r, /*through_dots=*/true, &nodes, &needs);
    // Chain nodes in the cut's order (inputs first), each copied once.
    std::sort(nodes.begin(), nodes.end(),
              [&](const CNode* x, const CNode* y) { return plan.Position(x) < plan.Position(y); });
    auto operand = [&](AnfNode* in) -> AnfNode* {
      if (auto it = group.made.find(in); it != group.made.end()) return it->second;
      AnfNode* mapped = copy.Node(in);
      AnfNode* v = in->is_value() ? mapped : b.Op(PrimId::kRematBarrier, {mapped, group.tangent});
      group.made[in] = v;
      return v;
    };
    for (CNode* c : nodes) {
      if (group.made.contains(c)) continue;
      std::vector<AnfNode*> args;
      for (size_t i = 1; i < c->size(); ++i) args.push_back(operand(c->input(i)));
      CNode* again = b.Call(copy.Node(c->input(0)), args);
      again->set_abstract(c->abstract());
      group.made[c] = again;
    }
    for (const Use& u : t.r->uses()) {
      if (u.user == nullptr || !cut.backward.contains(u.user)) continue;
      copy.Node(u.user)->AsCNode()->set_input(u.index, group.made.at(t.r));
    }
  }
  KGRAD_RETURN_IF_ERROR(b.status());
  return g;
}

}  // namespace

absl::StatusOr<MemoryBudget> ParseMemoryBudget(const std::string& text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  MemoryBudget b;
  double scale = 1;
  for (auto [suffix, factor] : {std::pair<absl::string_view, double>{"GiB", 1 << 30},
                                {"MiB", 1 << 20}, {"KiB", 1 << 10}}) {
    if (absl::ConsumeSuffix(&t, suffix)) scale = factor;
  }
  double v;
  // 2^62 bytes: far past any machine, and the product stays an exact int64.
  if (!absl::SimpleAtod(t, &v) || !(v > 0) || !(v * scale < 4.6e18)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--memory-budget wants bytes (123456, 64MiB, 1.5GiB) or a fraction of the "
        "save-everything peak in (0, 1] (0.5); got '", text, "'"));
  }
  if (scale == 1 && t.find('.') != absl::string_view::npos) {
    if (v > 1) return absl::InvalidArgumentError("--memory-budget: a fraction is at most 1");
    b.fraction = v;
  } else {
    b.bytes = static_cast<int64_t>(v * scale);
  }
  return b;
}

std::string RematPlanReport::ToString() const {
  auto mib = [](int64_t v) { return absl::StrFormat("%.3f MiB", static_cast<double>(v) / (1 << 20)); };
  return absl::StrCat(
      "remat auto: budget ", mib(budget), "; saving everything peaks at ", mib(peak_all),
      ", the plan at ", mib(peak), " (", absl::StrFormat("%.2f", peak_all > 0 ? 1.0 * peak / peak_all : 0),
      "x); residuals kept ", mib(residual_bytes), " of ", mib(residual_bytes_all), ", ",
      recomputed.size(), " of ", num_residuals, " recomputed (+",
      absl::StrFormat("%.1f", step_flops > 0 ? 100 * added_flops / step_flops : 0),
      "% of the forward's FLOPs)", recomputed.empty() ? "" : ": ", absl::StrJoin(recomputed, ", "));
}

namespace {

// Plans of one kind (Planner's `shared`), each measured; the best so far is
// `best` with its figures in `report`. An attempt that measures no better
// than the best ends the search (recomputing more only moves memory once the
// peak is not where the residuals are). Returns the best step.
absl::StatusOr<FuncGraph*> Search(Module& module, const GradientCut& cut, FuncGraph* f,
                                  const std::vector<Value>& inputs, bool shared, FuncGraph* best,
                                  RematPlanReport* report) {
  Planner plan(cut, shared);
  // The estimate: the save-everything peak less the residuals dropped.
  int64_t target = report->budget - (report->peak_all - plan.residual_bytes());
  int64_t peak_here = report->peak_all;
  for (int attempt = 0; attempt < 5 && report->peak > report->budget; ++attempt) {
    const bool more = plan.Reduce(std::max<int64_t>(target, 0));
    KGRAD_ASSIGN_OR_RETURN(FuncGraph* g, Rewrite(module, cut, plan));
    KGRAD_ASSIGN_OR_RETURN(FuncGraph* step, StepOf(module, g, "step_" + f->name()));
    g->set_public(false);
    KGRAD_ASSIGN_OR_RETURN(int64_t peak, StepPeak(step, inputs));
    if (peak >= peak_here) {
      step->set_public(false);
      break;
    }
    peak_here = peak;
    if (peak < report->peak) {
      best->set_public(false);
      best = step;
      report->peak = peak;
      report->residual_bytes = plan.KeptBytes();
      report->added_flops = plan.added_flops();
      report->recomputed.clear();
      for (const AnfNode* r : plan.dropped()) report->recomputed.push_back(r->DebugName());
    } else {
      step->set_public(false);
    }
    if (!more || plan.Estimate() == 0) break;
    target = plan.Estimate() - (peak - report->budget);
  }
  return best;
}

}  // namespace

absl::StatusOr<FuncGraph*> PlanRematStep(Module& module, FuncGraph* f,
                                         const ValueAndGradOptions& options,
                                         const MemoryBudget& budget,
                                         const std::vector<Value>& inputs,
                                         RematPlanReport* report) {
  KGRAD_ASSIGN_OR_RETURN(GradientCut cut, CutGradient(module, f, options));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* all, StepOf(module, cut.whole, "step_" + f->name()));
  KGRAD_ASSIGN_OR_RETURN(report->peak_all, StepPeak(all, inputs));
  report->budget = budget.bytes >= 0
                       ? budget.bytes
                       : static_cast<int64_t>(budget.fraction * static_cast<double>(report->peak_all));
  report->peak = report->peak_all;
  {
    const Planner all_kept(cut, true);
    report->residual_bytes_all = all_kept.residual_bytes();
    report->residual_bytes = all_kept.KeptBytes();
    report->step_flops = all_kept.step_flops();
  }
  report->num_residuals = static_cast<int>(cut.residuals.size());
  if (report->peak_all <= report->budget) {
    cut.whole->set_public(false);  // the steps inline copies of it
    return all;
  }
  // Shared recomputations first (each node once per segment); where they
  // cannot reach the budget, a recomputation per residual (more compute, but
  // each freed as soon as its readers are done).
  FuncGraph* best = all;
  for (bool shared : {true, false}) {
    if (report->peak <= report->budget) break;
    KGRAD_ASSIGN_OR_RETURN(best, Search(module, cut, f, inputs, shared, best, report));
  }
  cut.whole->set_public(false);
  if (report->peak > report->budget) {
    best->set_public(false);
    return absl::ResourceExhaustedError(absl::StrCat(
        "--memory-budget ", report->budget, " bytes cannot be met: the smallest peak the plans "
        "reached is ", report->peak, " bytes (",
        absl::StrFormat("%.3f", static_cast<double>(report->peak) / report->peak_all),
        " of saving everything, with ", report->recomputed.size(), " of ", cut.residuals.size(),
        " residuals recomputed); give at least that"));
  }
  return best;
}

}  // namespace kgrad
