// The CUDA device code (backends/cuda/kernels/*.cu) compiled for the host with
// KGRAD_CUDA_EMULATION and run on host threads (kernels/emulation.h), against
// the CPU kernels: index arithmetic, broadcasting and reduction geometry, block
// reductions (shared memory and __syncthreads), split reductions, tie and NaN
// rules. Runs on every machine, GPU or not; what it cannot check is the CUDA
// runtime itself (streams, memory, cuBLAS, cuDNN), which the GPU tests cover.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cuda/geometry.h"
#include "backends/cuda/kernels/launch.h"
#include "gtest/gtest.h"
#include "ops/elementwise.h"
#include "ops/registry.h"
#include "tests/cuda/compare.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace cuda {
namespace {

using testing::DefaultTolerance;
using testing::Ints;
using testing::kInf;
using testing::kNaN;
using testing::MakeTensor;
using testing::RandomTensor;
using testing::RunOk;
using testing::Tolerance;
using testing::ValuesClose;

DT ToDT(DType t) { return static_cast<DT>(static_cast<int>(t)); }
// The attributes the host kernels pass to the device code for `id` with `attrs`.
ew::Attrs AttrsOf(PrimId id, AttrMap attrs = {}) {
  return ops::ElementwiseAttrs(*DefaultRegistry().Make(id, std::move(attrs)).value());
}
Tensor New(DType t, const Shape& s) { return Tensor::Create(t, s).value(); }

::testing::AssertionResult Same(const Tensor& got, const Tensor& want, Tolerance tol) {
  if (!want.defined()) return ::testing::AssertionFailure() << "no CPU result";
  return ValuesClose(Value(got), Value(want), tol);
}
::testing::AssertionResult Same(const Tensor& got, const Tensor& want) {
  return Same(got, want, DefaultTolerance(IsFloating(want.dtype()) ? want.dtype() : DType::kFloat64));
}

class EmulatedTest : public ::testing::TestWithParam<DType> {
 protected:
  Tensor R(const Shape& s, double lo = -2, double hi = 2) {
    return RandomTensor(GetParam(), s, rng_, lo, hi);
  }
  std::mt19937_64 rng_{71};
};

// ----- Elementwise ------------------------------------------------------------------------------
struct UnaryCase {
  PrimId id;
  double lo, hi;
  AttrMap attrs;
};

TEST_P(EmulatedTest, UnaryOps) {
  const std::vector<UnaryCase> cases = {
      {PrimId::kNeg, -3, 3, {}},
      {PrimId::kAbs, -3, 3, {}},
      {PrimId::kSign, -3, 3, {}},
      {PrimId::kSquare, -3, 3, {}},
      {PrimId::kExp, -5, 5, {}},
      {PrimId::kLog, 0.1, 5, {}},
      {PrimId::kLog1p, -0.5, 5, {}},
      {PrimId::kExpm1, -3, 3, {}},
      {PrimId::kSin, -6, 6, {}},
      {PrimId::kCos, -6, 6, {}},
      {PrimId::kTanh, -4, 4, {}},
      {PrimId::kSigmoid, -8, 8, {}},
      {PrimId::kRelu, -3, 3, {}},
      {PrimId::kGelu, -4, 4, {}},
      {PrimId::kGelu, -4, 4, {{"approximate", true}}},
      {PrimId::kSoftplus, -20, 20, {}},
      {PrimId::kSqrt, 0, 9, {}},
      {PrimId::kRsqrt, 0.1, 9, {}},
      {PrimId::kReciprocal, 0.1, 3, {}},
      {PrimId::kErf, -3, 3, {}},
  };
  for (const UnaryCase& c : cases) {
    Tensor x = R({3, 700}, c.lo, c.hi);
    Tensor y = New(x.dtype(), x.shape());
    ASSERT_EQ(LaunchUnary(c.id, ToDT(x.dtype()), AttrsOf(c.id, c.attrs), x.raw_data(), y.raw_data(),
                          x.NumElements(), nullptr),
              cudaSuccess);
    EXPECT_TRUE(Same(y, RunOk(c.id, {Value(x)}, c.attrs))) << PrimIdName(c.id);
  }
}

TEST(EmulatedIntTest, IntegerUnaryAndBoolOps) {
  std::mt19937_64 rng(72);
  for (DType t : {DType::kInt32, DType::kInt64}) {
    const int64_t lo = t == DType::kInt32 ? std::numeric_limits<int32_t>::min()
                                          : std::numeric_limits<int64_t>::min();
    Tensor x = MakeTensor(t, {5}, {static_cast<double>(lo), -3, 0, 7, 46341});
    for (PrimId id : {PrimId::kNeg, PrimId::kAbs, PrimId::kSign, PrimId::kSquare}) {
      Tensor y = New(t, x.shape());
      ASSERT_EQ(LaunchUnary(id, ToDT(t), AttrsOf(id), x.raw_data(), y.raw_data(), 5, nullptr),
                cudaSuccess);
      EXPECT_TRUE(Same(y, RunOk(id, {Value(x)}))) << PrimIdName(id);
    }
  }
  Tensor b = RandomTensor(DType::kBool, {50}, rng);
  Tensor nb = New(DType::kBool, {50});
  ASSERT_EQ(LaunchUnary(PrimId::kLogicalNot, DT::kBool, {}, b.raw_data(), nb.raw_data(), 50,
                        nullptr),
            cudaSuccess);
  EXPECT_TRUE(Same(nb, RunOk(PrimId::kLogicalNot, {Value(b)})));
  // Unsupported dtype for the op: an error, not a launch.
  EXPECT_NE(LaunchUnary(PrimId::kExp, DT::kI32, {}, b.raw_data(), nb.raw_data(), 1, nullptr),
            cudaSuccess);
}

const std::vector<PrimId>& BinaryCases() {
  static const std::vector<PrimId> cases = {
      PrimId::kAdd,   PrimId::kSub,      PrimId::kMul,  PrimId::kDiv,
      PrimId::kMaximum, PrimId::kMinimum, PrimId::kEqual, PrimId::kNotEqual,
      PrimId::kLess,  PrimId::kLessEqual, PrimId::kGreater, PrimId::kGreaterEqual,
  };
  return cases;
}

const std::vector<std::pair<Shape, Shape>>& BroadcastShapePairs() {
  static const std::vector<std::pair<Shape, Shape>> pairs = {
      {{3, 4}, {3, 4}}, {{3, 1, 5}, {4, 1}}, {{}, {2, 3}},      {{2, 3}, {3}},
      {{0, 3}, {1, 3}}, {{2, 1, 4, 1}, {1, 3, 1, 5}}, {{5, 1}, {}}, {{4, 1, 6}, {4, 5, 6}}};
  return pairs;
}

// Runs a binary launcher like the host kernel does.
Tensor RunBinary(PrimId op, bool bool_out, const Tensor& a, const Tensor& b) {
  Shape shape = BroadcastShapes(a.shape(), b.shape()).value();
  Tensor out = New(bool_out ? DType::kBool : a.dtype(), shape);
  const Shape* ins[2] = {&a.shape(), &b.shape()};
  BroadcastGeom g = MakeBroadcastGeom(shape, ins);
  EXPECT_EQ(LaunchBinary(op, ToDT(a.dtype()), AttrsOf(op), a.raw_data(), b.raw_data(),
                         out.raw_data(), g, nullptr),
            cudaSuccess);
  return out;
}

bool IsComparison(PrimId op) {
  return op != PrimId::kAdd && op != PrimId::kSub && op != PrimId::kMul &&
         op != PrimId::kDiv && op != PrimId::kMaximum && op != PrimId::kMinimum &&
         op != PrimId::kPow;
}

TEST_P(EmulatedTest, BinaryOpsBroadcast) {
  for (const auto& [sa, sb] : BroadcastShapePairs()) {
    Tensor a = R(sa), b = R(sb, 0.5, 2);
    for (PrimId c : BinaryCases()) {
      for (bool swap : {false, true}) {
        const Tensor& x = swap ? b : a;
        const Tensor& y = swap ? a : b;
        EXPECT_TRUE(
            Same(RunBinary(c, IsComparison(c), x, y), RunOk(c, {Value(x), Value(y)})))
            << PrimIdName(c) << " " << ShapeToString(x.shape()) << " "
            << ShapeToString(y.shape());
      }
    }
    EXPECT_TRUE(
        Same(RunBinary(PrimId::kPow, false, b, a), RunOk(PrimId::kPow, {Value(b), Value(a)})));
  }
  Tensor p = MakeTensor(GetParam(), {4}, {kNaN, 1, kNaN, -1});
  Tensor q = MakeTensor(GetParam(), {4}, {1, kNaN, kNaN, 2});
  EXPECT_TRUE(Same(RunBinary(PrimId::kMaximum, false, p, q),
                   RunOk(PrimId::kMaximum, {Value(p), Value(q)})));
  EXPECT_TRUE(Same(RunBinary(PrimId::kMinimum, false, p, q),
                   RunOk(PrimId::kMinimum, {Value(p), Value(q)})));
}

TEST(EmulatedIntTest, IntegerBinaryOpsWrap) {
  for (DType t : {DType::kInt32, DType::kInt64}) {
    const double hi = t == DType::kInt32 ? 2147483647.0 : 9.2e18;
    Tensor a = MakeTensor(t, {6}, {-hi, hi, -7, 7, 0, hi});
    Tensor b = MakeTensor(t, {6}, {-1, 2, 2, -3, 5, hi});
    for (PrimId c : BinaryCases()) {
      EXPECT_TRUE(
          Same(RunBinary(c, IsComparison(c), a, b), RunOk(c, {Value(a), Value(b)})))
          << PrimIdName(c) << " " << DTypeName(t);
    }
    Tensor zero = MakeTensor(t, {4}, {3, 0, 1, 0});
    unsigned long long first = 0;
    ASSERT_EQ(LaunchFirstZero(ToDT(t), zero.raw_data(), 4, &first, nullptr), cudaSuccess);
    EXPECT_EQ(first, 1u);
    ASSERT_EQ(LaunchFirstZero(ToDT(t), a.raw_data(), 6, &first, nullptr), cudaSuccess);
    EXPECT_EQ(first, 4u) << "the only zero of a is at position 4";
  }
}

TEST_P(EmulatedTest, SelectBroadcastsThreeOperands) {
  std::mt19937_64 rng(73);
  Tensor c = RandomTensor(DType::kBool, {4, 1, 6}, rng);
  Tensor a = R({5, 1}), b = R({4, 5, 6});
  Shape shape = {4, 5, 6};
  const Shape* ins[3] = {&c.shape(), &a.shape(), &b.shape()};
  Tensor out = New(GetParam(), shape);
  ASSERT_EQ(LaunchSelect(ToDT(GetParam()), c.raw_data(), a.raw_data(), b.raw_data(), out.raw_data(),
                         MakeBroadcastGeom(shape, ins), nullptr),
            cudaSuccess);
  EXPECT_TRUE(Same(out, RunOk(PrimId::kSelect, {Value(c), Value(a), Value(b)})));
}

TEST(EmulatedIntTest, CastFillAndDropout) {
  const std::vector<double> values = {0, 1.5, -2.7, 1e10, -1e10, 3e9, kInf, -kInf, kNaN, 1};
  const DType all[] = {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64,
                       DType::kBool};
  for (DType from : all) {
    Tensor x = MakeTensor(from, {10}, values);
    for (DType to : all) {
      Tensor y = New(to, {10});
      ASSERT_EQ(LaunchCast(ToDT(from), ToDT(to), x.raw_data(), y.raw_data(), 10, nullptr),
                cudaSuccess);
      EXPECT_TRUE(Same(y, RunOk(PrimId::kCast, {Value(x)}, {{"dtype", to}})))
          << DTypeName(from) << " -> " << DTypeName(to);
    }
    Tensor f = New(from, {3, 5});
    ASSERT_EQ(LaunchFill(ToDT(from), f.raw_data(), 15, -2.5, nullptr), cudaSuccess);
    EXPECT_TRUE(Same(
        f, RunOk(PrimId::kFill, {}, {{"shape", Ints{3, 5}}, {"dtype", from}, {"value", -2.5}})));
  }
  std::mt19937_64 rng(74);
  for (DType t : {DType::kFloat32, DType::kFloat64}) {
    Tensor x = RandomTensor(t, {40, 37}, rng);
    for (double rate : {0.0, 0.3, 0.9}) {
      Tensor y = New(t, x.shape());
      ASSERT_EQ(LaunchDropout(ToDT(t), x.raw_data(), y.raw_data(), x.NumElements(), 42, rate,
                              nullptr),
                cudaSuccess);
      EXPECT_TRUE(Same(y,
                       RunOk(PrimId::kDropout, {Value(x)}, {{"rate", rate}, {"seed", int64_t{42}}}),
                       Tolerance{0, 0}));
    }
  }
  Tensor idx = MakeTensor(DType::kInt32, {6}, {0, 3, 5, -1, 9, 2});
  unsigned long long first = 0;
  ASSERT_EQ(LaunchFirstBadIndex(DT::kI32, idx.raw_data(), 6, 0, 6, &first, nullptr), cudaSuccess);
  EXPECT_EQ(first, 3u);
  ASSERT_EQ(LaunchFirstBadIndex(DT::kI32, idx.raw_data(), 3, 0, 6, &first, nullptr), cudaSuccess);
  EXPECT_EQ(first, ~0ull);
  // Negative indices allowed (gather_elements): only the 9 is out of [-6, 6).
  ASSERT_EQ(LaunchFirstBadIndex(DT::kI32, idx.raw_data(), 6, -6, 6, &first, nullptr), cudaSuccess);
  EXPECT_EQ(first, 4u);
}

// ----- Reductions --------------------------------------------------------------------------------
struct ReduceCase {
  Shape shape;
  Ints axes;
};

Tensor RunReduce(ReduceOp op, const Tensor& x, const Ints& axes, int sms) {
  std::vector<bool> reduced(x.rank(), axes.empty());
  for (int64_t a : axes) reduced[NormalizeAxis(a, x.rank()).value()] = true;
  Shape out;
  for (int d = 0; d < x.rank(); ++d) {
    if (!reduced[d]) out.push_back(x.dim(d));
  }
  const ReduceGeom g = MakeReduceGeom(x.shape(), reduced);
  Tensor y = New(x.dtype(), out);
  std::vector<char> scratch(ReduceScratchBytes(op, ToDT(x.dtype()), g, sms) + 1);
  EXPECT_EQ(LaunchReduce(op, ToDT(x.dtype()), x.raw_data(), y.raw_data(), g, scratch.data(), sms,
                         nullptr),
            cudaSuccess);
  return y;
}

TEST_P(EmulatedTest, ReductionsInEveryLaunchShape) {
  const std::vector<ReduceCase> cases = {
      {{2, 3, 4}, {}},   {{2, 3, 4}, {0}},    {{2, 3, 4}, {1}}, {{2, 3, 4}, {2}},
      {{2, 3, 4}, {0, 2}}, {{}, {}},         {{5000}, {}},     {{3, 2000}, {1}},
      {{2000, 3}, {0}},  {{40, 50}, {0}},     {{40, 50}, {1}},  {{0, 3}, {0}},
      {{3, 0}, {1}},     {{1100, 40}, {1}},  {{6, 3, 300}, {0, 2}},
      {{1200, 1030}, {0}}};  // columns split among threads
  const std::pair<ReduceOp, PrimId> ops[] = {
      {ReduceOp::kSum, PrimId::kReduceSum}, {ReduceOp::kMean, PrimId::kReduceMean},
      {ReduceOp::kProd, PrimId::kReduceProd}, {ReduceOp::kMax, PrimId::kReduceMax},
      {ReduceOp::kMin, PrimId::kReduceMin}, {ReduceOp::kLogsumexp, PrimId::kLogsumexp}};
  for (const ReduceCase& c : cases) {
    Tensor x = R(c.shape, 0.995, 1.005);
    for (const auto& [op, id] : ops) {
      const bool empty = NumElementsOf(x.shape()) == 0;
      if (empty && (op == ReduceOp::kMax || op == ReduceOp::kMin)) continue;  // an error
      for (int sms : {1, 132}) {  // 132: few outputs split their reduction
        Tolerance tol = DefaultTolerance(GetParam());
        if (GetParam() == DType::kFloat32) tol.rtol = 1e-4;
        EXPECT_TRUE(
            Same(RunReduce(op, x, c.axes, sms), RunOk(id, {Value(x)}, {{"axes", c.axes}}), tol))
            << PrimIdName(id) << " " << ShapeToString(c.shape) << " sms=" << sms;
      }
    }
  }
  Tensor special =
      MakeTensor(GetParam(), {4, 3}, {1, kNaN, 2, -kInf, -kInf, -kInf, kInf, 1, 2, 3, -1, kInf});
  for (const auto& [op, id] : ops) {
    for (Ints axes : {Ints{0}, Ints{1}}) {
      EXPECT_TRUE(
          Same(RunReduce(op, special, axes, 1), RunOk(id, {Value(special)}, {{"axes", axes}})))
          << PrimIdName(id);
    }
  }
}

TEST(EmulatedIntTest, IntegerReductionsAreExact) {
  std::mt19937_64 rng(75);
  for (DType t : {DType::kInt32, DType::kInt64}) {
    Tensor x = RandomTensor(t, {30, 700}, rng, -1000, 1000);
    for (Ints axes : {Ints{}, Ints{0}, Ints{1}}) {
      for (auto [op, id] : {std::pair{ReduceOp::kSum, PrimId::kReduceSum},
                            {ReduceOp::kProd, PrimId::kReduceProd},
                            {ReduceOp::kMax, PrimId::kReduceMax},
                            {ReduceOp::kMin, PrimId::kReduceMin}}) {
        EXPECT_TRUE(Same(RunReduce(op, x, axes, 132), RunOk(id, {Value(x)}, {{"axes", axes}})))
            << PrimIdName(id) << " " << DTypeName(t);
      }
    }
  }
}

TEST_P(EmulatedTest, ArgmaxAndArgminPickTheFirstExtremum) {
  const std::vector<Shape> shapes = {{7}, {5, 9}, {3, 600}, {4, 300, 5}};
  for (const Shape& s : shapes) {
    Tensor x = R(s, -3, 3);
    for (int64_t i = 0; i < x.NumElements(); ++i) {  // few distinct values: ties
      const double v = std::floor(x.ElementAsDouble(i));
      if (GetParam() == DType::kFloat32) {
        x.mutable_data<float>()[i] = static_cast<float>(v);
      } else {
        x.mutable_data<double>()[i] = v;
      }
    }
    if (x.NumElements() > 20) {  // and a NaN
      if (GetParam() == DType::kFloat32) x.mutable_data<float>()[17] = NAN;
      if (GetParam() == DType::kFloat64) x.mutable_data<double>()[17] = NAN;
    }
    for (int axis = 0; axis < static_cast<int>(s.size()); ++axis) {
      const int64_t outer = NumElementsOf(absl::MakeConstSpan(s).subspan(0, axis));
      const int64_t inner = NumElementsOf(absl::MakeConstSpan(s).subspan(axis + 1));
      for (bool is_max : {true, false}) {
        Shape out = s;
        out.erase(out.begin() + axis);
        Tensor y = New(DType::kInt64, out);
        ASSERT_EQ(LaunchArgReduce(is_max, ToDT(x.dtype()), x.raw_data(), y.mutable_data<int64_t>(),
                                  outer, s[axis], inner, nullptr),
                  cudaSuccess);
        EXPECT_TRUE(Same(y, RunOk(is_max ? PrimId::kArgmax : PrimId::kArgmin, {Value(x)},
                                  {{"axis", int64_t{axis}}})))
            << ShapeToString(s) << " axis " << axis;
      }
    }
  }
}

// cuBLAS's strided-batched GEMM by its definition (column-major, no transpose of C).
template <typename T>
void ReferenceColumnMajorGemm(const ColumnMajorGemm& g, const T* first, const T* second, T* c) {
  for (int64_t bi = 0; bi < g.batch; ++bi) {
    const T* a = first + bi * g.stride_first;
    const T* b = second + bi * g.stride_second;
    T* out = c + bi * g.stride_c;
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        double acc = 0;
        for (int64_t l = 0; l < g.k; ++l) {
          const T x = g.trans_first ? a[l + i * g.ld_first] : a[i + l * g.ld_first];
          const T y = g.trans_second ? b[j + l * g.ld_second] : b[l + j * g.ld_second];
          acc += static_cast<double>(x) * static_cast<double>(y);
        }
        out[i + j * g.ldc] = static_cast<T>(acc);
      }
    }
  }
}

