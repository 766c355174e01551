// The benchmark suite's logic: the JSON it reads back from PyTorch, the FLOP and
// memory formulas, the rows and targets, the report formats, the timing loop.
#include <cmath>
#include <string>

#include "absl/strings/match.h"
#include "backends/cpu/cpu_device.h"
#include "bench/suite_env.h"
#include "bench/suite_json.h"
#include "bench/suite_kgrad.h"
#include "bench/suite_report.h"
#include "bench/suite_rows.h"
#include "bench/suite_shapes.h"
#include "bench/suite_timing.h"
#include "bench/suite_torch.h"
#include "core/tensor.h"
#include "core/value.h"
#include "gtest/gtest.h"

namespace kgrad {
namespace bench {
namespace {

TEST(SuiteJsonTest, ReadsAFlatObject) {
  absl::StatusOr<FlatJson> j = ParseFlatJson(
      R"({"version": "1.13.0a0", "mlp.step_ms": 12.5, "n": -3e2, "missing": null, "nan": NaN})", "t.json");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->strings.at("version"), "1.13.0a0");
  EXPECT_DOUBLE_EQ(j->numbers.at("mlp.step_ms"), 12.5);
  EXPECT_DOUBLE_EQ(j->numbers.at("n"), -300);
  EXPECT_TRUE(std::isnan(j->numbers.at("missing")));
  EXPECT_TRUE(std::isnan(j->numbers.at("nan")));
  EXPECT_EQ(j->numbers.size(), 4u);
  absl::StatusOr<FlatJson> empty = ParseFlatJson(" { } ", "e.json");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->numbers.empty());
}

TEST(SuiteJsonTest, RejectsWhatIsNotFlatNamingTheFile) {
  for (const char* bad : {R"({"a": {"b": 1}})", R"({"a": [1]})", R"({"a": 1)", R"({"a" 1})", "", R"({"a": 1} x)",
                          R"({"a": "unterminated})", R"({"a": 1e})"}) {
    absl::StatusOr<FlatJson> j = ParseFlatJson(bad, "torch.json");
    ASSERT_FALSE(j.ok()) << bad;
    EXPECT_TRUE(absl::StrContains(j.status().message(), "torch.json")) << j.status();
  }
}

TEST(SuiteJsonTest, WritesEscapedStringsAndNullForNonFinite) {
  EXPECT_EQ(JsonString("a\"b\\c\nd"), R"("a\"b\\c\nd")");
  EXPECT_EQ(JsonNumber(2.5), "2.5");
  EXPECT_EQ(JsonNumber(std::nan("")), "null");
  EXPECT_EQ(JsonNumber(INFINITY), "null");
}

// A 4-3-2 MLP at batch 5, counted by hand.
SuiteShapes TinyMlp() {
  SuiteShapes s;
  s.mlp_batch = 5;
  s.mlp_sizes = {4, 3, 2};
  return s;
}

TEST(SuiteShapesTest, MlpStepFlopsCountForwardWeightAndInputGradients) {
  // forward 2*5*(4*3 + 3*2) = 180, weight gradients 180, input gradients of the
  // second layer only 2*5*3*2 = 60.
  EXPECT_DOUBLE_EQ(MlpStepFlops(TinyMlp()), 420);
}

TEST(SuiteShapesTest, MlpPlanAddsWeightsInputsSavedGradsAndTemporaries) {
  MemoryPlan p = MlpStepPlan(TinyMlp());
  EXPECT_DOUBLE_EQ(p.weights, 4 * (12 + 3 + 6 + 2));
  EXPECT_DOUBLE_EQ(p.inputs, 4 * 5 * (4 + 2));
  EXPECT_DOUBLE_EQ(p.saved, 4 * 5 * (3 + 2));  // tanh output, softmax
  EXPECT_DOUBLE_EQ(p.grads, p.weights);
  EXPECT_DOUBLE_EQ(p.temporaries, 2 * 4 * 5 * 3);
  EXPECT_DOUBLE_EQ(p.total(), 92 + 120 + 100 + 92 + 120);
}

