#include "backends/executor.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/builder.h"
#include "core/infer.h"
#include "core/verifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/graph_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

// sum_{i < n} i with a while loop (tail recursion).
FuncGraph* BuildLoopSum(Module* m) {
  GraphBuilder b(m, "loop_sum");
  AnfNode* n = b.Param("n");
  AnfNode* sum = Repeat(b, n, b.Int(0), [](GraphBuilder& body, AnfNode* i, AnfNode* s) {
    return body.Op(PrimId::kScalarAdd, {s, i});
  });
  return b.Return(sum).value();
}

TEST(ExecutorTest, NonTailRecursionComputesFactorial) {
  Module m(DefaultRegistry());
  FuncGraph* f = BuildFactorial(&m);
  ASSERT_TRUE(VerifyModule(m).ok());
  absl::StatusOr<Value> r = RunGraph(f, {I(10)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->scalar().AsInt(), 3628800);
  r = RunGraph(f, {I(1)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->scalar().AsInt(), 1);
}

TEST(ExecutorTest, DeepNonTailRecursionIsAResourceExhaustedStatus) {
  Module m(DefaultRegistry());
  FuncGraph* f = BuildFactorial(&m);
  ExecutorOptions o;
  o.max_call_depth = 100;
  auto e = Executor::Create(f, o);
  ASSERT_TRUE(e.ok());
  absl::StatusOr<Value> r = (*e)->Run({I(50)});
  ASSERT_TRUE(r.ok()) << r.status();
  r = (*e)->Run({I(1000)});
  ExpectError(r, "call depth exceeds 100", absl::StatusCode::kResourceExhausted);
}

TEST(ExecutorTest, HundredThousandIterationLoopRunsInBoundedStack) {
  Module m(DefaultRegistry());
  FuncGraph* f = BuildLoopSum(&m);
  ASSERT_TRUE(VerifyModule(m).ok());
  ExecutorOptions o;
  o.max_call_depth = 8;  // tail calls must not accumulate frames
  auto e = Executor::Create(f, o);
  ASSERT_TRUE(e.ok()) << e.status();
  absl::StatusOr<Value> r = (*e)->Run({I(100000)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->scalar().AsInt(), int64_t{100000} * 99999 / 2);
}

TEST(ExecutorTest, ClosureCapturesFreeVariablesOfEnclosingGraphs) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "outer");
  AnfNode* x = b.Param("x");
  AnfNode* y = b.Op(PrimId::kScalarMul, {x, b.Int(10)});
  // make_adder(k) returns a closure over k and y; outer applies it twice.
  ValueNode* add = b.Closure("add", 1, [&](GraphBuilder& c, absl::Span<AnfNode* const> p) {
    return c.Op(PrimId::kScalarAdd, {c.Op(PrimId::kScalarAdd, {p[0], y}), x});
  });
  AnfNode* once = b.Call(add, {b.Int(1)});
  AnfNode* twice = b.Call(add, {once});
  FuncGraph* g = b.Return(b.Tuple({once, twice})).value();
  absl::StatusOr<Value> r = RunGraph(g, {I(3)});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->is_tuple());
  EXPECT_EQ(r->tuple()[0].scalar().AsInt(), 1 + 30 + 3);
  EXPECT_EQ(r->tuple()[1].scalar().AsInt(), 34 + 30 + 3);
}

TEST(ExecutorTest, PartialApplicationAndPrimitivesAsValues) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x");
  AnfNode* c = b.Param("c");
  // op = c ? scalar_add : scalar_mul; p = partial(op, x); p(5)
  AnfNode* op = b.Switch(c, b.PrimRef(PrimId::kScalarAdd), b.PrimRef(PrimId::kScalarMul));
  AnfNode* p = b.Partial(op, {x});
  FuncGraph* g = b.Return(b.Call(p, {b.Int(5)})).value();
  auto e = Executor::Create(g);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*e)->Run({I(7), Value(Scalar::Bool(true))})->scalar().AsInt(), 12);
  EXPECT_EQ((*e)->Run({I(7), Value(Scalar::Bool(false))})->scalar().AsInt(), 35);
}

