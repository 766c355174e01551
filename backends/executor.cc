#include "backends/executor.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/cpu/cpu_device.h"
#include "backends/cpu/denormals.h"
#include "backends/argument_checks.h"
#include "backends/collective_worker.h"
#include "backends/fused_step.h"
#include "backends/fusion_planner.h"
#include "backends/kernel_cache.h"
#include "backends/run_order.h"
#include "backends/slot_pool.h"
#include "core/infer.h"
#include "core/manager.h"
#include "core/module.h"
#include "core/status_macros.h"
#include "ops/collective.h"
#include "core/value_walk.h"

namespace kgrad {

namespace {

enum class OperandKind : uint8_t { kSlot, kConst, kWeight };

struct Operand {
  OperandKind kind;
  int32_t index;
};

struct Step {
  enum class Kind : uint8_t { kKernel, kCall, kClosure, kFused } kind;
  const CNode* node = nullptr;
  const Primitive* prim = nullptr;  // kKernel
  KernelFn kernel = nullptr;        // kKernel
  FuncGraph* closure_graph = nullptr;  // kClosure
  absl::InlinedVector<Operand, 4> inputs;  // kCall: inputs[0] is the callee
  absl::InlinedVector<bool, 4> move;       // read by moving (last use of the slot)
  absl::InlinedVector<int32_t, 2> release; // slots dead after this step
  int32_t out = -1;
  std::shared_ptr<const FusedGroup> fused;  // kFused
  std::vector<int32_t> outs;                // kFused: one slot per program output
  // kKernel steps that read a weight: their kernel's memo across runs.
  std::shared_ptr<KernelCache> cache;
  bool tail = false;
  bool async = false;  // a collective handed to the CollectiveWorker
  bool waits = false;  // reads a slot an async collective writes
};

absl::Status AtNode(const absl::Status& s, const CNode* node, const Primitive* prim) {
  std::string what = prim != nullptr ? absl::StrCat(" (", prim->name(), ")") : "";
  return absl::Status(s.code(), absl::StrCat(node->Location(), what, ": ", s.message()));
}

}  // namespace

class Plan {
 public:
  FuncGraph* graph = nullptr;
  int num_params = 0;
  int num_slots = 0;
  std::vector<const AnfNode*> fvs;  // captured free variables, closure order
  std::vector<Step> steps;
  std::vector<Value> constants;
  Operand output{OperandKind::kSlot, 0};
  std::vector<int32_t> release_at_entry;
};

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
      if (weight_caches_ && step.kind == Step::Kind::kKernel && op.kind == OperandKind::kWeight &&
          step.cache == nullptr) {
        step.cache = std::make_shared<KernelCache>();
      }
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

struct Frame {
  const Plan* plan;
  std::vector<Value> slots;
  size_t pc = 0;
};

}  // namespace

// Argument-type signatures already checked (graphs without declared types).
struct Executor::SignatureCache {
  struct Key {
    std::vector<AbstractPtr> types;
    bool operator==(const Key& o) const {
      if (types.size() != o.types.size()) return false;
      for (size_t i = 0; i < types.size(); ++i) {
        if (!AbstractEquals(types[i], o.types[i])) return false;
      }
      return true;
    }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      for (const AbstractPtr& a : k.types) h = H::combine(std::move(h), AbstractHash(a));
      return h;
    }
  };
  // Enough for every batch size a service sees; a flood of new shapes only costs
  // re-checks, not memory.
  static constexpr size_t kMaxEntries = 256;
  std::mutex mu;  // also serialises the inference of new signatures
  absl::flat_hash_set<Key> checked;
};

Executor::Executor(FuncGraph* entry, ExecutorOptions options)
    : entry_(entry), options_(options),
      device_(options.device != nullptr ? options.device : CpuDevice()),
      signatures_(std::make_unique<SignatureCache>()),
      slot_pool_(std::make_unique<SlotPool>()) {}

Executor::~Executor() = default;

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(FuncGraph* entry,
                                                           ExecutorOptions options) {
  if (options.flush_denormals && !cpu::kCanFlushDenormals) {
    return absl::UnimplementedError(absl::StrCat(
        "graph '", entry->name(),
        "': ExecutorOptions::flush_denormals needs an x86-64 build (it sets MXCSR)"));
  }
  std::unique_ptr<Executor> e(new Executor(entry, options));
  KGRAD_RETURN_IF_ERROR(e->Compile());
  return e;
}

