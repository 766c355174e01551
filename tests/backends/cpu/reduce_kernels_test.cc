// CPU reduce kernels against naive float64 references written here: every
// input element is sent to its output by dropping the reduced coordinates, and
// each output folds its list of elements with a plain loop. Covers axes,
// negative axes, keepdims, rank 0, size-1 and empty axes, the parallel paths
// (long contiguous runs, many rows, column pieces), NaN/inf and errors.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "core/value.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kSeed = 7081993;

bool IsInt(DType t) { return t == kI32 || t == kI64; }

// Relative tolerance against the natural scale of each result (see Scale()).
double RTol(DType t) { return t == kF64 ? 1e-12 : t == kF32 ? 1e-5 : 0; }

// Which dims `axes` names (empty: all); negative axes count from the end.
std::vector<bool> ReducedMask(const std::vector<int64_t>& axes, int rank) {
  std::vector<bool> mask(rank, axes.empty());
  for (int64_t a : axes) mask[a < 0 ? a + rank : a] = true;
  return mask;
}

Shape ExpectedShape(const Shape& in, const std::vector<bool>& mask, bool keepdims) {
  Shape out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!mask[d]) out.push_back(in[d]);
    if (mask[d] && keepdims) out.push_back(1);
  }
  return out;
}

// groups[o] = the input values that output o reduces, in row-major order.
std::vector<std::vector<double>> Groups(const Shape& in, const std::vector<bool>& mask,
                                        const std::vector<double>& x) {
  int64_t outputs = 1;
  for (size_t d = 0; d < in.size(); ++d) outputs *= mask[d] ? 1 : in[d];
  std::vector<std::vector<double>> groups(outputs);
  std::vector<int64_t> coord(in.size(), 0);
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t remaining = i;
    for (int d = static_cast<int>(in.size()) - 1; d >= 0; --d) {
      coord[d] = remaining % in[d];
      remaining /= in[d];
    }
    int64_t o = 0;
    for (size_t d = 0; d < in.size(); ++d) {
      if (!mask[d]) o = o * in[d] + coord[d];
    }
    groups[o].push_back(x[i]);
  }
  return groups;
}

// ----- Reductions --------------------------------------------------------------------
struct Kind {
  PrimId id;
  std::vector<DType> dtypes;
};

const std::vector<Kind>& Kinds() {
  static const auto* kinds = new std::vector<Kind>{
      {PrimId::kReduceSum, {kF32, kF64, kI32, kI64}},
      {PrimId::kReduceProd, {kF32, kF64, kI32, kI64}},
      {PrimId::kReduceMean, {kF32, kF64}},
      {PrimId::kReduceMax, {kF32, kF64, kI32, kI64}},
      {PrimId::kReduceMin, {kF32, kF64, kI32, kI64}},
      {PrimId::kLogsumexp, {kF32, kF64}},
  };
  return *kinds;
}

double Reference(PrimId id, const std::vector<double>& g) {
  double r = 0;
  switch (id) {
    case PrimId::kReduceSum:
      for (double v : g) r += v;
      return r;
    case PrimId::kReduceMean:
      for (double v : g) r += v;
      return r / g.size();
    case PrimId::kReduceProd:
      r = 1;
      for (double v : g) r *= v;
      return r;
    case PrimId::kReduceMax:
      r = g[0];
      for (double v : g) r = v > r ? v : r;
      return r;
    case PrimId::kReduceMin:
      r = g[0];
      for (double v : g) r = v < r ? v : r;
      return r;
    case PrimId::kLogsumexp: {
      double m = g[0];
      for (double v : g) m = std::max(m, v);
      for (double v : g) r += std::exp(v - m);
      return m + std::log(r);
    }
    default:
      return kNaN;
  }
}

// The size rounding errors are measured against: sum |x| for sums, its average
// for means, |prod| * sqrt(n) for products, 1 + |result| for logsumexp; max and
// min must be exact.
double Scale(PrimId id, const std::vector<double>& g, double want) {
  double abs_sum = 0;
  for (double v : g) abs_sum += std::abs(v);
  switch (id) {
    case PrimId::kReduceSum: return abs_sum;
    case PrimId::kReduceMean: return abs_sum / g.size();
    case PrimId::kReduceProd: return std::abs(want) * std::sqrt(double(g.size()));
    case PrimId::kLogsumexp: return 1 + std::abs(want);
    default: return 0;
  }
}

