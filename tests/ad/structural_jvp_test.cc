// Structural forward mode (ad/tangent_functor.h): the Jvp of a program keeps its
// shape (a loop's Jvp is a loop, no reverse graph is left) and its size stays
// within a small factor of the forward's; it agrees with the whole-graph
// transposition (ad/transposed_jvp.h) on every program of tests/ad; higher order
// (Jvp of Jvp, Jvp of a gradient) goes through loops; a custom bprop is the rule
// of its graph, including for the values it reads from enclosing graphs.
#include <cmath>
#include <random>
#include <string>

#include "absl/strings/match.h"
#include "ad/expand_differentiation.h"
#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/manager.h"
#include "examples/programs.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "proto/model_io.h"
#include "tests/testing/graph_test_util.h"

namespace kgrad {
namespace testing {
namespace {

// Tangents shaped like `args`: random floating values, zero integers.
std::vector<Value> Tangents(const std::vector<Value>& args, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<Value> out;
  for (const Value& a : args) {
    if (a.is_scalar()) {
      out.push_back(a.scalar().is_int() ? Value(Scalar::Int(0)) : Value(Scalar::Float(u(rng))));
      continue;
    }
    Tensor t = a.tensor().Clone();
    for (int64_t i = 0; i < t.NumElements(); ++i) {
      if (t.dtype() == DType::kFloat64) t.mutable_data<double>()[i] = u(rng);
      if (t.dtype() == DType::kFloat32) t.mutable_data<float>()[i] = static_cast<float>(u(rng));
    }
    out.push_back(Value(t));
  }
  return out;
}

// Arguments for f: uniform in [-0.5, 0.5), one-hot rows for "labels", `n` for an
// integer scalar (a trip count).
std::vector<Value> Inputs(FuncGraph* f, uint64_t seed, int64_t n) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  std::vector<Value> out;
  for (Parameter* p : f->parameters()) {
    if (const AbstractScalar* s = AsScalar(p->declared())) {
      out.push_back(s->dtype() == DType::kInt64 ? Value(Scalar::Int(n)) : Value(Scalar::Float(u(rng))));
      continue;
    }
    const AbstractTensor* t = AsTensor(p->declared());
    Tensor v = Tensor::Zeros(t->dtype(), t->shape()).value();
    int64_t classes = t->shape().empty() ? 1 : t->shape().back();
    for (int64_t i = 0; i < v.NumElements(); ++i) {
      double x = p->name() == "labels" ? (i % classes == static_cast<int64_t>(rng() % 2) ? 1 : 0) : u(rng);
      if (t->dtype() == DType::kFloat64) v.mutable_data<double>()[i] = x;
      if (t->dtype() == DType::kFloat32) v.mutable_data<float>()[i] = static_cast<float>(x);
    }
    out.push_back(Value(v));
  }
  return out;
}

std::vector<Value> Concat(std::vector<Value> a, const std::vector<Value>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Names of graphs the reverse transform makes (K_f, bprop_f) left in what `g` reaches.
std::vector<std::string> ReverseGraphs(FuncGraph* g) {
  std::vector<std::string> out;
  for (FuncGraph* h : g->module()->manager().Reachable({g})) {
    if (absl::StrContains(h->name(), "K_") || absl::StrContains(h->name(), "bprop_")) out.push_back(h->name());
  }
  return out;
}

// Whether some graph `g` reaches calls itself through the graphs it references.
bool HasRecursion(FuncGraph* g) {
  Manager& m = g->module()->manager();
  for (FuncGraph* h : m.Reachable({g})) {
    for (CNode* c : m.Info(h).order) {
      for (AnfNode* in : c->inputs()) {
        FuncGraph* callee = GraphOf(in);
        if (callee == nullptr || callee == h) continue;
        for (FuncGraph* r : m.Reachable({callee})) {
          if (r == h) return true;
        }
      }
    }
  }
  return false;
}

struct Program {
  std::string name;
  FuncGraph* f;
  std::vector<Value> args;
  double tolerance;
};

// tests/ad's programs and the example files, each in its own module.
std::vector<std::pair<std::unique_ptr<Module>, Program>> Programs() {
  std::vector<std::pair<std::unique_ptr<Module>, Program>> out;
  auto built = [&](const std::string& name, FuncGraph* (*make)(Module*)) {
    auto m = std::make_unique<Module>(DefaultRegistry());
    FuncGraph* f = make(m.get());
    out.emplace_back(std::move(m), Program{name, f, Inputs(f, 11, 9), 1e-9});
  };
  built("mlp", [](Module* m) { return programs::Mlp(m, 3, {4, 5, 3}, DType::kFloat64); });
  built("convnet_bn", [](Module* m) { return programs::ConvNet(m, 2, 8, 2, 3, 3, DType::kFloat64, true); });
  built("tanh_rnn", [](Module* m) { return programs::TanhRnn(m, 4, 2, 3, 3, DType::kFloat64); });
  built("horner", [](Module* m) { return programs::HornerLoop(m, 3, DType::kFloat64); });
  for (const char* file : {"examples/mlp.pbtxt", "examples/closure.pbtxt", "examples/if_else.pbtxt",
                           "examples/while_loop.pbtxt", "examples/maml.pbtxt",
                           "examples/gradient_penalty.pbtxt"}) {
    absl::StatusOr<std::unique_ptr<Module>> m = LoadModelFile(file, DefaultRegistry());
    EXPECT_TRUE(m.ok()) << file << ": " << m.status();
    if (!m.ok()) continue;
    FuncGraph* f = (*m)->entry();
    // maml and gradient_penalty differentiate inside the IR: expanded first.
    absl::StatusOr<int> expanded = ExpandDifferentiation(**m, f);
    EXPECT_TRUE(expanded.ok()) << file << ": " << expanded.status();
    out.emplace_back(std::move(*m), Program{file, f, Inputs(f, 12, 6), 1e-4});
  }
  return out;
}

TEST(StructuralJvpTest, AgreesWithTheWholeGraphTranspositionAndLeavesNoReverseGraph) {
  for (auto& [m, p] : Programs()) {
    SCOPED_TRACE(p.name);
    absl::StatusOr<FuncGraph*> jvp = Jvp(*m, p.f);
    ASSERT_TRUE(jvp.ok()) << jvp.status();
    EXPECT_TRUE(ReverseGraphs(*jvp).empty()) << ReverseGraphs(*jvp)[0] << "\n" << Canonical(*jvp);
    JvpOptions old;
    old.construction = JvpConstruction::kTransposedWholeGraph;
    absl::StatusOr<FuncGraph*> reference = Jvp(*m, p.f, old);
    ASSERT_TRUE(reference.ok()) << reference.status();
    std::vector<Value> args = Concat(p.args, Tangents(p.args, 13));
    absl::StatusOr<Value> a = RunGraph(*jvp, args);
    ASSERT_TRUE(a.ok()) << a.status();
    absl::StatusOr<Value> b = RunGraph(*reference, args);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->TypeString(), b->TypeString());
    EXPECT_LE(MaxRelDiff(*a, *b), p.tolerance) << a->ToString() << " vs " << b->ToString();
  }
}

TEST(StructuralJvpTest, ControlFlowJvpsStayWithinThreeTimesTheForward) {
  for (const char* file : {"examples/if_else.pbtxt", "examples/while_loop.pbtxt", "examples/closure.pbtxt"}) {
    SCOPED_TRACE(file);
    std::unique_ptr<Module> m = LoadModelFile(file, DefaultRegistry()).value();
    FuncGraph* f = m->entry();
    int forward = CountApplications(f);
    absl::StatusOr<FuncGraph*> jvp = Jvp(*m, f);
    ASSERT_TRUE(jvp.ok()) << jvp.status();
    EXPECT_LE(CountApplications(*jvp), 3 * forward) << Canonical(*jvp);
  }
}

TEST(StructuralJvpTest, MlpJvpIsNoLargerThanTheWholeGraphTransposition) {
  std::unique_ptr<Module> m = LoadModelFile("examples/mlp.pbtxt", DefaultRegistry()).value();
  JvpOptions old;
  old.construction = JvpConstruction::kTransposedWholeGraph;
  FuncGraph* reference = Jvp(*m, m->entry(), old).value();
  FuncGraph* jvp = Jvp(*m, m->entry()).value();
  EXPECT_LE(CountApplications(jvp), CountApplications(reference)) << Canonical(jvp);
}

// Runs `jvp`, a Jvp of programs::HornerLoop(k) or of its gradient, at x = 0.5
// (k elements) and n along the tangent ones (0 for n): element i of its output
// is `value`, of the output's tangent `tangent`.
void ExpectHornerJvpAtHalf(FuncGraph* jvp, int64_t k, int64_t n, int64_t i, double value, double tangent) {
  Value x(Tensor::Full(DType::kFloat64, {k}, 0.5).value());
  Value v(Tensor::Full(DType::kFloat64, {k}, 1.0).value());
  absl::StatusOr<Value> r = RunGraph(jvp, {x, Value(Scalar::Int(n)), v, Value(Scalar::Int(0))});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->tuple()[0].tensor().ElementAsDouble(i), value, 1e-9);
  EXPECT_NEAR(r->tuple()[1].tensor().ElementAsDouble(i), tangent, 1e-9);
}

TEST(StructuralJvpTest, ALoopsJvpIsALoopOverValueAndTangent) {
  Module m(DefaultRegistry());
  FuncGraph* f = programs::HornerLoop(&m, 3, DType::kFloat64);
  absl::StatusOr<FuncGraph*> jvp = Jvp(m, f);
  ASSERT_TRUE(jvp.ok()) << jvp.status();
  EXPECT_TRUE(HasRecursion(*jvp)) << Canonical(*jvp);
  JvpOptions old;
  old.construction = JvpConstruction::kTransposedWholeGraph;
  EXPECT_LT(CountApplications(*jvp), CountApplications(Jvp(m, f, old).value()));
  // f = sum((1 - x^n) / (1 - x)); along v = ones, J v = sum(d/dx acc_n), which at
  // x = 0.5 and n = 2000 is 1 / (1 - x)^2 = 4 per element (a deep loop: the
  // executor runs tail calls in constant stack).
  ExpectHornerJvpAtHalf(*jvp, 3, 2000, 0, 6.0, 12.0);
}

TEST(StructuralJvpTest, ForwardOverReverseThroughALoopIsTheHessianVectorProduct) {
  // grad f = 1/(1-x)^2 per element (at large n); its Jvp along ones is the
  // Hessian's diagonal 2/(1-x)^3 = 16 at x = 0.5.
  Module m(DefaultRegistry());
  FuncGraph* f = programs::HornerLoop(&m, 2, DType::kFloat64);
  GradOptions o;
  o.argnums = {0};
  FuncGraph* grad = Grad(m, f, o).value();
  absl::StatusOr<FuncGraph*> hvp = Jvp(m, grad);
  ASSERT_TRUE(hvp.ok()) << hvp.status();
  EXPECT_TRUE(ReverseGraphs(*hvp).size() < m.manager().Reachable({*hvp}).size());
  ExpectHornerJvpAtHalf(*hvp, 2, 200, 1, 4.0, 16.0);
}

TEST(StructuralJvpTest, JvpOfJvpGivesTheSecondDirectionalDerivative) {
  // f(x) = sum(sin(x) * x). jvp(jvp f)(x, v; u, w) carries, in its tangent of the
  // tangent, u^T H v + J w with H = diag(2 cos x - x sin x).
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {4});
  FuncGraph* f = b.Return(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {b.Op(PrimId::kSin, {x}), x})})).value();
  FuncGraph* j1 = Jvp(m, f).value();
  absl::StatusOr<FuncGraph*> j2 = Jvp(m, j1);
  ASSERT_TRUE(j2.ok()) << j2.status();
  std::mt19937_64 rng(21);
  std::vector<Value> xv = {Value(Tensor::Full(DType::kFloat64, {4}, 0.3).value())};
  std::vector<Value> args = Concat(Concat(xv, Tangents(xv, 22)), Concat(Tangents(xv, 23), Tangents(xv, 24)));
  absl::StatusOr<Value> r = RunGraph(*j2, args);
  ASSERT_TRUE(r.ok()) << r.status();
  double expected = 0;
  for (int i = 0; i < 4; ++i) {
    double xi = 0.3, vi = args[1].tensor().ElementAsDouble(i), ui = args[2].tensor().ElementAsDouble(i),
           wi = args[3].tensor().ElementAsDouble(i);
    expected += ui * (2 * std::cos(xi) - xi * std::sin(xi)) * vi + (std::cos(xi) * xi + std::sin(xi)) * wi;
  }
  EXPECT_NEAR(r->tuple()[1].tuple()[1].tensor().ElementAsDouble(0), expected, 1e-12);
  EXPECT_TRUE(ReverseGraphs(*j2).empty());
}

