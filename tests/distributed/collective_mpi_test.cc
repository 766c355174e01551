// Collectives and data-parallel training across the ranks of an MPI job. Run by
// mpirun (tests/distributed/run_mpi.sh) with 2 and 4 ranks; every rank runs every
// test, and each test's collectives happen in the same order on all ranks.
#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "ad/data_parallel.h"
#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "backends/collectives.h"
#include "backends/executor.h"
#include "backends/mpi/mpi_communicator.h"
#include "core/builder.h"
#include "core/infer.h"
#include "core/status_macros.h"
#include "ops/registry.h"
#include "gtest/gtest.h"
#include "examples/distributed/step_programs.h"

namespace kgrad {
namespace {

MpiCommunicator* g_comm = nullptr;  // the job's communicator (main), for every test

Communicator& Comm() { return *g_comm; }
int Rank() { return g_comm->rank(); }
int Ranks() { return g_comm->size(); }

// The sum over ranks of one number (exact enough for the checks: f64).
double SumOverRanks(double v) {
  double out = 0;
  EXPECT_TRUE(Comm().AllReduce(&v, &out, 1, DType::kFloat64, ReduceOp::kSum).ok());
  return out;
}

// Whether `ok` holds on every rank (so that all ranks take the same branch).
bool AllRanks(bool ok) { return SumOverRanks(ok ? 1 : 0) == Ranks(); }

// x of rank r: element i is (r + 1) * 10 + i (exactly representable).
Tensor RankTensor(DType dtype, Shape shape, int r) {
  Tensor t = Tensor::Create(dtype, shape).value();
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    const double v = (r + 1) * 10 + i;
    switch (dtype) {
      case DType::kFloat32: t.mutable_data<float>()[i] = static_cast<float>(v); break;
      case DType::kFloat64: t.mutable_data<double>()[i] = v; break;
      case DType::kInt32: t.mutable_data<int32_t>()[i] = static_cast<int32_t>(v); break;
      default: t.mutable_data<int64_t>()[i] = static_cast<int64_t>(v); break;
    }
  }
  return t;
}

absl::StatusOr<Tensor> Collective(PrimId id, AttrMap attrs, const Tensor& x) {
  KGRAD_ASSIGN_OR_RETURN(PrimitivePtr p, DefaultRegistry().Make(id, std::move(attrs)));
  return RunCollective(*p, x, Comm());
}

TEST(CollectiveMpi, AllReduceEveryOpAndDType) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64}) {
    for (std::string op : {"sum", "max", "min", "mean"}) {
      if (op == "mean" && !IsFloating(dtype)) continue;
      absl::StatusOr<Tensor> y = Collective(PrimId::kAllReduce, {{"op", op}}, RankTensor(dtype, {2, 3}, Rank()));
      ASSERT_TRUE(y.ok()) << y.status();
      const int n = Ranks();
      for (int64_t i = 0; i < 6; ++i) {
        // sum_r ((r + 1) * 10 + i) = 10 n (n + 1) / 2 + n i
        double want = op == "sum" ? 5.0 * n * (n + 1) + n * i
                      : op == "max" ? n * 10 + i
                      : op == "min" ? 10 + i
                                    : (5.0 * n * (n + 1) + n * i) / n;
        EXPECT_EQ(y->ElementAsDouble(i), want) << op << " " << DTypeName(dtype) << " element " << i;
      }
    }
  }
}

// Rounding differs with the order of a sum; all_reduce reduces each element on
// one rank, so every rank holds the same bits.
TEST(CollectiveMpi, AllReduceSumIsBitIdenticalAcrossRanks) {
  std::mt19937_64 rng(1234 + Rank());
  std::uniform_real_distribution<double> u(-1e3, 1e3);
  Tensor x = Tensor::Create(DType::kFloat32, {1001}).value();
  for (int64_t i = 0; i < 1001; ++i) x.mutable_data<float>()[i] = static_cast<float>(u(rng) * 1e-3 * (i + 1));
  absl::StatusOr<Tensor> y = Collective(PrimId::kAllReduce, {{"op", std::string("mean")}}, x);
  ASSERT_TRUE(y.ok()) << y.status();
  std::string bytes(static_cast<const char*>(y->raw_data()), y->nbytes());
  EXPECT_TRUE(Comm().Agree(StableFingerprint(bytes), "the all_reduce result").ok());
}