// The matmul plan, the batch expansions and the column-major arguments give the
// CPU's matmul.
TEST_P(EmulatedTest, MatMulPlansAndCublasArguments) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{5, 7}, {7, 3}},       {{2, 3, 5, 7}, {7, 4}},      {{4, 5, 7}, {4, 7, 3}},
      {{1, 5, 7}, {4, 7, 3}}, {{2, 1, 5, 7}, {3, 7, 4}},    {{3, 1, 2, 6}, {1, 4, 6, 2}},
      {{1, 1}, {1, 1}},       {{6, 2, 3}, {1, 3, 2}},       {{2, 1, 4, 3}, {1, 3, 3, 5}}};
  for (const auto& [a0, b0] : cases) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        Shape as = a0, bs = b0;
        if (ta) std::swap(as[as.size() - 1], as[as.size() - 2]);
        if (tb) std::swap(bs[bs.size() - 1], bs[bs.size() - 2]);
        Tensor a = R(as), b = R(bs);
        const MatMulPlan plan = PlanMatMul(as, bs, ta, tb);
        Shape batch(plan.out.begin(), plan.out.end() - 2);
        const int elem = static_cast<int>(DTypeSize(GetParam()));
        auto expand = [&](const Tensor& t) {
          Shape shape;
          const CopyGeom g = ExpandBatch(t.shape(), batch, &shape);
          Tensor e = New(GetParam(), shape);
          EXPECT_EQ(LaunchStridedCopy(elem, t.raw_data(), e.raw_data(), g, nullptr), cudaSuccess);
          return e;
        };
        Tensor pa = plan.expand_a ? expand(a) : a;
        Tensor pb = plan.expand_b ? expand(b) : b;
        Tensor c = New(GetParam(), plan.out);
        const ColumnMajorGemm g = ToColumnMajor(plan.gemm);
        if (GetParam() == DType::kFloat32) {
          ReferenceColumnMajorGemm(g, pb.data<float>(), pa.data<float>(), c.mutable_data<float>());
        } else {
          ReferenceColumnMajorGemm(g, pb.data<double>(), pa.data<double>(),
                                   c.mutable_data<double>());
        }
        EXPECT_TRUE(Same(c, RunOk(PrimId::kMatMul, {Value(a), Value(b)},
                                  {{"transpose_a", ta}, {"transpose_b", tb}})))
            << ShapeToString(as) << " x " << ShapeToString(bs) << " ta=" << ta << " tb=" << tb;
      }
    }
  }
}

