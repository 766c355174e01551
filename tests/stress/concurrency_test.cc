// Concurrency stress: 16 threads each build their own module (MLP, conv net,
// tanh RNN, a while loop with a run-time trip count), differentiate it, optimise
// it and run it, many times; then all threads run the same finished executors at
// once. Every result must equal the single-threaded run bit for bit. Under
// ThreadSanitizer (--config=tsan) this also checks that nothing shared is
// written without synchronisation: Executor::Run is documented thread-safe
// (each call has its own frame stack; plans, constants and weights are read-only).
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/config.h"
#include "ad/grad_operation.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/passes/optimize.h"
#include "core/status_macros.h"
#include "examples/programs.h"
#include "gtest/gtest.h"
#include "ops/registry.h"

namespace kgrad {
namespace {

#if defined(ABSL_HAVE_THREAD_SANITIZER) || defined(ABSL_HAVE_ADDRESS_SANITIZER)
constexpr int kRounds = 8;  // sanitizers run ~10x slower; the interleavings still vary
#else
constexpr int kRounds = 400;
#endif
constexpr int kThreads = 16;
constexpr int kPrograms = 4;

// loss(x[4], n) = sum(h_n) with h <- tanh(h * w + x) for n iterations (a
// run-time trip count, so the loop stays a tail-recursive graph: frames, calls
// and closures in the executor, not a flat schedule).
FuncGraph* DynamicLoop(Module* m) {
  GraphBuilder b(m, "dyn_loop");
  AnfNode* x = b.Param("x", DType::kFloat64, {4});
  AnfNode* n = b.Param("n", MakeAbstractScalar(DType::kInt64));
  AnfNode* w = b.Weight("w", Tensor::FromVector<double>({4}, {0.5, -0.25, 0.75, 0.1}));
  std::vector<AnfNode*> out = b.While(
      {b.Int(0), x},
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) { return c.Op(PrimId::kScalarLt, {s[0], n}); },
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) {
        AnfNode* h = c.Op(PrimId::kTanh, {c.Op(PrimId::kAdd, {c.Op(PrimId::kMul, {s[1], w}), x})});
        return std::vector<AnfNode*>{c.Op(PrimId::kScalarAdd, {s[0], c.Int(1)}), h};
      });
  return b.Return(b.Op(PrimId::kReduceSum, {out[1]})).value();
}

FuncGraph* BuildProgram(Module* m, int program) {
  switch (program) {
    case 0: return programs::Mlp(m, 8, {12, 16, 5}, DType::kFloat32);
    case 1: return programs::ConvNet(m, 2, 8, 3, 4, 3, DType::kFloat32, /*batch_norm=*/true);
    case 2: return programs::TanhRnn(m, 6, 2, 5, 7, DType::kFloat64);
    default: return DynamicLoop(m);
  }
}

std::vector<Value> ProgramInputs(FuncGraph* f, int program, uint64_t seed) {
  if (program == 3) {  // RandomInputs draws tensors only
    double s = static_cast<double>(seed);
    return {Value(Tensor::FromVector<double>({4}, {0.1 * s, -0.3, 0.2 + s, 0.05})),
            Value(Scalar::Int(static_cast<int64_t>(5 + seed % 7)))};
  }
  return programs::RandomInputs(f, seed);
}

// Modules with the program, its gradient graph (first input and every weight)
// and executors for the forward graph, the raw gradient graph (calls, closures,
// tuples) and the optimised one. The raw gradient lives in a module of its own:
// optimising rewrites graphs in place and deletes unreachable ones, and an
// executor's plan points into its graphs.
struct Pipeline {
  std::unique_ptr<Module> raw_module;
  std::unique_ptr<Module> module;
  FuncGraph* forward = nullptr;
  std::unique_ptr<Executor> forward_exec;
  std::unique_ptr<Executor> raw_grad_exec;
  std::unique_ptr<Executor> grad_exec;
};

absl::StatusOr<FuncGraph*> GradOfProgram(Module& m, int program, FuncGraph** forward) {
  FuncGraph* f = BuildProgram(&m, program);
  *forward = f;
  GradOptions o;
  for (const auto& w : m.weights()) o.weights.push_back(w.get());
  return Grad(m, f, o);
}