TEST(CollectiveMpi, AllGatherAndReduceScatterAlongEachAxis) {
  const int n = Ranks();
  for (int64_t axis : {0, 1, -1}) {
    Tensor x = RankTensor(DType::kFloat64, {2, 4}, Rank());
    absl::StatusOr<Tensor> g = Collective(PrimId::kAllGather, {{"axis", axis}, {"ranks", int64_t{n}}}, x);
    ASSERT_TRUE(g.ok()) << g.status();
    const int a = axis < 0 ? 1 : static_cast<int>(axis);
    ASSERT_EQ(g->dim(a), (a == 0 ? 2 : 4) * n);
    for (int64_t i = 0; i < g->dim(0); ++i) {
      for (int64_t j = 0; j < g->dim(1); ++j) {
        // Element (i, j) comes from rank (index along axis) / size, at the rest.
        const int64_t along = a == 0 ? i : j, size = a == 0 ? 2 : 4;
        const int64_t r = along / size, ii = a == 0 ? i % 2 : i, jj = a == 0 ? j : j % 4;
        EXPECT_EQ(g->ElementAsDouble(i * g->dim(1) + j), (r + 1) * 10 + ii * 4 + jj);
      }
    }
    // reduce_scatter of the gathered tensor: block `rank` of n times the sum.
    absl::StatusOr<Tensor> s = Collective(PrimId::kReduceScatter, {{"axis", axis}}, *g);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(s->shape(), x.shape());
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      // Every rank contributed the same gathered tensor, so the sum is n times
      // block `rank` of it, which is rank `rank`'s x.
      EXPECT_EQ(s->ElementAsDouble(i), n * x.ElementAsDouble(i)) << "axis " << axis;
    }
  }
}

TEST(CollectiveMpi, BroadcastAndReduceTo) {
  const int root = Ranks() - 1;
  absl::StatusOr<Tensor> b = Collective(PrimId::kBroadcast, {{"root", int64_t{root}}}, RankTensor(DType::kFloat32, {3}, Rank()));
  ASSERT_TRUE(b.ok()) << b.status();
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(b->ElementAsDouble(i), (root + 1) * 10 + i);
  absl::StatusOr<Tensor> r = Collective(PrimId::kReduceTo, {{"root", int64_t{0}}}, RankTensor(DType::kFloat64, {3}, Rank()));
  ASSERT_TRUE(r.ok()) << r.status();
  const int n = Ranks();
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r->ElementAsDouble(i), Rank() == 0 ? 5.0 * n * (n + 1) + n * i : 0.0);
  }
}

TEST(CollectiveMpi, MismatchedShapesFailOnEveryRank) {
  // Rank 0 holds 3 elements, the others 4: no rank may exchange anything.
  absl::StatusOr<Tensor> y = Collective(PrimId::kAllReduce, {}, RankTensor(DType::kFloat32, {Rank() == 0 ? 3 : 4}, Rank()));
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(y.status().message().find("disagree"), std::string::npos) << y.status();
  EXPECT_NE(y.status().message().find(Rank() == 0 ? "f32[3]" : "f32[4]"), std::string::npos) << y.status();
  // The communicator still works afterwards (the ranks stayed in step).
  EXPECT_TRUE(Collective(PrimId::kAllReduce, {}, RankTensor(DType::kFloat32, {2}, Rank())).ok());
}

