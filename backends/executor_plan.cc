#include "backends/executor_plan.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/fused_step.h"
#include "backends/fusion_planner.h"
#include "backends/kernel_cache.h"
#include "backends/run_order.h"
#include "core/manager.h"
#include "core/status_macros.h"
#include "ops/collective.h"

namespace kgrad {
namespace executor_internal {

absl::Status AtNode(const absl::Status& s, const CNode* node, const Primitive* prim) {
  std::string what = prim != nullptr ? absl::StrCat(" (", prim->name(), ")") : "";
  return absl::Status(s.code(), absl::StrCat(node->Location(), what, ": ", s.message()));
}

namespace {

// Builds the Plan of one graph.
class PlanCompiler {
 public:
  PlanCompiler(FuncGraph* g, Device* device, Manager& manager,
               const absl::flat_hash_map<const Parameter*, int>& weight_index, bool fuse,
               bool overlap, bool weight_caches)
      : g_(g), device_(device), manager_(manager), weight_index_(weight_index),
        fuse_(fuse && device->fused_elementwise() != nullptr), overlap_(overlap),
        weight_caches_(weight_caches) {}

  absl::StatusOr<std::unique_ptr<Plan>> Compile() {
    plan_ = std::make_unique<Plan>();
    plan_->graph = g_;
    const GraphInfo& info = manager_.Info(g_);
    for (Parameter* p : g_->parameters()) slot_[p] = NewSlot();
    plan_->num_params = static_cast<int>(g_->parameters().size());
    for (AnfNode* fv : info.fvs) {
      if (fv->graph() == nullptr) continue;  // weights are global
      plan_->fvs.push_back(fv);
      slot_[fv] = NewSlot();
    }
    const bool closures = MakesClosures(g_, info);
    std::vector<CNode*> order = RunOrder(g_, info);
    // Overlapped collectives want their own order (fused runs then only group
    // what is adjacent in it).
    const bool collectives_first = overlap_ && !closures;
    if (collectives_first) order = CollectivesEarly(order);
    KGRAD_RETURN_IF_ERROR(CompileNodes(order, !closures && !collectives_first));
    if (g_->output() == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("graph '", g_->name(), "' has no output"));
    }
    KGRAD_ASSIGN_OR_RETURN(plan_->output, OperandOf(g_->output(), nullptr));
    MarkTailCall();
    MarkWaits();
    ComputeLiveness();
    plan_->num_slots = next_slot_;
    return std::move(plan_);
  }

 private:
  int32_t NewSlot() { return next_slot_++; }

  absl::Status CompileNodes(const std::vector<CNode*>& order, bool may_reorder) {
    if (!fuse_) {
      for (CNode* c : order) KGRAD_RETURN_IF_ERROR(CompileNode(c));
      return absl::OkStatus();
    }
    FusionPlan fp = PlanFusion(order, may_reorder);
    size_t r = 0;
    for (size_t i = 0; i < fp.order.size();) {
      if (r < fp.runs.size() && fp.runs[r].first == i) {
        const size_t end = fp.runs[r++].second;
        KGRAD_RETURN_IF_ERROR(CompileFused(absl::MakeSpan(fp.order).subspan(i, end - i)));
        i = end;
        continue;
      }
      KGRAD_RETURN_IF_ERROR(CompileNode(fp.order[i++]));
    }
    return absl::OkStatus();
  }

  absl::Status CompileFused(absl::Span<CNode* const> run) {
    FusedRunProgram frp = BuildFusedProgram(run);
    std::vector<AnfNode*> inputs = frp.inputs;
    std::vector<CNode*> outputs = frp.outputs;
    KGRAD_ASSIGN_OR_RETURN(FusedGroup group, MakeFusedGroup(run, std::move(frp), device_));
    Step step;
    step.kind = Step::Kind::kFused;
    step.node = run.front();
    for (AnfNode* in : inputs) {
      KGRAD_ASSIGN_OR_RETURN(Operand op, OperandOf(in, run.front()));
      step.inputs.push_back(op);
    }
    for (CNode* c : outputs) {
      slot_[c] = NewSlot();
      step.outs.push_back(slot_[c]);
    }
    step.fused = std::make_shared<const FusedGroup>(std::move(group));
    plan_->steps.push_back(std::move(step));
    return absl::OkStatus();
  }