TEST(SuiteShapesTest, ConvPlanCountsActivationsOfTheNetwork) {
  SuiteShapes s;
  s.conv_batch = 2, s.conv_hw = 8, s.conv_c1 = 3, s.conv_c2 = 4, s.conv_classes = 5;
  MemoryPlan p = ConvStepPlan(s);
  const double features = 4 * 2 * 2;  // c2 x (8/4)^2
  EXPECT_DOUBLE_EQ(p.weights, 4 * (3 * 9 + 4 * 3 * 9 + features * 5 + 5));
  EXPECT_DOUBLE_EQ(p.inputs, 4 * 2 * (64 + 5));
  // relu1 [3,8,8], pool1 [3,4,4], relu2 [4,4,4], pool2 [4,2,2], softmax [5].
  EXPECT_DOUBLE_EQ(p.saved, 4 * 2 * (192 + 48 + 64 + 16 + 5));
  EXPECT_DOUBLE_EQ(p.temporaries, 4 * 2 * (192 + 48));
}

Report WithMetrics(Metrics kgrad, Metrics torch) {
  Report r;
  r.kgrad = std::move(kgrad);
  r.torch = std::move(torch);
  r.build_sizes = {1000, 10000};
  AddRows(SuiteShapes(), &r);
  return r;
}

const Row& Find(const Report& r, const std::string& key) {
  for (const Row& row : r.rows) {
    if (row.key == key) return row;
  }
  static Row none;
  ADD_FAILURE() << "no row " << key;
  return none;
}

TEST(SuiteRowsTest, RatiosAndTargets) {
  Report r = WithMetrics({{"mlp.fwd_ms", 4}, {"mlp.step_ms", 10}, {"conv.fwd_ms", 2}, {"conv.step_ms", 7},
                          {"mlp.loss", 2.3}, {"sgemm_gflops", 100}, {"ad_build.1000_ms", 2.5},
                          {"ad_build.10000_ms", 40}},
                         {{"mlp.fwd_ms", 8}, {"mlp.step_ms", 16}, {"conv.step_ms", 6}, {"mlp.loss", 2.3001}});
  const Row& ratio = Find(r, "mlp.grad_over_fwd");
  EXPECT_DOUBLE_EQ(ratio.kgrad, 2.5);
  EXPECT_DOUBLE_EQ(ratio.torch, 2.0);
  EXPECT_EQ(ratio.pass, true);
  const Row& conv = Find(r, "conv.grad_over_fwd");
  EXPECT_DOUBLE_EQ(conv.kgrad, 3.5);
  EXPECT_EQ(conv.pass, false);
  EXPECT_EQ(Find(r, "conv.step_ms").pass, false);  // 7 ms is not half of 6 ms
  EXPECT_EQ(Find(r, "mlp.loss").pass, true);       // 1e-4 apart: the same computation
  EXPECT_DOUBLE_EQ(Find(r, "mlp.step_pct_sgemm").kgrad, 100 * MlpStepFlops(SuiteShapes()) / (10 * 1e6) / 100);
  EXPECT_EQ(Find(r, "ad_build.10000_ms").pass, true);
  const Row& growth = Find(r, "ad_build.growth_1000_10000");
  EXPECT_DOUBLE_EQ(growth.kgrad, 16);
  EXPECT_EQ(growth.pass, false);
  // No value: no verdict, and never a pass.
  EXPECT_FALSE(Find(r, "chain.jvp_over_fwd").pass.has_value());
  EXPECT_TRUE(std::isnan(Find(r, "mlp.jvp_ms").torch));
}

TEST(SuiteRowsTest, TheChainIsAlsoJudgedWithSubnormalsFlushed) {
  Report r = WithMetrics({{"chain.fwd_ms", 2}, {"chain.step_ms", 9}, {"chain.fwd_flushed_ms", 2},
                          {"chain.step_flushed_ms", 4.5}, {"chain.step_applications", 1000},
                          {"chain.step_unfused_ms", 0.2}, {"chain.step_unfused_flushed_ms", 0.12}},
                         {});
  EXPECT_EQ(Find(r, "chain.grad_over_fwd").pass, false);  // 4.5
  const Row& flushed = Find(r, "chain.flushed_grad_over_fwd");
  EXPECT_DOUBLE_EQ(flushed.kgrad, 2.25);
  EXPECT_EQ(flushed.pass, true);
  EXPECT_TRUE(std::isnan(flushed.torch));
  EXPECT_EQ(Find(r, "chain.step_us_per_node").pass, false);  // 0.2 us
  const Row& per_node = Find(r, "chain.step_us_per_node_flushed");
  EXPECT_DOUBLE_EQ(per_node.kgrad, 0.12);
  EXPECT_EQ(per_node.pass, true);
}