TEST_P(EmulatedTest, EinsumRearrangementsTransposeTakeDiagonalsAndSum) {
  const std::vector<std::tuple<std::string, std::string, Shape>> cases = {
      {"ij", "ji", {3, 5}},   {"ii", "i", {4, 4}},     {"ii", "", {4, 4}},
      {"ijk", "kj", {2, 3, 4}}, {"iij", "j", {3, 3, 2}}, {"ijk", "", {2, 3, 4}},
      {"abc", "cab", {2, 3, 4}}, {"ijji", "ij", {2, 3, 3, 2}}};
  for (const auto& [letters, out, shape] : cases) {
    Tensor x = R(shape);
    Shape out_shape;
    absl::StatusOr<ReduceGeom> g = RearrangeGeom(letters, shape, out, &out_shape);
    ASSERT_TRUE(g.ok()) << g.status();
    Tensor y = New(GetParam(), out_shape);
    std::vector<char> scratch(ReduceScratchBytes(ReduceOp::kSum, ToDT(GetParam()), *g, 4) + 1);
    ASSERT_EQ(LaunchReduce(ReduceOp::kSum, ToDT(GetParam()), x.raw_data(), y.raw_data(), *g,
                           scratch.data(), 4, nullptr),
              cudaSuccess);
    EXPECT_TRUE(Same(y, RunOk(PrimId::kEinsum, {Value(x)}, {{"equation", letters + "->" + out}})))
        << letters << "->" << out;
  }
  Shape unused;
  EXPECT_FALSE(RearrangeGeom("ij", {2, 3}, "k", &unused).ok());
  EXPECT_FALSE(RearrangeGeom("ij", {2, 3}, "ii", &unused).ok());
}

