// The data-parallel pass (ad/data_parallel.h) in one process: what it makes of a
// training step (sharded declarations, all_reduce buckets, which gradients are
// combined), that a group of one trains exactly as the original, and its
// errors. Across ranks: tests/distributed.
#include <string>

#include "ad/data_parallel.h"
#include "ad/expand_differentiation.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "examples/distributed/step_programs.h"
#include "tests/testing/graph_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;
using examples::MlpStep;
using examples::StepData;
using examples::StepProgram;
using examples::Train;
using examples::Trained;
using examples::WeightBytes;

DataParallelOptions Ranks(int n, int64_t bucket_bytes = 25 << 20) {
  DataParallelOptions o;
  o.ranks = n;
  o.bucket_bytes = bucket_bytes;
  return o;
}

std::string Declared(FuncGraph* g, int i) { return g->parameters()[i]->declared()->ToString(); }

// Every all_reduce in `g` (and what it calls) has these attributes.
void ExpectAllReduces(FuncGraph* root, Module& m, int count, const std::string& op, int64_t ranks) {
  int seen = 0;
  for (FuncGraph* g : m.manager().Reachable({root})) {
    for (CNode* c : m.manager().Info(g).order) {
      if (c->primitive() == nullptr || c->primitive()->id() != PrimId::kAllReduce) continue;
      ++seen;
      EXPECT_EQ(c->primitive()->GetString("op"), op);
      EXPECT_EQ(c->primitive()->GetInt("ranks"), ranks);
    }
  }
  EXPECT_EQ(seen, count);
}

TEST(DataParallelTest, MlpStepGetsShardedInputsAndOneBucket) {
  StepProgram p = MlpStep(DType::kFloat64, 8);
  absl::StatusOr<DataParallelReport> r = MakeDataParallel(*p.module, p.step, Ranks(4));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->differentiations, 1);
  EXPECT_EQ(r->gradients, 4);
  EXPECT_EQ(r->buckets, 2);  // the gradients, and the loss
  // w1 4x5, b1 5, w2 5x2, b2 2 and the loss: 38 doubles.
  EXPECT_EQ(r->bytes, 38 * 8);
  EXPECT_EQ(Declared(p.step, 0), "f64[2,4]");
  EXPECT_EQ(Declared(p.step, 1), "f64[2,2]");
  FuncGraph* loss = p.module->FindGraph("mlp_loss");
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(Declared(loss, 0), "f64[2,4]");  // declared with the full batch before
  ExpectAllReduces(p.step, *p.module, 2, "mean", 4);
  EXPECT_EQ(CountPrim(p.step, PrimId::kConcat), 1);
  EXPECT_EQ(CountPrim(p.step, PrimId::kSplit), 1);
}

TEST(DataParallelTest, SmallBucketsAndSumReduction) {
  StepProgram p = MlpStep(DType::kFloat32, 8);
  DataParallelOptions o = Ranks(2, 40);  // b2 (8 bytes) + w2 (40) do not fit together
  o.reduction = GradientReduction::kSum;
  absl::StatusOr<DataParallelReport> r = MakeDataParallel(*p.module, p.step, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->gradients, 4);
  // Latest first: {b2}, {w2}, {b1 (20 bytes)}, {w1 (80 bytes, alone)}, and the loss.
  EXPECT_EQ(r->buckets, 5);
  ExpectAllReduces(p.step, *p.module, 5, "sum", 2);
  EXPECT_EQ(CountPrim(p.step, PrimId::kConcat), 0);
}

TEST(DataParallelTest, AGroupOfOneTrainsExactlyAsTheOriginal) {
  StepProgram original = MlpStep(DType::kFloat32, 6);
  StepProgram parallel = MlpStep(DType::kFloat32, 6);
  ASSERT_TRUE(MakeDataParallel(*parallel.module, parallel.step, Ranks(1, 48)).ok());
  std::vector<Value> data = StepData(original, 6, 9);
  LocalCommunicator one;
  absl::StatusOr<Trained> a = Train(original, data, 5, nullptr);
  absl::StatusOr<Trained> b = Train(parallel, data, 5, &one);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(WeightBytes(*a), WeightBytes(*b));
  EXPECT_EQ(a->losses, b->losses);
}

