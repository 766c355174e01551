// Collectives overlapped with computation (backends/collective_worker.h): the run
// order that starts them early and reads them late (CollectivesEarly), and runs
// with overlap on and off giving the same bits, in one process (a group of one;
// across ranks every MPI test runs overlapped: tests/distributed).
#include <algorithm>
#include <string>

#include "ad/data_parallel.h"
#include "ad/expand_differentiation.h"
#include "backends/executor.h"
#include "backends/run_order.h"
#include "core/builder.h"
#include "core/manager.h"
#include "core/passes/optimize.h"
#include "examples/distributed/step_programs.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

std::string Names(const std::vector<CNode*>& order) {
  std::string out;
  for (const CNode* c : order) out += (out.empty() ? "" : " ") + c->DebugName();
  return out;
}

// x -> a = neg(x) -> r = all_reduce(a) -> out = add(r, e3), with an independent
// chain e1 = exp(x), e2 = exp(e1), e3 = exp(e2).
TEST(CollectivesEarlyTest, StartsCollectivesFirstAndReadsThemLast) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", kF32, {4});
  CNode* e1 = b.Op(PrimId::kExp, {x});
  CNode* e2 = b.Op(PrimId::kExp, {e1});
  CNode* e3 = b.Op(PrimId::kExp, {e2});
  CNode* a = b.Op(PrimId::kNeg, {x});
  CNode* r = b.Op(PrimId::kAllReduce, {a});
  CNode* out = b.Op(PrimId::kAdd, {r, e3});
  for (auto [node, name] : {std::pair<CNode*, const char*>{e1, "e1"}, {e2, "e2"}, {e3, "e3"},
                            {a, "a"}, {r, "r"}, {out, "out"}}) {
    node->set_name(name);
  }
  FuncGraph* f = b.Return(out).value();
  std::vector<CNode*> before = RunOrder(f, m.manager().Info(f));
  EXPECT_EQ(Names(CollectivesEarly(before)), "a r e1 e2 e3 out") << "from " << Names(before);
  // Nothing to move without a collective.
  std::vector<CNode*> plain = {e1, e2, e3};
  EXPECT_EQ(CollectivesEarly(plain), plain);
}

// A data-parallel step with a bucket per gradient: after the first gradient's
// all_reduce starts, backward work that does not read it is still to come.
TEST(CollectivesEarlyTest, DataParallelStepOverlapsBucketsWithTheBackwardPass) {
  examples::StepProgram p = examples::MlpStep(kF32, 8, {4, 8, 8, 2});
  DataParallelOptions o;
  o.ranks = 1;
  o.bucket_bytes = 4;  // every gradient its own all_reduce
  ASSERT_TRUE(MakeDataParallel(*p.module, p.step, o).ok());
  ASSERT_TRUE(ExpandDifferentiation(*p.module).ok());
  ASSERT_TRUE(Optimize(*p.module, p.step).ok());
  std::vector<CNode*> order = CollectivesEarly(RunOrder(p.step, p.module->manager().Info(p.step)));
  auto is_collective = [](const CNode* c) {
    return c->primitive() != nullptr && c->primitive()->id() == PrimId::kAllReduce;
  };
  const int collectives = static_cast<int>(std::count_if(order.begin(), order.end(), is_collective));
  EXPECT_EQ(collectives, 7);  // 6 gradients and the loss
  // Position of the second all_reduce (the first gradient's; the loss's is first)
  // and of the last matmul (the first layer's weight gradient).
  int seen = 0, second = -1, last_matmul = -1;
  for (int i = 0; i < static_cast<int>(order.size()); ++i) {
    if (is_collective(order[i]) && ++seen == 2) second = i;
    if (order[i]->primitive() != nullptr && order[i]->primitive()->id() == PrimId::kMatMul) last_matmul = i;
  }
  EXPECT_LT(second, last_matmul) << Names(order);
}

TEST(CollectiveOverlapTest, OverlapOnAndOffGiveTheSameBits) {
  LocalCommunicator one;
  std::vector<std::string> bytes;
  for (bool overlap : {true, false}) {
    examples::StepProgram p = examples::MlpStep(kF32, 8, {4, 8, 2});
    DataParallelOptions o;
    o.ranks = 1;
    o.bucket_bytes = 16;
    ASSERT_TRUE(MakeDataParallel(*p.module, p.step, o).ok());
    absl::StatusOr<examples::Trained> t =
        examples::Train(p, examples::StepData(p, 8, 5), 4, &one, nullptr, overlap);
    ASSERT_TRUE(t.ok()) << t.status();
    bytes.push_back(examples::WeightBytes(*t));
  }
  EXPECT_EQ(bytes[0], bytes[1]);
}

TEST(CollectiveOverlapTest, AnOverlappedCollectiveFailsAtItsNode) {
  LocalCommunicator one;
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", kF32, {4});
  CNode* r = b.Op(PrimId::kAllGather, {b.Op(PrimId::kNeg, {x})}, {{"ranks", int64_t{2}}});
  r->set_name("gathered");
  FuncGraph* f = b.Return(b.Op(PrimId::kExp, {r})).value();
  ExecutorOptions eo;
  eo.communicator = &one;
  std::unique_ptr<Executor> e = Executor::Create(f, eo).value();
  ExpectFailure(e->Run({Value(Tensor::Zeros(kF32, {4}).value())}),
                {"graph 'f'", "gathered", "all_gather", "built for 2 ranks"},
                absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