// Random input for `id`: products of ints stay in {-1, 1} unless the groups are
// tiny (so that nothing overflows); float factors near 1 (nothing underflows).
Tensor ReduceInput(PrimId id, DType t, const Shape& shape, int64_t group,
                   std::mt19937_64& rng) {
  if (id != PrimId::kReduceProd) {
    return RandomTensor(t, shape, rng, IsInt(t) ? -100 : -1, IsInt(t) ? 100 : 1);
  }
  if (!IsInt(t)) return RandomTensor(t, shape, rng, 0.99, 1.01);
  if (group <= 12) return RandomTensor(t, shape, rng, -4, 5);
  std::vector<double> v = ToDoubles(RandomTensor(kI64, shape, rng, -1, 1));
  for (double& d : v) d = d == 0 ? 1 : d;
  return MakeTensor(t, shape, v);
}

struct AxesCase {
  Shape shape;
  std::vector<int64_t> axes;
};

const std::vector<AxesCase>& AxesCases() {
  static const auto* cases = new std::vector<AxesCase>{
      {{2, 3, 4}, {}},         {{2, 3, 4}, {0}},       {{2, 3, 4}, {1}},
      {{2, 3, 4}, {2}},        {{2, 3, 4}, {-1}},      {{2, 3, 4}, {0, 2}},
      {{2, 3, 4}, {0, 1}},     {{2, 3, 4}, {2, 1}},    {{2, 3, 4}, {-3, -1}},
      {{2, 3, 4}, {0, 1, 2}},  {{5}, {0}},             {{}, {}},
      {{1, 1}, {}},            {{1, 1}, {0}},          {{3, 1, 4}, {1}},
      {{3, 1, 4}, {0}},        {{3, 1, 4}, {2}},       {{2, 3, 4, 5}, {0, 2}},
      {{2, 3, 4, 5}, {1, 3}},  {{0, 3}, {1}},          {{3, 0}, {0}},
      {{128, 4096}, {1}},      {{128, 4096}, {0}},     {{128, 4096}, {}},
      {{64, 128, 32}, {0, 2}}, {{64, 128, 32}, {1}},   {{64, 128, 32}, {0}},
      {{2, 140000}, {1}},      {{2, 140000}, {0}},     {{2, 1500, 3}, {1}},
      {{40, 2000}, {0}},
  };
  return *cases;
}

// Runs `id` with and without keepdims and compares every output with the reference.
void CheckReduction(PrimId id, DType t, const AxesCase& c, std::mt19937_64& rng) {
  std::string what = absl::StrCat(PrimIdName(id), " ", DTypeName(t), ShapeToString(c.shape),
                                  " axes=[", absl::StrJoin(c.axes, ","), "] seed=", kSeed);
  std::vector<bool> mask = ReducedMask(c.axes, c.shape.size());
  int64_t group = 1;
  for (size_t d = 0; d < c.shape.size(); ++d) group *= mask[d] ? c.shape[d] : 1;
  Tensor x = ReduceInput(id, t, c.shape, group, rng);
  std::vector<std::vector<double>> groups = Groups(c.shape, mask, ToDoubles(x));
  std::vector<double> want(groups.size()), tol(groups.size());
  for (size_t o = 0; o < groups.size(); ++o) {
    want[o] = Reference(id, groups[o]);
    tol[o] = RTol(t) * Scale(id, groups[o], want[o]) + (IsInt(t) ? 0 : 1e-300);
  }
  for (bool keepdims : {false, true}) {
    absl::StatusOr<Value> r = RunCpuKernel(id, {x}, Axes(c.axes, keepdims));
    ASSERT_TRUE(r.ok()) << what << ": " << r.status();
    const Tensor& y = r->tensor();
    EXPECT_EQ(y.dtype(), t) << what;
    ASSERT_EQ(y.shape(), ExpectedShape(c.shape, mask, keepdims)) << what << " " << keepdims;
    int bad = 0;
    for (size_t o = 0; o < groups.size() && bad < 5; ++o) {
      double got = y.ElementAsDouble(o);
      if (!(std::abs(got - want[o]) <= tol[o])) {
        ++bad;
        ADD_FAILURE() << what << ": output " << o << " is " << got << ", want " << want[o];
      }
    }
  }
}

