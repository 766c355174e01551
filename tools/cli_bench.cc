#include "tools/cli_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "backends/executor.h"
#include "backends/peak_trace.h"
#include "backends/run_peak.h"
#include "core/dim_symbol.h"
#include "core/passes/optimize.h"
#include "core/status_macros.h"
#include "tools/cli_args.h"
#include "tools/cli_common.h"
#include "tools/remat_plan.h"

namespace kgrad {
namespace cli {
namespace {

// --dim NAME=N: the size of each dim symbol.
absl::StatusOr<absl::flat_hash_map<int64_t, int64_t>> DimSizes(const ParsedArgs& args) {
  absl::flat_hash_map<int64_t, int64_t> sizes;
  auto it = args.options.find("dim");
  if (it == args.options.end()) return sizes;
  for (const std::string& s : it->second) {
    size_t eq = s.find('=');
    int64_t n = 0;
    if (eq == std::string::npos || eq == 0 || !absl::SimpleAtoi(s.substr(eq + 1), &n) || n < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--dim wants NAME=SIZE, got '", s, "'"));
    }
    sizes[DimSymbol(s.substr(0, eq))] = n;
  }
  return sizes;
}

// A random tensor of the declared type of `p`, symbols sized by `sizes`.
absl::StatusOr<Value> RandomInput(const FuncGraph* g, const Parameter* p,
                                  const absl::flat_hash_map<int64_t, int64_t>& sizes, std::mt19937_64& rng) {
  const AbstractTensor* t = AsTensor(p->declared());
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  if (const AbstractScalar* s = AsScalar(p->declared())) {
    return IsFloating(s->dtype()) ? Value(Scalar::Float(u(rng))) : Value(Scalar::Int(1, s->dtype()));
  }
  if (t == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("input '", p->name(), "' of graph '", g->name(),
                                                   "' has no declared tensor type: give --input ",
                                                   p->name(), "=X.npy"));
  }
  Shape shape = t->shape();
  for (int64_t& d : shape) {
    if (d >= 0) continue;
    auto it = sizes.find(d);
    if (it == sizes.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", p->name(), "' of graph '", g->name(), "' has dim '", DimToString(d),
          "': give its size with --dim ", IsSymbolDim(d) ? DimToString(d) : "NAME", "=N, or --input ",
          p->name(), "=X.npy"));
    }
    d = it->second;
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor x, Tensor::Create(t->dtype(), shape));
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    double r = u(rng);
    DispatchDType(x.dtype(), [&](auto zero) {
      using V = decltype(zero);
      double v = IsFloating(t->dtype()) || IsHalf(t->dtype()) ? r : std::floor((r + 1) * 1.5);
      if (t->dtype() == DType::kBool) v = r > 0;
      x.mutable_data<V>()[i] = static_cast<V>(v);
    });
  }
  return Value(std::move(x));
}

absl::StatusOr<std::vector<Value>> BenchInputs(FuncGraph* g, const ParsedArgs& args, uint64_t seed) {
  KGRAD_ASSIGN_OR_RETURN(auto sizes, DimSizes(args));
  absl::flat_hash_map<std::string, std::string> given;
  auto it = args.options.find("input");
  if (it != args.options.end()) {
    for (const std::string& s : it->second) {
      size_t eq = s.find('=');
      if (eq == std::string::npos) return absl::InvalidArgumentError(absl::StrCat("--input wants NAME=VALUE, got '", s, "'"));
      given[s.substr(0, eq)] = s.substr(eq + 1);
    }
  }
  std::mt19937_64 rng(seed);
  std::vector<Value> out;
  for (const Parameter* p : g->parameters()) {
    auto found = given.find(p->name());
    if (found != given.end()) {
      KGRAD_ASSIGN_OR_RETURN(Value v, ReadOneInput(p, found->second));
      out.push_back(std::move(v));
      given.erase(found);
    } else {
      KGRAD_ASSIGN_OR_RETURN(Value v, RandomInput(g, p, sizes, rng));
      out.push_back(std::move(v));
    }
  }
  if (!given.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", g->name(), "' has no input named '",
                                                   given.begin()->first, "'"));
  }
  return out;
}

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  // With --profile: time per primitive, summed over `profiled_runs` more runs
  // after the timed ones (kernels are timed one by one, so these runs are not
  // part of the median).
  Profile profile;
  int64_t profiled_runs = 0;
  // With `peak`: the run's high-water mark above its inputs and outputs (the
  // allocator's, less what was in use before it and the new buffers of the
  // result it returns), the largest of 3 more runs.
  int64_t peak_bytes = -1;
  // With both: where one more run peaks and what holds the memory there.
  PeakTrace peak_trace;
};

