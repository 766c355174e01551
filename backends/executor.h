// Executor: runs any FuncGraph on a device. Every graph reachable from the entry
// is compiled once into a Plan: its applications in order, each reading and
// writing numbered slots, with the slots each step frees (last use), closures
// created from captured slots, and calls marked when in tail position. A graph
// without calls (the usual case after optimisation) is a flat kernel schedule; on
// the CPU, runs of elementwise applications are one step each
// (backends/fusion_planner.h).
// Calls run on an explicit frame stack, so recursion never grows the C++ stack:
// tail calls replace the caller's frame (a 100,000-iteration loop runs in one
// frame), other calls are limited by `max_call_depth` (ResourceExhausted beyond).
//
// Types are checked before anything runs (ExecutorOptions::check_types): the
// entry graph is inferred for its declared parameter types once, in Create, or,
// when that does not check (undeclared inputs, or unknown dims an op needs
// known), once per new signature of concrete argument types (a cached check, then
// none per run). So `run` refuses what `grad` refuses.
//
// Threading: Create() compiles; afterwards the executor is immutable and Run may
// be called from many threads at once (each Run has its own frame stack; plans,
// constants and weights are only read; the signature cache has its own lock). The graphs must stay alive and unchanged
// while the executor exists: do not optimise or delete them after Create.
#ifndef KGRAD_BACKENDS_EXECUTOR_H_
#define KGRAD_BACKENDS_EXECUTOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/communicator.h"
#include "backends/device.h"
#include "core/func_graph.h"

namespace kgrad {

// Per-Run resource limits (an embedding service tightens them for untrusted
// graphs). Exceeding one fails the Run with ResourceExhausted naming the limit;
// everything the Run allocated is released.
struct ExecutorOptions {
  Device* device = nullptr;     // nullptr: the CPU
  // Non-tail calls in flight. Frames live on the heap (~0.15-0.6 KB each), never
  // on the C++ stack; reverse mode through an N-iteration loop nests ~2N calls, and
  // so do forward-over-reverse (Jvp) and reverse-over-reverse: 4,000,000 admits a
  // 1,000,000-iteration loop in each.
  int max_call_depth = 4'000'000;
  // Tail calls per Run, all loops together: a while loop iteration is two tail
  // calls (@loop -> @body -> @loop), so this bounds iterations at half of it. A
  // loop that never ends stops here within about a minute (~0.4 us per tail call
  // for the smallest loop bodies), not after days.
  int64_t max_tail_calls = 100'000'000;
  // Wall-clock seconds per Run, checked between steps (a single kernel is not
  // interrupted); 0: no deadline. DeadlineExceeded beyond it.
  double max_run_seconds = 0;
  // Bytes of kernel outputs allocated during one Run, in total (not the peak:
  // freed buffers still count). Checked after each kernel, so one kernel may
  // overshoot by its own output. Off by default (long loops allocate a lot).
  int64_t max_run_bytes = INT64_MAX;
  // Infer the entry graph for the argument types before running (see above), with
  // the module's InferOptions. Off only for programs whose types change from one
  // loop iteration to the next (a state wrapped in one more tuple each time),
  // which no type can describe; kernels still check their inputs.
  bool check_types = true;
  // Runs of connected elementwise applications (backends/fusion_planner.h) run as
  // one step on a device that can (the CPU): their values stay in a small scratch
  // block, only those read outside the run become tensors. Off: one kernel per
  // application (what the per-application overhead benchmarks measure).
  bool fuse_elementwise = true;
  // The ranks the collective primitives (all_reduce, ...; ops/collective.h) run
  // across: an MpiCommunicator (backends/mpi) in a data-parallel job, a
  // LocalCommunicator in one process; nullptr: collectives fail. Not owned; one
  // Run at a time may use it.
  Communicator* communicator = nullptr;
  // With a communicator, collectives run on a thread of their own while the
  // steps that do not read their results go on (backends/collective_worker.h),
  // and the run order starts them as early as it can. Off: each collective runs
  // where the run order puts it and the run waits for it there.
  bool overlap_collectives = true;
  // Host kernels flush subnormal floats to zero during each Run (on the calling
  // thread and the kernels' own threads; backends/cpu/denormals.h), as PyTorch's
  // set_flush_denormal and ONNX Runtime's set_denormal_as_zero do: much faster
  // where values underflow (a gradient carried back through long chains), at the
  // cost of gradual underflow. Off: the calling thread's own mode. x86-64 only
  // (Create fails elsewhere). oneDNN's convolutions start threads of their own,
  // which keep their mode.
  bool flush_denormals = false;
  // Kernels keep what they derive from the executor's own weights across runs
  // (backends/kernel_cache.h): oneDNN's f32 convolutions keep each weight in
  // their blocked layout instead of reordering it every call (a second copy of
  // those weights for the executor's lifetime; resnet18 batch 1: forward 13.0 ->
  // 11.x ms). Weights passed to Run (`weights`) are never kept. Weight tensors
  // must not be changed in place after Create (on the CPU the executor shares
  // their buffers): pass new values through Run. Kernels that compile their
  // step (tc's blocks) keep the result per input signature in the same memo.
  bool reuse_weight_layouts = true;
};

struct ExecutorStats {
  int graphs = 0;       // compiled graphs
  int steps = 0;        // steps over all plans (a fused run is one)
  int fused = 0;        // applications inside fused runs
  bool flat = false;    // the entry graph makes no calls and creates no closures
};

class Plan;
class CollectiveWorker;

struct PeakTrace;

// Time spent per primitive in one run (when asked for).
struct Profile {
  struct Entry {
    int64_t calls = 0;
    double ms = 0;
  };
  absl::flat_hash_map<std::string, Entry> by_primitive;
  // The entries, slowest first (ties by name).
  std::vector<std::pair<std::string, Entry>> Rows() const;
  // "conv2d 12.3 ms (4 calls)" lines, slowest first.
  std::string ToString() const;
  // When set, the run also records where its host memory peaks and what holds
  // it there (backends/peak_trace.h; it resets the allocator's peak mark).
  PeakTrace* peak = nullptr;
};

// Sees every kernel application of a Run, after its kernel, on the thread that
// runs it: the node, its primitive, the kernel's inputs and its output. For
// tools that read each intermediate value (tools/precision_report.h). While
// observed, a kernel never writes its output over an input, so the inputs are
// what it read. Fused runs of elementwise applications are one step each and not
// observed: create the executor with fuse_elementwise off to see every
// application. A status other than OK ends the Run with it.
class KernelObserver {
 public:
  virtual ~KernelObserver() = default;
  virtual absl::Status OnKernel(const CNode& node, const Primitive& prim,
                                absl::Span<const Value> inputs, const Value& output) = 0;
};

class SlotPool;

class Executor {
 public:
  static absl::StatusOr<std::unique_ptr<Executor>> Create(FuncGraph* entry,
                                                          ExecutorOptions options = {});
  ~Executor();

