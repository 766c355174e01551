// Fused elementwise runs (backends/fusion_planner.h, backends/fused_elementwise.h,
// the CPU evaluator): every fused primitive gives what its kernel gives, in f32
// and f64, over one block and many; a run's values read outside it are its
// outputs; a Jvp of a chain is one run; operands the evaluator does not take
// (broadcasting, integers) run through the kernels, with their errors; the
// planner keeps the order of a graph with nothing to fuse; the profile, the
// metering and the stats count a run.
#include <cmath>
#include <random>

#include "ad/jvp.h"
#include "backends/executor.h"
#include "backends/fusion_planner.h"
#include "core/builder.h"
#include "core/infer.h"
#include "core/manager.h"
#include "gtest/gtest.h"
#include "ops/elementwise_table.h"
#include "ops/registry.h"
#include "tests/testing/graph_test_util.h"

namespace kgrad {
namespace testing {
namespace {

Value Random(DType dtype, Shape shape, uint64_t seed, double lo = -1.5, double hi = 1.5) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor t = Tensor::Zeros(dtype, shape).value();
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    if (dtype == DType::kFloat64) t.mutable_data<double>()[i] = u(rng);
    if (dtype == DType::kFloat32) t.mutable_data<float>()[i] = static_cast<float>(u(rng));
  }
  return Value(t);
}

// Every fused primitive (its row of ops/elementwise_table.inc says Fused) once,
// in a run whose intermediate values are also returned: f(x, y) = (all of them).
std::vector<PrimId> FusedPrimitives(int arity) {
  std::vector<PrimId> ids;
  for (int i = 0; i < kNumPrimIds; ++i) {
    const PrimId id = static_cast<PrimId>(i);
    if (ops::IsFusedElementwise(id) && ops::ElementwiseArity(id) == arity) ids.push_back(id);
  }
  return ids;
}

FuncGraph* EveryFusedOp(Module* m, DType dtype, Shape shape) {
  GraphBuilder b(m, "every_op");
  AnfNode* x = b.Param("x", dtype, shape);
  AnfNode* y = b.Param("y", dtype, shape);
  std::vector<AnfNode*> outs;
  AnfNode* h = x;
  for (PrimId id : FusedPrimitives(1)) {
    h = b.Op(id, {h});
    outs.push_back(h);
  }
  for (PrimId id : FusedPrimitives(2)) {
    h = b.Op(id, {h, id == PrimId::kDiv ? b.Op(PrimId::kExp, {y}) : y});
    outs.push_back(h);
  }
  return b.Return(b.Tuple(outs)).value();
}

absl::StatusOr<Value> RunWith(FuncGraph* g, const std::vector<Value>& args, bool fuse,
                          ExecutorStats* stats = nullptr) {
  ExecutorOptions o;
  o.fuse_elementwise = fuse;
  absl::StatusOr<std::unique_ptr<Executor>> e = Executor::Create(g, o);
  if (!e.ok()) return e.status();
  if (stats != nullptr) *stats = (*e)->stats();
  return (*e)->Run(args);
}

// Bits of every element, NaNs included (a NaN equals a NaN here).
bool SameBits(const Tensor& a, const Tensor& b) {
  if (a.TypeString() != b.TypeString()) return false;
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    double x = a.ElementAsDouble(i), y = b.ElementAsDouble(i);
    if (!(x == y || (std::isnan(x) && std::isnan(y)))) return false;
  }
  return true;
}

// SameBits of every tensor of two values (tensors or tuples of tensors).
bool SameValueBits(const Value& a, const Value& b) {
  if (a.is_tensor() && b.is_tensor()) return SameBits(a.tensor(), b.tensor());
  if (!a.is_tuple() || !b.is_tuple() || a.tuple().size() != b.tuple().size()) return false;
  for (size_t i = 0; i < a.tuple().size(); ++i) {
    if (!SameValueBits(a.tuple()[i], b.tuple()[i])) return false;
  }
  return true;
}