absl::Status Executor::Compile() {
  Module* module = entry_->module();
  for (const auto& w : module->weights()) {
    weight_index_[w.get()] = static_cast<int>(weights_.size());
    weights_.push_back(w.get());
    if (!w->default_value().has_value()) {
      return absl::FailedPreconditionError(absl::StrCat("weight '", w->name(), "' has no value"));
    }
    KGRAD_ASSIGN_OR_RETURN(Tensor t, device_->CopyToDevice(*w->default_value()));
    weight_values_.push_back(Value(std::move(t)));
  }
  Manager& manager = module->manager();
  // Collectives run on a worker thread, overlapping the steps that do not read
  // them, when there is a communicator (host tensors: the CPU).
  const bool overlap = options_.communicator != nullptr && options_.overlap_collectives &&
                       device_->type() == DeviceType::kCpu &&
                       options_.communicator->memory() == DeviceType::kCpu;
  for (FuncGraph* g : manager.Reachable({entry_})) {
    PlanCompiler compiler(g, device_, manager, weight_index_, options_.fuse_elementwise, overlap,
                          options_.reuse_weight_layouts);
    KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, compiler.Compile());
    stats_.steps += static_cast<int>(plan->steps.size());
    for (const Step& s : plan->steps) {
      if (s.kind == Step::Kind::kFused) stats_.fused += static_cast<int>(s.fused->nodes.size());
      if (s.async && worker_ == nullptr) worker_ = std::make_unique<CollectiveWorker>(options_.communicator);
    }
    plans_[g] = std::move(plan);
  }
  stats_.graphs = static_cast<int>(plans_.size());
  stats_.flat = true;
  for (const Step& s : plans_.at(entry_)->steps) {
    if (s.kind != Step::Kind::kKernel && s.kind != Step::Kind::kFused) stats_.flat = false;
  }
  // With declared input types, one check covers every run. When the declared
  // types do not check (undeclared inputs, or unknown dims some op needs known),
  // each new signature of concrete argument types is checked in Run instead: a
  // real type error is refused there, with the concrete types in the message.
  if (options_.check_types) {
    absl::StatusOr<std::vector<AbstractPtr>> declared = DeclaredArgs(entry_);
    types_checked_ = declared.ok() && CheckTypes(*declared).ok();
  }
  return absl::OkStatus();
}

absl::Status Executor::CheckTypes(const std::vector<AbstractPtr>& args) const {
  InferOptions o = entry_->module()->infer_options();
  o.record = false;  // a check: the module is not changed
  absl::Status s = InferGraph(entry_, args, o).status();
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("graph '", entry_->name(),
                                             "' does not type-check for its inputs: ", s.message()));
}

absl::Status Executor::CheckSignature(const std::vector<Value>& args) const {
  const int max_depth = entry_->module()->infer_options().max_abstract_depth;
  SignatureCache::Key key;
  for (size_t i = 0; i < args.size(); ++i) {
    AbstractPtr a = AbstractOfValue(args[i], max_depth);
    if (a == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph '", entry_->name(), "', input ", i, " nests deeper than ", max_depth,
          " tuples (InferOptions::max_abstract_depth); such a value has no type to check"));
    }
    key.types.push_back(Broaden(a));
  }
  std::lock_guard<std::mutex> lock(signatures_->mu);
  if (signatures_->checked.contains(key)) return absl::OkStatus();
  KGRAD_RETURN_IF_ERROR(CheckTypes(key.types));
  if (signatures_->checked.size() >= SignatureCache::kMaxEntries) signatures_->checked.clear();
  signatures_->checked.insert(std::move(key));
  return absl::OkStatus();
}

