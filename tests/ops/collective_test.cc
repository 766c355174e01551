// The collective primitives in one process: inference (shapes for every
// attribute, unknown rank counts, errors), the kernels over a group of one
// (LocalCommunicator) and without a communicator, the gradient rules' shape
// (each adjoint is again a collective) and float64 finite-difference checks in
// both modes. Across ranks: tests/distributed (mpirun).
#include <string>
#include <vector>

#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "core/passes/optimize.h"
#include "core/builder.h"
#include "core/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/graph_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

AttrMap Op(const std::string& op, int64_t ranks = 0) { return {{"op", op}, {"ranks", ranks}}; }
AttrMap AxisRanks(int64_t axis, int64_t ranks) { return {{"axis", axis}, {"ranks", ranks}}; }
AttrMap Root(int64_t root, int64_t ranks = 0) { return {{"root", root}, {"ranks", ranks}}; }

TEST(CollectiveInferTest, AllReduceKeepsTheTypeForEveryOp) {
  for (const char* op : {"sum", "max", "min"}) {
    for (DType t : {kF32, kF64, kI32, kI64}) {
      ExpectTensor(InferOp(PrimId::kAllReduce, {T(t, {2, 3})}, Op(op)), t, {2, 3});
    }
  }
  ExpectTensor(InferOp(PrimId::kAllReduce, {T(kF64, {})}, Op("mean", 4)), kF64, {});
  ExpectTensor(InferOp(PrimId::kAllReduce, {T(kF32, {kUnknownDim, 3})}, Op("mean")), kF32,
               {kUnknownDim, 3});
}

TEST(CollectiveInferTest, AllGatherAndReduceScatterScaleTheAxis) {
  ExpectTensor(InferOp(PrimId::kAllGather, {T(kF32, {2, 3})}, AxisRanks(0, 4)), kF32, {8, 3});
  ExpectTensor(InferOp(PrimId::kAllGather, {T(kF32, {2, 3})}, AxisRanks(-1, 4)), kF32, {2, 12});
  ExpectTensor(InferOp(PrimId::kAllGather, {T(kBool, {2})}, AxisRanks(0, 2)), kBool, {4});
  ExpectTensor(InferOp(PrimId::kReduceScatter, {T(kF64, {8, 3})}, AxisRanks(0, 4)), kF64, {2, 3});
  ExpectTensor(InferOp(PrimId::kReduceScatter, {T(kI32, {2, 6})}, AxisRanks(1, 3)), kI32, {2, 2});
  // Without a rank count (0) the axis is unknown; so it is when the dim is.
  ExpectTensor(InferOp(PrimId::kAllGather, {T(kF32, {2, 3})}, AxisRanks(1, 0)), kF32, {2, kUnknownDim});
  ExpectTensor(InferOp(PrimId::kReduceScatter, {T(kF32, {kUnknownDim, 3})}, AxisRanks(0, 2)), kF32,
               {kUnknownDim, 3});
}

TEST(CollectiveInferTest, BroadcastAndReduceToKeepTheType) {
  ExpectTensor(InferOp(PrimId::kBroadcast, {T(DType::kFloat16, {5})}, Root(1, 2)), DType::kFloat16, {5});
  ExpectTensor(InferOp(PrimId::kReduceTo, {T(kI64, {2, 2})}, Root(0)), kI64, {2, 2});
}

TEST(CollectiveInferTest, Errors) {
  ExpectError(InferOp(PrimId::kAllReduce, {T(kF32, {2})}, Op("prod")), "must be sum, mean, max or min");
  ExpectError(InferOp(PrimId::kAllReduce, {T(kI32, {2})}, Op("mean")), "input 0 must be");
  ExpectError(InferOp(PrimId::kAllReduce, {T(kBool, {2})}, Op("sum")), "input 0 must be");
  ExpectError(InferOp(PrimId::kAllReduce, {T(kF32, {2})}, Op("sum", -1)), "'ranks'");
  ExpectError(InferOp(PrimId::kAllGather, {T(kF32, {})}, AxisRanks(0, 2)), "rank >= 1");
  ExpectError(InferOp(PrimId::kAllGather, {T(kF32, {2})}, AxisRanks(1, 2)), "out of range");
  ExpectError(InferOp(PrimId::kReduceScatter, {T(kF32, {6, 2})}, AxisRanks(0, 4)),
              "6 is not a multiple of 4");
  ExpectError(InferOp(PrimId::kBroadcast, {T(kF32, {2})}, Root(2, 2)), "not a rank of 2");
  ExpectError(InferOp(PrimId::kReduceTo, {T(kF32, {2})}, Root(-1)), "not a rank");
  ExpectError(InferOp(PrimId::kAllReduce, {MakeAbstractTuple({})}), "must be a tensor");
}

