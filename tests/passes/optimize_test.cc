// The pipeline keeps numbers identical: every example program (forward and
// gradient) and the sample programs give the same results before and after
// optimisation, and a first-order gradient is left with no closure, partial, env
// or tuple (only the output tuple).
#include "core/passes/optimize.h"

#include "ad/grad_operation.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/manager.h"
#include "examples/programs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "proto/model_io.h"
#include "tests/testing/graph_test_util.h"
#include "tools/graph_counts.h"
#include "tools/npy.h"

namespace kgrad {
namespace {

using testing::CountPrim;
using testing::MaxRelDiff;

Value Npy(const std::string& path) { return Value(ReadNpyFile(path).value()); }

struct ExampleCase {
  const char* file;
  std::vector<Value> (*inputs)();
};

std::vector<ExampleCase> Cases() {
  return {
      {"examples/mlp.pbtxt", [] { return std::vector<Value>{Npy("examples/data/mlp_x.npy"), Npy("examples/data/mlp_labels.npy")}; }},
      {"examples/closure.pbtxt", [] { return std::vector<Value>{Npy("examples/data/x3.npy")}; }},
      {"examples/if_else.pbtxt", [] { return std::vector<Value>{Npy("examples/data/x4.npy")}; }},
      {"examples/while_loop.pbtxt", [] { return std::vector<Value>{Npy("examples/data/x3.npy"), Value(Scalar::Int(5))}; }},
  };
}

TEST(OptimizeTest, ExamplesComputeTheSameBeforeAndAfter) {
  OptimizeOptions o;
  o.evaluator = &CpuConstantEvaluator::Get();
  for (const ExampleCase& c : Cases()) {
    std::unique_ptr<Module> m = LoadModelFile(c.file, DefaultRegistry()).value();
    FuncGraph* f = m->entry();
    GradOptions go;
    go.argnums = {0};
    for (const auto& w : m->weights()) go.weights.push_back(w.get());
    FuncGraph* grad = Grad(*m, f, go).value();
    std::vector<Value> args = c.inputs();
    Value before_f = RunGraph(f, args).value();
    Value before_g = RunGraph(grad, args).value();
    ASSERT_TRUE(Optimize(*m, grad, o).ok()) << c.file;
    ASSERT_TRUE(Optimize(*m, f, o).ok()) << c.file;
    Value after_f = RunGraph(f, args).value();
    Value after_g = RunGraph(grad, args).value();
    EXPECT_LE(MaxRelDiff(before_f, after_f), 1e-6) << c.file;
    EXPECT_LE(MaxRelDiff(before_g, after_g), 1e-6) << c.file;
  }
}

// The driver stops when neither pass can give the other more: optimising the
// result again changes nothing, for gradients of closures, branches, loops and
// first-order programs alike.
TEST(OptimizeTest, TheResultIsAFixpoint) {
  OptimizeOptions o;
  o.evaluator = &CpuConstantEvaluator::Get();
  for (const ExampleCase& c : Cases()) {
    std::unique_ptr<Module> m = LoadModelFile(c.file, DefaultRegistry()).value();
    GradOptions go;
    go.argnums = {0};
    for (const auto& w : m->weights()) go.weights.push_back(w.get());
    FuncGraph* grad = Grad(*m, m->entry(), go).value();
    ASSERT_TRUE(Optimize(*m, grad, o).ok()) << c.file;
    const std::string once = testing::Canonical(grad);
    absl::StatusOr<std::string> log = Optimize(*m, grad, o);
    ASSERT_TRUE(log.ok()) << c.file;
    EXPECT_THAT(*log, ::testing::HasSubstr("inline x0")) << c.file;
    EXPECT_THAT(*log, ::testing::HasSubstr("simplify x0")) << c.file;
    EXPECT_EQ(testing::Canonical(grad), once) << c.file;
  }
}

TEST(OptimizeTest, FirstOrderGradientsBecomePlainKernelGraphs) {
  struct Program {
    const char* name;
    FuncGraph* (*build)(Module*);
  };
  for (Program p : std::vector<Program>{
           {"mlp", [](Module* m) { return programs::Mlp(m, 4, {6, 8, 3}, DType::kFloat32); }},
           {"convnet", [](Module* m) { return programs::ConvNet(m, 2, 8, 3, 4, 3, DType::kFloat32, true); }},
           {"rnn", [](Module* m) { return programs::TanhRnn(m, 5, 2, 3, 4, DType::kFloat32); }},
       }) {
    Module m(DefaultRegistry());
    FuncGraph* f = p.build(&m);
    std::vector<Value> args = programs::RandomInputs(f, 1);
    GradOptions go;
    go.argnums = {0};
    for (const auto& w : m.weights()) go.weights.push_back(w.get());
    FuncGraph* grad = Grad(m, f, go).value();
    Value before = RunGraph(grad, args).value();
    OptimizeOptions o;
    o.evaluator = &CpuConstantEvaluator::Get();
    ASSERT_TRUE(Optimize(m, grad, o).ok()) << p.name;
    EXPECT_EQ(CountPlumbing(grad), 0) << p.name << "\n" << testing::Canonical(grad);
    Value after = RunGraph(grad, args).value();
    EXPECT_LE(MaxRelDiff(before, after), 1e-5) << p.name;
  }
}

// (t[0], t[1]) of a triple t stays a pair through the whole pipeline, also when
// it is built in a graph that is inlined into its caller.
TEST(OptimizeTest, PairTakenFromATripleStaysAPair) {
  Module m(DefaultRegistry());
  AbstractPtr f2 = MakeAbstractTensor(DType::kFloat64, {2});
  GraphBuilder pb(&m, "pair");
  AnfNode* u = pb.Param("u", MakeAbstractTuple({f2, f2, f2}));
  FuncGraph* pair = pb.Return(pb.Tuple({pb.GetItem(u, 0), pb.GetItem(u, 1)})).value();
  GraphBuilder b(&m, "main");
  AnfNode* t = b.Param("t", MakeAbstractTuple({f2, f2, f2}));
  FuncGraph* main = b.Return(b.Tuple({b.Call(pair, {t}), b.Tuple({b.GetItem(t, 0), b.GetItem(t, 1)})})).value();
  m.set_entry(main);
  Value x = Value(Tensor::FromVector<double>({2}, {1, 2}));
  Value in = Value::Tuple({x, x, x});
  OptimizeOptions o;
  o.evaluator = &CpuConstantEvaluator::Get();
  ASSERT_TRUE(Optimize(m, main, o).ok());
  absl::StatusOr<Value> out = RunGraph(main, {in});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->tuple().size(), 2u);
  for (const Value& p : out->tuple()) {
    ASSERT_TRUE(p.is_tuple());
    EXPECT_EQ(p.tuple().size(), 2u) << testing::Canonical(main);
  }
}

}  // namespace
}  // namespace kgrad
