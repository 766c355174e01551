#include "bench/suite_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kgrad {
namespace bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double Get(const Metrics& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? kNaN : it->second;
}

// A count or rate for a metric's label ("n/a" when it was not measured).
std::string Label(double v) { return std::isfinite(v) ? absl::StrFormat("%.0f", v) : "n/a"; }

// pass when `ok` holds for a finite value; unknown otherwise.
std::optional<bool> Judge(double v, bool ok) {
  if (!std::isfinite(v)) return std::nullopt;
  return ok;
}

class Rows {
 public:
  explicit Rows(Report* r) : r_(r) {}

  // A measurement both sides have under the same key.
  Row& Both(const std::string& scenario, const std::string& metric, const std::string& key) {
    return Add(scenario, metric, key, Get(r_->kgrad, key), Get(r_->torch, key));
  }
  Row& Add(const std::string& scenario, const std::string& metric, const std::string& key, double k, double t) {
    Row row;
    row.scenario = scenario;
    row.metric = metric;
    row.key = key;
    row.kgrad = k;
    row.torch = t;
    r_->rows.push_back(row);
    return r_->rows.back();
  }
  Row& at(size_t i) { return r_->rows[i]; }
  size_t size() const { return r_->rows.size(); }
  void note(std::string n) { r_->notes.push_back(std::move(n)); }
  double K(const std::string& key) const { return Get(r_->kgrad, key); }
  double T(const std::string& key) const { return Get(r_->torch, key); }

 private:
  Report* r_;
};

void AtMost(Row& row, double limit, const std::string& target) {
  row.target = target;
  row.pass = Judge(row.kgrad, row.kgrad <= limit);
}

// Losses of both sides on the same weights and inputs: a check that they run the
// same computation.
void LossRow(Rows& rows, const std::string& scenario, const std::string& prefix) {
  Row& row = rows.Both(scenario, "loss on shared weights/inputs (check)", prefix + ".loss");
  row.target = "same to 1e-3 rel.";
  double rel = std::fabs(row.kgrad - row.torch) / std::max(1.0, std::fabs(row.torch));
  row.pass = Judge(rel, rel <= 1e-3);
}

// forward, step, step/forward (at most `ratio`); returns the step row's index.
// Forward, step and step / forward (with the target `ratio`, none when 0); the
// step row's index.
size_t ModelRows(Rows& rows, const std::string& scenario, const std::string& p, double ratio) {
  rows.Both(scenario, "forward (ms)", p + ".fwd_ms");
  rows.Both(scenario, "forward + gradient step (ms)", p + ".step_ms");
  size_t step = rows.size() - 1;
  Row& r = rows.Add(scenario, "step / forward", p + ".grad_over_fwd", rows.K(p + ".step_ms") / rows.K(p + ".fwd_ms"),
                    rows.T(p + ".step_ms") / rows.T(p + ".fwd_ms"));
  if (ratio > 0) AtMost(r, ratio, absl::StrFormat("<= %.1f", ratio));
  return step;
}

void MlpRows(const SuiteShapes& s, Rows& rows) {
  const std::string sc = "1. MLP";
  ModelRows(rows, sc, "mlp", 3.0);
  double flops = MlpStepFlops(s);
  double k = flops / (rows.K("mlp.step_ms") * 1e6), t = flops / (rows.T("mlp.step_ms") * 1e6);
  rows.Add(sc, "step GFLOP/s (matmul FLOPs)", "mlp.step_gflops", k, t);
  double sgemm = rows.K("sgemm_gflops");
  Row& pct = rows.Add(sc, absl::StrCat("step GFLOP/s as % of Eigen sgemm (", Label(sgemm), " GFLOP/s)"),
                      "mlp.step_pct_sgemm", 100 * k / sgemm, 100 * t / sgemm);
  pct.target = ">= 80%";
  pct.pass = Judge(pct.kgrad, pct.kgrad >= 80);
  AtMost(rows.Add(sc, "step with a symbolic batch / static batch", "mlp.dyn_over_static",
                  rows.K("mlp.dyn_over_static"), kNaN),
         1.10, "<= 1.10");
  LossRow(rows, sc, "mlp");
}