// f(x, w) = mean(x * w) with w an input every rank receives whole: its gradient
// is combined, x's (per example) is not.
FuncGraph* MeanOfProducts(Module& m, int64_t rows) {
  GraphBuilder fb(&m, "f");
  AnfNode* fx = fb.Param("x", DType::kFloat64, {rows, 3});
  AnfNode* fw = fb.Param("w", DType::kFloat64, {3});
  FuncGraph* f = fb.Return(fb.Op(PrimId::kReduceMean, {fb.Op(PrimId::kMul, {fx, fw})})).value();
  GraphBuilder b(&m, "step");
  AnfNode* x = b.Param("x", DType::kFloat64, {rows, 3});
  AnfNode* w = b.Param("w", DType::kFloat64, {3});
  AnfNode* vg = b.Op(PrimId::kValueAndGrad, {b.GraphRef(f)}, {{"wrt", std::vector<int64_t>{0, 1}}});
  return b.Return(b.Call(vg, {x, w})).value();
}

TEST(DataParallelTest, ReplicatedInputsKeepTheirRowsAndGetCombinedGradients) {
  Module m(DefaultRegistry());
  FuncGraph* step = MeanOfProducts(m, 4);
  DataParallelOptions o = Ranks(2);
  o.replicated = {"w"};
  absl::StatusOr<DataParallelReport> r = MakeDataParallel(m, step, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->gradients, 1);  // dw; dx is per example
  EXPECT_EQ(Declared(step, 0), "f64[2,3]");
  EXPECT_EQ(Declared(step, 1), "f64[3]");
  ExpectAllReduces(step, m, 2, "mean", 2);

  // A group of one gives the original's result, (mean(x * w), (dx, dw)).
  Module one_rank(DefaultRegistry());
  FuncGraph* single = MeanOfProducts(one_rank, 2);
  o.ranks = 1;
  ASSERT_TRUE(MakeDataParallel(one_rank, single, o).ok());
  ASSERT_TRUE(ExpandDifferentiation(one_rank).ok());
  LocalCommunicator one;
  ExecutorOptions eo;
  eo.communicator = &one;
  Tensor xs = Tensor::Create(DType::kFloat64, {2, 3}).value(), ws = Tensor::Create(DType::kFloat64, {3}).value();
  for (int i = 0; i < 6; ++i) xs.mutable_data<double>()[i] = i;
  for (int i = 0; i < 3; ++i) ws.mutable_data<double>()[i] = 1 + i;
  absl::StatusOr<Value> out = Executor::Create(single, eo).value()->Run({Value(xs), Value(ws)});
  ASSERT_TRUE(out.ok()) << out.status();
  // mean over 6 products: dw_j = (x_0j + x_1j) / 6, dx_ij = w_j / 6.
  EXPECT_DOUBLE_EQ(out->tuple()[1].tuple()[1].tensor().ElementAsDouble(0), (0 + 3) / 6.0);
  EXPECT_DOUBLE_EQ(out->tuple()[1].tuple()[0].tensor().ElementAsDouble(4), 2 / 6.0);
}

