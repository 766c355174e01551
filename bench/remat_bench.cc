// Rematerialisation (ad/remat.h) on the CPU executor: peak memory, step time and
// gradient agreement of everything_saveable (no remat), nothing_saveable and
// dots_saveable, for
//   (a) a 20-layer tanh MLP, width 1024, batch 128, float32, each layer a called
//       graph y = tanh(x W + b), loss = sum of the last output;
//   (a') the same MLP in 4 called segments of 5 layers each;
//   (b) a 20-block residual conv net, 32 channels, 32x32 images, batch 8, each
//       block a called graph relu(conv3x3(relu(conv3x3(x))) + x), loss = sum.
// Every called graph gets the policy (SetRematPolicy), the entry keeps the default.
// Beside them, `auto 0.5` and `auto 0.3`: the automatic plan (tools/remat_plan.h)
// for that fraction of the save-everything peak, chosen inside the inlined graph
// (no policy on the called graphs), for each step separately.
//
// Two steps per program, both optimised gradient graphs run by the executor:
//   step    (x, W..., b...) -> (loss, (dW..., db...)): the training step;
//   dx-step (x, W..., b...) -> dx: the same backward pass without weight
//           gradients, so that its memory is the residuals' and the temporaries'.
// Memory columns (allocator high-water mark, bytes):
//   step peak     : peak of the step above what was allocated before it (the
//                   weights and x are inputs, allocated before) = activations,
//                   temporaries and the gradients it returns;
//   step total    : step peak + the inputs' bytes (as suite_kgrad's PeakBytes);
//   dx-step peak  : peak of the dx-step above its inputs (residuals + temporaries
//                   + the one dx it returns): the number remat is meant to cut.
// Times are medians of 5 runs of the step after one warm-up run.
// Run: ./bazelw run //bench:remat_bench
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ad/grad_operation.h"
#include "ad/remat.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "backends/run_peak.h"
#include "core/builder.h"
#include "core/passes/optimize.h"
#include "core/status_macros.h"
#include "core/tensor.h"
#include "examples/programs.h"
#include "ops/registry.h"
#include "tools/remat_plan.h"