absl::StatusOr<Value> Executor::Run(std::vector<Value> args,
                                    const absl::flat_hash_map<std::string, Tensor>& weights,
                                    Profile* profile) const {
  const auto& params = entry_->parameters();
  if (args.size() != params.size()) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", entry_->name(), "' takes ",
                                                   params.size(), " inputs, got ", args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    KGRAD_RETURN_IF_ERROR(CheckArgument(params[i], args[i], entry_));
  }
  KGRAD_RETURN_IF_ERROR(CheckSymbols(params, args, entry_));
  if (options_.check_types && !types_checked_) KGRAD_RETURN_IF_ERROR(CheckSignature(args));
  for (size_t i = 0; i < args.size(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(args[i], ValueToDevice(args[i], device_));
  }
  std::vector<Value> w = weight_values_;
  for (const auto& [name, tensor] : weights) {
    int index = -1;
    for (size_t i = 0; i < weights_.size(); ++i) {
      if (weights_[i]->name() == name) index = static_cast<int>(i);
    }
    if (index < 0) {
      return absl::NotFoundError(absl::StrCat("the module has no weight named '", name, "'"));
    }
    const Tensor& old = *weights_[index]->default_value();
    if (tensor.dtype() != old.dtype() || tensor.shape() != old.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("weight '", name, "' must be ",
                                                     old.TypeString(), ", got ",
                                                     tensor.TypeString()));
    }
    KGRAD_ASSIGN_OR_RETURN(Tensor t, device_->CopyToDevice(tensor));
    w[index] = Value(std::move(t));
  }
  // Scoped: the caller's thread gets its own mode back.
  cpu::ScopedDenormalMode mode(options_.flush_denormals ? cpu::kFlushBits : cpu::DenormalMode());
  KGRAD_ASSIGN_OR_RETURN(Value out, Execute(std::move(args), std::move(w), profile));
  KGRAD_RETURN_IF_ERROR(device_->Synchronize());
  return ValueToHost(out, device_);
}

namespace {

// The run-time state of one Execute call.
class Machine {
 public:
  Machine(const absl::flat_hash_map<const FuncGraph*, std::unique_ptr<Plan>>& plans,
          std::vector<Value> weights, const std::vector<Value>& own_weights, Device* device,
          const ExecutorOptions& options, Profile* profile, int run_token, CollectiveWorker* worker,
          SlotPool* slot_pool)
      : plans_(plans), weights_(std::move(weights)), own_weights_(own_weights), device_(device),
        options_(options),
        max_depth_(options.max_call_depth), profile_(profile), run_token_(run_token),
        worker_(worker), slot_pool_(slot_pool), spare_(slot_pool->Take()) {}
  ~Machine() { slot_pool_->Give(std::move(spare_)); }
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  absl::StatusOr<Value> Run(const Plan* entry, std::vector<Value> args) {
    KGRAD_RETURN_IF_ERROR(Push(entry, std::move(args), {}, nullptr));
    if (options_.max_run_seconds > 0) {
      deadline_ = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(options_.max_run_seconds));
    }
    while (true) {
      KGRAD_RETURN_IF_ERROR(CheckDeadline());
      Frame& f = stack_.back();
      if (!pending_.empty() && (f.pc >= f.plan->steps.size() || f.plan->steps[f.pc].waits ||
                                f.plan->steps[f.pc].kind == Step::Kind::kCall)) {
        KGRAD_RETURN_IF_ERROR(ResolvePending());
      }
      if (f.pc >= f.plan->steps.size()) {
        Value result = Read(f, f.plan->output, true);
        PopFrame();
        if (stack_.empty()) return result;
        Frame& caller = stack_.back();
        const Step& s = caller.plan->steps[caller.pc];
        caller.slots[s.out] = std::move(result);
        Finish(caller, s);
        continue;
      }
      const Step& s = f.plan->steps[f.pc];
      switch (s.kind) {
        case Step::Kind::kKernel:
          KGRAD_RETURN_IF_ERROR(RunKernel(f, s));
          break;
        case Step::Kind::kClosure:
          MakeClosure(f, s);
          break;
        case Step::Kind::kFused:
          KGRAD_RETURN_IF_ERROR(RunFused(f, s));
          break;
        case Step::Kind::kCall:
          KGRAD_RETURN_IF_ERROR(Call(s));
          break;
      }
    }
  }

 private:
  // Every 1,024 steps, when a deadline is set: a clock read per step would cost
  // more than a small kernel.
  absl::Status CheckDeadline() {
    if (options_.max_run_seconds <= 0 || (++steps_ & 1023) != 0) return absl::OkStatus();
    if (std::chrono::steady_clock::now() < deadline_) return absl::OkStatus();
    const Frame& f = stack_.back();
    std::string where = f.pc < f.plan->steps.size() && f.plan->steps[f.pc].node != nullptr
                            ? f.plan->steps[f.pc].node->Location()
                            : absl::StrCat("graph '", f.plan->graph->name(), "'");
    return absl::DeadlineExceededError(absl::StrCat(
        where, ": the run took longer than ExecutorOptions::max_run_seconds = ",
        options_.max_run_seconds, " s"));
  }