void ConvRows(Rows& rows) {
  const std::string sc = "2. conv net";
  Row& step = rows.at(ModelRows(rows, sc, "conv", 2.5));
  step.target = "<= 0.5x PyTorch";
  step.pass = Judge(step.kgrad / step.torch, step.kgrad <= 0.5 * step.torch);
  LossRow(rows, sc, "conv");
}

void ChainRows(Rows& rows) {
  const std::string sc = "3. 1,000-op chain";
  ModelRows(rows, sc, "chain", 2.5);
  // Both sides divided by the applications kgrad's optimised gradient graph has,
  // kgrad's time taken with one kernel per application (ExecutorOptions::
  // fuse_elementwise off), so that the row measures the executor's cost per
  // application (PyTorch does comparable work per node).
  double nodes = rows.K("chain.step_applications");
  AtMost(rows.Add(sc, absl::StrCat("per-node overhead, step, unfused (us; ", Label(nodes), " nodes)"),
                  "chain.step_us_per_node", rows.K("chain.step_unfused_ms") * 1e3 / nodes,
                  rows.T("chain.step_ms") * 1e3 / nodes),
         0.15, "<= 0.15 us");
  double fwd_nodes = rows.K("chain.fwd_applications");
  rows.Add(sc, absl::StrCat("per-node overhead, forward, unfused (us; ", Label(fwd_nodes), " nodes)"),
           "chain.fwd_us_per_node", rows.K("chain.fwd_unfused_ms") * 1e3 / fwd_nodes,
           rows.T("chain.fwd_ms") * 1e3 / fwd_nodes);
  // The same with subnormals flushed (kgrad only; PyTorch keeps its default).
  AtMost(rows.Add(sc, "step / forward, subnormals flushed (flush_denormals)", "chain.flushed_grad_over_fwd",
                  rows.K("chain.step_flushed_ms") / rows.K("chain.fwd_flushed_ms"), kNaN),
         2.5, "<= 2.5");
  AtMost(rows.Add(sc, "per-node overhead, step, unfused, subnormals flushed (us)", "chain.step_us_per_node_flushed",
                  rows.K("chain.step_unfused_flushed_ms") * 1e3 / nodes, kNaN),
         0.15, "<= 0.15 us");
  LossRow(rows, sc, "chain");
}

void JvpRows(Rows& rows) {
  const std::string sc = "4. Jvp";
  // The MLP's tangent repeats every matmul of the forward (x_dot @ w1 included), so
  // 2.0 is its floor; the elementwise work around them gets 5%.
  struct Target {
    const char* key;
    double at_most;
    const char* text;
  };
  for (const Target& t : {Target{"mlp", 2.05, "<= 2.05"}, Target{"chain", 2.0, "<= 2.0"}}) {
    std::string key(t.key);
    rows.Both(sc, key + " jvp (ms)", key + ".jvp_ms");
    AtMost(rows.Add(sc, key + " jvp / forward", key + ".jvp_over_fwd", rows.K(key + ".jvp_ms") / rows.K(key + ".fwd_ms"),
                    rows.T(key + ".jvp_ms") / rows.T(key + ".fwd_ms")),
           t.at_most, t.text);
  }
}

std::string Nodes(int n) { return n >= 1000 ? absl::StrCat(n / 1000, "k") : absl::StrCat(n); }

void BuildRows(const SuiteShapes& s, Rows& rows) {
  const std::string sc = "5. grad build + optimise";
  for (int n : s.build_sizes) {
    std::string key = absl::StrCat("ad_build.", n, "_ms");
    Row& row = rows.Both(
        sc, absl::StrCat(Nodes(n), " nodes (ms; ", Label(rows.K(absl::StrCat("ad_build.", n, "_nodes_after"))),
                         " nodes after)"),
        key);
    if (n == 10000) AtMost(row, 50, "<= 50 ms");
    if (n == 100000) AtMost(row, 600, "<= 600 ms");
  }
  // ~linear: 10x the nodes should cost ~10x the time; 12x allows a little more.
  for (size_t i = 1; i < s.build_sizes.size(); ++i) {
    int a = s.build_sizes[i - 1], b = s.build_sizes[i];
    std::string ka = absl::StrCat("ad_build.", a, "_ms"), kb = absl::StrCat("ad_build.", b, "_ms");
    double linear = static_cast<double>(b) / a;
    AtMost(rows.Add(sc, absl::StrFormat("growth %s -> %s (time ratio; linear = %.0f)", Nodes(a), Nodes(b), linear),
                    absl::StrCat("ad_build.growth_", a, "_", b), rows.K(kb) / rows.K(ka), rows.T(kb) / rows.T(ka)),
           1.2 * linear, absl::StrFormat("<= %.0f", 1.2 * linear));
  }
}