TEST(ReduceKernelTest, MatchesReference) {
  std::mt19937_64 rng(kSeed);
  for (const Kind& k : Kinds()) {
    for (DType t : k.dtypes) {
      for (const AxesCase& c : AxesCases()) {
        bool empty_group = false;
        std::vector<bool> mask = ReducedMask(c.axes, c.shape.size());
        for (size_t d = 0; d < c.shape.size(); ++d) empty_group |= mask[d] && c.shape[d] == 0;
        if (empty_group) continue;  // EmptyReductions covers these
        CheckReduction(k.id, t, c, rng);
      }
    }
  }
}

TEST(ReduceKernelTest, EmptyReductions) {
  // Sum 0, prod 1, mean NaN (0/0), logsumexp -inf; max and min are errors.
  for (DType t : {kF32, kF64, kI32, kI64}) {
    Tensor x = MakeTensor(t, {0, 3}, {});
    struct Want {
      PrimId id;
      double value;
    };
    std::vector<Want> wants = {{PrimId::kReduceSum, 0}, {PrimId::kReduceProd, 1}};
    if (!IsInt(t)) {
      wants.push_back({PrimId::kReduceMean, kNaN});
      wants.push_back({PrimId::kLogsumexp, -kInf});
    }
    for (const Want& w : wants) {
      std::string what = absl::StrCat(PrimIdName(w.id), " ", DTypeName(t));
      absl::StatusOr<Value> r = RunCpuKernel(w.id, {x}, Axes({0}, false));
      ASSERT_TRUE(r.ok()) << what << ": " << r.status();
      ASSERT_EQ(r->tensor().shape(), Shape({3})) << what;
      for (double v : ToDoubles(r->tensor())) {
        if (std::isnan(w.value)) {
          EXPECT_TRUE(std::isnan(v)) << what << " gave " << v;
        } else {
          EXPECT_EQ(v, w.value) << what;
        }
      }
    }
    for (PrimId id : {PrimId::kReduceMax, PrimId::kReduceMin}) {
      for (const std::vector<int64_t>& axes : {std::vector<int64_t>{0}, std::vector<int64_t>{}}) {
        absl::StatusOr<Value> r = RunCpuKernel(id, {x}, Axes(axes, false));
        ASSERT_FALSE(r.ok()) << PrimIdName(id);
        EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(std::string(r.status().message()), HasSubstr("empty axis"));
        EXPECT_THAT(std::string(r.status().message()), HasSubstr("axis 0 of "));
      }
      // No output element means nothing to reduce: not an error.
      absl::StatusOr<Value> fine = RunCpuKernel(id, {x}, Axes({1}, true));
      ASSERT_TRUE(fine.ok()) << fine.status();
      EXPECT_EQ(fine->tensor().shape(), Shape({0, 1}));
    }
  }
}

TEST(ReduceKernelTest, NaNPropagatesThroughMaxAndMin) {
  // Row [1, NaN, 3] in both layouts: reduced innermost (runs) and kept innermost (rows).
  for (DType t : {kF32, kF64}) {
    Tensor rows = MakeTensor(t, {2, 3}, {1, kNaN, 3, 4, 5, 6});
    Tensor cols = MakeTensor(t, {3, 2}, {1, 4, kNaN, 5, 3, 6});
    for (PrimId id : {PrimId::kReduceMax, PrimId::kReduceMin}) {
      absl::StatusOr<Value> a = RunCpuKernel(id, {rows}, Axes({1}, false));
      absl::StatusOr<Value> b = RunCpuKernel(id, {cols}, Axes({0}, false));
      ASSERT_TRUE(a.ok() && b.ok());
      std::vector<double> va = ToDoubles(a->tensor()), vb = ToDoubles(b->tensor());
      EXPECT_TRUE(std::isnan(va[0]) && std::isnan(vb[0])) << PrimIdName(id);
      EXPECT_EQ(va[1], id == PrimId::kReduceMax ? 6 : 4) << PrimIdName(id);
      EXPECT_EQ(vb[1], id == PrimId::kReduceMax ? 6 : 4) << PrimIdName(id);
    }
  }
}

