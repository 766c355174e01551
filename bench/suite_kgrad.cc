#include "bench/suite_kgrad.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "backends/run_peak.h"
#include "bench/chain_program.h"
#include "core/passes/optimize.h"
#include "core/status_macros.h"
#include "core/tensor.h"
#include "core/value_walk.h"
#include "examples/programs.h"
#include "ops/registry.h"

namespace kgrad {
namespace bench {
namespace {

absl::Status WriteTensor(const std::string& dir, const std::string& program, const std::string& name,
                         const Tensor& t, TensorManifest* manifest) {
  if (t.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat(program, ": tensor '", name, "' is ", t.TypeString(), ", expected f32"));
  }
  TensorFile f{name, absl::StrCat(program, "_", name, ".f32"), {t.shape().begin(), t.shape().end()}};
  std::string path = absl::StrCat(dir, "/", f.file);
  std::ofstream os(path, std::ios::binary);
  os.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes()));
  if (!os) return absl::InternalError(absl::StrCat("cannot write tensor file ", path));
  (*manifest)[program].push_back(std::move(f));
  return absl::OkStatus();
}

// Writes f's inputs (by parameter name) and the module's weights.
absl::Status WriteProgramTensors(const KgradRun& run, const std::string& program, const Module& m,
                                 FuncGraph* f, const std::vector<Value>& args, TensorManifest* manifest) {
  for (size_t i = 0; i < args.size(); ++i) {
    KGRAD_RETURN_IF_ERROR(WriteTensor(run.tensor_dir, program, f->parameters()[i]->name(), args[i].tensor(),
                                      manifest));
  }
  for (const auto& w : m.weights()) {
    if (!w->default_value().has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(program, ": weight '", w->name(), "' has no value"));
    }
    KGRAD_RETURN_IF_ERROR(WriteTensor(run.tensor_dir, program, w->name(), *w->default_value(), manifest));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> ScalarOf(const absl::StatusOr<Value>& v, const std::string& what) {
  if (!v.ok()) return v.status();
  if (!v->is_tensor() || v->tensor().NumElements() != 1) {
    return absl::InternalError(absl::StrCat(what, ": expected a scalar tensor, got ", v->TypeString()));
  }
  return v->tensor().ElementAsDouble(0);
}

// Runs `e` once and fails with its status (timing loops then ignore results).
absl::Status Check(const Executor& e, const std::vector<Value>& args, const std::string& what) {
  absl::StatusOr<Value> r = e.Run(args);
  if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat(what, ": ", r.status().message()));
  return absl::OkStatus();
}

int64_t ResidentBytes(const Module& m, const std::vector<Value>& args) {
  int64_t bytes = 0;
  for (const auto& w : m.weights()) {
    if (w->default_value().has_value()) bytes += static_cast<int64_t>(w->default_value()->nbytes());
  }
  for (const Value& a : args) bytes += a.is_tensor() ? static_cast<int64_t>(a.tensor().nbytes()) : 0;
  return bytes;
}

// The allocator's high-water mark during a run, counting the weights and inputs
// (already allocated before it) once: peak - in use before + their bytes, so
// that whatever else the process holds does not count. The largest of 3 runs.
int64_t PeakBytes(const Executor& e, const Module& m, const std::vector<Value>& args) {
  absl::StatusOr<int64_t> peak = RunPeakBytes(e, args, 3);
  return (peak.ok() ? *peak : 0) + ResidentBytes(m, args);
}