TEST(StructuralJvpTest, ElementwiseTangentsAreTheFusedDerivativePrimitives) {
  // jvp(tanh)(x; t) = tanh_grad(tanh(x), t): two applications, no multiply.
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat32, {8});
  FuncGraph* f = b.Return(b.Op(PrimId::kTanh, {x})).value();
  FuncGraph* jvp = Jvp(m, f).value();
  EXPECT_EQ(CountPrim(jvp, PrimId::kTanhGrad), 1) << Canonical(jvp);
  EXPECT_EQ(CountPrim(jvp, PrimId::kTanh), 1);
  EXPECT_EQ(CountApplications(jvp), 3);  // tanh, tanh_grad, the output pair
}

TEST(StructuralJvpTest, ACustomBpropReadingAnEnclosingValueGivesThatValuesTangentToo) {
  // inner(z) = z * y reads y of outer; its custom bprop gives dz = dout * y and
  // dy = dout (not the true z * dout): the Jvp is its transpose, y t_x + t_y.
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "outer");
  AnfNode* x = b.Param("x", DType::kFloat64, {2});
  AnfNode* y = b.Param("y", DType::kFloat64, {2});
  GraphBuilder ib(&m, "inner", b.graph());
  AnfNode* z = ib.Param("z", DType::kFloat64, {2});
  FuncGraph* inner = ib.Return(ib.Op(PrimId::kMul, {z, y})).value();
  GraphBuilder cb(&m, "inner_bprop", b.graph());
  cb.Param("z", DType::kFloat64, {2});
  cb.Param("out", DType::kFloat64, {2});
  AnfNode* dout = cb.Param("dout", DType::kFloat64, {2});
  inner->set_custom_bprop(cb.Return(cb.Tuple({cb.Op(PrimId::kMul, {dout, y}), dout})).value());
  FuncGraph* outer = b.Return(b.Call(inner, {x})).value();
  absl::StatusOr<FuncGraph*> jvp = Jvp(m, outer);
  ASSERT_TRUE(jvp.ok()) << jvp.status();
  std::vector<Value> args = {Value(Tensor::FromVector<double>({2}, {1.5, -2.0})),
                             Value(Tensor::FromVector<double>({2}, {2.0, 3.0})),
                             Value(Tensor::FromVector<double>({2}, {1.0, 0.5})),
                             Value(Tensor::FromVector<double>({2}, {0.25, -1.0}))};
  absl::StatusOr<Value> r = RunGraph(*jvp, args);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->tuple()[0].tensor().ElementAsDouble(1), -6.0);
  EXPECT_DOUBLE_EQ(r->tuple()[1].tensor().ElementAsDouble(0), 2.25);
  EXPECT_DOUBLE_EQ(r->tuple()[1].tensor().ElementAsDouble(1), 0.5);
}