TEST(CollectiveMpi, RanksAttributeMustMatchTheCommunicator) {
  absl::StatusOr<Tensor> y = Collective(PrimId::kAllGather, {{"ranks", int64_t{Ranks() + 1}}}, RankTensor(DType::kFloat32, {2}, Rank()));
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("built for"), std::string::npos) << y.status();
}

// ----- Gradients across ranks, by finite differences ---------------------------------
// f_r(x_r, w_r) = sum(w_r * P(x_r)) on every rank r, L = sum_r f_r. Reverse mode on
// rank q gives dL/dx_q (the convention of ops/collective.h); forward mode on rank
// r gives sum_q df_r/dx_q t_q for tangents t_q on every rank.

struct CollectiveCase {
  PrimId id;
  AttrMap attrs;
  Shape x_shape;
};

std::vector<CollectiveCase> Cases() {
  const int64_t n = Ranks();
  return {
      {PrimId::kAllReduce, {{"op", std::string("sum")}}, {2, 3}},
      {PrimId::kAllReduce, {{"op", std::string("mean")}}, {2, 3}},
      {PrimId::kAllReduce, {{"op", std::string("max")}}, {2, 3}},
      {PrimId::kAllReduce, {{"op", std::string("min")}}, {2, 3}},
      {PrimId::kAllGather, {{"axis", int64_t{1}}, {"ranks", n}}, {2, 3}},
      {PrimId::kReduceScatter, {{"axis", int64_t{0}}, {"ranks", n}}, {2 * n, 2}},
      {PrimId::kBroadcast, {{"root", n - 1}}, {2, 3}},
      {PrimId::kReduceTo, {{"root", int64_t{0}}}, {2, 3}},
  };
}

Tensor Random(Shape shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Tensor t = Tensor::Create(DType::kFloat64, shape).value();
  for (int64_t i = 0; i < t.NumElements(); ++i) t.mutable_data<double>()[i] = u(rng);
  return t;
}

struct Objective {
  std::unique_ptr<Module> m = std::make_unique<Module>(DefaultRegistry());
  FuncGraph* f = nullptr;
  std::unique_ptr<Executor> run, grad, jvp;
  Tensor w;
};

absl::Status Build(const CollectiveCase& c, Objective* o) {
  GraphBuilder b(o->m.get(), "f");
  AnfNode* x = b.Param("x", DType::kFloat64, c.x_shape);
  KGRAD_ASSIGN_OR_RETURN(PrimitivePtr p, DefaultRegistry().Make(c.id, c.attrs));
  AbstractPtr y_type = InferPrimitiveCall(*p, {MakeAbstractTensor(DType::kFloat64, c.x_shape)}).value();
  const Shape& y_shape = AsTensor(y_type)->shape();
  AnfNode* w = b.Param("w", DType::kFloat64, y_shape);
  KGRAD_ASSIGN_OR_RETURN(o->f, b.Return(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {w, b.Op(p, {x})})})));
  o->w = Random(y_shape, 77 + Rank());
  ExecutorOptions eo;
  eo.communicator = &Comm();
  KGRAD_ASSIGN_OR_RETURN(o->run, Executor::Create(o->f, eo));
  GradOptions go;
  go.argnums = {0};
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* g, Grad(*o->m, o->f, go));
  KGRAD_ASSIGN_OR_RETURN(o->grad, Executor::Create(g, eo));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* j, Jvp(*o->m, o->f));
  KGRAD_ASSIGN_OR_RETURN(o->jvp, Executor::Create(j, eo));
  return absl::OkStatus();
}

double F(Objective& o, const Tensor& x) {
  absl::StatusOr<Value> v = o.run->Run({Value(x), Value(o.w)});
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? v->tensor().ElementAsDouble(0) : 0;
}

// The step of the central differences the derivatives are checked against.
constexpr double kEps = 1e-6;

Tensor Plus(const Tensor& x, const Tensor& d, double s) {
  Tensor y = x.Clone();
  for (int64_t i = 0; i < y.NumElements(); ++i) y.mutable_data<double>()[i] += s * d.ElementAsDouble(i);
  return y;
}