absl::StatusOr<Pipeline> BuildPipeline(int program) {
  Pipeline p;
  p.raw_module = std::make_unique<Module>(DefaultRegistry());
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* raw, GradOfProgram(*p.raw_module, program, &p.forward));
  KGRAD_ASSIGN_OR_RETURN(p.forward_exec, Executor::Create(p.forward));
  KGRAD_ASSIGN_OR_RETURN(p.raw_grad_exec, Executor::Create(raw));

  p.module = std::make_unique<Module>(DefaultRegistry());
  FuncGraph* forward = nullptr;
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* grad, GradOfProgram(*p.module, program, &forward));
  OptimizeOptions oo;
  oo.evaluator = &CpuConstantEvaluator::Get();
  KGRAD_RETURN_IF_ERROR(Optimize(*p.module, grad, oo).status());
  KGRAD_ASSIGN_OR_RETURN(p.grad_exec, Executor::Create(grad));
  return p;
}

// (forward, raw gradient, optimised gradient) results for one input seed.
absl::StatusOr<std::vector<Value>> RunPipeline(const Pipeline& p, int program, uint64_t seed) {
  std::vector<Value> in = ProgramInputs(p.forward, program, seed);
  std::vector<Value> out;
  for (const Executor* e : {p.forward_exec.get(), p.raw_grad_exec.get(), p.grad_exec.get()}) {
    KGRAD_ASSIGN_OR_RETURN(Value v, e->Run(in));
    out.push_back(std::move(v));
  }
  return out;
}

absl::StatusOr<std::vector<Value>> BuildAndRun(int program, uint64_t seed) {
  KGRAD_ASSIGN_OR_RETURN(Pipeline p, BuildPipeline(program));
  return RunPipeline(p, program, seed);
}

// The results each (program, seed) must give, computed on one thread.
class ConcurrencyTest : public ::testing::Test {
 protected:
  static constexpr int kSeeds = 3;
  static void SetUpTestSuite() {
    reference_ = new std::vector<std::vector<Value>>();
    for (int program = 0; program < kPrograms; ++program) {
      for (int seed = 0; seed < kSeeds; ++seed) {
        absl::StatusOr<std::vector<Value>> r = BuildAndRun(program, seed);
        ASSERT_TRUE(r.ok()) << "program " << program << ": " << r.status();
        reference_->push_back(*std::move(r));
      }
    }
  }
  static void TearDownTestSuite() { delete reference_; }
  static const std::vector<Value>& Reference(int program, int seed) {
    return (*reference_)[program * kSeeds + seed];
  }
  static std::vector<std::vector<Value>>* reference_;
};
std::vector<std::vector<Value>>* ConcurrencyTest::reference_ = nullptr;

// Compares a thread's results with the reference; returns a description of the
// first difference ("" when equal).
std::string Diff(const absl::StatusOr<std::vector<Value>>& got, const std::vector<Value>& want,
                 int program, int seed) {
  std::string where = "program " + std::to_string(program) + " seed " + std::to_string(seed);
  if (!got.ok()) return where + ": " + got.status().ToString();
  if (got->size() != want.size()) return where + ": wrong number of results";
  for (size_t i = 0; i < want.size(); ++i) {
    if (!ValuesEqual((*got)[i], want[i])) {
      return where + " result " + std::to_string(i) + ": " + (*got)[i].ToString() + " != " + want[i].ToString();
    }
  }
  return "";
}

// Runs `work(thread)` on kThreads threads, collecting failure descriptions.
template <typename Work>
std::vector<std::string> OnThreads(const Work& work) {
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Start together so that the threads really overlap.
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      failures[t] = work(t);
    });
  }
  for (std::thread& th : threads) th.join();
  std::vector<std::string> out;
  for (std::string& f : failures) {
    if (!f.empty()) out.push_back(std::move(f));
  }
  return out;
}

TEST_F(ConcurrencyTest, EachThreadBuildsDifferentiatesOptimisesAndRunsItsOwnModule) {
  std::vector<std::string> failures = OnThreads([](int t) -> std::string {
    for (int round = 0; round < kRounds; ++round) {
      int program = (t + round) % kPrograms;
      int seed = (t * 7 + round) % kSeeds;
      std::string d = Diff(BuildAndRun(program, seed), Reference(program, seed), program, seed);
      if (!d.empty()) return "thread " + std::to_string(t) + ", round " + std::to_string(round) + ": " + d;
    }
    return "";
  });
  EXPECT_TRUE(failures.empty()) << failures.size() << " threads failed; first: " << failures[0];
}