TEST(SuiteRowsTest, AMissingPyTorchSideLeavesItsTargetsOpen) {
  Report r = WithMetrics({{"conv.fwd_ms", 2}, {"conv.step_ms", 5}, {"mlp.loss", 2.3}}, {});
  EXPECT_FALSE(Find(r, "conv.step_ms").pass.has_value());
  EXPECT_FALSE(Find(r, "mlp.loss").pass.has_value());
  EXPECT_EQ(Find(r, "conv.grad_over_fwd").pass, true);
  std::string md = ToMarkdown(r);
  EXPECT_TRUE(absl::StrContains(md, "| 2. conv net | forward + gradient step (ms) | 5.00 | n/a | n/a | "
                                    "<= 0.5x PyTorch | n/a |"))
      << md;
  EXPECT_TRUE(absl::StrContains(md, "| step / forward | 2.50 | n/a | n/a | <= 2.5 | pass |")) << md;
}

TEST(SuiteReportTest, JsonCarriesRowsAndRawMetrics) {
  Report r = WithMetrics({{"conv.fwd_ms", 2}, {"conv.step_ms", 7}}, {{"conv.step_ms", 14}});
  r.meta = {{"PyTorch", "1.13"}};
  std::string json = ToJson(r);
  EXPECT_TRUE(absl::StrContains(json, R"("key": "conv.step_ms", "kgrad": 7, "pytorch": 14, )"
                                      R"("kgrad_over_pytorch": 0.5, "target": "<= 0.5x PyTorch", "pass": true})"))
      << json;
  EXPECT_TRUE(absl::StrContains(json, R"("PyTorch": "1.13")"));
  EXPECT_TRUE(absl::StrContains(json, R"("conv.fwd_ms": 2)"));
  // Unmeasured values are null: JSON has no NaN.
  EXPECT_FALSE(absl::StrContains(json, "nan"));
}

TEST(SuiteReportTest, SvgPlotsOnePolylinePerSideWithData) {
  Report r;
  r.build_sizes = {1000, 10000, 100000};
  r.kgrad = {{"ad_build.1000_ms", 10}, {"ad_build.10000_ms", 100}, {"ad_build.100000_ms", 1000}};
  std::string svg = BuildTimeSvg(r);
  EXPECT_TRUE(absl::StartsWith(svg, "<svg "));
  EXPECT_TRUE(absl::EndsWith(svg, "</svg>\n"));
  size_t first = svg.find("<polyline");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(svg.find("<polyline", first + 1), std::string::npos);  // no PyTorch data
  // Decades 1k..100k on x and 10..1000 ms on y: the points lie on the diagonal
  // from the bottom-left corner (80, 360) to the top-right one (570, 50).
  EXPECT_TRUE(absl::StrContains(svg, R"(points="80.0,360.0 325.0,205.0 570.0,50.0")")) << svg;
  EXPECT_TRUE(absl::StrContains(svg, ">10k</text>")) << svg;
  EXPECT_TRUE(absl::StrContains(svg, ">100 ms</text>")) << svg;
  r.torch = {{"ad_build.1000_ms", 20}, {"ad_build.10000_ms", 200}};
  svg = BuildTimeSvg(r);
  first = svg.find("<polyline");
  EXPECT_NE(svg.find("<polyline", first + 1), std::string::npos);
}