absl::StatusOr<Timing> Time(FuncGraph* g, const std::vector<Value>& args, int64_t warmup, int64_t repeat,
                            const ExecutorOptions& options, bool profile, bool peak = false) {
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> e, Executor::Create(g, options));
  for (int64_t i = 0; i < warmup; ++i) KGRAD_RETURN_IF_ERROR(e->Run(args).status());
  std::vector<double> ms;
  for (int64_t i = 0; i < repeat; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    KGRAD_RETURN_IF_ERROR(e->Run(args).status());
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  size_t n = ms.size();
  Timing t{n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2, ms.front(), ms.back()};
  if (profile) {
    for (int64_t i = 0; i < repeat; ++i) KGRAD_RETURN_IF_ERROR(e->Run(args, {}, &t.profile).status());
    t.profiled_runs = repeat;
  }
  if (peak) {
    KGRAD_ASSIGN_OR_RETURN(t.peak_bytes, RunPeakAboveOutputs(*e, args, 3));
    if (profile) {
      Profile traced;
      traced.peak = &t.peak_trace;
      KGRAD_RETURN_IF_ERROR(e->Run(args, {}, &traced).status());
    }
  }
  return t;
}

// The profile as "  conv2d  12.3456 ms  61.2%  (20 calls)" lines per run, slowest
// first, then their total.
std::string ProfileLines(const Timing& t) {
  const std::vector<std::pair<std::string, Profile::Entry>> rows = t.profile.Rows();
  double total = 0;
  for (const auto& row : rows) total += row.second.ms;
  const double runs = static_cast<double>(std::max<int64_t>(t.profiled_runs, 1));
  std::string s;
  for (const auto& [name, e] : rows) {
    absl::StrAppend(&s, absl::StrFormat("  %-28s %10.4f ms  %5.1f%%  (%g calls)\n", name, e.ms / runs,
                                        total > 0 ? 100 * e.ms / total : 0.0,
                                        static_cast<double>(e.calls) / runs));
  }
  absl::StrAppend(&s, absl::StrFormat("  %-28s %10.4f ms  (all kernels; median run %.3f ms)\n", "total", total / runs,
                                      t.median_ms));
  return s;
}

// The training step: value and gradients with respect to every floating input
// and every weight, optimised.
absl::StatusOr<ValueAndGradOptions> StepOptions(Module& m, FuncGraph* g,
                                                const std::vector<Value>& inputs,
                                                const std::string& residuals) {
  ValueAndGradOptions o;
  o.residuals = residuals;
  o.argnums.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = inputs[i];
    bool floating = (v.is_tensor() && IsDifferentiable(v.tensor().dtype())) ||
                    (v.is_scalar() && IsFloating(v.scalar().dtype()));
    if (floating) o.argnums.push_back(static_cast<int>(i));
  }
  for (const auto& w : m.weights()) {
    if (AsTensor(w->abstract()) != nullptr && IsDifferentiable(AsTensor(w->abstract())->dtype())) {
      o.weights.push_back(w.get());
    }
  }
  if (o.argnums.empty() && o.weights.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", g->name(), "' has no floating input or weight to differentiate"));
  }
  return o;
}

// The step as --remat and --residuals ask: under --remat auto, the plan for
// --memory-budget (tools/remat_plan.h), whose report goes to `out`.
absl::StatusOr<FuncGraph*> StepGraph(const ParsedArgs& args, Module& m, FuncGraph* g,
                                     const std::vector<Value>& inputs, std::ostream& out) {
  KGRAD_ASSIGN_OR_RETURN(ValueAndGradOptions o,
                         StepOptions(m, g, inputs, args.Get("residuals", "")));
  const bool automatic = args.Get("remat", "") == "auto";
  if (automatic != args.Has("memory-budget")) {
    return absl::InvalidArgumentError(automatic ? "--remat auto needs --memory-budget B"
                                                : "--memory-budget goes with --remat auto");
  }
  if (automatic) {
    KGRAD_ASSIGN_OR_RETURN(MemoryBudget budget, ParseMemoryBudget(args.Get("memory-budget")));
    RematPlanReport report;
    KGRAD_ASSIGN_OR_RETURN(FuncGraph* step, PlanRematStep(m, g, o, budget, inputs, &report));
    out << report.ToString() << "\n";
    return step;
  }
  KGRAD_RETURN_IF_ERROR(ApplyRematOption(args, m, g));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* step, ValueAndGrad(m, g, o));
  KGRAD_RETURN_IF_ERROR(Optimize(m, step).status());
  return step;
}