// ----- Data movement ------------------------------------------------------------------------------
TEST_P(EmulatedTest, TransposeBroadcastSlicePadConcat) {
  const int elem = static_cast<int>(DTypeSize(GetParam()));
  // transpose
  for (Ints perm : {Ints{1, 0, 2}, Ints{2, 0, 1}, Ints{0, 1, 2}}) {
    Tensor x = R({3, 4, 5});
    Shape in_strides = RowMajorStrides(x.shape()), dims, strides;
    for (int64_t p : perm) {
      dims.push_back(x.dim(p));
      strides.push_back(in_strides[p]);
    }
    Tensor y = New(GetParam(), dims);
    ASSERT_EQ(LaunchStridedCopy(elem, x.raw_data(), y.raw_data(), DenseWrite(dims, strides), nullptr),
              cudaSuccess);
    EXPECT_TRUE(Same(y, RunOk(PrimId::kTranspose, {Value(x)}, {{"perm", perm}})));
  }
  // broadcast_to [3,1] -> [2,3,4]
  {
    Tensor x = R({3, 1});
    Shape target = {2, 3, 4};
    Shape strides = {0, 1, 0};
    Tensor y = New(GetParam(), target);
    ASSERT_EQ(LaunchStridedCopy(elem, x.raw_data(), y.raw_data(), DenseWrite(target, strides), nullptr),
              cudaSuccess);
    EXPECT_TRUE(Same(y, RunOk(PrimId::kBroadcastTo, {Value(x)}, {{"shape", Ints{2, 3, 4}}})));
  }
  // slice x[1:5:2, 2:6] of [6, 7]
  {
    Tensor x = R({6, 7});
    Shape out = {2, 4};
    Shape strides = {14, 1};
    Tensor y = New(GetParam(), out);
    ASSERT_EQ(LaunchStridedCopy(elem, x.raw_data(), y.raw_data(), DenseWrite(out, strides, 9), nullptr),
              cudaSuccess);
    EXPECT_TRUE(
        Same(y, RunOk(PrimId::kSlice, {Value(x)},
                      {{"begin", Ints{1, 2}}, {"end", Ints{5, 6}}, {"strides", Ints{2, 1}}})));
  }
  // pad [2, 3] by (1, 0), (2, 1) with 0.5
  {
    Tensor x = R({2, 3});
    Shape dims = {3, 6};
    Tensor y = New(GetParam(), dims);
    ASSERT_EQ(LaunchFill(ToDT(GetParam()), y.raw_data(), 18, 0.5, nullptr), cudaSuccess);
    ASSERT_EQ(LaunchStridedCopy(elem, x.raw_data(), y.raw_data(),
                                DenseRead(x.shape(), RowMajorStrides(dims), 1 * 6 + 2), nullptr),
              cudaSuccess);
    EXPECT_TRUE(
        Same(y, RunOk(PrimId::kPad, {Value(x)}, {{"pads", Ints{1, 0, 2, 1}}, {"value", 0.5}})));
  }
  // concat along axis 1 of [2,3] and [2,4]
  {
    Tensor a = R({2, 3}), b = R({2, 4});
    Shape dims = {2, 7};
    Tensor y = New(GetParam(), dims);
    ASSERT_EQ(LaunchStridedCopy(elem, a.raw_data(), y.raw_data(),
                                DenseRead(a.shape(), RowMajorStrides(dims), 0), nullptr),
              cudaSuccess);
    ASSERT_EQ(LaunchStridedCopy(elem, b.raw_data(), y.raw_data(),
                                DenseRead(b.shape(), RowMajorStrides(dims), 3), nullptr),
              cudaSuccess);
    EXPECT_TRUE(Same(y, RunOk(PrimId::kConcat, {Value(a), Value(b)}, {{"axis", int64_t{1}}})));
  }
}