  Value Read(Frame& f, const Operand& op, bool move) {
    switch (op.kind) {
      case OperandKind::kSlot:
        return move ? std::move(f.slots[op.index]) : f.slots[op.index];
      case OperandKind::kConst:
        return f.plan->constants[op.index];
      case OperandKind::kWeight:
        return weights_[op.index];
    }
    return Value();
  }

  // Bit i: args_[i] is the executor's own weight tensor (not one Run replaced).
  uint32_t OwnWeightInputs(const Step& s) const {
    uint32_t mask = 0;
    for (size_t i = 0; i < s.inputs.size() && i < 32; ++i) {
      const Operand& op = s.inputs[i];
      if (op.kind != OperandKind::kWeight || !args_[i].is_tensor()) continue;
      const Value& own = own_weights_[op.index];
      if (own.is_tensor() && own.tensor().buffer() == args_[i].tensor().buffer()) mask |= 1u << i;
    }
    return mask;
  }

  void Gather(Frame& f, const Step& s, size_t from, absl::InlinedVector<Value, 6>* out) {
    out->clear();
    for (size_t i = from; i < s.inputs.size(); ++i) out->push_back(Read(f, s.inputs[i], s.move[i]));
  }

  void Finish(Frame& f, const Step& s) {
    for (int32_t slot : s.release) f.slots[slot] = Value();
    ++f.pc;
  }

  absl::Status RunKernel(Frame& f, const Step& s) {
    Gather(f, s, 0, &args_);
    if (s.async && args_[0].is_tensor()) {
      // Runs on the worker's thread while the next steps run; a step that
      // reads the result waits for it (ResolvePending).
      pending_.Add({stack_.size() - 1, s.out, s.node, s.prim, worker_->Submit(*s.prim, args_[0].tensor())});
      args_.clear();
      Finish(f, s);
      return absl::OkStatus();
    }
    const bool meter = metered() && !s.prim->def().moves_only;
    if (meter) CollectBuffers(args_);
    KernelContext ctx(*s.prim, absl::MakeSpan(args_.data(), args_.size()), device_,
                      options_.communicator);
    if (s.cache != nullptr) ctx.set_cache(s.cache.get(), OwnWeightInputs(s));
    device_->BeforeKernel(run_token_);
    std::chrono::steady_clock::time_point start;
    if (profile_ != nullptr) start = std::chrono::steady_clock::now();
    absl::StatusOr<Value> out = s.kernel(ctx);
    if (profile_ != nullptr) {
      (void)device_->Synchronize();
      Profile::Entry& e = profile_->by_primitive[s.prim->name()];
      ++e.calls;
      e.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    if (!out.ok()) return AtNode(out.status(), s.node, s.prim);
    if (meter) {
      absl::Status charged = Charge(*out);
      if (!charged.ok()) return AtNode(charged, s.node, s.prim);
    }
    f.slots[s.out] = *std::move(out);
    args_.clear();
    Finish(f, s);
    return absl::OkStatus();
  }

  absl::Status RunFused(Frame& f, const Step& s) {
    Gather(f, s, 0, &args_);
    const bool meter = metered();
    if (meter) CollectBuffers(args_);
    device_->BeforeKernel(run_token_);
    std::chrono::steady_clock::time_point start;
    if (profile_ != nullptr) start = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<Value>> outs = RunFusedGroup(*s.fused, absl::MakeConstSpan(args_.data(), args_.size()), device_);
    if (profile_ != nullptr) {
      (void)device_->Synchronize();
      Profile::Entry& e = profile_->by_primitive["fused_elementwise"];
      ++e.calls;
      e.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    if (!outs.ok()) return outs.status();
    for (size_t k = 0; k < s.outs.size(); ++k) {
      if (meter) {
        absl::Status charged = Charge((*outs)[k]);
        if (!charged.ok()) return AtNode(charged, s.node, nullptr);
      }
      f.slots[s.outs[k]] = std::move((*outs)[k]);
    }
    args_.clear();
    Finish(f, s);
    return absl::OkStatus();
  }

  absl::Status ResolvePending() {
    double* waited = profile_ != nullptr ? &profile_->by_primitive["collective wait"].ms : nullptr;
    return pending_.Resolve(
        [this](const PendingCollectives::Entry& e, absl::StatusOr<Tensor> r) -> absl::Status {
          if (!r.ok()) return AtNode(r.status(), e.node, e.prim);
          Value v(*std::move(r));
          if (metered()) {
            input_buffers_.clear();
            if (absl::Status s = Charge(v); !s.ok()) return AtNode(s, e.node, e.prim);
          }
          stack_[e.frame].slots[e.slot] = std::move(v);
          return absl::OkStatus();
        },
        waited);
  }

  // Allocation metering (ExecutorOptions::max_run_bytes): an output tensor is new
  // unless its buffer is one of the kernel's inputs (reused in place, or passed
  // through by a structural kernel). Ops that only move values are not metered.
  bool metered() const { return options_.max_run_bytes != INT64_MAX; }

  void CollectBuffers(absl::Span<const Value> inputs) {
    input_buffers_.clear();
    for (const Value& v : inputs) AddBuffers(v, &input_buffers_);
  }

  static void AddBuffers(const Value& v, absl::InlinedVector<const Buffer*, 8>* out) {
    (void)ForEachLeaf(v, [out](const Value& leaf, absl::Span<const size_t>) {
      if (leaf.is_tensor()) out->push_back(leaf.tensor().buffer().get());
      return absl::OkStatus();
    });
  }

  absl::Status Charge(const Value& out) {
    absl::InlinedVector<const Buffer*, 8> produced;
    AddBuffers(out, &produced);
    for (const Buffer* b : produced) {
      if (std::find(input_buffers_.begin(), input_buffers_.end(), b) != input_buffers_.end()) continue;
      allocated_ += static_cast<int64_t>(b->bytes());
    }
    if (allocated_ > options_.max_run_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the run allocated ", allocated_, " bytes, over the limit ExecutorOptions::max_run_bytes = ",
          options_.max_run_bytes));
    }
    return absl::OkStatus();
  }