TEST(ReduceKernelTest, LogsumexpIsStable) {
  for (DType t : {kF32, kF64}) {
    Tensor x = MakeTensor(t, {4, 2}, {1000, 1000, -kInf, -kInf, kInf, 1, -1000, -1000});
    absl::StatusOr<Value> r = RunCpuKernel(PrimId::kLogsumexp, {x}, Axes({1}, false));
    ASSERT_TRUE(r.ok()) << r.status();
    std::vector<double> v = ToDoubles(r->tensor());
    EXPECT_NEAR(v[0], 1000 + std::log(2.0), 1e-3);
    EXPECT_EQ(v[1], -kInf);
    EXPECT_EQ(v[2], kInf);
    EXPECT_NEAR(v[3], -1000 + std::log(2.0), 1e-3);
  }
  // Rows long enough for the vectorised exp: all -inf is -inf in both precisions
  // (Eigen's double exp gives 5.6e-309 for -inf, which made it -709.09).
  for (DType t : {kF32, kF64}) {
    std::vector<double> rows(32, -kInf);
    for (int j = 16; j < 32; ++j) rows[j] = -1000;
    absl::StatusOr<Value> r = RunCpuKernel(PrimId::kLogsumexp, {MakeTensor(t, {2, 16}, rows)},
                                           Axes({1}, false));
    ASSERT_TRUE(r.ok()) << r.status();
    std::vector<double> v = ToDoubles(r->tensor());
    EXPECT_EQ(v[0], -kInf) << DTypeName(t);
    EXPECT_NEAR(v[1], -1000 + std::log(16.0), 1e-3) << DTypeName(t);
  }
}

// 0.1f added 200,000 times: a float running sum drifts by hundreds of ulps; sum,
// mean and logsumexp add floats in double and round once, on every loop shape
// (contiguous runs, kept rows, a full reduction).
TEST(ReduceKernelTest, FloatSumsAreRoundedOnceFromDouble) {
  const double exact = 200000 * static_cast<double>(0.1f);
  for (const auto& [shape, axes] : std::vector<std::pair<Shape, std::vector<int64_t>>>{
           {{200000, 2}, {0}}, {{2, 200000}, {1}}, {{200000}, {0}}, {{400, 2, 500}, {0, 2}}}) {
    SCOPED_TRACE(ShapeToString(shape));
    Tensor x = Tensor::Full(kF32, shape, 0.1).value();
    absl::StatusOr<Value> sum = RunCpuKernel(PrimId::kReduceSum, {x}, Axes(axes, false));
    absl::StatusOr<Value> mean = RunCpuKernel(PrimId::kReduceMean, {x}, Axes(axes, false));
    ASSERT_TRUE(sum.ok() && mean.ok());
    for (int64_t i = 0; i < sum->tensor().NumElements(); ++i) {
      EXPECT_EQ(sum->tensor().data<float>()[i], static_cast<float>(exact));
      EXPECT_EQ(mean->tensor().data<float>()[i], static_cast<float>(static_cast<float>(exact) / 200000));
    }
    // logsumexp of 200,000 zeros: log(200000), from an exact count of exp(0) = 1.
    Tensor zeros = Tensor::Zeros(kF32, shape).value();
    absl::StatusOr<Value> lse = RunCpuKernel(PrimId::kLogsumexp, {zeros}, Axes(axes, false));
    ASSERT_TRUE(lse.ok());
    EXPECT_EQ(lse->tensor().data<float>()[0], std::log(200000.0f));
  }
}