// y = P(x) in one process.
absl::StatusOr<Value> RunOne(PrimId id, AttrMap attrs, Value x, Communicator* comm) {
  ExecutorOptions o;
  o.communicator = comm;
  return RunOneOp(id, std::move(attrs), std::move(x), o);
}

Value Iota(DType dtype, Shape shape) {
  Tensor t = Tensor::Create(dtype, shape).value();
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    if (dtype == kF32) t.mutable_data<float>()[i] = 0.5f * i - 1;
    if (dtype == kF64) t.mutable_data<double>()[i] = 0.5 * i - 1;
    if (dtype == kI64) t.mutable_data<int64_t>()[i] = 3 * i - 2;
  }
  return Value(t);
}

// In a group of one every collective returns its input.
TEST(CollectiveKernelTest, AGroupOfOneReturnsTheInput) {
  LocalCommunicator one;
  struct Case {
    PrimId id;
    AttrMap attrs;
    DType dtype;
  };
  for (const Case& c : std::vector<Case>{{PrimId::kAllReduce, Op("sum"), kF32},
                                         {PrimId::kAllReduce, Op("mean", 1), kF64},
                                         {PrimId::kAllReduce, Op("max"), kI64},
                                         {PrimId::kAllReduce, Op("min"), kF32},
                                         {PrimId::kAllGather, AxisRanks(1, 1), kF64},
                                         {PrimId::kReduceScatter, AxisRanks(0, 1), kF32},
                                         {PrimId::kBroadcast, Root(0), kI64},
                                         {PrimId::kReduceTo, Root(0, 1), kF64}}) {
    Value x = Iota(c.dtype, {2, 3});
    absl::StatusOr<Value> y = RunOne(c.id, c.attrs, x, &one);
    ASSERT_TRUE(y.ok()) << PrimIdName(c.id) << ": " << y.status();
    EXPECT_EQ(MaxRelDiff(*y, x), 0) << PrimIdName(c.id);
  }
  // Empty tensors pass through too.
  absl::StatusOr<Value> e = RunOne(PrimId::kAllGather, AxisRanks(0, 1), Iota(kF32, {0, 2}), &one);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->tensor().shape(), (Shape{0, 2}));
}

TEST(CollectiveKernelTest, ErrorsNameTheNodeAndWhatIsMissing) {
  LocalCommunicator one;
  // No communicator: never a silent group of one (constant folding runs
  // kernels without one and must keep the node).
  ExpectFailure(RunOne(PrimId::kAllReduce, Op("sum"), Iota(kF32, {2}), nullptr),
                {"graph 'f'", "all_reduce", "needs a communicator"},
                absl::StatusCode::kFailedPrecondition);
  ExpectFailure(RunOne(PrimId::kAllGather, AxisRanks(0, 4), Iota(kF32, {2}), &one),
                {"built for 4 ranks", "communicator of 1"}, absl::StatusCode::kFailedPrecondition);
  ExpectFailure(RunOne(PrimId::kBroadcast, Root(3), Iota(kF32, {2}), &one), {"not a rank of 1"});
}

TEST(CollectiveKernelTest, ConstantInputsAreNotFolded) {
  // Folding all_reduce(constant) in one process would bake in one rank's value.
  // The optimiser folds with the CPU kernels, which get no communicator.
  Module m(DefaultRegistry());
  m.set_constant_evaluator(&CpuConstantEvaluator::Get());
  GraphBuilder b(&m, "f");
  AnfNode* c = b.Const(Iota(kF32, {3}));
  AnfNode* y = b.Op(PrimId::kAllReduce, {b.Op(PrimId::kNeg, {c})}, Op("sum"));
  FuncGraph* f = b.Return(b.Op(PrimId::kNeg, {y})).value();
  ASSERT_TRUE(Optimize(m, f).ok());
  EXPECT_EQ(CountPrim(f, PrimId::kAllReduce), 1);
  EXPECT_EQ(CountPrim(f, PrimId::kNeg), 1);  // the neg before it folded, the one after not
}

