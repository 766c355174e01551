#include "backends/executor_machine.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/fused_step.h"
#include "backends/peak_recorder.h"
#include "backends/peak_trace.h"
#include "core/status_macros.h"
#include "core/value_walk.h"

namespace kgrad {
namespace executor_internal {
namespace {

struct Frame {
  const Plan* plan;
  std::vector<Value> slots;
  size_t pc = 0;
};

// The run-time state of one Execute call.
class Machine {
 public:
  Machine(const absl::flat_hash_map<const FuncGraph*, std::unique_ptr<Plan>>& plans,
          std::vector<Value> weights, const std::vector<Value>& own_weights, Device* device,
          const ExecutorOptions& options, Profile* profile, KernelObserver* observer, int run_token,
          CollectiveWorker* worker, SlotPool* slot_pool)
      : plans_(plans), weights_(std::move(weights)), own_weights_(own_weights), device_(device),
        options_(options), max_depth_(options.max_call_depth), profile_(profile),
        observer_(observer), run_token_(run_token),
        worker_(worker), slot_pool_(slot_pool), spare_(slot_pool->Take()) {}
  ~Machine() { slot_pool_->Give(std::move(spare_)); }
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  absl::StatusOr<Value> Run(const Plan* entry, std::vector<Value> args) {
    if (profile_ != nullptr && profile_->peak != nullptr) peak_.emplace(profile_->peak, args, weights_);
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
    // Held here, the inputs' buffers are shared, so the kernel cannot reuse one
    // for its output: the observer sees what the kernel read.
    if (observer_ != nullptr) observed_.assign(args_.begin(), args_.end());
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
    if (observer_ != nullptr) {
      KGRAD_RETURN_IF_ERROR(observer_->OnKernel(*s.node, *s.prim, observed_, *out));
      observed_.clear();
    }
    f.slots[s.out] = *std::move(out);
    TracePeak(f, s);
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
    TracePeak(f, s);
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

  // With a PeakTrace asked for: after step `s` of `f`, before its inputs are
  // dropped, the snapshot of what is held when the high-water mark rose.
  void TracePeak(const Frame& f, const Step& s) {
    if (!peak_.has_value() || !peak_->AfterStep()) return;
    peak_->Begin(s);
    peak_->HoldInputs(*f.plan, s, absl::MakeConstSpan(args_.data(), args_.size()));
    for (const Frame& frame : stack_) peak_->HoldFrame(*frame.plan, frame.slots);
    peak_->End();
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
  KernelObserver* observer_;
  absl::InlinedVector<Value, 6> observed_;  // the inputs of the observed kernel
  int run_token_;  // from Device::BeginRun
  CollectiveWorker* worker_;  // null unless collectives overlap (ExecutorOptions)
  PendingCollectives pending_;
  SlotPool* slot_pool_;
  SlotPool::Set spare_;  // emptied slot vectors of returned frames
  std::optional<PeakRecorder> peak_;  // when the profile asks for a PeakTrace
};

}  // namespace

absl::StatusOr<Value> RunPlans(
    const absl::flat_hash_map<const FuncGraph*, std::unique_ptr<Plan>>& plans, const Plan* entry,
    std::vector<Value> args, std::vector<Value> weights, const std::vector<Value>& own_weights,
    Device* device, const ExecutorOptions& options, Profile* profile, KernelObserver* observer,
    int run_token, CollectiveWorker* worker, SlotPool* slot_pool) {
  Machine m(plans, std::move(weights), own_weights, device, options, profile, observer, run_token,
            worker, slot_pool);
  return m.Run(entry, std::move(args));
}

}  // namespace executor_internal
}  // namespace kgrad