namespace kgrad {
namespace {

constexpr int kBlocks = 20;
constexpr RematPolicy kPolicies[] = {RematPolicy::kEverythingSaveable,
                                     RematPolicy::kNothingSaveable, RematPolicy::kDotsSaveable};

// The MLP of programs::LayeredTanhMlp (kBlocks layers) with its layers in 4
// called segments of 5 (sqrt(n)-style checkpointing): seg(x, W_0, b_0, ..., W_4,
// b_4) applies five layers inline. A per-layer checkpoint cannot save memory in a tanh MLP (a layer's backward
// reads only its input and its output, which is the next layer's input, so
// both are saved either way); a segment's backward recomputes 5 layers from
// one saved input.
FuncGraph* SegmentedMlp(Module* m, int64_t batch, int64_t width) {
  constexpr int kPerSegment = 5;
  GraphBuilder sb(m, "segment");
  AnfNode* sh = sb.Param("x", DType::kFloat32, {batch, width});
  for (int i = 0; i < kPerSegment; ++i) {
    AnfNode* w = sb.Param(absl::StrCat("w", i), DType::kFloat32, {width, width});
    AnfNode* b = sb.Param(absl::StrCat("b", i), DType::kFloat32, {width});
    sh = sb.Op(PrimId::kTanh, {sb.Op(PrimId::kAdd, {sb.Op(PrimId::kMatMul, {sh, w}), b})});
  }
  FuncGraph* segment = sb.Return(sh).value();
  GraphBuilder g(m, "mlp_segments");
  AnfNode* h = g.Param("x", DType::kFloat32, {batch, width});
  std::vector<AnfNode*> args = {h};
  for (int i = 0; i < kBlocks; ++i) {
    args.push_back(g.Param(absl::StrCat("w", i), DType::kFloat32, {width, width}));
    args.push_back(g.Param(absl::StrCat("b", i), DType::kFloat32, {width}));
    if ((i + 1) % kPerSegment == 0) {
      h = g.Call(segment, args);
      args = {h};
    }
  }
  return g.Return(g.Op(PrimId::kReduceSum, {h})).value();
}

// resnet(x, k_0, ..., k_39) = sum(block(...block(x, k_0, k_1)...)).
FuncGraph* ResNet(Module* m, int64_t batch, int64_t channels, int64_t size) {
  AttrMap same{{"padding", std::vector<int64_t>{1, 1}}};
  Shape image{batch, channels, size, size};
  Shape kernel{channels, channels, 3, 3};
  GraphBuilder bb(m, "block");
  AnfNode* x = bb.Param("x", DType::kFloat32, image);
  AnfNode* k1 = bb.Param("k1", DType::kFloat32, kernel);
  AnfNode* k2 = bb.Param("k2", DType::kFloat32, kernel);
  AnfNode* h = bb.Op(PrimId::kRelu, {bb.Op(PrimId::kConv2d, {x, k1}, same)});
  h = bb.Op(PrimId::kAdd, {bb.Op(PrimId::kConv2d, {h, k2}, same), x});
  FuncGraph* block = bb.Return(bb.Op(PrimId::kRelu, {h})).value();
  GraphBuilder g(m, "resnet");
  AnfNode* y = g.Param("x", DType::kFloat32, image);
  for (int i = 0; i < kBlocks; ++i) {
    AnfNode* a = g.Param(absl::StrCat("k", 2 * i), DType::kFloat32, kernel);
    AnfNode* c = g.Param(absl::StrCat("k", 2 * i + 1), DType::kFloat32, kernel);
    y = g.Call(block, {y, a, c});
  }
  return g.Return(g.Op(PrimId::kReduceSum, {y})).value();
}

// Inputs: x uniform in [-1, 1); weights uniform in [-s, s) with s = 1/sqrt(fan-in),
// so that activations neither vanish nor saturate.
std::vector<Value> Inputs(FuncGraph* f, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Value> args;
  for (Parameter* p : f->parameters()) {
    Shape s = AsTensor(p->declared())->shape();
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    int64_t fan_in = s.size() == 4 ? s[1] * s[2] * s[3] : s[0];
    double scale = p->name() == "x" ? 1.0 : 1.0 / std::sqrt(static_cast<double>(fan_in));
    std::uniform_real_distribution<float> u(static_cast<float>(-scale), static_cast<float>(scale));
    std::vector<float> v(n);
    for (float& e : v) e = u(rng);
    args.push_back(Value(Tensor::FromVector<float>(s, v)));
  }
  return args;
}

struct Row {
  std::string program, policy;
  int64_t step_peak = 0, step_total = 0, dx_peak = 0;
  double median_ms = 0, max_diff = 0;
  std::vector<Value> grads;
};

int64_t Bytes(const std::vector<Value>& vs) {
  int64_t n = 0;
  for (const Value& v : vs) n += static_cast<int64_t>(v.tensor().nbytes());
  return n;
}

// Peak above what is in use before the run, largest of 3 runs; `result` gets the
// last result.
absl::StatusOr<int64_t> Peak(const Executor& e, const std::vector<Value>& args, Value* result) {
  return RunPeakBytes(e, args, 3, result);
}

// The optimised step of `build`'s program under `policy`: gradients of args 1..n
// with the value (`dx_only`: the gradient of x alone).
absl::StatusOr<FuncGraph*> Step(Module& m, FuncGraph* f, RematPolicy policy, bool dx_only) {
  KGRAD_RETURN_IF_ERROR(SetRematPolicy(m, f, policy));
  FuncGraph* step = nullptr;
  if (dx_only) {
    KGRAD_ASSIGN_OR_RETURN(step, Grad(m, f, GradOptions{}));
  } else {
    ValueAndGradOptions o;
    o.argnums.clear();
    for (size_t i = 1; i < f->parameters().size(); ++i) o.argnums.push_back(static_cast<int>(i));
    KGRAD_ASSIGN_OR_RETURN(step, ValueAndGrad(m, f, o));
  }
  KGRAD_RETURN_IF_ERROR(Optimize(m, step).status());
  return step;
}

using BuildFn = FuncGraph* (*)(Module*);

// The step (or dx-step) under the automatic plan for `fraction`.
absl::StatusOr<FuncGraph*> AutoStep(Module& m, FuncGraph* f, double fraction, bool dx_only,
                                    const std::vector<Value>& args) {
  ValueAndGradOptions o;
  o.argnums.clear();
  if (dx_only) o.argnums.push_back(0);
  for (size_t i = 1; !dx_only && i < f->parameters().size(); ++i) {
    o.argnums.push_back(static_cast<int>(i));
  }
  MemoryBudget budget;
  budget.fraction = fraction;
  RematPlanReport report;
  absl::StatusOr<FuncGraph*> step = PlanRematStep(m, f, o, budget, args, &report);
  if (step.ok()) std::fprintf(stderr, "%s\n", report.ToString().c_str());
  return step;
}

// `fraction` > 0: the automatic plan for it instead of `policy`.
absl::StatusOr<Row> Measure(const std::string& name, BuildFn build, RematPolicy policy,
                            double fraction = 0) {
  Row row{name, fraction > 0 ? absl::StrCat("auto ", fraction) : std::string(RematPolicyName(policy))};
  auto step_of = [&](Module& m, FuncGraph* f, bool dx_only, const std::vector<Value>& args) {
    return fraction > 0 ? AutoStep(m, f, fraction, dx_only, args) : Step(m, f, policy, dx_only);
  };
  std::vector<Value> args;
  {
    Module m(DefaultRegistry());
    m.set_constant_evaluator(&CpuConstantEvaluator::Get());
    FuncGraph* f = build(&m);
    args = Inputs(f, 42);
    KGRAD_ASSIGN_OR_RETURN(FuncGraph* step, step_of(m, f, /*dx_only=*/true, args));
    KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> e, Executor::Create(step));
    Value dx;
    KGRAD_ASSIGN_OR_RETURN(row.dx_peak, Peak(*e, args, &dx));
  }
  Module m(DefaultRegistry());
  m.set_constant_evaluator(&CpuConstantEvaluator::Get());
  FuncGraph* f = build(&m);
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* step, step_of(m, f, /*dx_only=*/false, args));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> e, Executor::Create(step));
  Value result;
  KGRAD_ASSIGN_OR_RETURN(row.step_peak, Peak(*e, args, &result));
  row.step_total = row.step_peak + Bytes(args);
  const Value& grads = result.tuple()[1];
  row.grads = grads.is_tuple() ? grads.tuple() : std::vector<Value>{grads};
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    KGRAD_RETURN_IF_ERROR(e->Run(args).status());
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  row.median_ms = ms[ms.size() / 2];
  return row;
}

