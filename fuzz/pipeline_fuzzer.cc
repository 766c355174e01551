// libFuzzer target: the whole path on small graphs. Load (text or binary, tight
// LoadLimits) -> verify (inside the loader) -> infer with the declared types ->
// run -> Grad with respect to every floating input -> optimise -> run the
// gradient. Every step may fail with a status; none may crash, hang or leak.
// Graphs whose inferred tensors are larger than kMaxElements are not run, so the
// fuzzer spends its time on structure, not on big kernels.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "ad/grad_operation.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "core/infer.h"
#include "core/manager.h"
#include "core/passes/optimize.h"
#include "fuzz/fuzz_limits.h"
#include "google/protobuf/stubs/logging.h"
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

// Deterministic small inputs of the declared types; false when a parameter has
// no declared type with known dims.
bool MakeInputs(FuncGraph* g, std::vector<Value>* out) {
  int64_t k = 0;
  for (Parameter* p : g->parameters()) {
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
      out->push_back(IsFloating(s->dtype()) ? Value(Scalar::Float(0.5)) : Value(Scalar::Int(3, s->dtype())));
    } else {
      return false;
    }
    ++k;
  }
  return true;
}

// KGRAD_FUZZ_DEBUG=1 prints why each input stopped early (to see what a corpus reaches).
bool Stop(const char* step, const absl::Status& s) {
  static const bool debug = std::getenv("KGRAD_FUZZ_DEBUG") != nullptr;
  if (debug) std::fprintf(stderr, "stopped at %s: %s\n", step, s.ToString().c_str());
  return true;
}

void RunPipeline(absl::string_view bytes, bool text) {
  absl::StatusOr<std::unique_ptr<Module>> loaded =
      ParseModel(bytes, text, DefaultRegistry(), "fuzz", fuzz::Limits());
  if (!loaded.ok() && Stop("load", loaded.status())) return;
  Module& m = **loaded;
  FuncGraph* f = m.entry() != nullptr ? m.entry() : m.graphs().front().get();
  InferOptions io;
  io.max_call_depth = 64;
  absl::StatusOr<AbstractPtr> inferred = InferGraph(f, io);
  if (!inferred.ok() && Stop("infer", inferred.status())) return;
  if (!AllNodesSmall(m, f) && Stop("size", absl::OkStatus())) return;
  std::vector<Value> inputs;
  if (!MakeInputs(f, &inputs) && Stop("inputs", absl::OkStatus())) return;
  absl::StatusOr<std::unique_ptr<Executor>> forward = Executor::Create(f, fuzz::RunLimits());
  if (!forward.ok() && Stop("compile", forward.status())) return;
  absl::StatusOr<Value> value = (*forward)->Run(inputs);
  if (!value.ok() && Stop("run", value.status())) return;  // its gradient would fail too

  GradOptions go;
  go.argnums.clear();
  for (size_t i = 0; i < f->parameters().size(); ++i) {
    const AbstractPtr& d = f->parameters()[i]->declared();
    bool floating = (AsTensor(d) != nullptr && IsFloating(AsTensor(d)->dtype())) ||
                    (AsScalar(d) != nullptr && IsFloating(AsScalar(d)->dtype()));
    if (floating) go.argnums.push_back(static_cast<int>(i));
  }
  if (go.argnums.empty() && Stop("no floating input", absl::OkStatus())) return;
  absl::StatusOr<FuncGraph*> grad = Grad(m, f, go);
  if (!grad.ok() && Stop("grad", grad.status())) return;
  CpuConstantEvaluator evaluator;
  OptimizeOptions oo;
  oo.evaluator = &evaluator;
  oo.max_unroll = 2000;
  absl::StatusOr<std::string> optimised = Optimize(m, *grad, oo);
  if (!optimised.ok() && Stop("optimise", optimised.status())) return;
  inferred = InferGraph(*grad, io);
  if (!inferred.ok() && Stop("infer gradient", inferred.status())) return;
  if (!AllNodesSmall(m, *grad) && Stop("gradient size", absl::OkStatus())) return;
  absl::StatusOr<std::unique_ptr<Executor>> backward = Executor::Create(*grad, fuzz::RunLimits());
  if (!backward.ok() && Stop("compile gradient", backward.status())) return;
  absl::StatusOr<Value> grads = (*backward)->Run(inputs);
  Stop(grads.ok() ? "the end" : "run gradient", grads.status());
}

}  // namespace
}  // namespace kgrad

// Protobuf logs every invalid UTF-8 string it parses; the loader's Status already
// says what is wrong, and the logging would dominate the fuzzer's time.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The first byte picks the format, so that mutations of one kind stay that kind.
  if (size == 0) return 0;
  kgrad::RunPipeline(bytes.substr(1), /*text=*/(data[0] & 1) != 0);
  return 0;
}
