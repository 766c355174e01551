// libFuzzer target: the whole path on small graphs. Load (text or binary, tight
// LoadLimits) -> verify (inside the loader) -> infer with the declared types ->
// run -> Grad with respect to every floating input -> optimise -> run the
// gradient -> Jvp -> run -> the gradient of the optimised gradient (second
// order) -> run. Every step may fail with a status; none may crash, hang or leak.
//
// Long loops and deep values: integer scalar inputs (trip counts, in the seeds)
// are 3 in a first run and, when that passes, a second run takes a count of up to
// 5,500 chosen from the input's hash, under a deadline per run (fuzz_limits.h);
// programs whose state has no fixed type (a loop that wraps its state in a tuple
// or a partial application per iteration) fail the type check and are then run
// unchecked, so that values thousands of levels deep are built, passed around
// and released.
// Graphs whose inferred tensors are larger than kMaxElements are not run, so the
// fuzzer spends its time on structure, not on big kernels.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

#include "absl/hash/hash.h"
#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "core/infer.h"
#include "core/manager.h"
#include "core/passes/optimize.h"
#include "fuzz/fuzz_limits.h"
#include "ops/registry.h"
#include "proto/model_io.h"

namespace kgrad {
namespace {

bool Small(const AbstractPtr& a, int depth = 0) {
  if (a == nullptr || depth > 16) return depth <= 16;
  if (const AbstractTensor* t = AsTensor(a)) {
    if (!t->shape_known()) return true;  // run-time sizes: max_run_bytes bounds them
    int64_t n = 1;
    for (int64_t d : t->shape()) {
      if (d > kgrad::fuzz::kMaxElements) return false;
      n *= d;
      if (n > kgrad::fuzz::kMaxElements) return false;
    }
    return true;
  }
  if (const AbstractTuple* t = AsTuple(a)) {
    for (const AbstractPtr& e : t->elements()) {
      if (!Small(e, depth + 1)) return false;
    }
  }
  return true;
}

bool AllNodesSmall(Module& m, FuncGraph* root) {
  for (FuncGraph* g : m.manager().Reachable({root})) {
    for (const CNode* n : m.manager().Info(g).order) {
      if (!Small(n->abstract())) return false;
    }
  }
  return true;
}

// Deterministic small inputs of the declared types (integer scalars = `count`);
// false when a parameter has no declared type with known dims.
bool MakeInputs(const std::vector<Parameter*>& params, int64_t count, std::vector<Value>* out) {
  int64_t k = 0;
  for (Parameter* p : params) {
    const AbstractPtr& d = p->declared();
    if (const AbstractTensor* t = AsTensor(d); t != nullptr && t->shape_known()) {
      absl::StatusOr<Tensor> x = Tensor::Full(t->dtype(), t->shape(), 0.0);
      if (!x.ok()) return false;
      for (int64_t i = 0; i < x->NumElements(); ++i) {
        double v = 0.25 * static_cast<double>((i + k) % 7) - 0.5;
        DispatchDType(x->dtype(), [&](auto zero) {
          using V = decltype(zero);
          x->mutable_data<V>()[i] = static_cast<V>(v);
        });
      }
      out->push_back(Value(*std::move(x)));
    } else if (const AbstractScalar* s = AsScalar(d)) {
      out->push_back(IsFloating(s->dtype()) ? Value(Scalar::Float(0.5)) : Value(Scalar::Int(count, s->dtype())));
    } else {
      return false;
    }
    ++k;
  }
  return true;
}

bool HasIntegerScalarInput(FuncGraph* f) {
  for (Parameter* p : f->parameters()) {
    if (const AbstractScalar* s = AsScalar(p->declared()); s != nullptr && !IsFloating(s->dtype())) return true;
  }
  return false;
}

// KGRAD_FUZZ_DEBUG=1 prints why each input stopped early (to see what a corpus reaches).
bool Stop(const char* step, const absl::Status& s) {
  static const bool debug = std::getenv("KGRAD_FUZZ_DEBUG") != nullptr;
  if (debug) std::fprintf(stderr, "stopped at %s: %s\n", step, s.ToString().c_str());
  return true;
}

// Runs `g` on `inputs`; false (after Stop) when it cannot be compiled or run.
bool Run(const char* step, FuncGraph* g, const std::vector<Value>& inputs, const ExecutorOptions& o) {
  absl::StatusOr<std::unique_ptr<Executor>> e = Executor::Create(g, o);
  if (!e.ok()) return !Stop(step, e.status());
  absl::StatusOr<Value> r = (*e)->Run(inputs);
  if (!r.ok()) return !Stop(step, r.status());
  return true;
}

// The short run, then, for graphs with trip-count inputs, a long one.
bool RunShortAndLong(const char* step, FuncGraph* g, const std::vector<Value>& short_in,
                     const std::vector<Value>& long_in, bool check_types) {
  ExecutorOptions o = fuzz::RunLimits();
  o.check_types = check_types;
  if (!Run(step, g, short_in, o)) return false;
  if (long_in.empty()) return true;
  ExecutorOptions lo = fuzz::LongRunLimits();
  lo.check_types = check_types;
  Run(step, g, long_in, lo);  // a long run may well stop at a limit
  return true;
}

struct Inputs {
  std::vector<Value> short_run, long_run;  // long_run empty: no trip count to vary
};

bool MakeRunInputs(FuncGraph* f, int64_t long_count, Inputs* in) {
  if (!MakeInputs(f->parameters(), 3, &in->short_run)) return false;
  if (HasIntegerScalarInput(f)) MakeInputs(f->parameters(), long_count, &in->long_run);
  return true;
}

FuncGraph* Optimised(Module& m, FuncGraph* g) {
  OptimizeOptions oo;
  oo.evaluator = &CpuConstantEvaluator::Get();
  oo.max_unroll = 2000;
  absl::StatusOr<std::string> log = Optimize(m, g, oo);
  if (!log.ok()) return Stop("optimise", log.status()), nullptr;
  absl::StatusOr<AbstractPtr> inferred = InferGraph(g);
  if (!inferred.ok()) return Stop("infer derivative", inferred.status()), nullptr;
  if (!AllNodesSmall(m, g)) return Stop("derivative size", absl::OkStatus()), nullptr;
  return g;
}

// The gradient w.r.t. every floating input of `f`, optimised; null when none.
FuncGraph* Gradient(Module& m, FuncGraph* f) {
  GradOptions go;
  go.argnums.clear();
  for (size_t i = 0; i < f->parameters().size(); ++i) {
    const AbstractPtr& d = f->parameters()[i]->declared();
    bool floating = (AsTensor(d) != nullptr && IsFloating(AsTensor(d)->dtype())) ||
                    (AsScalar(d) != nullptr && IsFloating(AsScalar(d)->dtype()));
    if (floating) go.argnums.push_back(static_cast<int>(i));
  }
  if (go.argnums.empty()) return Stop("no floating input", absl::OkStatus()), nullptr;
  absl::StatusOr<FuncGraph*> grad = Grad(m, f, go);
  if (!grad.ok()) return Stop("grad", grad.status()), nullptr;
  return Optimised(m, *grad);
}

// Jvp(f)(x..., v...): the tangents are the inputs again (integers: themselves,
// which forward mode ignores).
void ForwardMode(Module& m, FuncGraph* f, const Inputs& in) {
  absl::StatusOr<FuncGraph*> jvp = Jvp(m, f);
  if (!jvp.ok()) return (void)Stop("jvp", jvp.status());
  if (!AllNodesSmall(m, *jvp)) return (void)Stop("jvp size", absl::OkStatus());
  Inputs both = in;
  both.short_run.insert(both.short_run.end(), in.short_run.begin(), in.short_run.end());
  both.long_run.insert(both.long_run.end(), in.long_run.begin(), in.long_run.end());
  RunShortAndLong("run jvp", *jvp, both.short_run, both.long_run, /*check_types=*/true);
}

void RunPipeline(absl::string_view bytes, bool text) {
  absl::StatusOr<std::unique_ptr<Module>> loaded =
      ParseModel(bytes, text, DefaultRegistry(), "fuzz", fuzz::Limits());
  if (!loaded.ok() && Stop("load", loaded.status())) return;
  Module& m = **loaded;
  m.set_infer_options(fuzz::InferLimits());
  FuncGraph* f = m.entry() != nullptr ? m.entry() : m.graphs().front().get();
  Inputs in;
  if (!MakeRunInputs(f, 500 + static_cast<int64_t>(absl::HashOf(bytes) % 5'000), &in)) {
    Stop("inputs", absl::OkStatus());
    return;
  }
  absl::StatusOr<AbstractPtr> inferred = InferGraph(f);
  if (!inferred.ok()) {
    // No fixed type (or a type error): what runs anyway must fail cleanly.
    Stop("infer", inferred.status());
    RunShortAndLong("run unchecked", f, in.short_run, in.long_run, /*check_types=*/false);
    return;
  }
  if (!AllNodesSmall(m, f) && Stop("size", absl::OkStatus())) return;
  if (!RunShortAndLong("run", f, in.short_run, in.long_run, true)) return;  // derivatives would fail too
  FuncGraph* grad = Gradient(m, f);
  if (grad == nullptr || !RunShortAndLong("run gradient", grad, in.short_run, in.long_run, true)) return;
  ForwardMode(m, f, in);
  FuncGraph* second = Gradient(m, grad);
  if (second == nullptr) return;
  RunShortAndLong("run second order", second, in.short_run, in.long_run, true);
  Stop("the end", absl::OkStatus());
}

}  // namespace
}  // namespace kgrad

// The first byte picks the format, so that mutations of one kind stay that kind
// (fuzz/run.sh puts it before the seeds of fuzz/corpus/load: 0 for .pb, 1 for
// .pbtxt). LLVMFuzzerInitialize: fuzz/fuzz_init.cc.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  kgrad::RunPipeline(kgrad::fuzz::Bytes(data + 1, size - 1), /*text=*/(data[0] & 1) != 0);
  return 0;
}