TEST_P(EmulatedTest, GatherScatterAddAndOneHot) {
  const int elem = static_cast<int>(DTypeSize(GetParam()));
  for (DType it : {DType::kInt32, DType::kInt64}) {
    Tensor params = R({6, 4, 5});
    // axis 1: [outer 6, dim 4, inner 5] with indices < 4.
    Tensor idx1 = MakeTensor(it, {3}, {3, 0, 3});
    Tensor g = New(GetParam(), {6, 3, 5});
    ASSERT_EQ(LaunchGather(elem, params.raw_data(), ToDT(it), idx1.raw_data(), g.raw_data(), 6, 4, 5,
                           3, nullptr),
              cudaSuccess);
    EXPECT_TRUE(
        Same(g, RunOk(PrimId::kGather, {Value(params), Value(idx1)}, {{"axis", int64_t{1}}})));
    // scatter_add along axis 0: few long columns add atomically, short ones in
    // index order.
    for (const auto& [inner_shape, n] : std::vector<std::pair<Shape, int64_t>>{
             {{4, 5}, 300}, {{2}, 300}, {{3}, 10}}) {
      Shape in_shape = {6};
      in_shape.insert(in_shape.end(), inner_shape.begin(), inner_shape.end());
      Tensor input = R(in_shape);
      std::vector<double> rep_values(n);
      for (int64_t i = 0; i < n; ++i) rep_values[i] = static_cast<double>((i * 7) % 6);
      Tensor rep = MakeTensor(it, {n}, rep_values);
      Shape upd_shape = {n};
      upd_shape.insert(upd_shape.end(), inner_shape.begin(), inner_shape.end());
      Tensor upd = R(upd_shape);
      Tensor out = input.Clone();
      const int64_t inner = NumElementsOf(inner_shape);
      ASSERT_EQ(LaunchScatterAdd(ToDT(GetParam()), out.raw_data(), upd.raw_data(), ToDT(it),
                                 rep.raw_data(), 1, 6, inner, n, nullptr),
                cudaSuccess);
      Tolerance tol = DefaultTolerance(GetParam());
      tol.atol = 1e-3;
      EXPECT_TRUE(
          Same(out, RunOk(PrimId::kScatterAdd, {Value(input), Value(rep), Value(upd)}), tol));
    }
    Tensor oh_idx = MakeTensor(it, {2, 3}, {0, 4, -1, 2, 5, 1});
    for (int64_t axis : {0, 1, 2}) {
      Shape dims = {2, 3};
      dims.insert(dims.begin() + axis, 5);
      const int64_t outer = NumElementsOf(absl::MakeConstSpan(dims).subspan(0, axis));
      const int64_t inner = NumElementsOf(absl::MakeConstSpan(dims).subspan(axis + 1));
      Tensor y = New(GetParam(), dims);
      ASSERT_EQ(LaunchOneHot(ToDT(GetParam()), ToDT(it), oh_idx.raw_data(), y.raw_data(), outer, 5,
                             inner, 3.0, -1.0, nullptr),
                cudaSuccess);
      EXPECT_TRUE(Same(y, RunOk(PrimId::kOneHot, {Value(oh_idx)},
                                {{"depth", int64_t{5}},
                                 {"axis", axis},
                                 {"dtype", GetParam()},
                                 {"on_value", 3.0},
                                 {"off_value", -1.0}})));
    }
  }
}