std::string Line(const std::string& what, const Timing& t) {
  return absl::StrFormat("%-8s median %9.3f ms  (min %.3f, max %.3f)", what, t.median_ms, t.min_ms, t.max_ms);
}

absl::Status Bench(const ParsedArgs& args, std::ostream& out) {
  if (args.positional.size() != 1) return absl::InvalidArgumentError("bench takes one FILE");
  KGRAD_ASSIGN_OR_RETURN(int64_t repeat, IntOption(args, "repeat", 10, 1));
  KGRAD_ASSIGN_OR_RETURN(int64_t warmup, IntOption(args, "warmup", 2, 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t seed, IntOption(args, "seed", 1, 0));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, LoadModule(args.positional[0]));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* g, SelectGraph(*m, args));
  KGRAD_ASSIGN_OR_RETURN(std::vector<Value> inputs, BenchInputs(g, args, static_cast<uint64_t>(seed)));
  // Build every graph before timing anything (building optimises the module).
  FuncGraph* step = nullptr;
  FuncGraph* jvp = nullptr;
  for (const char* option : {"remat", "residuals", "memory-budget"}) {
    if (args.Has(option) && !args.Has("grad")) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", option, " applies to the training step: give --grad too"));
    }
  }
  if (args.Has("grad")) {
    KGRAD_ASSIGN_OR_RETURN(step, StepGraph(args, *m, g, inputs, out));
  }
  if (args.Has("jvp")) {
    KGRAD_ASSIGN_OR_RETURN(jvp, Jvp(*m, g));
  }
  ExecutorOptions options;
  options.flush_denormals = args.Has("flush-denormals");
  const bool profile = args.Has("profile");
  out << "graph '" << g->name() << "', " << repeat << " runs after " << warmup << " warm-up"
      << (options.flush_denormals ? ", subnormals flushed" : "") << "\n";
  KGRAD_ASSIGN_OR_RETURN(Timing fwd, Time(g, inputs, warmup, repeat, options, profile));
  out << Line("forward", fwd) << "\n";
  std::string profiles;
  if (profile) absl::StrAppend(&profiles, "profile of the forward, per run:\n", ProfileLines(fwd));
  if (step != nullptr) {
    KGRAD_ASSIGN_OR_RETURN(Timing t, Time(step, inputs, warmup, repeat, options, profile, /*peak=*/true));
    out << Line("step", t) << absl::StrFormat("  step/forward %.2f", t.median_ms / fwd.median_ms) << "\n";
    out << absl::StrFormat("peak     %9.3f MiB  the step's memory above its inputs and outputs\n",
                           static_cast<double>(t.peak_bytes) / (1 << 20));
    if (profile) {
      absl::StrAppend(&profiles, "profile of the step, per run:\n", ProfileLines(t),
                      "where the step's memory peaks (outputs included):\n", t.peak_trace.ToString(100));
    }
  }
  if (jvp != nullptr) {
    // Tangents of the inputs' types: the inputs themselves (the time does not
    // depend on the values).
    std::vector<Value> with_tangents = inputs;
    with_tangents.insert(with_tangents.end(), inputs.begin(), inputs.end());
    KGRAD_ASSIGN_OR_RETURN(Timing t, Time(jvp, with_tangents, warmup, repeat, options, profile));
    out << Line("jvp", t) << absl::StrFormat("  jvp/forward %.2f", t.median_ms / fwd.median_ms) << "\n";
    if (profile) absl::StrAppend(&profiles, "profile of the jvp, per run:\n", ProfileLines(t));
  }
  out << profiles;
  return absl::OkStatus();
}

}  // namespace

int BenchCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return CommandMain(argv, {"input", "dim", "repeat", "warmup", "seed", "graph", "remat", "residuals",
                            "memory-budget"},
                     {"grad", "jvp", "flush-denormals", "profile"}, Bench, out, err);
}

}  // namespace cli
}  // namespace kgrad