// On a device other than the CPU: how far its step result is from the CPU's.
absl::Status CompareWithCpu(const KgradRun& run, const std::string& key, FuncGraph* step,
                            const Executor& on_device, const std::vector<Value>& args, Metrics* out) {
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> cpu, Executor::Create(step));
  KGRAD_ASSIGN_OR_RETURN(Value expected, cpu->Run(args));
  KGRAD_ASSIGN_OR_RETURN(Value actual, on_device.Run(args));
  absl::StatusOr<double> diff = MaxScaledDiff(actual, expected);
  if (!diff.ok()) {
    return absl::InternalError(absl::StrCat(key, " step on ", run.device->name(), " vs the CPU: ",
                                            diff.status().message()));
  }
  (*out)[key + ".max_diff_vs_cpu"] = *diff;
  if (run.profile) {
    // Each leaf of the result, by its path of tuple positions.
    auto leaves = [](const Value& v) {
      std::vector<std::pair<std::string, Value>> out;
      (void)ForEachLeaf(v, [&](const Value& leaf, absl::Span<const size_t> path) {
        out.emplace_back(absl::StrJoin(path, "."), leaf);
        return absl::OkStatus();
      });
      return out;
    };
    const auto got = leaves(actual), want = leaves(expected);
    std::string each;
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
      absl::StatusOr<double> d = MaxScaledDiff(got[i].second, want[i].second);
      absl::StrAppend(&each, "  output ", want[i].first, " (", want[i].second.TypeString(), "): ",
                      d.ok() ? absl::StrCat(*d) : std::string(d.status().message()), "\n");
    }
    run.progress->Note(absl::StrCat(key, " step on ", run.device->name(),
                                    " vs the CPU, max |diff| / max |value| of each output:\n", each));
  }
  return absl::OkStatus();
}

// One run's time per primitive, on stderr (--profile: where a miss comes from).
void Note(const KgradRun& run, const std::string& what, const Executor& e, const std::vector<Value>& args) {
  Profile profile;
  (void)e.Run(args, {}, &profile);
  run.progress->Note(absl::StrCat("profile of the kgrad ", what, ":\n", profile.ToString()));
}

std::vector<Parameter*> Weights(const Module& m) {
  std::vector<Parameter*> w;
  for (const auto& p : m.weights()) w.push_back(p.get());
  return w;
}

struct ModelCase {
  std::string key;       // "mlp", "conv"
  std::string label;     // for the progress bar
  bool jvp = false;
};

// The optimised training step of loss program f: its value and every weight's
// gradient (m folds constants on the CPU while optimising).
absl::StatusOr<FuncGraph*> OptimisedStep(Module& m, FuncGraph* f) {
  m.set_constant_evaluator(&CpuConstantEvaluator::Get());  // Optimize and Jvp fold with it
  ValueAndGradOptions vo;
  vo.argnums.clear();
  vo.weights = Weights(m);
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* step, ValueAndGrad(m, f, vo));
  KGRAD_RETURN_IF_ERROR(Optimize(m, step).status());
  return step;
}