// A replicated input as long as the batch is not split where the loss graph
// receives it: only what carries the batch is.
TEST(DataParallelTest, OnlyParametersThatReceiveTheBatchAreSplit) {
  Module m(DefaultRegistry());
  GraphBuilder fb(&m, "f");
  AnfNode* fx = fb.Param("x", DType::kFloat64, {4, 3});
  AnfNode* fw = fb.Param("w", DType::kFloat64, {4, 3});
  FuncGraph* f = fb.Return(fb.Op(PrimId::kMul, {fb.Op(PrimId::kReduceMean, {fx}),
                                                fb.Op(PrimId::kReduceSum, {fw})})).value();
  GraphBuilder b(&m, "step");
  AnfNode* x = b.Param("x", DType::kFloat64, {4, 3});
  AnfNode* w = b.Param("w", DType::kFloat64, {4, 3});
  AnfNode* g = b.Op(PrimId::kGrad, {b.GraphRef(f)}, {{"wrt", std::vector<int64_t>{1}}});
  FuncGraph* step = b.Return(b.Call(g, {x, w})).value();
  DataParallelOptions o = Ranks(2);
  o.replicated = {"w"};
  absl::StatusOr<DataParallelReport> r = MakeDataParallel(m, step, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Declared(f, 0), "f64[2,3]");
  EXPECT_EQ(Declared(f, 1), "f64[4,3]");
  EXPECT_EQ(r->gradients, 1);  // dw, averaged
  ExpectAllReduces(step, m, 1, "mean", 2);
}

TEST(DataParallelTest, Errors) {
  {
    StepProgram p = MlpStep(DType::kFloat64, 9);
    ExpectFailure(MakeDataParallel(*p.module, p.step, Ranks(2)),
                  {"graph 'step', parameter 'x'", "batch of 9 rows does not divide among 2 ranks"});
  }
  {
    StepProgram p = MlpStep(DType::kFloat64, 8);
    ExpectFailure(MakeDataParallel(*p.module, p.step, Ranks(0)), {"over 0 ranks"});
    ExpectFailure(MakeDataParallel(*p.module, p.step, Ranks(2, 0)), {"bucket_bytes"});
  }
  {
    // A fixed batch size inside the model (a reshape to [8, 3], as a static
    // export writes it) cannot take 4 rows.
    Module m(DefaultRegistry());
    GraphBuilder fb(&m, "f");
    AnfNode* fx = fb.Param("x", DType::kFloat64, {8, 3});
    AnfNode* flat = fb.Op(PrimId::kReshape, {fb.Op(PrimId::kSin, {fx})}, {{"shape", std::vector<int64_t>{8, 3}}});
    FuncGraph* f = fb.Return(fb.Op(PrimId::kReduceSum, {flat})).value();
    GraphBuilder b(&m, "step");
    AnfNode* x = b.Param("x", DType::kFloat64, {8, 3});
    AnfNode* w = b.Op(PrimId::kValueAndGrad, {b.GraphRef(f)});
    FuncGraph* step = b.Return(b.Call(w, {x})).value();
    DataParallelOptions o = Ranks(2);
    ExpectFailure(MakeDataParallel(m, step, o),
                  {"batch of 8 rows split among 2 ranks (4 each)", "reshape", "dynamic batch axis"});
  }
  {
    // A graph with no gradient in it.
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "plain");
    AnfNode* x = b.Param("x", DType::kFloat32, {4});
    FuncGraph* g = b.Return(b.Op(PrimId::kNeg, {x})).value();
    ExpectFailure(MakeDataParallel(m, g, Ranks(2)), {"graph 'plain' applies no grad or value_and_grad"});
  }
  {
    // A batch input without a batch dim, and an operator the pass does not know.
    Module m(DefaultRegistry());
    GraphBuilder fb(&m, "f");
    AnfNode* fx = fb.Param("x", DType::kFloat64, {});
    FuncGraph* f = fb.Return(fb.Op(PrimId::kSin, {fx})).value();
    GraphBuilder b(&m, "step");
    AnfNode* x = b.Param("x", DType::kFloat64, {});
    AnfNode* j = b.Op(PrimId::kJvp, {b.GraphRef(f)});
    FuncGraph* step = b.Return(b.Call(j, {x, x})).value();
    ExpectFailure(MakeDataParallel(m, step, Ranks(2)),
                  {"graph 'step', parameter 'x'", "leading batch dim"});
    DataParallelOptions o = Ranks(2);
    o.replicated = {"x"};
    ExpectFailure(MakeDataParallel(m, step, o), {"'jvp' is not supported"},
                  absl::StatusCode::kUnimplemented);
  }
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
