#include "examples/distributed/step_programs.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <random>

#include "ad/data_parallel.h"
#include "ad/expand_differentiation.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/status_macros.h"
#include "examples/programs.h"
#include "ops/registry.h"

namespace kgrad {
namespace examples {
namespace {

using programs::FloatTensor;

// Small deterministic starting weights (no two alike), scaled by 2/sqrt(fan_in).
Tensor Init(DType dtype, Shape shape, double phase, int64_t fan_in = 4) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return FloatTensor(dtype, shape, [=](int64_t i) { return scale * std::sin(1.7 * i + phase); });
}

// The step graph around `loss`: value_and_grad{weights="*"}, then w - 0.5 dw for
// every weight, returning (loss, new weights).
FuncGraph* StepAround(Module* m, FuncGraph* loss, DType dtype, Shape x_shape, Shape labels_shape,
                      double rate) {
  GraphBuilder b(m, "step");
  AnfNode* x = b.Param("x", dtype, x_shape);
  AnfNode* labels = b.Param("labels", dtype, labels_shape);
  AnfNode* vg_op = b.Op(PrimId::kValueAndGrad, {b.GraphRef(loss)},
                        {{"wrt", std::vector<int64_t>{}}, {"weights", std::string("*")}});
  AnfNode* vg = b.Call(vg_op, {x, labels});
  AnfNode* grads = b.GetItem(vg, 1);
  AnfNode* lr = b.Const(Value(FloatTensor(dtype, {}, [rate](int64_t) { return rate; })));
  std::vector<AnfNode*> updated;
  for (size_t k = 0; k < m->weights().size(); ++k) {
    AnfNode* w = m->weights()[k].get();
    updated.push_back(b.Op(PrimId::kSub, {w, b.Op(PrimId::kMul, {lr, b.GetItem(grads, static_cast<int64_t>(k))})}));
  }
  return b.Return(b.Tuple({b.GetItem(vg, 0), b.Tuple(updated)})).value();
}

AnfNode* CrossEntropy(GraphBuilder& b, AnfNode* logits, AnfNode* labels) {
  return b.Op(PrimId::kReduceMean, {b.Op(PrimId::kSoftmaxCrossEntropy, {logits, labels})});
}

StepProgram Finish(std::unique_ptr<Module> m, FuncGraph* step) {
  m->set_constant_evaluator(&CpuConstantEvaluator::Get());
  m->set_entry(step);
  return StepProgram{std::move(m), step};
}

}  // namespace

StepProgram MlpStep(DType dtype, int64_t batch, std::vector<int64_t> widths, double lr) {
  auto m = std::make_unique<Module>(DefaultRegistry());
  GraphBuilder b(m.get(), "mlp_loss");
  AnfNode* h = b.Param("x", dtype, {batch, widths.front()});
  AnfNode* labels = b.Param("labels", dtype, {batch, widths.back()});
  for (size_t k = 0; k + 1 < widths.size(); ++k) {
    const std::string n = std::to_string(k + 1);
    AnfNode* w = b.Weight("w" + n, Init(dtype, {widths[k], widths[k + 1]}, 0.1 + k, widths[k]));
    AnfNode* bias = b.Weight("b" + n, Init(dtype, {widths[k + 1]}, 0.7 + k, 4));
    h = b.Op(PrimId::kAdd, {b.Op(PrimId::kMatMul, {h, w}), bias});
    if (k + 2 < widths.size()) h = b.Op(PrimId::kTanh, {h});
  }
  FuncGraph* loss = b.Return(CrossEntropy(b, h, labels)).value();
  FuncGraph* step = StepAround(m.get(), loss, dtype, {batch, widths.front()}, {batch, widths.back()}, lr);
  return Finish(std::move(m), step);
}

StepProgram CnnStep(DType dtype, int64_t batch, double lr) {
  auto m = std::make_unique<Module>(DefaultRegistry());
  GraphBuilder b(m.get(), "cnn_loss");
  AnfNode* x = b.Param("x", dtype, {batch, 1, 6, 6});
  AnfNode* labels = b.Param("labels", dtype, {batch, 2});
  AnfNode* k = b.Weight("k", Init(dtype, {3, 1, 3, 3}, 0.3));
  AnfNode* kb = b.Weight("kb", Init(dtype, {3, 1, 1}, 0.9));
  AnfNode* w = b.Weight("w", Init(dtype, {3, 2}, 1.9));
  AnfNode* wb = b.Weight("wb", Init(dtype, {2}, 2.6));
  AnfNode* conv = b.Op(PrimId::kConv2d, {x, k}, {{"padding", std::vector<int64_t>{1, 1}}});
  AnfNode* act = b.Op(PrimId::kRelu, {b.Op(PrimId::kAdd, {conv, kb})});
  AnfNode* pooled = b.Op(PrimId::kReduceMean, {act}, {{"axes", std::vector<int64_t>{2, 3}}});
  AnfNode* logits = b.Op(PrimId::kAdd, {b.Op(PrimId::kMatMul, {pooled, w}), wb});
  FuncGraph* loss = b.Return(CrossEntropy(b, logits, labels)).value();
  FuncGraph* step = StepAround(m.get(), loss, dtype, {batch, 1, 6, 6}, {batch, 2}, lr);
  return Finish(std::move(m), step);
}

std::vector<Value> StepData(const StepProgram& p, int64_t batch, uint64_t seed) {
  const AbstractTensor* xt = AsTensor(p.step->parameters()[0]->declared());
  const DType dtype = xt->dtype();
  Shape x_shape = xt->shape();
  x_shape[0] = batch;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> xs;
  int64_t n = 1;
  for (int64_t d : x_shape) n *= d;
  for (int64_t i = 0; i < n; ++i) xs.push_back(u(rng));
  Tensor x = FloatTensor(dtype, x_shape, [&](int64_t i) { return xs[i]; });
  const int64_t classes = AsTensor(p.step->parameters()[1]->declared())->shape()[1];
  Tensor labels = FloatTensor(dtype, {batch, classes}, [&](int64_t i) {
    const int64_t row = i / classes, hit = static_cast<int64_t>((xs[row * (n / batch)] + 1) / 2 * classes);
    return i % classes == std::min(hit, classes - 1) ? 1.0 : 0.0;
  });
  return {Value(x), Value(labels)};
}

std::vector<Value> RowsOf(const std::vector<Value>& inputs, int64_t begin, int64_t end) {
  std::vector<Value> out;
  for (const Value& v : inputs) out.push_back(Value(BatchRows(v.tensor(), begin, end).value()));
  return out;
}

absl::StatusOr<Trained> Train(StepProgram& p, const std::vector<Value>& inputs, int steps,
                              Communicator* comm, std::vector<Profile>* profiles, bool overlap,
                              Device* device) {
  KGRAD_RETURN_IF_ERROR(ExpandDifferentiation(*p.module).status());
  ExecutorOptions options;
  options.communicator = comm;
  options.overlap_collectives = overlap;
  options.device = device;
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> e, Executor::Create(p.step, options));
  Trained t;
  absl::flat_hash_map<std::string, Tensor> weights;
  for (const auto& w : p.module->weights()) weights[w->name()] = *w->default_value();
  for (int s = 0; s < steps; ++s) {
    Profile* profile = nullptr;
    if (profiles != nullptr) profile = &profiles->emplace_back();
    const auto start = std::chrono::steady_clock::now();
    KGRAD_ASSIGN_OR_RETURN(Value out, e->Run(inputs, weights, profile));
    t.step_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    t.losses.push_back(out.tuple()[0].tensor().ElementAsDouble(0));
    for (size_t k = 0; k < p.module->weights().size(); ++k) {
      weights[p.module->weights()[k]->name()] = out.tuple()[1].tuple()[k].tensor();
    }
  }
  for (const auto& [name, w] : weights) t.weights[name] = w;
  return t;
}

double MaxWeightDiff(const Trained& a, const Trained& b) {
  double worst = 0;
  for (const auto& [name, w] : a.weights) {
    const Tensor& v = b.weights.at(name);
    for (int64_t i = 0; i < w.NumElements(); ++i) {
      worst = std::max(worst, std::abs(w.ElementAsDouble(i) - v.ElementAsDouble(i)));
    }
  }
  return worst;
}

std::string WeightBytes(const Trained& t) {
  std::string bytes;
  for (const auto& [name, w] : t.weights) {
    bytes += name;
    bytes.append(static_cast<const char*>(w.raw_data()), w.nbytes());
  }
  return bytes;
}

}  // namespace examples
}  // namespace kgrad
