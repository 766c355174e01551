// Time and memory of the forward pass and of each AD mode through a long while
// loop (a measurement, not a test):
//   long_loop_memory [forward|grad|jvp|gradgrad] N [K]
// runs examples/programs HornerLoop, f(x[K], n) = sum(acc_n), acc <- acc * x + 1
// over N iterations (N an input, so the loop is not unrolled), at x = 0.5, and
// prints the result's first element against the closed form, the run time, the
// smallest call-depth limit (in calls per iteration) the run fits and the CPU
// allocator's peak. Run under /usr/bin/time -v for the process's peak RSS:
//   for m in forward grad jvp gradgrad; do /usr/bin/time -v long_loop_memory $m 1000000; done
// (A bare N, as in `long_loop_memory 100000`, means grad.)
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "core/passes/optimize.h"
#include "examples/programs.h"
#include "ops/registry.h"

namespace kgrad {
namespace {

absl::StatusOr<FuncGraph*> Optimized(Module& m, absl::StatusOr<FuncGraph*> g) {
  if (!g.ok()) return g;
  OptimizeOptions o;
  o.evaluator = &CpuConstantEvaluator::Get();
  absl::StatusOr<std::string> log = Optimize(m, *g, o);
  if (!log.ok()) return log.status();
  return g;
}

// The graph that `mode` runs.
absl::StatusOr<FuncGraph*> Build(Module& m, FuncGraph* f, const std::string& mode) {
  if (mode == "forward") return f;
  if (mode == "jvp") return Jvp(m, f);
  if (mode == "grad") return Optimized(m, GradOperation()(m, f));
  if (mode == "gradgrad") {
    absl::StatusOr<FuncGraph*> g = Optimized(m, GradOperation()(m, f));
    if (!g.ok()) return g;
    return Optimized(m, GradOperation()(m, *g));
  }
  return absl::InvalidArgumentError("mode must be forward, grad, jvp or gradgrad");
}

// The first element of `mode`'s result at x = 0.5 (n large enough for x^n to
// vanish): f = k/(1-x); df/dx_i = 1/(1-x)^2; J v with v = ones, k/(1-x)^2;
// d2f/dx_i^2 = 2/(1-x)^3.
double ClosedForm(const std::string& mode, int64_t k) {
  const double x = 0.5;
  if (mode == "forward") return static_cast<double>(k) / (1 - x);
  if (mode == "grad") return 1 / std::pow(1 - x, 2);
  if (mode == "jvp") return static_cast<double>(k) / std::pow(1 - x, 2);
  return 2 / std::pow(1 - x, 3);
}

int Main(int argc, char** argv) {
  int arg = 1;
  std::string mode = "grad";
  if (argc > 1 && std::isalpha(static_cast<unsigned char>(argv[1][0]))) mode = argv[arg++];
  int64_t n = argc > arg ? std::atoll(argv[arg]) : 100000;
  int64_t k = argc > arg + 1 ? std::atoll(argv[arg + 1]) : 3;
  Module m(DefaultRegistry());
  FuncGraph* f = programs::HornerLoop(&m, k, DType::kFloat64);
  absl::StatusOr<FuncGraph*> g = Build(m, f, mode);
  if (!g.ok()) return std::fprintf(stderr, "%s\n", g.status().ToString().c_str()), 1;
  const double want = ClosedForm(mode, k);
  Value x(Tensor::Full(DType::kFloat64, {k}, 0.5).value());
  std::vector<Value> args = {x, Value(Scalar::Int(n))};
  if (mode == "jvp") {  // tangents: ones for x, 0 for the trip count
    args.push_back(Value(Tensor::Full(DType::kFloat64, {k}, 1.0).value()));
    args.push_back(Value(Scalar::Int(0)));
  }
  // The smallest depth limit (in calls per iteration) that the run fits.
  for (int per = 0; per <= 8; ++per) {
    ExecutorOptions o;
    o.max_call_depth = static_cast<int>(per * n + 16);
    auto e = Executor::Create(*g, o);
    if (!e.ok()) return std::fprintf(stderr, "%s\n", e.status().ToString().c_str()), 1;
    ResetCpuAllocatorPeak();
    auto start = std::chrono::steady_clock::now();
    absl::StatusOr<Value> r = (*e)->Run(args);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r.ok()) {
      const Value& out = mode == "jvp" ? r->tuple()[1] : *r;
      std::printf("%s n=%lld k=%lld: %.12g (want %.12g) in %.2f s; call depth <= %d per iteration; "
                  "allocator peak %.1f MB\n",
                  mode.c_str(), static_cast<long long>(n), static_cast<long long>(k),
                  out.tensor().ElementAsDouble(0), want, s, per,
                  CpuAllocatorStats().peak_bytes_in_use / 1e6);
      return std::abs(out.tensor().ElementAsDouble(0) - want) <= 1e-9 * std::abs(want) ? 0 : 1;
    }
    if (r.status().code() != absl::StatusCode::kResourceExhausted) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
  }
  return 1;
}

}  // namespace
}  // namespace kgrad

int main(int argc, char** argv) { return kgrad::Main(argc, argv); }