  absl::Status CompileNode(CNode* c) {
    if (c->size() == 0) {
      return absl::FailedPreconditionError(absl::StrCat(c->Location(), ": no callee"));
    }
    Step step;
    step.node = c;
    const Primitive* prim = c->primitive();
    size_t first_arg = 1;
    if (prim != nullptr) {
      // Kernels read their inputs by position: a graph built in C++ has not
      // necessarily been through the verifier.
      if (absl::Status s = CheckArity(prim->def(), c->num_args()); !s.ok()) {
        return AtNode(s, c, prim);
      }
      if (prim->def().derived_args != nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            c->Location(), ": '", prim->name(),
            "' is a differentiation operator; expand it before running (kgrad::ExpandDifferentiation "
            "in ad/expand_differentiation.h; the kgrad CLI does this when it loads a file)"));
      }
      step.kind = Step::Kind::kKernel;
      step.prim = prim;
      step.async = overlap_ && ops::IsCollective(prim->id());
      step.kernel = device_->kernel(prim->id());
      if (step.kernel == nullptr) {
        return absl::UnimplementedError(absl::StrCat(c->Location(), ": no ", device_->name(),
                                                     " kernel for primitive '", prim->name(), "'"));
      }
    } else {
      step.kind = Step::Kind::kCall;
      first_arg = 0;
    }
    for (size_t i = first_arg; i < c->size(); ++i) {
      KGRAD_ASSIGN_OR_RETURN(Operand op, OperandOf(c->input(i), c));
      step.inputs.push_back(op);
    }
    // Every kernel step keeps its memo: derived weights and compiled plans.
    if (weight_caches_ && step.kind == Step::Kind::kKernel) {
      step.cache = std::make_shared<KernelCache>();
    }
    step.out = NewSlot();
    slot_[c] = step.out;
    plan_->steps.push_back(std::move(step));
    return absl::OkStatus();
  }

  // Where a node's value comes from; emits a closure step for a graph constant
  // that captures free variables.
  absl::StatusOr<Operand> OperandOf(AnfNode* n, const CNode* user) {
    auto it = slot_.find(n);
    if (it != slot_.end()) return Operand{OperandKind::kSlot, it->second};
    if (Parameter* p = n->AsParameter(); p != nullptr && p->is_weight()) {
      auto w = weight_index_.find(p);
      if (w == weight_index_.end()) {
        return absl::InternalError(absl::StrCat("weight '", p->name(), "' is not registered"));
      }
      return Operand{OperandKind::kWeight, w->second};
    }
    if (const ValueNode* v = n->AsValue()) return ConstantOperand(v->value(), user);
    std::string where = user != nullptr ? user->Location() : absl::StrCat("graph '", g_->name(), "'");
    return absl::FailedPreconditionError(absl::StrCat(
        where, ": input '", n->DebugName(), "' is not in scope (it belongs to graph '",
        n->graph() != nullptr ? n->graph()->name() : "?", "')"));
  }

  absl::StatusOr<Operand> ConstantOperand(const Value& v, const CNode* user) {
    if (v.is_graph()) {
      FuncGraph* h = v.graph();
      std::vector<AnfNode*> captured;
      for (AnfNode* fv : manager_.Info(h).fvs) {
        if (fv->graph() != nullptr) captured.push_back(fv);
      }
      if (!captured.empty()) return ClosureOperand(h, captured, user);
    }
    Value on_device = v;
    if (v.is_tensor() && v.tensor().device() != device_->type()) {
      KGRAD_ASSIGN_OR_RETURN(Tensor t, device_->CopyToDevice(v.tensor()));
      on_device = Value(std::move(t));
    }
    plan_->constants.push_back(std::move(on_device));
    return Operand{OperandKind::kConst, static_cast<int32_t>(plan_->constants.size() - 1)};
  }

