// The optimizer graphs (tools/train/optimizer.h) against a direct restatement of
// torch.optim's single-tensor loops in double, over a dozen steps of
// pseudo-random gradients, for every option; the schedules against the rates
// torch's schedulers gave (tests/train/data/*_lr.npy); and the option checks.
#include "tools/train/optimizer.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/executor.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/train/finetune_config.h"
#include "tools/npy.h"

namespace kgrad {
namespace train {
namespace {

using Vec = std::vector<double>;
constexpr int kSteps = 12;
const std::vector<int64_t> kSizes = {3, 2};  // two weights: clipping is global

double Grad(int step, size_t w, size_t i) {
  return std::sin(1.7 * step + 2.3 * w + 0.9 * i) * (w == 0 ? 3.0 : 0.5);
}

// torch.optim's update in plain double, one weight at a time.
class Reference {
 public:
  explicit Reference(const OptimizerOptions& o) : o_(o) {
    for (size_t w = 0; w < kSizes.size(); ++w) {
      Vec init;
      for (int64_t i = 0; i < kSizes[w]; ++i) init.push_back(0.5 - 0.3 * i + 0.2 * w);
      p.push_back(init);
      buf.push_back(Vec(init.size(), 0));
      m.push_back(Vec(init.size(), 0));
      v.push_back(Vec(init.size(), 0));
      vmax.push_back(Vec(init.size(), 0));
    }
  }

  double Lr(int t) const {
    const LrSchedule& s = o_.schedule;
    double e = t - 1;
    if (s.warmup_steps > 0) {
      if (e < s.warmup_steps) {
        return o_.lr * (s.warmup_start_factor + (1 - s.warmup_start_factor) * e / s.warmup_steps);
      }
      e -= s.warmup_steps;
    }
    if (s.kind == LrSchedule::Kind::kStep) return o_.lr * std::pow(s.gamma, std::floor(e / s.step_size));
    if (s.kind == LrSchedule::Kind::kCosine) {
      return s.eta_min + (o_.lr - s.eta_min) * (1 + std::cos(M_PI * e / s.t_max)) / 2;
    }
    return o_.lr;
  }

  void Step(int t, std::vector<Vec> g) {
    if (o_.max_grad_norm > 0) {
      double total = 0;
      for (const Vec& gw : g) for (double x : gw) total += x * x;
      const double coef = std::min(1.0, o_.max_grad_norm / (std::sqrt(total) + 1e-6));
      for (Vec& gw : g) for (double& x : gw) x *= coef;
    }
    const double lr = Lr(t);
    for (size_t w = 0; w < p.size(); ++w) {
      for (size_t i = 0; i < p[w].size(); ++i) {
        double gi = o_.maximize ? -g[w][i] : g[w][i];
        double& pi = p[w][i];
        if (o_.kind == OptimizerKind::kSgd) {
          gi += o_.weight_decay * pi;
          if (o_.momentum != 0) {
            buf[w][i] = t == 1 ? gi : o_.momentum * buf[w][i] + (1 - o_.dampening) * gi;
            gi = o_.nesterov ? gi + o_.momentum * buf[w][i] : buf[w][i];
          }
          pi -= lr * gi;
          continue;
        }
        if (o_.kind == OptimizerKind::kAdamW) {
          pi *= 1 - lr * o_.weight_decay;
        } else {
          gi += o_.weight_decay * pi;
        }
        m[w][i] = o_.beta1 * m[w][i] + (1 - o_.beta1) * gi;
        v[w][i] = o_.beta2 * v[w][i] + (1 - o_.beta2) * gi * gi;
        double vv = v[w][i];
        if (o_.amsgrad) vv = vmax[w][i] = std::max(vmax[w][i], v[w][i]);
        const double denom = std::sqrt(vv) / std::sqrt(1 - std::pow(o_.beta2, t)) + o_.eps;
        pi -= lr / (1 - std::pow(o_.beta1, t)) * m[w][i] / denom;
      }
    }
  }

  std::vector<Vec> p, buf, m, v, vmax;