TEST(FusedElementwiseTest, EveryFusedPrimitiveGivesWhatItsKernelGives) {
  // 2 x 700 elements: three blocks of the evaluator, the last one partial.
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (Shape shape : {Shape{7}, Shape{2, 700}}) {
      Module m(DefaultRegistry());
      FuncGraph* f = EveryFusedOp(&m, dtype, shape);
      ASSERT_TRUE(InferGraph(f).ok());
      std::vector<Value> args = {Random(dtype, shape, 1), Random(dtype, shape, 2)};
      ExecutorStats fused_stats;
      absl::StatusOr<Value> fused = RunWith(f, args, true, &fused_stats);
      ASSERT_TRUE(fused.ok()) << fused.status();
      absl::StatusOr<Value> plain = RunWith(f, args, false);
      ASSERT_TRUE(plain.ok()) << plain.status();
      const size_t ops = FusedPrimitives(1).size() + FusedPrimitives(2).size();
      ASSERT_GE(ops, 18u);
      EXPECT_EQ(fused_stats.fused, static_cast<int>(ops) + 1);  // and exp(y): all but the tuple
      EXPECT_LE(fused_stats.steps, 3);
      // Bit for bit: both evaluate each op's functor through the same row loops.
      EXPECT_TRUE(SameValueBits(*plain, *fused)) << DTypeName(dtype) << " " << ShapeToString(shape);
      ASSERT_EQ(fused->tuple().size(), ops);
      for (const Value& v : fused->tuple()) EXPECT_EQ(v.tensor().shape(), shape);
    }
  }
}

// clip(x, 0, 6) as ONNX imports it: maximum then minimum with rank-0 bounds.
// The bounds are broadcast operands of one fused run, NaN stays NaN (it wins in
// both, as in the kernels), and a bound may come first.
TEST(FusedElementwiseTest, ScalarOperandsLikeClipBoundsAreBroadcast) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "clip");
    const Shape shape = {2, 700};
    AnfNode* x = b.Param("x", dtype, shape);
    auto bound = [&](double v) {
      return b.Const(Value(dtype == DType::kFloat32 ? Tensor::FromScalar<float>(static_cast<float>(v))
                                                    : Tensor::FromScalar<double>(v)));
    };
    AnfNode* lo = b.Op(PrimId::kMaximum, {x, bound(0)});
    AnfNode* hi = b.Op(PrimId::kMinimum, {bound(6), lo});
    FuncGraph* f = b.Return(b.Op(PrimId::kMul, {hi, x})).value();
    ASSERT_TRUE(InferGraph(f).ok());
    Value in = Random(dtype, shape, 9, -10, 10);
    Tensor t = in.tensor();
    for (int64_t i = 0; i < t.NumElements(); i += 97) {
      if (dtype == DType::kFloat32) t.mutable_data<float>()[i] = std::nanf("");
      if (dtype == DType::kFloat64) t.mutable_data<double>()[i] = std::nan("");
    }
    ExecutorStats stats;
    absl::StatusOr<Value> fused = RunWith(f, {in}, true, &stats);
    ASSERT_TRUE(fused.ok()) << fused.status();
    absl::StatusOr<Value> plain = RunWith(f, {in}, false);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ(stats.fused, 3);
    EXPECT_EQ(stats.steps, 1);
    EXPECT_TRUE(SameBits(fused->tensor(), plain->tensor())) << DTypeName(dtype);
    EXPECT_TRUE(std::isnan(fused->tensor().ElementAsDouble(97)));
  }
}

// An instruction that reads only scalars would be a scalar: such a run goes
// through the kernels, and its scalar output keeps its shape.
TEST(FusedElementwiseTest, ARunWithAnApplicationOfScalarsOnlyRunsThroughTheKernels) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "g");
  AnfNode* x = b.Param("x", DType::kFloat32, {3, 4});
  AnfNode* s = b.Param("s", DType::kFloat32, {});
  AnfNode* sum = b.Op(PrimId::kAdd, {s, s});
  FuncGraph* g = b.Return(b.Tuple({b.Op(PrimId::kMul, {x, sum}), sum})).value();
  ASSERT_TRUE(InferGraph(g).ok());
  std::vector<Value> args = {Random(DType::kFloat32, {3, 4}, 10), Value(Tensor::FromScalar<float>(1.5f))};
  ExecutorStats stats;
  absl::StatusOr<Value> fused = RunWith(g, args, true, &stats);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(stats.fused, 2);  // planned as a run
  absl::StatusOr<Value> plain = RunWith(g, args, false);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(fused->tuple()[1].tensor().TypeString(), "f32[]");
  EXPECT_TRUE(SameBits(fused->tuple()[0].tensor(), plain->tuple()[0].tensor()));
  EXPECT_EQ(fused->tuple()[1].tensor().ElementAsDouble(0), 3.0);
}

