// Imports each PyTorch-exported fixture, runs it and compares with torch's output;
// then differentiates it with kgrad (inputs and weights, torch's cotangent) and
// compares with torch.autograd's gradients. float32 throughout.
#include <vector>

#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/passes/optimize.h"
#include "tests/onnx/onnx_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

struct Fixture {
  const char* name;
  int num_inputs;
};

std::ostream& operator<<(std::ostream& os, const Fixture& f) { return os << f.name; }

// Float32 round-off over these small graphs stays near 1e-6 of the tensor scale;
// the bound leaves a margin for different summation orders.
constexpr double kTol = 1e-5;

class OnnxFixtureTest : public testing::TestWithParam<Fixture> {
 protected:
  std::vector<Value> Inputs() {
    std::vector<Value> in;
    for (int i = 0; i < GetParam().num_inputs; ++i) in.push_back(Npy(absl::StrCat(GetParam().name, "_in", i, ".npy")));
    return in;
  }
};

TEST_P(OnnxFixtureTest, OutputMatchesTorch) {
  absl::StatusOr<std::unique_ptr<Module>> m = ImportFixture(GetParam().name);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Value> out = RunGraph((*m)->entry(), Inputs());
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectClose(*out, Npy(absl::StrCat(GetParam().name, "_out.npy")), kTol, "output");
}

// Runs d<ct, f>/d(inputs, weights) with the gradient graph optimised or not.
void CheckGradients(const Fixture& f, std::vector<Value> inputs, bool optimize) {
  absl::StatusOr<std::unique_ptr<Module>> m = ImportFixture(f.name);
  ASSERT_TRUE(m.ok()) << m.status();
  GradOptions o;
  o.argnums.clear();
  for (int i = 0; i < f.num_inputs; ++i) o.argnums.push_back(i);
  std::vector<std::string> names;
  for (const auto& w : (*m)->weights()) {
    if (!Exists(DataPath(absl::StrCat(f.name, "_dw_", w->name(), ".npy")))) continue;  // BN statistics
    o.weights.push_back(w.get());
    names.push_back(w->name());
  }
  ASSERT_FALSE(names.empty());
  o.sens_param = true;
  absl::StatusOr<FuncGraph*> g = Grad(**m, (*m)->entry(), o);
  ASSERT_TRUE(g.ok()) << g.status();
  if (optimize) {
    OptimizeOptions oo;
    oo.evaluator = &CpuConstantEvaluator::Get();
    absl::StatusOr<std::string> log = Optimize(**m, *g, oo);
    ASSERT_TRUE(log.ok()) << log.status();
  }
  inputs.push_back(Npy(absl::StrCat(f.name, "_ct.npy")));
  absl::StatusOr<Value> r = RunGraph(*g, std::move(inputs));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->is_tuple() && r->tuple().size() == 2) << r->TypeString();
  const Value& dx = r->tuple()[0];
  for (int i = 0; i < f.num_inputs; ++i) {
    const Value& d = f.num_inputs == 1 ? dx : dx.tuple()[i];
    ExpectClose(d, Npy(absl::StrCat(f.name, "_din", i, ".npy")), kTol, absl::StrCat("d input ", i));
  }
  const Value& dw = r->tuple()[1];
  ASSERT_TRUE(dw.is_tuple() && dw.tuple().size() == names.size()) << dw.TypeString();
  for (size_t k = 0; k < names.size(); ++k) {
    ExpectClose(dw.tuple()[k], Npy(absl::StrCat(f.name, "_dw_", names[k], ".npy")), kTol,
                absl::StrCat("d ", names[k]));
  }
}

TEST_P(OnnxFixtureTest, GradientsMatchTorch) { CheckGradients(GetParam(), Inputs(), false); }

TEST_P(OnnxFixtureTest, OptimizedGradientsMatchTorch) { CheckGradients(GetParam(), Inputs(), true); }

INSTANTIATE_TEST_SUITE_P(Torch, OnnxFixtureTest,
                         testing::Values(Fixture{"mlp", 1}, Fixture{"cnn", 1}, Fixture{"block13", 1},
                                         Fixture{"block17", 1}, Fixture{"if_pos", 1},
                                         Fixture{"if_neg", 1}, Fixture{"loop", 1}),
                         [](const testing::TestParamInfo<Fixture>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