TEST(ExecutorTest, NestedTuplesInAndOut) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "swap");
  AnfNode* t = b.Param("t");  // ((a, b), c)
  AnfNode* inner = b.GetItem(t, 0);
  AnfNode* out = b.Tuple({b.GetItem(t, 1), b.Tuple({b.GetItem(inner, 1), b.GetItem(inner, 0)})});
  FuncGraph* g = b.Return(out).value();
  Value arg = Value::Tuple({Value::Tuple({I(1), I(2)}), I(3)});
  absl::StatusOr<Value> r = RunGraph(g, {arg});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ToString(), "(3, (2, 1))");
}

TEST(ExecutorTest, WrongArgumentCountIsAnError) {
  Module m(DefaultRegistry());
  FuncGraph* f = BuildFactorial(&m);
  absl::StatusOr<Value> r = RunGraph(f, {I(1), I(2)});
  ExpectError(r, "takes 1 inputs, got 2");
}

// The divisor is an input, so only the run can find it zero.
TEST(ExecutorTest, RunTimeErrorsNameTheNode) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "bad");
  AnfNode* a = b.Param("a");
  AnfNode* d = b.Param("d");
  CNode* q = b.Op(PrimId::kScalarDiv, {a, d});
  q->set_name("quotient");
  FuncGraph* g = b.Return(q).value();
  absl::StatusOr<Value> r = RunGraph(g, {I(7), I(2)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->scalar().AsInt(), 3);
  r = RunGraph(g, {I(7), I(0)});
  ExpectFailure(r, {"graph 'bad', node 'quotient' (scalar_div)", "integer division by zero"});
}

// What inference can see is refused before anything runs, naming the node.
TEST(ExecutorTest, TypeErrorsAreFoundBeforeRunningAndNameTheNode) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "bad");
  AnfNode* t = b.Param("t");
  CNode* item = b.GetItem(t, 5);
  item->set_name("pick");
  FuncGraph* g = b.Return(item).value();
  auto e = Executor::Create(g);  // no declared types: checked per signature in Run
  ASSERT_TRUE(e.ok()) << e.status();
  absl::StatusOr<Value> r = (*e)->Run({Value::Tuple({I(1)})});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("graph 'bad' does not type-check"));
  EXPECT_THAT(r.status().message(), HasSubstr("node 'pick'"));
  // A signature that type-checks runs (and is cached: a second run is the same).
  for (int k = 0; k < 2; ++k) {
    r = (*e)->Run({Value::Tuple({I(1), I(2), I(3), I(4), I(5), I(6)})});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->scalar().AsInt(), 6);
  }
}

// Found by the pipeline fuzzer: a primitive reached as a value (here through a
// parameter) and called with the wrong number of arguments ran its kernel, which
// read past its inputs. The arity is checked at the call, as for applications.
TEST(ExecutorTest, PrimitivesCalledAsValuesHaveTheirArityChecked) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "call_it");
  AnfNode* fn = b.Param("fn");
  AnfNode* x = b.Param("x");
  CNode* call = b.Call(fn, {x});
  call->set_name("call");
  FuncGraph* g = b.Return(call).value();
  Value sw = Value::Prim(m.Prim(PrimId::kSwitch));
  ExecutorOptions unchecked;
  unchecked.check_types = false;
  auto e = Executor::Create(g, unchecked);
  ASSERT_TRUE(e.ok()) << e.status();
  absl::StatusOr<Value> r = (*e)->Run({sw, I(1)});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("graph 'call_it', node 'call' (switch): switch takes 3 inputs, got 1"));
  // Checked (the default), the type check refuses it first.
  r = RunGraph(g, {sw, I(1)});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("switch takes 3 inputs, got 1"));
  // The right number of arguments runs.
  r = (*e)->Run({Value::Prim(m.Prim(PrimId::kNeg)), Value(Tensor::FromVector<float>({1}, {2}))});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tensor().ElementAsDouble(0), -2.0);
}