TEST_F(ConcurrencyTest, AllThreadsRunSharedExecutors) {
  std::vector<Pipeline> shared;
  for (int program = 0; program < kPrograms; ++program) {
    absl::StatusOr<Pipeline> p = BuildPipeline(program);
    ASSERT_TRUE(p.ok()) << p.status();
    shared.push_back(*std::move(p));
  }
  std::vector<std::string> failures = OnThreads([&](int t) -> std::string {
    for (int round = 0; round < 4 * kRounds; ++round) {
      int program = (t + round) % kPrograms;
      int seed = (t + 2 * round) % kSeeds;
      std::string d = Diff(RunPipeline(shared[program], program, seed), Reference(program, seed), program, seed);
      if (!d.empty()) return "thread " + std::to_string(t) + ", round " + std::to_string(round) + ": " + d;
    }
    return "";
  });
  EXPECT_TRUE(failures.empty()) << failures.size() << " threads failed; first: " << failures[0];
}

// Weight overrides are per call: threads passing different weights to the same
// executor must not see each other's.
TEST_F(ConcurrencyTest, PerCallWeightOverridesStayPerCall) {
  absl::StatusOr<Pipeline> p = BuildPipeline(3);
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<Value> in = ProgramInputs(p->forward, 3, 0);
  auto weights_for = [](int t) {
    absl::flat_hash_map<std::string, Tensor> w;
    w["w"] = Tensor::FromVector<double>({4}, {0.1 * t, -0.2, 0.3, 0.05 * t});
    return w;
  };
  std::vector<Value> want;
  for (int t = 0; t < kThreads; ++t) {
    absl::StatusOr<Value> v = p->grad_exec->Run(in, weights_for(t));
    ASSERT_TRUE(v.ok()) << v.status();
    want.push_back(*std::move(v));
  }
  EXPECT_FALSE(ValuesEqual(want[1], want[2]));  // the overrides matter
  std::vector<std::string> failures = OnThreads([&](int t) -> std::string {
    for (int round = 0; round < 8 * kRounds; ++round) {
      absl::StatusOr<Value> v = p->grad_exec->Run(in, weights_for(t));
      if (!v.ok()) return v.status().ToString();
      if (!ValuesEqual(*v, want[t])) return "thread " + std::to_string(t) + ": " + v->ToString();
    }
    return "";
  });
  EXPECT_TRUE(failures.empty()) << failures.size() << " threads failed; first: " << failures[0];
}

// One deep value shared by every thread, each dropping its copies at its own
// pace: the last owner, whichever thread it is, frees the chain (the intrusive
// count's acq_rel decrement is what makes that visible to TSAN as ordered).
TEST_F(ConcurrencyTest, SharedDeepValuesAreReleasedByTheirLastOwner) {
  Value chain = Value(Tensor::FromVector<double>({2}, {1, 2}));
  for (int i = 0; i < 20'000; ++i) chain = Value::Tuple({std::move(chain), Value(Scalar::Int(i))});
  std::vector<std::string> failures = OnThreads([chain](int t) -> std::string {
    Value mine = chain;
    for (int round = 0; round < kRounds; ++round) {
      Value extended = Value::Tuple({mine, Value(Scalar::Int(t))});
      const Value* at = &extended;
      int depth = 0;
      while (at->is_tuple()) {
        at = &at->tuple()[0];
        ++depth;
      }
      if (depth != 20'001 || at->tensor().ElementAsDouble(1) != 2.0) return "wrong chain";
    }
    return "";
  });
  chain = Value();
  EXPECT_TRUE(failures.empty()) << failures[0];
}

// A graph without declared input types is type-checked once per argument
// signature, under the executor's lock; threads with different signatures at once.
TEST_F(ConcurrencyTest, SignatureChecksOfAnUndeclaredGraphAreShared) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "scale");
  AnfNode* x = b.Param("x");
  FuncGraph* f = b.Return(b.Op(PrimId::kMul, {x, x})).value();
  auto e = Executor::Create(f);
  ASSERT_TRUE(e.ok()) << e.status();
  std::vector<std::string> failures = OnThreads([&](int t) -> std::string {
    for (int round = 0; round < kRounds; ++round) {
      int64_t n = 1 + (t + round) % 5;  // five signatures: f64[1] ... f64[5]
      absl::StatusOr<Value> r = (*e)->Run({Value(Tensor::Full(DType::kFloat64, {n}, 3.0).value())});
      if (!r.ok()) return r.status().ToString();
      if (r->tensor().NumElements() != n || r->tensor().ElementAsDouble(0) != 9.0) return "wrong result";
    }
    return "";
  });
  EXPECT_TRUE(failures.empty()) << failures[0];
}

}  // namespace
}  // namespace kgrad