// ----- nn -------------------------------------------------------------------------------------------
TEST_P(EmulatedTest, SoftmaxCrossEntropiesAndLayerNorm) {
  const DT dt = ToDT(GetParam());
  for (const auto& [shape, axis] : std::vector<std::pair<Shape, int>>{
           {{4, 7}, 1}, {{3, 4, 5}, 1}, {{2, 600}, 1}, {{3, 4}, 0}, {{0, 4}, 1}}) {
    Tensor x = R(shape, -3, 3), labels = R(shape, 0, 1);
    const int64_t outer = NumElementsOf(absl::MakeConstSpan(shape).subspan(0, axis));
    const int64_t inner = NumElementsOf(absl::MakeConstSpan(shape).subspan(axis + 1));
    for (bool log : {false, true}) {
      Tensor y = New(GetParam(), shape);
      ASSERT_EQ(LaunchSoftmax(log, dt, x.raw_data(), y.raw_data(), outer, shape[axis], inner, nullptr),
                cudaSuccess);
      EXPECT_TRUE(Same(y, RunOk(log ? PrimId::kLogSoftmax : PrimId::kSoftmax, {Value(x)},
                                {{"axis", int64_t{axis}}})))
          << ShapeToString(shape);
    }
    Shape loss_shape = shape;
    loss_shape.erase(loss_shape.begin() + axis);
    Tensor loss = New(GetParam(), loss_shape);
    ASSERT_EQ(LaunchSoftmaxCrossEntropy(dt, x.raw_data(), labels.raw_data(), loss.raw_data(), outer,
                                        shape[axis], inner, nullptr),
              cudaSuccess);
    EXPECT_TRUE(Same(loss, RunOk(PrimId::kSoftmaxCrossEntropy, {Value(x), Value(labels)},
                                 {{"axis", int64_t{axis}}})))
        << ShapeToString(shape);
  }
  for (int64_t c : {6, 300}) {
    Tensor x = R({5, c}, -3, 3);
    Tensor labels = MakeTensor(DType::kInt64, {5}, {0, 5, 3, 3, 1});
    Tensor loss = New(GetParam(), {5});
    ASSERT_EQ(LaunchSparseSoftmaxCrossEntropy(dt, x.raw_data(), DT::kI64, labels.raw_data(),
                                              loss.raw_data(), 5, c, nullptr),
              cudaSuccess);
    EXPECT_TRUE(Same(loss, RunOk(PrimId::kSparseSoftmaxCrossEntropy, {Value(x), Value(labels)})));
  }
  for (const auto& [shape, begin] : std::vector<std::pair<Shape, int>>{
           {{4, 7}, 1}, {{3, 4, 5}, 1}, {{2, 700}, 1}}) {
    Tensor x = R(shape, 100, 101);
    Shape norm(shape.begin() + begin, shape.end());
    Tensor scale = R(norm), bias = R(norm);
    Tensor y = New(GetParam(), shape);
    const int64_t n = NumElementsOf(norm);
    ASSERT_EQ(LaunchLayerNorm(dt, x.raw_data(), scale.raw_data(), bias.raw_data(), y.raw_data(),
                              x.NumElements() / n, n, 1e-5, nullptr),
              cudaSuccess);
    EXPECT_TRUE(Same(y, RunOk(PrimId::kLayerNorm, {Value(x), Value(scale), Value(bias)},
                              {{"begin_norm_axis", int64_t{begin}}})))
        << ShapeToString(shape);
  }
}