TEST(CollectiveMpi, ReverseModeMatchesFiniteDifferencesAcrossRanks) {
  for (const CollectiveCase& c : Cases()) {
    Objective o;
    absl::Status built = Build(c, &o);
    ASSERT_TRUE(AllRanks(built.ok())) << built;
    Tensor x = Random(c.x_shape, 5 + Rank());
    absl::StatusOr<Value> g = o.grad->Run({Value(x), Value(o.w)});
    ASSERT_TRUE(AllRanks(g.ok())) << g.status();
    for (int q = 0; q < Ranks(); ++q) {
      for (int64_t i = 0; i < x.NumElements(); ++i) {
        Tensor e = Tensor::Zeros(DType::kFloat64, c.x_shape).value();
        if (Rank() == q) e.mutable_data<double>()[i] = 1;
        const double up = SumOverRanks(F(o, Plus(x, e, kEps))), down = SumOverRanks(F(o, Plus(x, e, -kEps)));
        if (Rank() != q) continue;
        EXPECT_NEAR(g->tensor().ElementAsDouble(i), (up - down) / (2 * kEps), 1e-6)
            << DefaultRegistry().Find(c.id)->name << " rank " << q << " element " << i;
      }
    }
  }
}

TEST(CollectiveMpi, ForwardModeMatchesFiniteDifferencesAcrossRanks) {
  for (const CollectiveCase& c : Cases()) {
    Objective o;
    absl::Status built = Build(c, &o);
    ASSERT_TRUE(AllRanks(built.ok())) << built;
    Tensor x = Random(c.x_shape, 5 + Rank()), t = Random(c.x_shape, 900 + Rank());
    Tensor zero_w = Tensor::Zeros(DType::kFloat64, o.w.shape()).value();
    absl::StatusOr<Value> j = o.jvp->Run({Value(x), Value(o.w), Value(t), Value(zero_w)});
    ASSERT_TRUE(AllRanks(j.ok())) << j.status();
    const double fd = (F(o, Plus(x, t, kEps)) - F(o, Plus(x, t, -kEps))) / (2 * kEps);
    EXPECT_NEAR(j->tuple()[1].tensor().ElementAsDouble(0), fd, 1e-6)
        << DefaultRegistry().Find(c.id)->name << " rank " << Rank();
  }
}

// ----- Data-parallel training ----------------------------------------------------------

// 20 steps on this rank's share against 20 steps on the whole batch in one
// process (every rank computes that reference itself).
void ExpectMatchesOneProcess(examples::StepProgram (*build)(DType, int64_t), DType dtype, double tol,
                             int64_t bucket_bytes, bool overlap = true) {
  const int64_t batch = 4 * Ranks();
  examples::StepProgram whole = build(dtype, batch);
  std::vector<Value> data = examples::StepData(whole, batch, 42);
  absl::StatusOr<examples::Trained> reference = examples::Train(whole, data, 20, nullptr);
  ASSERT_TRUE(AllRanks(reference.ok())) << reference.status();

  examples::StepProgram mine = build(dtype, batch);
  DataParallelOptions o;
  o.ranks = Ranks();
  o.bucket_bytes = bucket_bytes;
  absl::StatusOr<DataParallelReport> r = MakeDataParallel(*mine.module, mine.step, o);
  ASSERT_TRUE(AllRanks(r.ok())) << r.status();
  const int64_t share = batch / Ranks();
  absl::StatusOr<examples::Trained> trained =
      examples::Train(mine, examples::RowsOf(data, Rank() * share, (Rank() + 1) * share), 20, &Comm(),
                      nullptr, overlap);
  ASSERT_TRUE(AllRanks(trained.ok())) << trained.status();
  EXPECT_LE(examples::MaxWeightDiff(*trained, *reference), tol);
  for (size_t s = 0; s < reference->losses.size(); ++s) {
    EXPECT_NEAR(trained->losses[s], reference->losses[s], tol) << "step " << s + 1;
  }
  EXPECT_LT(reference->losses.back(), reference->losses.front());  // it trains
  absl::Status same = Comm().Agree(StableFingerprint(examples::WeightBytes(*trained)), "the weights");
  EXPECT_TRUE(same.ok()) << same;
}