TEST(SuiteRowsTest, GpuRowsCompareWithPyTorchAndTheCpuBackend) {
  Report r;
  r.kgrad = {{"mlp.fwd_ms", 0.2}, {"mlp.step_ms", 0.5}, {"mlp.loss", 2.3}, {"mlp.max_diff_vs_cpu", 3e-6},
             {"conv.fwd_ms", 0.4}, {"conv.step_ms", 1.6}, {"conv.max_diff_vs_cpu", 2e-3},
             {"conv.max_diff_vs_cpu_f64", 1e-8}};
  r.torch = {{"mlp.fwd_ms", 0.25}, {"mlp.step_ms", 1.0}, {"mlp.loss", 2.3}, {"conv.step_ms", 1.5}};
  AddGpuRows(SuiteShapes(), &r);
  EXPECT_DOUBLE_EQ(Find(r, "mlp.step_ms").torch, 1.0);
  EXPECT_EQ(Find(r, "mlp.step_ms").pass, true);    // 0.5x PyTorch
  EXPECT_EQ(Find(r, "conv.step_ms").pass, true);   // 1.07x: within 1.1x
  EXPECT_DOUBLE_EQ(Find(r, "mlp.grad_over_fwd").kgrad, 2.5);
  EXPECT_FALSE(Find(r, "mlp.grad_over_fwd").pass.has_value());  // no ratio target on the GPU
  EXPECT_DOUBLE_EQ(Find(r, "mlp.step_gflops").kgrad, MlpStepFlops(SuiteShapes()) / 0.5e6);
  EXPECT_EQ(Find(r, "mlp.max_diff_vs_cpu").pass, true);
  // The conv net's f32 distance is informational (max-pool near-ties); f64 judged.
  EXPECT_FALSE(Find(r, "conv.max_diff_vs_cpu").pass.has_value());
  EXPECT_TRUE(std::isnan(Find(r, "conv.max_diff_vs_cpu").torch));
  EXPECT_EQ(Find(r, "conv.max_diff_vs_cpu_f64").pass, false);  // 1e-8 is over 1e-9
  r.kgrad["conv.step_ms"] = 1.7;
  r.kgrad["conv.max_diff_vs_cpu_f64"] = 1e-12;
  r.rows.clear();
  AddGpuRows(SuiteShapes(), &r);
  EXPECT_EQ(Find(r, "conv.step_ms").pass, false);  // 1.13x
  EXPECT_EQ(Find(r, "conv.max_diff_vs_cpu_f64").pass, true);
  EXPECT_FALSE(Find(r, "conv.loss").pass.has_value());  // no kgrad conv loss: no verdict
  for (const Row& row : r.rows) EXPECT_FALSE(absl::StartsWith(row.key, "chain")) << row.key;
}

TEST(SuiteKgradTest, MaxScaledDiffScalesEachTensorByItsLargestValue) {
  Value a = Value::Tuple({Tensor::FromVector<float>({2}, {1.0f, 10.0f}), Tensor::FromVector<float>({1}, {0.0f})});
  Value b = Value::Tuple({Tensor::FromVector<float>({2}, {1.5f, 10.0f}), Tensor::FromVector<float>({1}, {0.0f})});
  absl::StatusOr<double> d = MaxScaledDiff(a, b);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_DOUBLE_EQ(*d, 0.05);  // |1 - 1.5| / 10
  EXPECT_DOUBLE_EQ(*MaxScaledDiff(Tensor::FromVector<float>({1}, {0.25f}), Tensor::FromVector<float>({1}, {0.0f})),
                   0.25);  // an all-zero reference: absolute difference
  Value nan = Tensor::FromVector<float>({1}, {std::nanf("")});
  EXPECT_TRUE(std::isinf(*MaxScaledDiff(nan, Tensor::FromVector<float>({1}, {1.0f}))));
  absl::StatusOr<double> shape =
      MaxScaledDiff(Tensor::FromVector<float>({2}, {1, 2}), Tensor::FromVector<float>({1}, {1}));
  EXPECT_FALSE(shape.ok());
  absl::StatusOr<double> arity = MaxScaledDiff(a, Value::Tuple({Tensor::FromVector<float>({1}, {0.0f})}));
  EXPECT_FALSE(arity.ok());
  EXPECT_TRUE(absl::StrContains(arity.status().message(), "2 and 1 elements")) << arity.status();
}

// A one-repetition run on the CPU device standing in for CUDA: the path
// //bench:gpu_suite takes.
KgradRun RunOnCpuDevice(Progress* progress) {
  KgradRun run;
  run.budget = TimingBudget{0, 0.0, 1, 1};
  run.tensor_dir = ::testing::TempDir();
  run.device = CpuDevice();
  run.progress = progress;
  return run;
}