// ----- Pooling -----------------------------------------------------------------------------------
struct PoolCase {
  Shape x;
  Ints kernel, stride, padding;  // padding: [top, bottom, left, right]
};

PoolGeom MakePool(const PoolCase& c, bool include_pad) {
  PoolGeom g;
  g.planes = c.x[0] * c.x[1];
  g.h = c.x[2], g.w = c.x[3];
  g.kh = c.kernel[0], g.kw = c.kernel[1];
  g.sh = c.stride[0], g.sw = c.stride[1];
  g.pad_top = c.padding[0], g.pad_left = c.padding[2];
  g.oh = (g.h + c.padding[0] + c.padding[1] - g.kh) / g.sh + 1;
  g.ow = (g.w + c.padding[2] + c.padding[3] - g.kw) / g.sw + 1;
  g.count_include_pad = include_pad;
  return g;
}

TEST_P(EmulatedTest, PoolingForwardBackwardAndGradGrad) {
  const DT dt = ToDT(GetParam());
  const std::vector<PoolCase> cases = {
      {{2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0, 0, 0}},
      {{1, 2, 7, 9}, {3, 3}, {1, 1}, {0, 0, 0, 0}},
      {{2, 2, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}},
      {{1, 3, 6, 5}, {2, 3}, {2, 1}, {1, 0, 0, 2}},
  };
  for (const PoolCase& c : cases) {
    Tensor x = R(c.x, -1, 1);
    for (int64_t i = 0; i < x.NumElements(); ++i) {  // relu'd: ties at 0
      if (GetParam() == DType::kFloat32) {
        x.mutable_data<float>()[i] = std::max(0.0f, x.data<float>()[i]);
      } else {
        x.mutable_data<double>()[i] = std::max(0.0, x.data<double>()[i]);
      }
    }
    AttrMap attrs = {{"kernel", c.kernel}, {"stride", c.stride}, {"padding", c.padding}};
    const PoolGeom g = MakePool(c, true);
    Shape y_shape = {c.x[0], c.x[1], g.oh, g.ow};
    Tensor y = New(GetParam(), y_shape), idx = New(DType::kInt64, y_shape);
    ASSERT_EQ(LaunchMaxPoolArgmax(dt, x.raw_data(), y.raw_data(), idx.mutable_data<int64_t>(), g,
                                  nullptr),
              cudaSuccess);
    EXPECT_TRUE(Same(y, RunOk(PrimId::kMaxPool2d, {Value(x)}, attrs))) << ShapeToString(c.x);
    Tensor dy = R(y_shape);
    Tensor dx = New(GetParam(), c.x);
    ASSERT_EQ(LaunchMaxPoolGrad(dt, idx.data<int64_t>(), dy.raw_data(), dx.raw_data(), g, nullptr),
              cudaSuccess);
    EXPECT_TRUE(Same(dx, RunOk(PrimId::kMaxPool2dGrad, {Value(x), Value(dy)}, attrs)));
    Tensor ddx = R(c.x);
    Tensor gg = New(GetParam(), y_shape);
    ASSERT_EQ(LaunchGatherArgmax(dt, idx.data<int64_t>(), ddx.raw_data(), gg.raw_data(), g, nullptr),
              cudaSuccess);
    EXPECT_TRUE(Same(gg, RunOk(PrimId::kMaxPool2dGradGrad, {Value(x), Value(ddx)}, attrs)));
    for (bool include : {true, false}) {
      const PoolGeom ga = MakePool(c, include);
      AttrMap avg = attrs;
      avg["count_include_pad"] = include;
      Tensor ya = New(GetParam(), y_shape);
      ASSERT_EQ(LaunchAvgPool(dt, x.raw_data(), ya.raw_data(), ga, nullptr), cudaSuccess);
      EXPECT_TRUE(Same(ya, RunOk(PrimId::kAvgPool2d, {Value(x)}, avg)));
      Tensor dxa = New(GetParam(), c.x);
      ASSERT_EQ(LaunchAvgPoolGrad(dt, dy.raw_data(), dxa.raw_data(), ga, nullptr), cudaSuccess);
      EXPECT_TRUE(Same(dxa, RunOk(PrimId::kAvgPool2dGrad, {Value(dy), Value(x)}, avg)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, EmulatedTest,
                         ::testing::Values(DType::kFloat32, DType::kFloat64),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

}  // namespace
}  // namespace cuda
}  // namespace kgrad