TEST(ReduceKernelTest, Errors) {
  Tensor f = MakeTensor(kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto expect_error = [](PrimId id, std::vector<Value> in, AttrMap attrs,
                         const std::string& fragment) {
    absl::StatusOr<Value> r = RunCpuKernel(id, std::move(in), std::move(attrs));
    ASSERT_FALSE(r.ok()) << PrimIdName(id) << " should fail with " << fragment;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(fragment));
  };
  for (const Kind& k : Kinds()) {
    expect_error(k.id, {f}, Axes({2}, false), "out of range");
    expect_error(k.id, {f}, Axes({-3}, false), "out of range");
    expect_error(k.id, {f}, Axes({0, -2}, false), "repeated");
    expect_error(k.id, {MakeTensor(kBool, {2}, {1, 0})}, {}, "got bool[2]");
    expect_error(k.id, {Value(Scalar::Float(1.0))}, {}, "input 0 must be a tensor");
  }
  expect_error(PrimId::kReduceMean, {MakeTensor(kI32, {2}, {1, 2})}, {},
               "input 0 must be a f32 or f64 tensor, got i32[2]");
  expect_error(PrimId::kLogsumexp, {MakeTensor(kI64, {2}, {1, 2})}, {}, "got i64[2]");
}

// ----- argmax / argmin ---------------------------------------------------------------
// Index of the first extremum; a NaN beats everything and the first one wins.
double ArgReference(bool is_max, const std::vector<double>& g) {
  size_t best = 0;
  for (size_t i = 1; i < g.size(); ++i) {
    if (std::isnan(g[best])) break;
    if (std::isnan(g[i]) || (is_max ? g[i] > g[best] : g[i] < g[best])) best = i;
  }
  return static_cast<double>(best);
}

TEST(ArgReduceKernelTest, MatchesReferenceWithTies) {
  struct Case {
    Shape shape;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{7}, 0},          {{7}, -1},         {{1}, 0},          {{3, 4, 5}, 0},
      {{3, 4, 5}, 1},    {{3, 4, 5}, 2},    {{3, 4, 5}, -2},   {{0, 4}, 1},
      {{4, 0}, 0},       {{2000, 300}, 1},  {{300, 2000}, 0},  {{3, 100000}, 1},
      {{5, 3000, 7}, 1},
  };
  std::mt19937_64 rng(kSeed);
  for (bool is_max : {true, false}) {
    PrimId id = is_max ? PrimId::kArgmax : PrimId::kArgmin;
    for (DType t : {kF32, kF64, kI32, kI64}) {
      for (const Case& c : cases) {
        for (bool keepdims : {false, true}) {
          std::string what = absl::StrCat(PrimIdName(id), " ", DTypeName(t),
                                          ShapeToString(c.shape), " axis=", c.axis,
                                          " keepdims=", keepdims);
          // Few distinct values, so that ties are common.
          std::vector<double> v = ToDoubles(RandomTensor(kI64, c.shape, rng, -4, 4));
          Tensor x = MakeTensor(t, c.shape, v);
          int rank = static_cast<int>(c.shape.size());
          std::vector<bool> mask(rank, false);
          mask[c.axis < 0 ? c.axis + rank : c.axis] = true;
          std::vector<std::vector<double>> groups = Groups(c.shape, mask, v);
          absl::StatusOr<Value> r =
              RunCpuKernel(id, {x}, {{"axis", c.axis}, {"keepdims", keepdims}});
          ASSERT_TRUE(r.ok()) << what << ": " << r.status();
          EXPECT_EQ(r->tensor().dtype(), kI64) << what;
          ASSERT_EQ(r->tensor().shape(), ExpectedShape(c.shape, mask, keepdims)) << what;
          std::vector<double> got = ToDoubles(r->tensor());
          int bad = 0;
          for (size_t o = 0; o < groups.size() && bad < 5; ++o) {
            if (got[o] != ArgReference(is_max, groups[o])) {
              ++bad;
              ADD_FAILURE() << what << ": output " << o << " is " << got[o] << ", want "
                            << ArgReference(is_max, groups[o]);
            }
          }
        }
      }
    }
  }
}