// Forward, step (loss + weight gradients, optimised as ratio_bench does) and
// optionally the Jvp (tangents: the inputs themselves) of a loss program.
absl::Status MeasureModel(const KgradRun& run, const ModelCase& c, Module& m, FuncGraph* f, Metrics* out,
                          TensorManifest* tensors) {
  std::vector<Value> args = programs::RandomInputs(f, run.shapes.seed);
  KGRAD_RETURN_IF_ERROR(WriteProgramTensors(run, c.key, m, f, args, tensors));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* step, OptimisedStep(m, f));
  ExecutorOptions eo;
  eo.device = run.device;
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ef, Executor::Create(f, eo));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> es, Executor::Create(step, eo));
  KGRAD_ASSIGN_OR_RETURN((*out)[c.key + ".loss"], ScalarOf(ef->Run(args), c.key + " forward"));
  KGRAD_RETURN_IF_ERROR(Check(*es, args, c.key + " step"));
  if (run.device != nullptr) KGRAD_RETURN_IF_ERROR(CompareWithCpu(run, c.key, step, *es, args, out));
  (*out)[c.key + ".fwd_ms"] = MedianMs([&] { (void)ef->Run(args); }, run.budget);
  if (run.profile) Note(run, c.key + " forward", *ef, args);
  run.progress->Done(c.label + " forward (kgrad)");
  (*out)[c.key + ".step_ms"] = MedianMs([&] { (void)es->Run(args); }, run.budget);
  (*out)[c.key + ".step_nodes"] = es->stats().steps;
  if (run.profile) Note(run, c.key + " step", *es, args);
  if (run.device == nullptr) (*out)[c.key + ".peak_bytes"] = static_cast<double>(PeakBytes(*es, m, args));
  run.progress->Done(c.label + " step (kgrad)");
  if (!c.jvp) return absl::OkStatus();
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* jvp, Jvp(m, f));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ej, Executor::Create(jvp, eo));
  std::vector<Value> jargs = args;
  for (const Value& a : args) jargs.push_back(a);
  KGRAD_RETURN_IF_ERROR(Check(*ej, jargs, c.key + " jvp"));
  (*out)[c.key + ".jvp_ms"] = MedianMs([&] { (void)ej->Run(jargs); }, run.budget);
  run.progress->Done(c.label + " jvp (kgrad)");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> MaxScaledDiff(const Value& a, const Value& b) {
  if (a.is_tuple() && b.is_tuple()) {
    if (a.tuple().size() != b.tuple().size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tuples of ", a.tuple().size(), " and ", b.tuple().size(), " elements"));
    }
    double worst = 0;
    for (size_t i = 0; i < a.tuple().size(); ++i) {
      absl::StatusOr<double> d = MaxScaledDiff(a.tuple()[i], b.tuple()[i]);
      if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat("element ", i, ": ", d.status().message()));
      worst = std::max(worst, *d);
    }
    return worst;
  }
  if (!a.is_tensor() || !b.is_tensor()) {
    return absl::InvalidArgumentError(absl::StrCat(a.TypeString(), " vs ", b.TypeString()));
  }
  const Tensor& x = a.tensor();
  const Tensor& y = b.tensor();
  if (x.dtype() != y.dtype() || x.shape() != y.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(x.TypeString(), " vs ", y.TypeString()));
  }
  double scale = 0, diff = 0;
  for (int64_t i = 0; i < y.NumElements(); ++i) {
    scale = std::max(scale, std::abs(y.ElementAsDouble(i)));
    double d = std::abs(x.ElementAsDouble(i) - y.ElementAsDouble(i));
    diff = std::isnan(d) ? HUGE_VAL : std::max(diff, d);
  }
  return diff / (scale > 0 ? scale : 1.0);
}

// The MLP's optimised training step for a batch of `batch` (a size or a symbol).
absl::StatusOr<std::unique_ptr<Executor>> MlpStep(const KgradRun& run, Module& m, int64_t batch) {
  FuncGraph* f = programs::Mlp(&m, batch, run.shapes.mlp_sizes, DType::kFloat32);
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* step, OptimisedStep(m, f));
  ExecutorOptions eo;
  eo.device = run.device;
  return Executor::Create(step, eo);
}

// The MLP's step with its batch declared as the symbol "batch" against the same
// step with the static batch, on the same inputs and weights, timed in three
// interleaved rounds: one graph for every batch size should cost nothing at run
// time (mlp.dyn_over_static, the ratio of the medians).
absl::Status MeasureSymbolicBatchStep(const KgradRun& run, FuncGraph* static_f, Metrics* out) {
  Module ms(DefaultRegistry()), md(DefaultRegistry());
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> es, MlpStep(run, ms, run.shapes.mlp_batch));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ed, MlpStep(run, md, DimSymbol("batch")));
  std::vector<Value> args = programs::RandomInputs(static_f, run.shapes.seed);
  KGRAD_RETURN_IF_ERROR(Check(*ed, args, "mlp step (symbolic batch)"));
  std::vector<double> s, d;
  for (int round = 0; round < 3; ++round) {
    s.push_back(MedianMs([&] { (void)es->Run(args); }, run.budget));
    d.push_back(MedianMs([&] { (void)ed->Run(args); }, run.budget));
  }
  std::sort(s.begin(), s.end());
  std::sort(d.begin(), d.end());
  (*out)["mlp.dyn_step_ms"] = d[1];
  (*out)["mlp.dyn_over_static"] = d[1] / s[1];
  run.progress->Done("MLP step, symbolic batch (kgrad)");
  return absl::OkStatus();
}

