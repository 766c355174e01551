#include "backends/executor.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/argument_checks.h"
#include "backends/collective_worker.h"
#include "backends/cpu/cpu_device.h"
#include "backends/cpu/denormals.h"
#include "backends/executor_machine.h"
#include "backends/executor_plan.h"
#include "backends/slot_pool.h"
#include "core/infer.h"
#include "core/manager.h"
#include "core/module.h"
#include "core/status_macros.h"

namespace kgrad {

using executor_internal::Step;

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
    KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan,
                           executor_internal::CompilePlan(g, device_, manager, weight_index_,
                                                          options_.fuse_elementwise, overlap,
                                                          options_.reuse_weight_layouts));
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
                                    Profile* profile, KernelObserver* observer) const {
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
  KGRAD_ASSIGN_OR_RETURN(Value out, Execute(std::move(args), std::move(w), profile, observer));
  KGRAD_RETURN_IF_ERROR(device_->Synchronize());
  return ValueToHost(out, device_);
}

absl::StatusOr<Value> Executor::Execute(std::vector<Value> args, std::vector<Value> weights,
                                        Profile* profile, KernelObserver* observer) const {
  const int token = device_->BeginRun();
  absl::StatusOr<Value> out = executor_internal::RunPlans(
      plans_, plans_.at(entry_).get(), std::move(args), std::move(weights), weight_values_, device_,
      options_, profile, observer, token, worker_.get(), slot_pool_.get());
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