TEST(ArgReduceKernelTest, FirstNaNWins) {
  for (DType t : {kF32, kF64}) {
    // Contiguous axis and strided axis.
    Tensor rows = MakeTensor(t, {2, 4}, {1, kNaN, 5, kNaN, 3, 3, 1, 1});
    Tensor cols = MakeTensor(t, {4, 2}, {1, 3, kNaN, 3, 5, 1, kNaN, 1});
    for (PrimId id : {PrimId::kArgmax, PrimId::kArgmin}) {
      absl::StatusOr<Value> a = RunCpuKernel(id, {rows}, {{"axis", int64_t{1}}});
      absl::StatusOr<Value> b = RunCpuKernel(id, {cols}, {{"axis", int64_t{0}}});
      ASSERT_TRUE(a.ok() && b.ok());
      double second = id == PrimId::kArgmax ? 0 : 2;
      EXPECT_EQ(ToDoubles(a->tensor()), std::vector<double>({1, second})) << PrimIdName(id);
      EXPECT_EQ(ToDoubles(b->tensor()), std::vector<double>({1, second})) << PrimIdName(id);
    }
  }
}

TEST(ArgReduceKernelTest, Errors) {
  for (PrimId id : {PrimId::kArgmax, PrimId::kArgmin}) {
    auto error = [&](std::vector<Value> in, AttrMap attrs) {
      absl::StatusOr<Value> r = RunCpuKernel(id, std::move(in), std::move(attrs));
      EXPECT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      return std::string(r.status().message());
    };
    Tensor f = MakeTensor(kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
    EXPECT_THAT(error({f}, {{"axis", int64_t{2}}}), HasSubstr("out of range"));
    EXPECT_THAT(error({MakeTensor(kF32, {}, {1})}, {}), HasSubstr("out of range for rank 0"));
    EXPECT_THAT(error({MakeTensor(kF32, {2, 0}, {})}, {}), HasSubstr("empty axis"));
    EXPECT_THAT(error({MakeTensor(kBool, {2}, {0, 1})}, {}), HasSubstr("got bool[2]"));
    EXPECT_THAT(error({Value(Scalar::Int(3))}, {}), HasSubstr("input 0 must be a tensor"));
  }
}

// Reductions split long sums into chunks fixed by the sizes, never by the
// threads: one long contiguous run (chunked), many runs (one output per task),
// rows kept innermost (pieces of a row per task), argmax along rows and across.
TEST(ReduceKernelTest, ResultsDoNotDependOnTheThreadCount) {
  std::mt19937_64 rng(91);
  Tensor long_run = RandomTensor(DType::kFloat32, {1 << 19}, rng);
  Tensor matrix = RandomTensor(DType::kFloat32, {512, 700}, rng);
  Tensor cube = RandomTensor(DType::kFloat32, {64, 48, 40}, rng);
  for (PrimId id : {PrimId::kReduceSum, PrimId::kReduceMean, PrimId::kReduceMax, PrimId::kLogsumexp}) {
    SCOPED_TRACE(static_cast<int>(id));
    ExpectSameOnAnyThreadCount(id, {Value(long_run)}, Axes({0}));
    ExpectSameOnAnyThreadCount(id, {Value(matrix)}, Axes({1}));
    ExpectSameOnAnyThreadCount(id, {Value(matrix)}, Axes({0}));
    ExpectSameOnAnyThreadCount(id, {Value(cube)}, Axes({0, 2}));
  }
  Tensor matrix64 = RandomTensor(DType::kFloat64, {512, 700}, rng);
  ExpectSameOnAnyThreadCount(PrimId::kReduceSum, {Value(matrix64)}, Axes({0, 1}));
  for (int64_t axis : {0, 1}) {
    ExpectSameOnAnyThreadCount(PrimId::kArgmax, {Value(matrix)}, {{"axis", axis}, {"keepdims", false}});
    ExpectSameOnAnyThreadCount(PrimId::kCumSum, {Value(matrix)}, {{"axis", axis}});
  }
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