absl::Status MeasureMlp(const KgradRun& run, Metrics* out, TensorManifest* tensors) {
  Module m(DefaultRegistry());
  FuncGraph* f = programs::Mlp(&m, run.shapes.mlp_batch, run.shapes.mlp_sizes, DType::kFloat32);
  KGRAD_RETURN_IF_ERROR(MeasureModel(run, {"mlp", "MLP", true}, m, f, out, tensors));
  return MeasureSymbolicBatchStep(run, f, out);
}

absl::Status MeasureConvNet(const KgradRun& run, Metrics* out, TensorManifest* tensors) {
  const SuiteShapes& s = run.shapes;
  Module m(DefaultRegistry());
  FuncGraph* f = programs::ConvNet(&m, s.conv_batch, s.conv_hw, s.conv_c1, s.conv_c2, s.conv_classes,
                                   DType::kFloat32);
  KGRAD_RETURN_IF_ERROR(MeasureModel(run, {"conv", "conv net", false}, m, f, out, tensors));
  if (run.device == nullptr) return absl::OkStatus();
  // The same step in f64 on both backends (no max-pool near-ties flip there).
  Module m64(DefaultRegistry());
  FuncGraph* f64 = programs::ConvNet(&m64, s.conv_batch, s.conv_hw, s.conv_c1, s.conv_c2, s.conv_classes,
                                     DType::kFloat64);
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* step64, OptimisedStep(m64, f64));
  ExecutorOptions eo;
  eo.device = run.device;
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> es64, Executor::Create(step64, eo));
  Metrics f64_out;
  KGRAD_RETURN_IF_ERROR(
      CompareWithCpu(run, "conv_f64", step64, *es64, programs::RandomInputs(f64, s.seed), &f64_out));
  (*out)["conv.max_diff_vs_cpu_f64"] = f64_out["conv_f64.max_diff_vs_cpu"];
  return absl::OkStatus();
}