// The adjoint of each collective is the collective the header names.
TEST(CollectiveGradTest, EachAdjointIsACollective) {
  struct Case {
    PrimId id;
    AttrMap attrs;
    PrimId adjoint;
  };
  for (const Case& c : std::vector<Case>{{PrimId::kAllReduce, Op("sum", 2), PrimId::kAllReduce},
                                         {PrimId::kAllGather, AxisRanks(0, 2), PrimId::kReduceScatter},
                                         {PrimId::kReduceScatter, AxisRanks(0, 2), PrimId::kAllGather},
                                         {PrimId::kBroadcast, Root(1, 2), PrimId::kReduceTo},
                                         {PrimId::kReduceTo, Root(1, 2), PrimId::kBroadcast}}) {
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "f");
    AnfNode* x = b.Param("x", kF64, {4, 2});
    FuncGraph* f = b.Return(b.Op(PrimId::kReduceSum, {b.Op(c.id, {x}, c.attrs)})).value();
    absl::StatusOr<FuncGraph*> g = Grad(m, f, GradOptions{});
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(CountPrim(*g, c.adjoint), c.adjoint == c.id ? 2 : 1) << PrimIdName(c.id);
  }
}

// Finite differences in one process (a group of one), both modes, every
// collective: the rules build and evaluate; across ranks they are checked by
// tests/distributed.
TEST(CollectiveGradTest, GroupOfOneMatchesFiniteDifferencesInBothModes) {
  LocalCommunicator one;
  ExecutorOptions o;
  o.communicator = &one;
  for (PrimId id : {PrimId::kAllReduce, PrimId::kAllGather, PrimId::kReduceScatter,
                    PrimId::kBroadcast, PrimId::kReduceTo}) {
    for (const char* op : {"sum", "mean", "max", "min"}) {
      if (id != PrimId::kAllReduce && std::string(op) != "sum") continue;
      Module m(DefaultRegistry());
      GraphBuilder b(&m, "f");
      AnfNode* x = b.Param("x", kF64, {3});
      AttrMap attrs = id == PrimId::kAllReduce ? Op(op) : AttrMap{};
      // f(x) = sum(sin(P(x)) * c): a non-trivial cotangent.
      AnfNode* c = b.Const(Iota(kF64, {3}));
      FuncGraph* f = b.Return(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {b.Op(PrimId::kSin, {b.Op(id, {x}, attrs)}), c})})).value();
      FuncGraph* g = Grad(m, f, GradOptions{}).value();
      FuncGraph* j = Jvp(m, f).value();
      auto run = [&](FuncGraph* fg, std::vector<Value> args) {
        return Executor::Create(fg, o).value()->Run(std::move(args)).value();
      };
      Value x0 = Iota(kF64, {3});
      Value grad = run(g, {x0});
      for (int64_t i = 0; i < 3; ++i) {
        Tensor e = Tensor::Zeros(kF64, {3}).value();
        e.mutable_data<double>()[i] = 1e-6;
        Tensor up = x0.tensor().Clone(), down = x0.tensor().Clone();
        up.mutable_data<double>()[i] += 1e-6;
        down.mutable_data<double>()[i] -= 1e-6;
        const double fd = (run(f, {Value(up)}).tensor().ElementAsDouble(0) -
                           run(f, {Value(down)}).tensor().ElementAsDouble(0)) / 2e-6;
        EXPECT_NEAR(grad.tensor().ElementAsDouble(i), fd, 1e-7) << PrimIdName(id) << " " << op;
        Tensor t = Tensor::Zeros(kF64, {3}).value();
        t.mutable_data<double>()[i] = 1;
        EXPECT_NEAR(run(j, {x0, Value(t)}).tuple()[1].tensor().ElementAsDouble(0), fd, 1e-7)
            << PrimIdName(id) << " " << op << " (forward mode)";
      }
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