TEST(DataParallelMpi, MlpFloat64MatchesOneProcess) {
  ExpectMatchesOneProcess([](DType d, int64_t b) { return examples::MlpStep(d, b); }, DType::kFloat64,
                          1e-6, 25 << 20);
}

TEST(DataParallelMpi, MlpFloat32InSmallBucketsMatchesOneProcess) {
  // 40-byte buckets: several all_reduces per step, one per gradient or two.
  ExpectMatchesOneProcess([](DType d, int64_t b) { return examples::MlpStep(d, b); }, DType::kFloat32,
                          1e-5, 40);
}

TEST(DataParallelMpi, MlpWithoutOverlapMatchesOneProcess) {
  // Each all_reduce where the run order puts it, the run waiting for it there.
  ExpectMatchesOneProcess([](DType d, int64_t b) { return examples::MlpStep(d, b); }, DType::kFloat64,
                          1e-6, 40, /*overlap=*/false);
}

TEST(DataParallelMpi, CnnFloat32MatchesOneProcess) {
  ExpectMatchesOneProcess([](DType d, int64_t b) { return examples::CnnStep(d, b); }, DType::kFloat32, 1e-5, 25 << 20);
}

TEST(DataParallelMpi, RanksRunningDifferentModelsFailOnEveryRank) {
  // Rank 0's hidden layer has 6 units, the others' 5: the gradient buckets differ.
  examples::StepProgram p = examples::MlpStep(DType::kFloat64, 4 * Ranks(), {4, Rank() == 0 ? 6 : 5, 2});
  std::vector<Value> data = examples::StepData(p, 4, 3);
  DataParallelOptions o;
  o.ranks = Ranks();
  ASSERT_TRUE(MakeDataParallel(*p.module, p.step, o).ok());
  absl::StatusOr<examples::Trained> t = examples::Train(p, data, 1, &Comm());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("disagree"), std::string::npos) << t.status();
  EXPECT_NE(t.status().message().find("all_reduce"), std::string::npos) << t.status();
}

TEST(DataParallelMpi, BatchThatDoesNotDivideFailsOnEveryRank) {
  examples::StepProgram p = examples::MlpStep(DType::kFloat64, 4 * Ranks() + 1);
  DataParallelOptions o;
  o.ranks = Ranks();
  absl::StatusOr<DataParallelReport> r = MakeDataParallel(*p.module, p.step, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not divide among"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("parameter 'x'"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace kgrad

int main(int argc, char** argv) {
  absl::StatusOr<std::unique_ptr<kgrad::MpiCommunicator>> comm =
      kgrad::MpiCommunicator::Create(kgrad::MpiOptions{60});
  if (!comm.ok()) {
    std::fprintf(stderr, "%s\n", std::string(comm.status().message()).c_str());
    return 1;
  }
  kgrad::g_comm = comm->get();
  // One report per job: rank 0 writes the XML and prints; the others stay quiet
  // unless something fails (failures print on every rank).
  if ((*comm)->rank() != 0) {
    unsetenv("TEST_PREMATURE_EXIT_FILE");  // Bazel's marker file: rank 0's
    GTEST_FLAG_SET(output, "");
    GTEST_FLAG_SET(brief, true);
  }
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  double failed = rc != 0 ? 1 : 0, any = 0;
  if (!(*comm)->AllReduce(&failed, &any, 1, kgrad::DType::kFloat64, kgrad::ReduceOp::kMax).ok()) return 2;
  comm->reset();
  return any > 0 ? 1 : 0;
}