// The step runs on the device and is compared with the CPU executor's.
TEST(SuiteKgradTest, OnAnotherDeviceTheStepIsComparedWithTheCpu) {
  Progress progress(3);
  KgradRun run = RunOnCpuDevice(&progress);
  run.shapes.mlp_batch = 4;
  run.shapes.mlp_sizes = {6, 5, 3};
  Metrics m;
  TensorManifest tensors;
  absl::Status s = MeasureMlp(run, &m, &tensors);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(m.count("mlp.max_diff_vs_cpu"), 1u);
  EXPECT_EQ(m["mlp.max_diff_vs_cpu"], 0.0);  // the same kernels on the same numbers
  EXPECT_EQ(m.count("mlp.peak_bytes"), 0u);  // device memory: not the CPU allocator's
  EXPECT_GT(m["mlp.step_ms"], 0.0);
  EXPECT_EQ(tensors["mlp"].size(), 2u + 4u);  // x, labels, w1, b1, w2, b2
}

// The conv net is also compared in f64 (its f32 comparison can differ by a
// max-pool tie).
TEST(SuiteKgradTest, OnAnotherDeviceTheConvNetIsComparedInF64Too) {
  Progress progress(2);
  KgradRun run = RunOnCpuDevice(&progress);
  run.shapes.conv_batch = 2;
  run.shapes.conv_hw = 8;
  run.shapes.conv_c1 = 3;
  run.shapes.conv_c2 = 4;
  Metrics m;
  TensorManifest tensors;
  absl::Status s = MeasureConvNet(run, &m, &tensors);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(m.count("conv.max_diff_vs_cpu_f64"), 1u);
  EXPECT_EQ(m["conv.max_diff_vs_cpu_f64"], 0.0);
  EXPECT_EQ(m["conv.max_diff_vs_cpu"], 0.0);
}

TEST(SuiteTorchTest, SpecNamesTheDeviceAndThePrograms) {
  std::string cpu = TorchSpecJson(SuiteShapes(), TimingBudget(), 2, "/tmp/t", {});
  EXPECT_TRUE(absl::StrContains(cpu, "\"device\": \"cpu\"")) << cpu;
  EXPECT_FALSE(absl::StrContains(cpu, "\"programs\"")) << cpu;  // all of them
  std::string gpu = TorchSpecJson(SuiteShapes(), TimingBudget(), 1, "/tmp/t", {}, "cuda", {"mlp", "conv"});
  EXPECT_TRUE(absl::StrContains(gpu, "\"device\": \"cuda\", \"programs\": [\"mlp\", \"conv\"]")) << gpu;
}

TEST(SuiteEnvTest, ResultsGoToTheWorkspaceUnderBazelRun) {
  unsetenv("BUILD_WORKSPACE_DIRECTORY");
  EXPECT_EQ(ResultsDir(""), "./bench/results");
  EXPECT_EQ(ResultsDir("out"), "out");
  setenv("BUILD_WORKSPACE_DIRECTORY", "/ws", 1);
  EXPECT_EQ(ResultsDir(""), "/ws/bench/results");
  EXPECT_EQ(ResultsDir("out"), "/ws/out");
  EXPECT_EQ(ResultsDir("/abs"), "/abs");
  unsetenv("BUILD_WORKSPACE_DIRECTORY");
}

TEST(SuiteEnvTest, CommandLineQuotesTheArgumentsAfterDashes) {
  char prog[] = "suite", quick[] = "--quick", out[] = "--out", dir[] = "/tmp/x";
  char* none[] = {prog};
  EXPECT_EQ(CommandLine("./bazelw run //bench:suite", 1, none), "./bazelw run //bench:suite");
  char* some[] = {prog, quick, out, dir};
  EXPECT_EQ(CommandLine("./bazelw run //bench:suite", 4, some), "./bazelw run //bench:suite -- --quick --out /tmp/x");
}

TEST(SuiteTimingTest, WarmsUpThenRepeatsWithinTheLimits) {
  int setups = 0, runs = 0;
  TimingBudget budget{2, 0.0, 3, 5};  // no time budget: stop at min_reps
  MedianMs([&] { ++runs; }, budget, -1, [&] { ++setups; });
  EXPECT_EQ(runs, 5);
  EXPECT_EQ(setups, 5);
  runs = 0;
  budget.budget_s = 1e9;  // time never runs out: stop at max_reps, or the cap
  MedianMs([&] { ++runs; }, budget);
  EXPECT_EQ(runs, 2 + 5);
  runs = 0;
  MedianMs([&] { ++runs; }, budget, 4);
  EXPECT_EQ(runs, 2 + 4);
}

}  // namespace
}  // namespace bench
}  // namespace kgrad
