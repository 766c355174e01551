// Times ONNX models imported by kgrad: the forward pass and a training step (the
// optimised gradient graph w.r.t. every weight, with an output cotangent), medians
// under the suite's timing rule. Inputs are random, from the entry's declared
// (static) input types. One JSON line per model on stdout:
//   {"model": "resnet18", "forward_ms": 12.3, "step_ms": 40.1}
// bench/onnx_models.sh runs it beside PyTorch on the same files.
//
//   onnx_models_bench NAME=FILE.onnx...
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ad/grad_operation.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "bench/suite_timing.h"
#include "core/passes/optimize.h"
#include "core/status_macros.h"
#include "ops/registry.h"
#include "proto/onnx/onnx_import.h"

namespace kgrad {
namespace {

absl::StatusOr<Tensor> Random(const AbstractPtr& type, std::mt19937* rng) {
  const AbstractTensor* t = AsTensor(type);
  if (t == nullptr || !t->shape_known() || !IsFloating(t->dtype())) {
    return absl::InvalidArgumentError(absl::StrCat("needs static float inputs, got ", type->ToString()));
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor x, Tensor::Zeros(DType::kFloat32, t->shape()));
  std::normal_distribution<float> n;
  for (int64_t i = 0; i < x.NumElements(); ++i) x.mutable_data<float>()[i] = n(*rng);
  return x;
}

absl::Status Bench(const std::string& name, const std::string& path) {
  OnnxImportOptions o;
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, ImportOnnxFile(path, DefaultRegistry(), o));
  std::mt19937 rng(1);
  std::vector<Value> args;
  for (Parameter* p : m->entry()->parameters()) {
    KGRAD_ASSIGN_OR_RETURN(Tensor x, Random(p->abstract(), &rng));
    args.push_back(x);
  }
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> fwd, Executor::Create(m->entry()));
  KGRAD_ASSIGN_OR_RETURN(Value out, fwd->Run(args));
  if (!out.is_tensor()) return absl::InvalidArgumentError("needs one output tensor");
  GradOptions g;
  g.argnums.clear();
  for (const auto& w : m->weights()) g.weights.push_back(w.get());
  g.sens_param = true;
  KGRAD_ASSIGN_OR_RETURN(FuncGraph * step, Grad(*m, m->entry(), g));
  OptimizeOptions oo;
  oo.evaluator = &CpuConstantEvaluator::Get();
  KGRAD_RETURN_IF_ERROR(Optimize(*m, step, oo).status());
  std::vector<Value> step_args = args;
  KGRAD_ASSIGN_OR_RETURN(Tensor ct, Random(AbstractOfValue(out), &rng));
  step_args.push_back(ct);
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> bwd, Executor::Create(step));
  KGRAD_RETURN_IF_ERROR(bwd->Run(step_args).status());
  bench::TimingBudget budget;
  budget.budget_s = 3;
  double f = bench::MedianMs([&] { (void)fwd->Run(args); }, budget);
  double s = bench::MedianMs([&] { (void)bwd->Run(step_args); }, budget);
  std::cout << "{\"model\": \"" << name << "\", \"forward_ms\": " << f << ", \"step_ms\": " << s << "}"
            << std::endl;
  return absl::OkStatus();
}

}  // namespace
}  // namespace kgrad

int main(int argc, char** argv) {
  int failed = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    if (kv.size() != 2) {
      std::cerr << "usage: onnx_models_bench NAME=FILE.onnx...\n";
      return 2;
    }
    absl::Status s = kgrad::Bench(kv[0], kv[1]);
    if (!s.ok()) {
      std::cerr << kv[0] << ": " << s << "\n";
      ++failed;
    }
  }
  return failed == 0 ? 0 : 1;
}