 private:
  OptimizerOptions o_;
};

Tensor F64(const Vec& v) { return Tensor::FromVector<double>({static_cast<int64_t>(v.size())}, v); }

Vec Values(const Value& v) {
  Vec out;
  for (int64_t i = 0; i < v.tensor().NumElements(); ++i) out.push_back(v.tensor().ElementAsDouble(i));
  return out;
}

// update(p0, p1, g0, g1, steps_done, state...) -> (p0', p1', state'...).
FuncGraph* UpdateGraph(Module& m, const OptimizerOptions& o) {
  GraphBuilder b(&m, "update");
  std::vector<AnfNode*> p, g, state;
  for (size_t w = 0; w < kSizes.size(); ++w) p.push_back(b.Param(absl::StrCat("p", w), DType::kFloat64, {kSizes[w]}));
  for (size_t w = 0; w < kSizes.size(); ++w) g.push_back(b.Param(absl::StrCat("g", w), DType::kFloat64, {kSizes[w]}));
  AnfNode* steps = b.Param("steps_done", DType::kInt64, {});
  for (size_t w = 0; w < kSizes.size(); ++w) {
    for (const std::string& slot : OptimizerSlots(o)) state.push_back(b.Param(slot, DType::kFloat64, {kSizes[w]}));
  }
  absl::StatusOr<WeightUpdate> u =
      BuildOptimizerUpdate(b, o, steps, p, g, state, {DType::kFloat64, DType::kFloat64});
  EXPECT_TRUE(u.ok()) << u.status();
  std::vector<AnfNode*> out = u->weights;
  out.insert(out.end(), u->state.begin(), u->state.end());
  absl::StatusOr<FuncGraph*> f = b.Return(b.Tuple(out));
  EXPECT_TRUE(f.ok()) << f.status();
  return *f;
}

void ExpectMatchesTorch(const OptimizerOptions& o) {
  Module m(DefaultRegistry());
  FuncGraph* f = UpdateGraph(m, o);
  absl::StatusOr<std::unique_ptr<Executor>> e = Executor::Create(f);
  ASSERT_TRUE(e.ok()) << e.status();
  Reference ref(o);
  std::vector<Vec> p = ref.p;
  const size_t slots = OptimizerSlots(o).size();
  std::vector<Vec> state;
  for (size_t w = 0; w < kSizes.size(); ++w) {
    for (size_t k = 0; k < slots; ++k) state.push_back(Vec(kSizes[w], 0));
  }
  for (int t = 1; t <= kSteps; ++t) {
    std::vector<Vec> g(kSizes.size());
    for (size_t w = 0; w < kSizes.size(); ++w) {
      for (int64_t i = 0; i < kSizes[w]; ++i) g[w].push_back(Grad(t, w, i));
    }
    std::vector<Value> args;
    for (const Vec& x : p) args.push_back(Value(F64(x)));
    for (const Vec& x : g) args.push_back(Value(F64(x)));
    args.push_back(Value(Tensor::FromScalar<int64_t>(t - 1)));
    for (const Vec& x : state) args.push_back(Value(F64(x)));
    absl::StatusOr<Value> r = (*e)->Run(args);
    ASSERT_TRUE(r.ok()) << r.status();
    ref.Step(t, g);
    for (size_t w = 0; w < p.size(); ++w) p[w] = Values(r->tuple()[w]);
    for (size_t k = 0; k < state.size(); ++k) state[k] = Values(r->tuple()[p.size() + k]);
    for (size_t w = 0; w < p.size(); ++w) {
      for (size_t i = 0; i < p[w].size(); ++i) {
        ASSERT_NEAR(p[w][i], ref.p[w][i], 1e-12 * std::max(1.0, std::fabs(ref.p[w][i])))
            << OptimizerName(o) << " step " << t << " weight " << w << "[" << i << "]";
      }
    }
  }
}

OptimizerOptions Options(const std::string& name) { return *DefaultOptimizerOptions(name); }

TEST(OptimizerTest, SgdPlainWithDecayAndMaximize) {
  OptimizerOptions o = Options("sgd");
  ExpectMatchesTorch(o);
  o.weight_decay = 0.1;
  o.maximize = true;
  ExpectMatchesTorch(o);
}

TEST(OptimizerTest, SgdMomentumDampeningNesterov) {
  OptimizerOptions o = Options("momentum");
  o.dampening = 0.3;  // torch's buffer starts as g whatever the dampening
  ExpectMatchesTorch(o);
  o.dampening = 0;
  o.nesterov = true;
  o.weight_decay = 0.05;
  ExpectMatchesTorch(o);
}

TEST(OptimizerTest, AdamWithL2AndAmsgrad) {
  OptimizerOptions o = Options("adam");
  o.lr = 0.05;
  ExpectMatchesTorch(o);
  o.weight_decay = 0.1;
  o.amsgrad = true;
  o.beta1 = 0.5;
  ExpectMatchesTorch(o);
}

TEST(OptimizerTest, AdamWDecoupledDecayAndMaximize) {
  OptimizerOptions o = Options("adamw");
  o.lr = 0.05;
  ExpectMatchesTorch(o);
  o.maximize = true;
  o.eps = 1e-3;
  ExpectMatchesTorch(o);
}

TEST(OptimizerTest, GlobalNormClipping) {
  for (const char* name : {"sgd", "adamw"}) {
    OptimizerOptions o = Options(name);
    o.max_grad_norm = 0.7;  // the gradients' norm is about 4: clipped every step
    ExpectMatchesTorch(o);
    o.max_grad_norm = 100;  // never clipped: the factor is exactly 1
    ExpectMatchesTorch(o);
  }
}

TEST(OptimizerTest, Schedules) {
  OptimizerOptions o = Options("momentum");
  o.schedule.kind = LrSchedule::Kind::kStep;
  o.schedule.step_size = 3;
  o.schedule.gamma = 0.5;
  ExpectMatchesTorch(o);
  o.schedule.kind = LrSchedule::Kind::kCosine;
  o.schedule.t_max = 5;  // past t_max the cosine rises again, as torch's closed form
  o.schedule.eta_min = 1e-3;
  ExpectMatchesTorch(o);
  o.schedule.warmup_steps = 4;
  ExpectMatchesTorch(o);
  o.schedule.kind = LrSchedule::Kind::kConstant;
  ExpectMatchesTorch(o);
}

// The rate of each step as the graph computes it.
std::vector<double> GraphRates(const OptimizerOptions& o, int steps) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "lr");
  AnfNode* e = b.Param("epoch", DType::kFloat64, {});
  absl::StatusOr<FuncGraph*> f = b.Return(ScheduledLr(b, o.schedule, o.lr, e));
  EXPECT_TRUE(f.ok()) << f.status();
  absl::StatusOr<std::unique_ptr<Executor>> ex = Executor::Create(*f);
  EXPECT_TRUE(ex.ok()) << ex.status();
  std::vector<double> rates;
  for (int t = 1; t <= steps; ++t) {
    absl::StatusOr<Value> r = (*ex)->Run({Value(Tensor::FromScalar<double>(t - 1))});
    EXPECT_TRUE(r.ok()) << r.status();
    rates.push_back(r->tensor().ElementAsDouble(0));
  }
  return rates;
}

TEST(OptimizerTest, SchedulesGiveTorchSchedulersRates) {
  for (const char* config : {"adam_clip", "sgd_step"}) {
    absl::StatusOr<Tensor> want = ReadNpyFile(absl::StrCat("tests/train/data/resnet_", config, "_lr.npy"));
    ASSERT_TRUE(want.ok()) << want.status();
    const std::vector<double> got = GraphRates(FinetuneConfig(config), want->NumElements());
    for (int64_t t = 0; t < want->NumElements(); ++t) {
      EXPECT_NEAR(got[t], want->ElementAsDouble(t), 1e-12) << config << " step " << t + 1;
    }
  }
}

TEST(OptimizerTest, RefusesWhatTorchRefuses) {
  auto error = [](OptimizerOptions o) { return std::string(ValidateOptimizerOptions(o).message()); };
  OptimizerOptions o = Options("sgd");
  o.nesterov = true;
  EXPECT_EQ(error(o), "nesterov momentum requires a momentum and zero dampening");
  o = Options("adam");
  o.beta1 = 1;
  EXPECT_EQ(error(o), "invalid beta1 1: it must be in [0, 1)");
  o = Options("adamw");
  o.lr = -1;
  EXPECT_EQ(error(o), "invalid learning rate -1: it must be in [0, 1e+308]");
  o = Options("momentum");
  o.schedule.kind = LrSchedule::Kind::kCosine;
  o.schedule.t_max = 0;
  EXPECT_EQ(error(o), "the cosine schedule's period (t_max) must be at least 1 step, got 0");
  EXPECT_EQ(DefaultOptimizerOptions("rmsprop").status().message(),
            "unknown optimizer 'rmsprop' (sgd, momentum, adam or adamw)");
  EXPECT_EQ(ParseLrScheduleKind("linear").status().message(),
            "unknown learning-rate schedule 'linear' (constant, step or cosine)");
  EXPECT_EQ(Options("adamw").weight_decay, 1e-2);  // torch's AdamW default
  EXPECT_EQ(OptimizerSlots(Options("sgd")).size(), 0u);
}

}  // namespace
}  // namespace train
}  // namespace kgrad