// An application built in C++ (never verified) with too few inputs is refused
// when compiled, not run off the end of its inputs.
TEST(ExecutorTest, ApplicationsWithTheWrongArityDoNotCompile) {
  Module m(DefaultRegistry());
  FuncGraph* g = m.NewGraph("short_switch");
  Parameter* x = g->AddParameter("x");
  CNode* c = g->NewCNode({g->NewValueNode(Value::Prim(m.Prim(PrimId::kSwitch))), x});
  g->set_output(c);
  ExecutorOptions unchecked;
  unchecked.check_types = false;
  auto e = Executor::Create(g, unchecked);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("switch takes 3 inputs, got 1"));
}

TEST(ExecutorTest, InferenceThroughRecursionReachesAFixpoint) {
  Module m(DefaultRegistry());
  FuncGraph* f = BuildFactorial(&m);
  absl::StatusOr<AbstractPtr> a = InferGraph(f, {MakeAbstractScalar(DType::kInt64)});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->ToString(), "i64");
  FuncGraph* loop = BuildLoopSum(&m);
  a = InferGraph(loop, {MakeAbstractScalarValue(Scalar::Int(10))});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->ToString(), "i64");
}

// Records what a KernelObserver sees.
class Recorder final : public KernelObserver {
 public:
  absl::Status OnKernel(const CNode& node, const Primitive& prim, absl::Span<const Value> inputs,
                        const Value& output) override {
    seen.push_back({node.DebugName(), prim.name(), std::vector<Value>(inputs.begin(), inputs.end()),
                    output});
    return fail_at == static_cast<int>(seen.size()) ? absl::AbortedError("stop here")
                                                     : absl::OkStatus();
  }
  struct Seen {
    std::string node, prim;
    std::vector<Value> inputs;
    Value output;
  };
  std::vector<Seen> seen;
  int fail_at = -1;
};

// y = exp(x) * 2 then neg: each application after its kernel, in order, with
// the inputs it read (the exp kernel would reuse x's buffer in place, but not
// while observed) and its output; once per iteration inside a loop; a status
// from the observer ends the run.
TEST(ExecutorTest, AnObserverSeesEveryKernelWithItsInputsAndOutput) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {2});
  AnfNode* e = b.Op(PrimId::kExp, {x});
  AnfNode* y = b.Op(PrimId::kNeg, {b.Op(PrimId::kMul, {e, b.Const(F64({}, {2}))})});
  FuncGraph* f = b.Return(y).value();
  ExecutorOptions o;
  o.fuse_elementwise = false;
  std::unique_ptr<Executor> exec = Executor::Create(f, o).value();
  Recorder r;
  absl::StatusOr<Value> out = exec->Run({F64({2}, {0, 1})}, {}, nullptr, &r);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(r.seen.size(), 3u);
  EXPECT_EQ(r.seen[0].prim, "exp");
  EXPECT_EQ(r.seen[0].inputs[0].tensor().ElementAsDouble(1), 1.0);
  EXPECT_DOUBLE_EQ(r.seen[0].output.tensor().ElementAsDouble(1), std::exp(1.0));
  EXPECT_EQ(r.seen[1].prim, "mul");
  EXPECT_EQ(r.seen[2].prim, "neg");
  EXPECT_DOUBLE_EQ(r.seen[2].output.tensor().ElementAsDouble(1), -2 * std::exp(1.0));
  EXPECT_DOUBLE_EQ(out->tensor().ElementAsDouble(1), -2 * std::exp(1.0));

  Module lm(DefaultRegistry());
  FuncGraph* loop = BuildLoopSum(&lm);
  std::unique_ptr<Executor> lexec = Executor::Create(loop, o).value();
  Recorder lr;
  ASSERT_TRUE(lexec->Run({I(4)}, {}, nullptr, &lr).ok());
  int adds = 0;
  for (const Recorder::Seen& s : lr.seen) adds += s.prim == "scalar_add" ? 1 : 0;
  EXPECT_GE(adds, 4);

  Recorder stop;
  stop.fail_at = 2;
  absl::StatusOr<Value> stopped = exec->Run({F64({2}, {0, 1})}, {}, nullptr, &stop);
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kAborted) << stopped.status();
  EXPECT_EQ(stop.seen.size(), 2u);
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