TEST(FusedElementwiseTest, AJvpOfAnElementwiseChainRunsAsOneRun) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "chain");
  AnfNode* x = b.Param("x", DType::kFloat32, {16});
  AnfNode* y = x;
  for (int i = 0; i < 40; ++i) {
    y = b.Op(i % 2 == 0 ? PrimId::kTanh : PrimId::kSin, {b.Op(PrimId::kMul, {y, x})});
  }
  FuncGraph* f = b.Return(b.Op(PrimId::kReduceSum, {y})).value();
  FuncGraph* jvp = Jvp(m, f).value();
  std::vector<Value> args = {Random(DType::kFloat32, {16}, 3, -0.5, 0.5), Random(DType::kFloat32, {16}, 4)};
  ExecutorStats stats;
  absl::StatusOr<Value> fused = RunWith(jvp, args, true, &stats);
  ASSERT_TRUE(fused.ok()) << fused.status();
  // One fused run, the two sums and the output pair.
  EXPECT_EQ(stats.steps, 4) << Canonical(jvp);
  EXPECT_EQ(stats.fused, CountApplications(jvp) - 3);
  absl::StatusOr<Value> plain = RunWith(jvp, args, false);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(SameValueBits(*plain, *fused));  // mul_add rounds each product, as mul does
}

TEST(FusedElementwiseTest, OperandsTheEvaluatorDoesNotTakeRunThroughTheKernels) {
  // No inference: the planner cannot see that b broadcasts, or that k is an
  // integer tensor; the run checks its operands when it runs.
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "g");
  AnfNode* a = b.Param("a");
  AnfNode* bias = b.Param("bias");
  FuncGraph* g = b.Return(b.Op(PrimId::kTanh, {b.Op(PrimId::kAdd, {a, bias})})).value();
  std::vector<Value> args = {Random(DType::kFloat64, {3, 4}, 5), Random(DType::kFloat64, {4}, 6)};
  ExecutorStats stats;
  absl::StatusOr<Value> fused = RunWith(g, args, true, &stats);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(stats.fused, 2);
  absl::StatusOr<Value> plain = RunWith(g, args, false);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(MaxRelDiff(*plain, *fused), 0.0);
  EXPECT_EQ(fused->tensor().TypeString(), "f64[3,4]");
  // tanh of an integer tensor, past the type check: the kernel's error, at its node.
  Value ints(Tensor::FromVector<int64_t>({2}, {1, 2}));
  ExecutorOptions unchecked;
  unchecked.check_types = false;
  absl::StatusOr<Value> bad = Executor::Create(g, unchecked).value()->Run({ints, ints});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(tanh)"), std::string::npos) << bad.status();
}

TEST(FusedElementwiseTest, EmptyTensorsAndConstantsAreOperandsLikeAnyOther) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "g");
  AnfNode* x = b.Param("x", DType::kFloat32, {0, 3});
  FuncGraph* g = b.Return(b.Op(PrimId::kSin, {b.Op(PrimId::kNeg, {x})})).value();
  ASSERT_TRUE(InferGraph(g).ok());
  absl::StatusOr<Value> r = RunWith(g, {Value(Tensor::Zeros(DType::kFloat32, {0, 3}).value())}, true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tensor().TypeString(), "f32[0,3]");

  GraphBuilder c(&m, "h");
  AnfNode* y = c.Param("y", DType::kFloat64, {3});
  AnfNode* k = c.Const(Value(Tensor::FromVector<double>({3}, {1, 2, 3})));
  FuncGraph* h = c.Return(c.Op(PrimId::kMul, {c.Op(PrimId::kAdd, {y, k}), k})).value();
  ASSERT_TRUE(InferGraph(h).ok());
  ExecutorStats stats;
  absl::StatusOr<Value> v = RunWith(h, {Value(Tensor::FromVector<double>({3}, {1, 1, 1}))}, true, &stats);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(stats.fused, 2);
  EXPECT_DOUBLE_EQ(v->tensor().ElementAsDouble(2), 12.0);
}