double MaxDiff(const std::vector<Value>& a, const std::vector<Value>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const float* x = a[i].tensor().data<float>();
    const float* y = b[i].tensor().data<float>();
    for (int64_t j = 0; j < a[i].tensor().NumElements(); ++j) {
      d = std::max(d, static_cast<double>(std::abs(x[j] - y[j])));
    }
  }
  return d;
}

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

FuncGraph* MlpProgram(Module* m) { return programs::LayeredTanhMlp(m, kBlocks, 128, 1024, DType::kFloat32); }
FuncGraph* ResNetProgram(Module* m) { return ResNet(m, 8, 32, 32); }
FuncGraph* SegmentedMlpProgram(Module* m) { return SegmentedMlp(m, 128, 1024); }

int Main() {
  std::printf("| program | policy | step peak MiB | step total MiB | dx-step peak MiB | "
              "step ms (median of 5) | max abs grad diff |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  struct Program {
    const char* name;
    BuildFn build;
  };
  for (const Program& p : {Program{"mlp20x1024", MlpProgram},
                           Program{"mlp20x1024_seg5", SegmentedMlpProgram},
                           Program{"resnet20x32c", ResNetProgram}}) {
    std::vector<Row> rows;
    for (RematPolicy policy : kPolicies) {
      absl::StatusOr<Row> r = Measure(p.name, p.build, policy);
      if (!r.ok()) {
        std::fprintf(stderr, "%s %s: %s\n", p.name, std::string(RematPolicyName(policy)).c_str(),
                     std::string(r.status().message()).c_str());
        return 1;
      }
      rows.push_back(*std::move(r));
    }
    for (double fraction : {0.5, 0.3}) {
      absl::StatusOr<Row> r = Measure(p.name, p.build, RematPolicy::kEverythingSaveable, fraction);
      if (!r.ok()) {
        std::printf("| %s | auto %.1f | not met: %s |\n", p.name, fraction,
                    std::string(r.status().message()).c_str());
        continue;
      }
      rows.push_back(*std::move(r));
    }
    for (Row& r : rows) {
      r.max_diff = MaxDiff(r.grads, rows[0].grads);
      std::printf("| %s | %s | %.1f | %.1f | %.1f | %.1f | %.3g |\n", r.program.c_str(),
                  r.policy.c_str(), MiB(r.step_peak), MiB(r.step_total), MiB(r.dx_peak),
                  r.median_ms, r.max_diff);
    }
    std::printf("%s ratios vs everything_saveable: nothing step peak %.2fx, dx-step peak %.2fx; "
                "dots step time %.2fx, nothing step time %.2fx\n",
                p.name, static_cast<double>(rows[1].step_peak) / rows[0].step_peak,
                static_cast<double>(rows[1].dx_peak) / rows[0].dx_peak,
                rows[2].median_ms / rows[0].median_ms, rows[1].median_ms / rows[0].median_ms);
  }
  return 0;
}

}  // namespace
}  // namespace kgrad

int main() { return kgrad::Main(); }