  // Runs the entry graph. Tensors in `args` are copied to the device, the result
  // back to the host. Weights take their module values unless `weights` names
  // them (name -> tensor). `profile` and `observer` (either may be null) see
  // this Run only.
  absl::StatusOr<Value> Run(std::vector<Value> args,
                            const absl::flat_hash_map<std::string, Tensor>& weights = {},
                            Profile* profile = nullptr, KernelObserver* observer = nullptr) const;

  const ExecutorStats& stats() const { return stats_; }
  Device* device() const { return device_; }

 private:
  Executor(FuncGraph* entry, ExecutorOptions options);
  absl::Status Compile();
  // Infers the entry graph for `args` without recording anything.
  absl::Status CheckTypes(const std::vector<AbstractPtr>& args) const;
  // The check for the argument types of one Run, once per signature.
  absl::Status CheckSignature(const std::vector<Value>& args) const;
  absl::StatusOr<Value> Execute(std::vector<Value> args, std::vector<Value> weights,
                                Profile* profile, KernelObserver* observer) const;

  FuncGraph* entry_;
  ExecutorOptions options_;
  Device* device_;
  absl::flat_hash_map<const FuncGraph*, std::unique_ptr<Plan>> plans_;
  std::vector<const Parameter*> weights_;         // weight index -> parameter
  std::vector<Value> weight_values_;              // on the device
  absl::flat_hash_map<const Parameter*, int> weight_index_;
  ExecutorStats stats_;
  std::unique_ptr<CollectiveWorker> worker_;  // with overlapped collectives
  bool types_checked_ = false;  // checked in Create for the declared types
  struct SignatureCache;
  std::unique_ptr<SignatureCache> signatures_;
  std::unique_ptr<SlotPool> slot_pool_;  // frame storage kept between runs
};

// Convenience: compile and run once on the CPU.
absl::StatusOr<Value> RunGraph(FuncGraph* graph, std::vector<Value> args);

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_EXECUTOR_H_