TEST(StructuralJvpTest, ACustomBpropIsTheTangentRuleOfItsGraph) {
  // inner(z) = z * z with a custom bprop claiming dz = 3 * dout: its Jvp is 3 t.
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "outer");
  AnfNode* x = b.Param("x", DType::kFloat64, {2});
  GraphBuilder ib(&m, "inner");
  AnfNode* z = ib.Param("z", DType::kFloat64, {2});
  FuncGraph* inner = ib.Return(ib.Op(PrimId::kMul, {z, z})).value();
  GraphBuilder cb(&m, "inner_bprop");
  cb.Param("z", DType::kFloat64, {2});
  cb.Param("out", DType::kFloat64, {2});
  AnfNode* dout = cb.Param("dout", DType::kFloat64, {2});
  AnfNode* three = cb.Const(Value(Tensor::FromScalar<double>(3.0)));
  inner->set_custom_bprop(cb.Return(cb.Tuple({cb.Op(PrimId::kMul, {three, dout})})).value());
  FuncGraph* outer = b.Return(b.Call(inner, {x})).value();
  absl::StatusOr<FuncGraph*> jvp = Jvp(m, outer);
  ASSERT_TRUE(jvp.ok()) << jvp.status();
  Value xv(Tensor::FromVector<double>({2}, {1.5, -2.0}));
  Value tv(Tensor::FromVector<double>({2}, {1.0, 0.5}));
  absl::StatusOr<Value> r = RunGraph(*jvp, {xv, tv});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->tuple()[0].tensor().ElementAsDouble(0), 2.25);
  EXPECT_DOUBLE_EQ(r->tuple()[1].tensor().ElementAsDouble(0), 3.0);
  EXPECT_DOUBLE_EQ(r->tuple()[1].tensor().ElementAsDouble(1), 1.5);
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