absl::Status MeasureChain(const KgradRun& run, Metrics* out, TensorManifest* tensors) {
  Module m(DefaultRegistry());
  FuncGraph* f = BuildChain(&m, run.shapes.chain_ops, run.shapes.chain_width);
  std::vector<Value> args = programs::RandomInputs(f, run.shapes.seed);
  KGRAD_RETURN_IF_ERROR(WriteProgramTensors(run, "chain", m, f, args, tensors));
  ValueAndGradOptions vo;  // d/dx, with the value (as the PyTorch side computes)
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* step, ValueAndGrad(m, f, vo));
  KGRAD_RETURN_IF_ERROR(Optimize(m, step).status());
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* jvp, Jvp(m, f));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ef, Executor::Create(f));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> es, Executor::Create(step));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ej, Executor::Create(jvp));
  std::vector<Value> jargs = {args[0], args[0]};
  KGRAD_ASSIGN_OR_RETURN((*out)["chain.loss"], ScalarOf(ef->Run(args), "chain forward"));
  KGRAD_RETURN_IF_ERROR(Check(*es, args, "chain step"));
  KGRAD_RETURN_IF_ERROR(Check(*ej, jargs, "chain jvp"));
  (*out)["chain.fwd_ms"] = MedianMs([&] { (void)ef->Run(args); }, run.budget);
  (*out)["chain.fwd_nodes"] = ef->stats().steps + ef->stats().fused;
  run.progress->Done("chain forward (kgrad)");
  (*out)["chain.step_ms"] = MedianMs([&] { (void)es->Run(args); }, run.budget);
  (*out)["chain.step_nodes"] = es->stats().steps + es->stats().fused;
  if (run.profile) Note(run, "chain step", *es, args);
  run.progress->Done("chain step (kgrad)");
  (*out)["chain.jvp_ms"] = MedianMs([&] { (void)ej->Run(jargs); }, run.budget);
  (*out)["chain.jvp_nodes"] = ej->stats().steps + ej->stats().fused;
  run.progress->Done("chain jvp (kgrad)");
  // The executor's cost per application: the same graphs with one kernel per
  // application (runs of elementwise applications otherwise run fused).
  ExecutorOptions unfused;
  unfused.fuse_elementwise = false;
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ef1, Executor::Create(f, unfused));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> es1, Executor::Create(step, unfused));
  (*out)["chain.fwd_unfused_ms"] = MedianMs([&] { (void)ef1->Run(args); }, run.budget);
  (*out)["chain.fwd_applications"] = ef1->stats().steps;
  (*out)["chain.step_unfused_ms"] = MedianMs([&] { (void)es1->Run(args); }, run.budget);
  (*out)["chain.step_applications"] = es1->stats().steps;
  run.progress->Done("chain unfused (kgrad)");
  // The gradient carried back through 1,000 steps underflows: on many x86 cores
  // its subnormal stretch costs more than the rest of the step. The same runs with
  // subnormals flushed (ExecutorOptions::flush_denormals, opt-in as in PyTorch
  // and ONNX Runtime).
  ExecutorOptions flush;
  flush.flush_denormals = true;
  ExecutorOptions flush_unfused = unfused;
  flush_unfused.flush_denormals = true;
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ef2, Executor::Create(f, flush));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> es2, Executor::Create(step, flush));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> es3, Executor::Create(step, flush_unfused));
  (*out)["chain.fwd_flushed_ms"] = MedianMs([&] { (void)ef2->Run(args); }, run.budget);
  (*out)["chain.step_flushed_ms"] = MedianMs([&] { (void)es2->Run(args); }, run.budget);
  (*out)["chain.step_unfused_flushed_ms"] = MedianMs([&] { (void)es3->Run(args); }, run.budget);
  run.progress->Done("chain, subnormals flushed (kgrad)");
  return absl::OkStatus();
}

absl::Status MeasureAdBuild(const KgradRun& run, Metrics* out) {
  for (int n : run.shapes.build_sizes) {
    std::unique_ptr<Module> m;
    FuncGraph* f = nullptr;
    absl::Status status;
    int64_t nodes_after = 0;
    auto setup = [&] {
      m = std::make_unique<Module>(DefaultRegistry());
      f = BuildChain(m.get(), n, run.shapes.chain_width);
    };
    auto build = [&] {
      absl::StatusOr<FuncGraph*> g = GradOperation()(*m, f);
      absl::StatusOr<std::string> log = g.ok() ? Optimize(*m, *g) : g.status();
      if (!log.ok()) status.Update(log.status());
    };
    // The largest graph takes a good fraction of a second per build: 5 runs.
    TimingBudget budget = run.budget;
    if (n >= 100000) budget.warmup = std::min(budget.warmup, 1);
    (*out)[absl::StrCat("ad_build.", n, "_ms")] = MedianMs(build, budget, n >= 100000 ? 5 : -1, setup);
    KGRAD_RETURN_IF_ERROR(status);
    for (const auto& g : m->graphs()) nodes_after += static_cast<int64_t>(g->owned_nodes().size());
    (*out)[absl::StrCat("ad_build.", n, "_nodes_after")] = static_cast<double>(nodes_after);
    run.progress->Done(absl::StrCat("AD build ", n, " (kgrad)"));
  }
  return absl::OkStatus();
}

}  // namespace bench
}  // namespace kgrad