  void MakeClosure(Frame& f, const Step& s) {
    std::vector<Value> captured;
    captured.reserve(s.inputs.size());
    for (size_t i = 0; i < s.inputs.size(); ++i) captured.push_back(Read(f, s.inputs[i], s.move[i]));
    f.slots[s.out] = Value::Closure(s.closure_graph, std::move(captured));
    Finish(f, s);
  }

  // Calls whatever the callee evaluates to: a closure or graph (a new frame, or
  // the current one replaced for a tail call), a partial application, or a
  // primitive used as a value.
  absl::Status Call(const Step& s) {
    Frame& f = stack_.back();
    absl::InlinedVector<Value, 6> in;
    Gather(f, s, 0, &in);
    Value fn = std::move(in[0]);
    std::vector<Value> args(std::make_move_iterator(in.begin() + 1),
                            std::make_move_iterator(in.end()));
    while (fn.is_partial()) {
      const PartialRep& p = fn.partial();
      args.insert(args.begin(), p.args.begin(), p.args.end());
      Value inner = p.fn;
      fn = std::move(inner);
    }
    if (fn.is_primitive()) {
      const Primitive& prim = *fn.primitive();
      if (absl::Status arity = CheckArity(prim.def(), args.size()); !arity.ok()) {
        return AtNode(arity, s.node, &prim);
      }
      KernelFn kernel = device_->kernel(prim.id());
      if (kernel == nullptr) {
        return AtNode(absl::UnimplementedError(absl::StrCat("no ", device_->name(), " kernel")),
                      s.node, &prim);
      }
      const bool meter = metered() && !prim.def().moves_only;
      if (meter) CollectBuffers(args);
      KernelContext ctx(prim, absl::MakeSpan(args), device_, options_.communicator);
      device_->BeforeKernel(run_token_);
      absl::StatusOr<Value> out = kernel(ctx);
      if (!out.ok()) return AtNode(out.status(), s.node, &prim);
      if (meter) {
        absl::Status charged = Charge(*out);
        if (!charged.ok()) return AtNode(charged, s.node, &prim);
      }
      f.slots[s.out] = *std::move(out);
      Finish(f, s);
      return absl::OkStatus();
    }
    FuncGraph* g = nullptr;
    std::vector<Value> captured;
    if (fn.is_closure()) {
      g = fn.closure().graph;
      captured = fn.closure().captured;
    } else if (fn.is_graph()) {
      g = fn.graph();
    } else {
      return AtNode(absl::InvalidArgumentError(
                        absl::StrCat("callee is not a function, it is ", fn.TypeString())),
                    s.node, nullptr);
    }
    auto it = plans_.find(g);
    if (it == plans_.end()) {
      return AtNode(absl::InternalError(absl::StrCat("graph '", g->name(), "' was not compiled")),
                    s.node, nullptr);
    }
    const Plan* plan = it->second.get();
    if (args.size() != static_cast<size_t>(plan->num_params)) {
      return AtNode(absl::InvalidArgumentError(absl::StrCat("graph '", g->name(), "' takes ",
                                                            plan->num_params, " arguments, got ",
                                                            args.size())),
                    s.node, nullptr);
    }
    if (captured.size() != plan->fvs.size()) {
      return AtNode(absl::InternalError(absl::StrCat("closure of graph '", g->name(), "' captures ",
                                                     captured.size(), " values, expected ",
                                                     plan->fvs.size())),
                    s.node, nullptr);
    }
    if (s.tail) {
      if (++tail_calls_ > options_.max_tail_calls) {
        return AtNode(absl::ResourceExhaustedError(absl::StrCat(
                          "more than ExecutorOptions::max_tail_calls = ", options_.max_tail_calls,
                          " tail calls (loop iterations) in one run")),
                      s.node, nullptr);
      }
      PopFrame();  // a tail call returns straight to our caller
    } else {
      for (int32_t slot : s.release) f.slots[slot] = Value();
    }
    return Push(plan, std::move(args), std::move(captured), s.node);
  }