  absl::StatusOr<Operand> ClosureOperand(FuncGraph* h, const std::vector<AnfNode*>& captured,
                                         const CNode* user) {
    auto it = closure_slot_.find(h);
    if (it != closure_slot_.end()) return Operand{OperandKind::kSlot, it->second};
    Step step;
    step.kind = Step::Kind::kClosure;
    step.node = user;
    step.closure_graph = h;
    for (AnfNode* fv : captured) {
      auto s = slot_.find(fv);
      if (s == slot_.end()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "graph '", g_->name(), "' makes a closure of graph '", h->name(),
            "' whose free variable '", fv->DebugName(), "' is not in scope"));
      }
      step.inputs.push_back(Operand{OperandKind::kSlot, s->second});
    }
    step.out = NewSlot();
    closure_slot_[h] = step.out;
    plan_->steps.push_back(std::move(step));
    return Operand{OperandKind::kSlot, step.out};
  }

  // Steps that read what an async collective writes wait for the collectives
  // in flight first.
  void MarkWaits() {
    absl::flat_hash_set<int32_t> async_slots;
    for (Step& s : plan_->steps) {
      for (const Operand& op : s.inputs) {
        if (op.kind == OperandKind::kSlot && async_slots.contains(op.index)) s.waits = true;
      }
      if (s.async) async_slots.insert(s.out);
    }
  }

  void MarkTailCall() {
    if (plan_->steps.empty()) return;
    Step& last = plan_->steps.back();
    if (last.kind == Step::Kind::kCall && plan_->output.kind == OperandKind::kSlot &&
        plan_->output.index == last.out) {
      last.tail = true;
    }
  }

  // Each slot is freed right after its last reader; the last read moves the value
  // so that a kernel may reuse a buffer nothing else holds.
  void ComputeLiveness() {
    const int n = static_cast<int>(plan_->steps.size());
    std::vector<int> last_use(next_slot_, -1);
    for (int i = 0; i < n; ++i) {
      for (const Operand& op : plan_->steps[i].inputs) {
        if (op.kind == OperandKind::kSlot) last_use[op.index] = i;
      }
    }
    if (plan_->output.kind == OperandKind::kSlot) last_use[plan_->output.index] = n;
    std::vector<int> defined_at(next_slot_, -1);
    for (int i = 0; i < n; ++i) {
      for (int32_t out : OutsOf(plan_->steps[i])) defined_at[out] = i;
    }
    for (int i = 0; i < n; ++i) {
      Step& s = plan_->steps[i];
      s.move.assign(s.inputs.size(), false);
      for (int k = static_cast<int>(s.inputs.size()) - 1; k >= 0; --k) {
        const Operand& op = s.inputs[k];
        if (op.kind != OperandKind::kSlot || last_use[op.index] != i) continue;
        bool later_in_step = false;
        for (size_t j = k + 1; j < s.inputs.size(); ++j) {
          later_in_step |= s.inputs[j].kind == OperandKind::kSlot && s.inputs[j].index == op.index;
        }
        if (!later_in_step) {
          s.move[k] = true;
          s.release.push_back(op.index);
        }
      }
      for (int32_t out : OutsOf(s)) {
        if (last_use[out] < 0) s.release.push_back(out);
      }
    }
    for (int slot = 0; slot < next_slot_; ++slot) {
      if (defined_at[slot] < 0 && last_use[slot] < 0) plan_->release_at_entry.push_back(slot);
    }
  }

  static std::vector<int32_t> OutsOf(const Step& s) {
    return s.kind == Step::Kind::kFused ? s.outs : std::vector<int32_t>{s.out};
  }

  FuncGraph* g_;
  Device* device_;
  Manager& manager_;
  const absl::flat_hash_map<const Parameter*, int>& weight_index_;
  const bool fuse_;
  const bool overlap_;
  const bool weight_caches_;  // ExecutorOptions::reuse_weight_layouts
  std::unique_ptr<Plan> plan_;
  absl::flat_hash_map<const AnfNode*, int32_t> slot_;
  absl::flat_hash_map<const FuncGraph*, int32_t> closure_slot_;
  int32_t next_slot_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Plan>> CompilePlan(
    FuncGraph* g, Device* device, Manager& manager,
    const absl::flat_hash_map<const Parameter*, int>& weight_index, bool fuse, bool overlap,
    bool weight_caches) {
  return PlanCompiler(g, device, manager, weight_index, fuse, overlap, weight_caches).Compile();
}

}  // namespace executor_internal
}  // namespace kgrad