void MemoryRows(const SuiteShapes& s, Rows& rows) {
  const std::string sc = "6. peak memory of the step";
  for (const char* p : {"mlp", "conv"}) {
    std::string key(p);
    MemoryPlan plan = key == "mlp" ? MlpStepPlan(s) : ConvStepPlan(s);
    double peak = rows.K(key + ".peak_bytes") / 1e6;
    rows.Add(sc, key + " peak, allocator high-water mark (MB)", key + ".peak_mb", peak, kNaN);
    rows.Add(sc, key + " planned minimum (MB)", key + ".planned_mb", plan.total() / 1e6, kNaN);
    AtMost(rows.Add(sc, key + " peak / planned", key + ".peak_over_planned", peak * 1e6 / plan.total(), kNaN), 1.1,
           "<= 1.1");
    rows.note(absl::StrFormat("%s planned minimum = %s = %.2f + %.2f + %.2f + %.2f + %.2f MB.", key, plan.formula,
                              plan.weights / 1e6, plan.inputs / 1e6, plan.saved / 1e6, plan.grads / 1e6,
                              plan.temporaries / 1e6));
  }
}

// The step on the device against the same step on the CPU (kgrad only).
void VsCpuRow(Rows& rows, const std::string& scenario, const std::string& p) {
  AtMost(rows.Add(scenario, "step result vs CPU backend (max |diff| / max |value|)", p + ".max_diff_vs_cpu",
                  rows.K(p + ".max_diff_vs_cpu"), kNaN),
         1e-4, "<= 1e-4");
}

// The GPU's step time against PyTorch's on the same GPU (issue 22: <= 1.1x).
void GpuStepTarget(Rows& rows, size_t step_row) {
  Row& step = rows.at(step_row);
  step.target = "<= 1.1x PyTorch";
  step.pass = Judge(step.kgrad / step.torch, step.kgrad <= 1.1 * step.torch);
}

}  // namespace

void AddGpuRows(const SuiteShapes& s, Report* report) {
  Rows rows(report);
  // No step / forward targets here: on the GPU both sides' steps are mostly the
  // copies of the gradients back to host memory.
  const std::string mlp = "1. MLP";
  GpuStepTarget(rows, ModelRows(rows, mlp, "mlp", 0));
  double flops = MlpStepFlops(s);
  rows.Add(mlp, "step GFLOP/s (matmul FLOPs)", "mlp.step_gflops", flops / (rows.K("mlp.step_ms") * 1e6),
           flops / (rows.T("mlp.step_ms") * 1e6));
  rows.Both(mlp, "jvp (ms)", "mlp.jvp_ms");
  LossRow(rows, mlp, "mlp");
  VsCpuRow(rows, mlp, "mlp");
  const std::string conv = "2. conv net";
  GpuStepTarget(rows, ModelRows(rows, conv, "conv", 0));
  LossRow(rows, conv, "conv");
  // In f32 a max-pooling window whose two largest values are within rounding of
  // each other can pick another maximum on each backend, which moves that
  // window's gradient (informational); in f64 no such ties occur at this size.
  rows.Add(conv, "step result vs CPU backend, f32 (max |diff| / max |value|; max-pool near-ties may flip)",
           "conv.max_diff_vs_cpu", rows.K("conv.max_diff_vs_cpu"), kNaN);
  AtMost(rows.Add(conv, "step result vs CPU backend, f64 (max |diff| / max |value|)", "conv.max_diff_vs_cpu_f64",
                  rows.K("conv.max_diff_vs_cpu_f64"), kNaN),
         1e-9, "<= 1e-9");
}

void AddRows(const SuiteShapes& s, Report* report) {
  Rows rows(report);
  MlpRows(s, rows);
  ConvRows(rows);
  ChainRows(rows);
  JvpRows(rows);
  BuildRows(s, rows);
  MemoryRows(s, rows);
}

}  // namespace bench
}  // namespace kgrad