  absl::Status Push(const Plan* plan, std::vector<Value> args, std::vector<Value> captured,
                    const CNode* site) {
    if (static_cast<int>(stack_.size()) >= max_depth_) {
      std::string where = site != nullptr ? site->Location() : "entry";
      return absl::ResourceExhaustedError(absl::StrCat(
          where, ": call depth exceeds ", max_depth_,
          " (the limit ExecutorOptions::max_call_depth; non-tail recursion too deep)"));
    }
    Frame f;
    f.plan = plan;
    f.slots = SlotPool::NewSlots(&spare_, plan->num_slots);
    for (size_t i = 0; i < args.size(); ++i) f.slots[i] = std::move(args[i]);
    for (size_t i = 0; i < captured.size(); ++i) f.slots[plan->num_params + i] = std::move(captured[i]);
    for (int32_t slot : plan->release_at_entry) f.slots[slot] = Value();
    stack_.push_back(std::move(f));
    return absl::OkStatus();
  }

  void PopFrame() {
    SlotPool::Recycle(&spare_, &stack_.back().slots);
    stack_.pop_back();
  }

  const absl::flat_hash_map<const FuncGraph*, std::unique_ptr<Plan>>& plans_;
  std::vector<Value> weights_;
  const std::vector<Value>& own_weights_;  // the executor's, before Run's overrides
  Device* device_;
  const ExecutorOptions& options_;
  int max_depth_;
  int64_t tail_calls_ = 0;
  int64_t allocated_ = 0;
  uint64_t steps_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  absl::InlinedVector<const Buffer*, 8> input_buffers_;
  std::vector<Frame> stack_;
  absl::InlinedVector<Value, 6> args_;
  Profile* profile_;
  int run_token_;  // from Device::BeginRun
  CollectiveWorker* worker_;  // null unless collectives overlap (ExecutorOptions)
  PendingCollectives pending_;
  SlotPool* slot_pool_;
  SlotPool::Set spare_;  // emptied slot vectors of returned frames
};

}  // namespace

absl::StatusOr<Value> Executor::Execute(std::vector<Value> args, std::vector<Value> weights,
                                        Profile* profile) const {
  const int token = device_->BeginRun();
  Machine m(plans_, std::move(weights), weight_values_, device_, options_, profile, token,
            worker_.get(), slot_pool_.get());
  absl::StatusOr<Value> out = m.Run(plans_.at(entry_).get(), std::move(args));
  device_->EndRun(token);
  return out;
}

std::vector<std::pair<std::string, Profile::Entry>> Profile::Rows() const {
  std::vector<std::pair<std::string, Entry>> rows(by_primitive.begin(), by_primitive.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.second.ms != b.second.ms ? a.second.ms > b.second.ms : a.first < b.first;
  });
  return rows;
}

std::string Profile::ToString() const {
  std::string s;
  for (const auto& [name, e] : Rows()) {
    absl::StrAppend(&s, absl::StrFormat("%-28s %9.3f ms  (%lld calls)\n", name, e.ms, static_cast<long long>(e.calls)));
  }
  return s;
}

absl::StatusOr<Value> RunGraph(FuncGraph* graph, std::vector<Value> args) {
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> e, Executor::Create(graph));
  return e->Run(std::move(args));
}

}  // namespace kgrad