TEST(FusedElementwiseTest, ProductsReadOnlyByTheirSumAreOneInstruction) {
  // p = x*y + y*z (both products absorbed); q = x*z + p*x where x*z is also an
  // output (kept as a product).
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "g");
  AnfNode* x = b.Param("x", DType::kFloat64, {5});
  AnfNode* y = b.Param("y", DType::kFloat64, {5});
  AnfNode* z = b.Param("z", DType::kFloat64, {5});
  AnfNode* p = b.Op(PrimId::kAdd, {b.Op(PrimId::kMul, {x, y}), b.Op(PrimId::kMul, {y, z})});
  AnfNode* xz = b.Op(PrimId::kMul, {x, z});
  AnfNode* q = b.Op(PrimId::kAdd, {xz, b.Op(PrimId::kMul, {p, x})});
  FuncGraph* g = b.Return(b.Tuple({q, xz})).value();
  ASSERT_TRUE(InferGraph(g).ok());
  FusionPlan plan = PlanFusion(m.manager().Info(g).order);
  ASSERT_EQ(plan.runs.size(), 1u);
  FusedRunProgram program = BuildFusedProgram(absl::MakeSpan(plan.order).subspan(0, plan.runs[0].second));
  ASSERT_EQ(program.program.instrs.size(), 4u);  // mul_add, mul(x,z), mul(p,x), add
  int mul_adds = 0;
  for (const FusedInstr& in : program.program.instrs) mul_adds += in.code == FusedCode::kMulAdd;
  EXPECT_EQ(mul_adds, 1);
  EXPECT_EQ(program.outputs.size(), 2u);
  std::vector<Value> args = {Random(DType::kFloat64, {5}, 8), Random(DType::kFloat64, {5}, 9),
                             Random(DType::kFloat64, {5}, 10)};
  absl::StatusOr<Value> fused = RunWith(g, args, true);
  ASSERT_TRUE(fused.ok()) << fused.status();
  for (int i = 0; i < 5; ++i) {
    double xv = args[0].tensor().ElementAsDouble(i), yv = args[1].tensor().ElementAsDouble(i),
           zv = args[2].tensor().ElementAsDouble(i);
    double pv = xv * yv + yv * zv;
    EXPECT_NEAR(fused->tuple()[0].tensor().ElementAsDouble(i), xv * zv + pv * xv, 1e-15);
    EXPECT_EQ(fused->tuple()[1].tensor().ElementAsDouble(i), xv * zv);
  }
}

TEST(FusedElementwiseTest, ARunWritesIntoAnInputNothingElseHolds) {
  // y = erf(x) (its own kernel: a new 8,000-byte buffer, x being the caller's);
  // tanh(sin(y)) reads y last, so it writes its output into y's buffer, as a
  // kernel would in place: the run allocates nothing more.
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "g");
  AnfNode* x = b.Param("x", DType::kFloat64, {1000});
  FuncGraph* g = b.Return(b.Op(PrimId::kTanh, {b.Op(PrimId::kSin, {b.Op(PrimId::kErf, {x})})})).value();
  ASSERT_TRUE(InferGraph(g).ok());
  std::vector<Value> args = {Random(DType::kFloat64, {1000}, 11)};
  ExecutorOptions o;
  o.max_run_bytes = 8000;
  std::unique_ptr<Executor> e = Executor::Create(g, o).value();
  EXPECT_EQ(e->stats().fused, 2);
  absl::StatusOr<Value> r = e->Run(args);
  ASSERT_TRUE(r.ok()) << r.status();
  for (int i = 0; i < 1000; i += 97) {
    EXPECT_NEAR(r->tensor().ElementAsDouble(i),
                std::tanh(std::sin(std::erf(args[0].tensor().ElementAsDouble(i)))), 1e-14);
  }
}

TEST(FusedElementwiseTest, ThePlannerKeepsTheOrderOfAGraphWithNothingToFuse) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "g");
  AnfNode* x = b.Param("x", DType::kFloat32, {2, 3});
  AnfNode* s = b.Op(PrimId::kReduceSum, {b.Op(PrimId::kTanh, {x})}, {{"axes", std::vector<int64_t>{1}}});
  AnfNode* t = b.Op(PrimId::kTranspose, {x}, {{"perm", std::vector<int64_t>{1, 0}}});
  FuncGraph* g = b.Return(b.Tuple({s, t})).value();
  ASSERT_TRUE(InferGraph(g).ok());
  std::vector<CNode*> order = m.manager().Info(g).order;
  FusionPlan plan = PlanFusion(order);
  EXPECT_EQ(plan.order, order);
  EXPECT_TRUE(plan.runs.empty());
}

TEST(FusedElementwiseTest, ProfileMeteringAndErrorsCountARun) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "g");
  AnfNode* x = b.Param("x", DType::kFloat64, {1000});
  AnfNode* h = b.Op(PrimId::kTanh, {b.Op(PrimId::kSin, {x})});
  FuncGraph* g = b.Return(b.Tuple({h, b.Op(PrimId::kReduceSum, {h})})).value();
  ASSERT_TRUE(InferGraph(g).ok());
  std::vector<Value> args = {Random(DType::kFloat64, {1000}, 7)};
  std::unique_ptr<Executor> e = Executor::Create(g).value();
  Profile profile;
  ASSERT_TRUE(e->Run(args, {}, &profile).ok());
  ASSERT_TRUE(profile.by_primitive.contains("fused_elementwise"));
  EXPECT_EQ(profile.by_primitive["fused_elementwise"].calls, 1);
  // The run's one output tensor (8,000 bytes) counts against max_run_bytes.
  ExecutorOptions o;
  o.max_run_bytes = 4000;
  absl::StatusOr<Value> r = Executor::Create(g, o).value()->Run(args);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
