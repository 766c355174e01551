// CPU elementwise kernels against naive float64 references written here: plain
// loops over row-major indices, on seeded random inputs, in every dtype each
// primitive accepts; plus edge cases (empty, rank 0, broadcasting, long rows
// that are cut across threads, special values) and run-time errors.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

constexpr uint64_t kSeed = 20240611;

// ----- Helpers ----------------------------------------------------------------------
struct Tol {
  double rtol, atol;
};
Tol TolFor(DType t) {
  switch (t) {
    case DType::kFloat64: return {1e-12, 1e-14};
    case DType::kFloat32: return {1e-5, 1e-6};
    default: return {0, 0};  // integers and bools: exact
  }
}

// Every element within atol + rtol * |want|; NaN matches NaN, inf matches itself.
void ExpectClose(const Tensor& got, const std::vector<double>& want, Tol tol,
                 const std::string& what) {
  ASSERT_EQ(got.NumElements(), static_cast<int64_t>(want.size())) << what;
  int bad = 0;
  for (int64_t i = 0; i < got.NumElements() && bad < 5; ++i) {
    double g = got.ElementAsDouble(i), w = want[i];
    bool ok = std::isnan(w) ? std::isnan(g)
              : std::isinf(w) ? g == w
                              : std::abs(g - w) <= tol.atol + tol.rtol * std::abs(w);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", want " << w
                    << " (seed " << kSeed << ")";
    }
  }
}

std::string Describe(PrimId id, DType t, const std::vector<Shape>& shapes) {
  std::string s = absl::StrCat(PrimIdName(id), " ", DTypeName(t));
  for (const Shape& sh : shapes) absl::StrAppend(&s, " ", ShapeToString(sh));
  return s;
}

// Row-major index into `in` of output element `flat` under NumPy broadcasting
// (dims aligned on the right; a size-1 input dim always reads index 0).
int64_t SourceIndex(const Shape& in, const Shape& out, int64_t flat) {
  int64_t index = 0, stride = 1;
  int k = static_cast<int>(in.size()) - 1;  // input dim aligned with output dim d
  for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d, --k) {
    int64_t coord = flat % out[d];
    flat /= out[d];
    if (k < 0) continue;
    if (in[k] != 1) index += coord * stride;
    stride *= in[k];
  }
  return index;
}

// ----- Unary ------------------------------------------------------------------------------
// Evaluated on the side where exp does not overflow.
double Sigmoid(double x) {
  return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
}
double GeluErf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double GeluTanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

struct UnaryCase {
  PrimId id;
  std::function<double(double)> ref;
  double lo, hi;  // float input range; integers use [-50, 50)
  std::vector<DType> dtypes;
  AttrMap attrs;
};

std::vector<UnaryCase> UnaryCases() {
  const std::vector<DType> num = {kF32, kF64, kI32, kI64};
  const std::vector<DType> flt = {kF32, kF64};
  return {
      {PrimId::kNeg, [](double x) { return -x; }, -3, 3, num, {}},
      {PrimId::kAbs, [](double x) { return std::abs(x); }, -3, 3, num, {}},
      {PrimId::kSign, [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }, -3, 3, num, {}},
      {PrimId::kSquare, [](double x) { return x * x; }, -3, 3, num, {}},
      {PrimId::kExp, [](double x) { return std::exp(x); }, -5, 5, flt, {}},
      {PrimId::kLog, [](double x) { return std::log(x); }, 0.01, 10, flt, {}},
      {PrimId::kLog1p, [](double x) { return std::log1p(x); }, -0.9, 5, flt, {}},
      {PrimId::kExpm1, [](double x) { return std::expm1(x); }, -2, 2, flt, {}},
      {PrimId::kSin, [](double x) { return std::sin(x); }, -10, 10, flt, {}},
      {PrimId::kCos, [](double x) { return std::cos(x); }, -10, 10, flt, {}},
      {PrimId::kTanh, [](double x) { return std::tanh(x); }, -5, 5, flt, {}},
      {PrimId::kSigmoid, Sigmoid, -20, 20, flt, {}},
      {PrimId::kRelu, [](double x) { return x < 0 ? 0.0 : x; }, -3, 3, flt, {}},
      {PrimId::kGelu, GeluErf, -5, 5, flt, {}},
      {PrimId::kGelu, GeluTanh, -5, 5, flt, {{"approximate", true}}},
      {PrimId::kSoftplus, [](double x) { return std::log1p(std::exp(x)); }, -30, 30, flt, {}},
      {PrimId::kSqrt, [](double x) { return std::sqrt(x); }, 0, 10, flt, {}},
      {PrimId::kRsqrt, [](double x) { return 1 / std::sqrt(x); }, 0.01, 10, flt, {}},
      {PrimId::kReciprocal, [](double x) { return 1 / x; }, -3, 3, flt, {}},
      {PrimId::kErf, [](double x) { return std::erf(x); }, -3, 3, flt, {}},
      {PrimId::kLogicalNot, [](double x) { return x != 0 ? 0.0 : 1.0; }, 0, 1, {kBool}, {}},
      {PrimId::kFloor, [](double x) { return std::floor(x); }, -10, 10, flt, {}},
      {PrimId::kCeil, [](double x) { return std::ceil(x); }, -10, 10, flt, {}},
      // Random floats are never halfway: nearbyint agrees with any rounding of
      // halves here; RoundHalvesToEven checks those.
      {PrimId::kRound, [](double x) { return std::nearbyint(x); }, -10, 10, flt, {}},
      {PrimId::kAsin, [](double x) { return std::asin(x); }, -0.99, 0.99, flt, {}},
      {PrimId::kAcos, [](double x) { return std::acos(x); }, -0.99, 0.99, flt, {}},
      {PrimId::kAtan, [](double x) { return std::atan(x); }, -5, 5, flt, {}},
      {PrimId::kSinh, [](double x) { return std::sinh(x); }, -4, 4, flt, {}},
      {PrimId::kCosh, [](double x) { return std::cosh(x); }, -4, 4, flt, {}},
      {PrimId::kAsinh, [](double x) { return std::asinh(x); }, -5, 5, flt, {}},
      {PrimId::kAcosh, [](double x) { return std::acosh(x); }, 1.01, 6, flt, {}},
      {PrimId::kAtanh, [](double x) { return std::atanh(x); }, -0.99, 0.99, flt, {}},
      {PrimId::kThresholdedRelu, [](double x) { return x > 1 ? x : 0.0; }, -3, 3, flt, {}},
      {PrimId::kThresholdedRelu, [](double x) { return x > -0.5 ? x : 0.0; }, -3, 3, flt,
       {{"alpha", -0.5}}},
  };
}

const std::vector<Shape>& UnaryShapes() {
  // Rank 0, empty, odd lengths (vector tails) and one large enough for threads.
  static const auto* shapes =
      new std::vector<Shape>{{}, {0}, {3, 0, 2}, {7}, {4, 5, 6}, {300001}};
  return *shapes;
}

TEST(ElementwiseKernelTest, UnaryMatchesReference) {
  std::mt19937_64 rng(kSeed);
  for (const UnaryCase& c : UnaryCases()) {
    for (DType t : c.dtypes) {
      for (const Shape& shape : UnaryShapes()) {
        std::string what = Describe(c.id, t, {shape}) + " " +
                           (c.attrs.empty() ? "" : AttrValueToString(c.attrs.begin()->second));
        bool is_int = t == kI32 || t == kI64;
        Tensor x = RandomTensor(t, shape, rng, is_int ? -50 : c.lo, is_int ? 50 : c.hi);
        std::vector<double> want = ToDoubles(x);
        for (double& v : want) v = c.ref(v);
        Tensor y = RunOk(c.id, {x}, c.attrs, what);
        ASSERT_TRUE(y.defined()) << what;
        EXPECT_EQ(y.dtype(), t) << what;
        EXPECT_EQ(y.shape(), shape) << what;
        ExpectClose(y, want, TolFor(t), what);
      }
    }
  }
}

TEST(ElementwiseKernelTest, UnarySpecialValues) {
  struct Special {
    PrimId id;
    double x, want;
  };
  const std::vector<Special> cases = {
      {PrimId::kSign, 0.0, 0.0},          {PrimId::kSign, kNaN, kNaN},
      {PrimId::kRelu, kNaN, kNaN},        {PrimId::kRelu, -kInf, 0.0},
      {PrimId::kLog, 0.0, -kInf},         {PrimId::kLog, -1.0, kNaN},
      {PrimId::kSqrt, -1.0, kNaN},        {PrimId::kRsqrt, 0.0, kInf},
      {PrimId::kReciprocal, 0.0, kInf},   {PrimId::kExp, -kInf, 0.0},
      {PrimId::kSigmoid, 1000.0, 1.0},    {PrimId::kSigmoid, -1000.0, 0.0},
      {PrimId::kSoftplus, 1000.0, 1000.0}, {PrimId::kSoftplus, -1000.0, 0.0},
      {PrimId::kGelu, -40.0, 0.0},        {PrimId::kTanh, 50.0, 1.0},
      {PrimId::kSqrt, kInf, kInf},        {PrimId::kRsqrt, kInf, 0.0},
      {PrimId::kSqrt, -kInf, kNaN},       {PrimId::kExp, -800.0, 0.0},
      {PrimId::kSoftplus, -800.0, 0.0},   {PrimId::kSigmoid, -800.0, 0.0},
      // x > alpha (1 by default): NaN and the threshold itself give 0.
      {PrimId::kThresholdedRelu, kNaN, 0.0}, {PrimId::kThresholdedRelu, 1.0, 0.0},
      {PrimId::kThresholdedRelu, kInf, kInf},
  };
  // 17 copies: the vectorised path (Eigen's packet maths) and the scalar tail
  // both see the value; a single element would take only the scalar one.
  for (DType t : {kF32, kF64}) {
    for (const Special& c : cases) {
      std::string what = absl::StrCat(Describe(c.id, t, {}), " at ", c.x);
      Tensor y = RunOk(c.id, {MakeTensor(t, {17}, std::vector<double>(17, c.x))}, {}, what);
      ASSERT_TRUE(y.defined()) << what;
      ExpectClose(y, std::vector<double>(17, c.want), {0, 0}, what);
    }
  }
}

TEST(ElementwiseKernelTest, ExpReachesTheSubnormalsOfDouble) {
  // Eigen's vectorised double exp stops at 5.6e-309 (x <= -709.78).
  const std::vector<double> x = {-700, -708, -712, -720, -740, -745, -750, -1e4};
  std::vector<double> want;
  for (double v : x) want.push_back(std::exp(v));
  std::vector<double> xs, wants;
  for (int copy = 0; copy < 3; ++copy) {
    xs.insert(xs.end(), x.begin(), x.end());
    wants.insert(wants.end(), want.begin(), want.end());
  }
  Tensor y = RunOk(PrimId::kExp, {MakeTensor(kF64, {static_cast<int64_t>(xs.size())}, xs)}, {},
                   "exp f64");
  ExpectClose(y, wants, {1e-9, 1e-323}, "exp f64 near and below the smallest normal");
}

TEST(ElementwiseKernelTest, SqrtIsCorrectlyRounded) {
  // IEEE sqrt is correctly rounded; an rsqrt estimate with a Newton step is not.
  std::mt19937_64 rng(kSeed);
  std::uniform_real_distribution<float> u(0.0f, 1000.0f);
  std::vector<double> xs = {2, 3, 5, 7, 0.5, 1e-40, 3e38};
  while (xs.size() < 1000) xs.push_back(u(rng));
  Tensor x = MakeTensor(kF32, {static_cast<int64_t>(xs.size())}, xs);
  Tensor y = RunOk(PrimId::kSqrt, {x}, {}, "sqrt f32");
  const float* px = x.data<float>();
  const float* py = y.data<float>();
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(py[i], std::sqrt(px[i])) << "sqrt(" << px[i] << ")";
}

TEST(ElementwiseKernelTest, SigmoidAndSoftplusKeepRelativeAccuracyInTheTails) {
  // Formulas like 0.5 * (1 + tanh(x / 2)) or log(1 + exp(x)) lose these entirely.
  const double e = std::exp(-700.0);
  Tensor s = RunOk(PrimId::kSigmoid, {MakeTensor(kF64, {1}, {-700})}, {}, "sigmoid");
  ExpectClose(s, {e / (1 + e)}, {1e-12, 0}, "sigmoid(-700)");
  Tensor p = RunOk(PrimId::kSoftplus, {MakeTensor(kF64, {2}, {-700, 700})}, {}, "softplus");
  ExpectClose(p, {std::log1p(e), 700 + std::log1p(e)}, {1e-12, 0}, "softplus(+-700)");
  const double e32 = std::exp(-80.0);
  Tensor s32 = RunOk(PrimId::kSigmoid, {MakeTensor(kF32, {1}, {-80})}, {}, "sigmoid f32");
  ExpectClose(s32, {e32 / (1 + e32)}, {1e-5, 0}, "sigmoid(-80) f32");
}

TEST(ElementwiseKernelTest, IntegerNegationWraps) {
  const double min32 = std::numeric_limits<int32_t>::min();
  Tensor x = MakeTensor(kI32, {3}, {min32, -5, 7});
  ExpectClose(RunOk(PrimId::kNeg, {x}, {}, "neg"), {min32, 5, -7}, {0, 0}, "neg i32");
  ExpectClose(RunOk(PrimId::kAbs, {x}, {}, "abs"), {min32, 5, 7}, {0, 0}, "abs i32");
}

TEST(ElementwiseKernelTest, UnaryReusesAUniquelyOwnedInput) {
  std::mt19937_64 rng(kSeed);
  Tensor x = RandomTensor(kF32, {1000}, rng);
  std::vector<double> want = ToDoubles(x);
  for (double& v : want) v = std::exp(v);
  void* buffer = x.raw_data();
  std::vector<Value> in;
  in.emplace_back(std::move(x));  // the kernel's input is the only reference
  Tensor y = RunOk(PrimId::kExp, std::move(in), {}, "exp in place");
  EXPECT_EQ(y.raw_data(), buffer);
  ExpectClose(y, want, TolFor(kF32), "exp in place");

  // A shared input is left alone.
  Tensor z = RandomTensor(kF64, {1000}, rng);
  std::vector<double> before = ToDoubles(z);
  Tensor w = RunOk(PrimId::kNeg, {z}, {}, "neg shared");
  EXPECT_NE(w.raw_data(), z.raw_data());
  ExpectClose(z, before, {0, 0}, "input after neg");
}

TEST(ElementwiseKernelTest, UnaryErrors) {
  ExpectRunError(PrimId::kExp, {MakeTensor(kI32, {2}, {1, 2})}, {},
                 "input 0 must be a f32 or f64 tensor, got i32[2]");
  ExpectRunError(PrimId::kNeg, {MakeTensor(kBool, {2}, {1, 0})}, {},
                 "input 0 must be a f32, f64, i32, i64, u8, i8, i16, u16, u32 or u64 tensor, got bool[2]");
  ExpectRunError(PrimId::kLogicalNot, {MakeTensor(kF32, {2}, {1, 0})}, {},
                 "input 0 must be a bool tensor");
  ExpectRunError(PrimId::kSqrt, {Value(Scalar::Float(2.0))}, {}, "input 0 must be a tensor");
  ExpectRunError(PrimId::kTanh, {}, {}, "expected at least 1 inputs");
}

// ----- Binary ------------------------------------------------------------------------------
struct BinaryCase {
  PrimId id;
  std::function<double(double, double)> ref;
  std::vector<DType> dtypes;
};

double IntDiv(double a, double b) { return std::trunc(a / b); }

std::vector<BinaryCase> BinaryCases() {
  const std::vector<DType> num = {kF32, kF64, kI32, kI64};
  const std::vector<DType> all = {kF32, kF64, kI32, kI64, kBool};
  return {
      {PrimId::kAdd, [](double a, double b) { return a + b; }, num},
      {PrimId::kSub, [](double a, double b) { return a - b; }, num},
      {PrimId::kMul, [](double a, double b) { return a * b; }, num},
      {PrimId::kDiv, [](double a, double b) { return a / b; }, num},  // ints: see below
      {PrimId::kPow, [](double a, double b) { return std::pow(a, b); }, {kF32, kF64}},
      {PrimId::kMaximum, [](double a, double b) { return a > b ? a : b; }, num},
      {PrimId::kMinimum, [](double a, double b) { return a < b ? a : b; }, num},
      {PrimId::kEqual, [](double a, double b) { return double(a == b); }, all},
      {PrimId::kNotEqual, [](double a, double b) { return double(a != b); }, all},
      {PrimId::kLess, [](double a, double b) { return double(a < b); }, num},
      {PrimId::kLessEqual, [](double a, double b) { return double(a <= b); }, num},
      {PrimId::kGreater, [](double a, double b) { return double(a > b); }, num},
      {PrimId::kGreaterEqual, [](double a, double b) { return double(a >= b); }, num},
      {PrimId::kLogicalAnd, [](double a, double b) { return double(a != 0 && b != 0); }, {kBool}},
      {PrimId::kLogicalOr, [](double a, double b) { return double(a != 0 || b != 0); }, {kBool}},
      // (y, d): the backward maps of tanh and sigmoid from their output.
      {PrimId::kTanhGrad, [](double y, double d) { return d * (1 - y * y); }, {kF32, kF64}},
      {PrimId::kSigmoidGrad, [](double y, double d) { return d * y * (1 - y); }, {kF32, kF64}},
      // (x, d): the backward maps of sin, cos and relu from their input.
      {PrimId::kSinGrad, [](double x, double d) { return d * std::cos(x); }, {kF32, kF64}},
      {PrimId::kCosGrad, [](double x, double d) { return -d * std::sin(x); }, {kF32, kF64}},
      {PrimId::kReluGrad, [](double x, double d) { return x > 0 ? d : 0.0; }, {kF32, kF64}},
  };
}

struct ShapeCase {
  Shape a, b, out;
};

const std::vector<ShapeCase>& BinaryShapes() {
  static const auto* shapes = new std::vector<ShapeCase>{
      {{3, 4}, {3, 4}, {3, 4}},
      {{3, 1}, {1, 4}, {3, 4}},
      {{2, 3, 4}, {4}, {2, 3, 4}},
      {{}, {2, 3}, {2, 3}},
      {{2, 3}, {}, {2, 3}},
      {{}, {}, {}},
      {{1}, {1}, {1}},
      {{0, 3}, {3}, {0, 3}},
      {{2, 1}, {1, 0}, {2, 0}},
      {{2, 1, 5}, {2, 3, 1}, {2, 3, 5}},
      {{4, 1, 3, 1}, {5, 1, 2}, {4, 5, 3, 2}},
      {{300, 400}, {300, 400}, {300, 400}},      // flat, cut across threads
      {{16, 1, 300}, {1, 40, 300}, {16, 40, 300}},
      {{2, 70000}, {70000}, {2, 70000}},          // long rows cut into pieces
      {{70000, 1}, {1, 3}, {70000, 3}},           // many short rows
      {{5, 1, 1}, {1, 1, 70001}, {5, 1, 70001}},  // a scalar row against a long one
  };
  return *shapes;
}

// Inputs for `id`: small integers for comparisons (so that ties occur),
// positive bases for pow, non-zero divisors.
std::pair<Tensor, Tensor> BinaryInputs(PrimId id, DType t, const ShapeCase& s,
                                       std::mt19937_64& rng) {
  bool is_int = t == kI32 || t == kI64;
  bool compare = id >= PrimId::kEqual && id <= PrimId::kGreaterEqual;
  if (compare && t != kBool) {
    auto ints = [&](const Shape& sh) {
      std::vector<double> v = ToDoubles(RandomTensor(kI64, sh, rng, -3, 3));
      return MakeTensor(t, sh, v);
    };
    return {ints(s.a), ints(s.b)};
  }
  if (id == PrimId::kPow) {
    return {RandomTensor(t, s.a, rng, 0.1, 3), RandomTensor(t, s.b, rng, -2, 2)};
  }
  Tensor a = RandomTensor(t, s.a, rng, is_int ? -100 : -1, is_int ? 100 : 1);
  Tensor b = RandomTensor(t, s.b, rng, is_int ? -20 : -1, is_int ? 20 : 1);
  if (id == PrimId::kDiv && is_int) {
    std::vector<double> v = ToDoubles(b);
    for (double& d : v) d = d == 0 ? 7 : d;
    b = MakeTensor(t, s.b, v);
  }
  return {a, b};
}

TEST(ElementwiseKernelTest, BinaryMatchesBroadcastReference) {
  std::mt19937_64 rng(kSeed);
  for (const BinaryCase& c : BinaryCases()) {
    for (DType t : c.dtypes) {
      bool is_int = t == kI32 || t == kI64;
      bool bool_out = c.id >= PrimId::kEqual;
      for (const ShapeCase& s : BinaryShapes()) {
        std::string what = Describe(c.id, t, {s.a, s.b});
        auto [a, b] = BinaryInputs(c.id, t, s, rng);
        std::vector<double> av = ToDoubles(a), bv = ToDoubles(b);
        std::vector<double> want(NumElementsOf(s.out));
        for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i) {
          double x = av[SourceIndex(s.a, s.out, i)], y = bv[SourceIndex(s.b, s.out, i)];
          want[i] = c.id == PrimId::kDiv && is_int ? IntDiv(x, y) : c.ref(x, y);
        }
        Tensor out = RunOk(c.id, {a, b}, {}, what);
        ASSERT_TRUE(out.defined()) << what;
        EXPECT_EQ(out.dtype(), bool_out ? kBool : t) << what;
        EXPECT_EQ(out.shape(), s.out) << what;
        ExpectClose(out, want, bool_out ? Tol{0, 0} : TolFor(t), what);
      }
    }
  }
}

TEST(ElementwiseKernelTest, IntegerDivisionTruncatesTowardZero) {
  const double min32 = std::numeric_limits<int32_t>::min();
  for (DType t : {kI32, kI64}) {
    Tensor a = MakeTensor(t, {6}, {-7, 7, -7, 7, 0, min32});
    Tensor b = MakeTensor(t, {6}, {2, -2, -2, 2, -3, -1});
    double last = t == kI32 ? min32 : -min32;  // i32 wraps; i64 holds 2^31
    ExpectClose(RunOk(PrimId::kDiv, {a, b}, {}, "div"), {-3, -3, 3, 3, 0, last}, {0, 0},
                Describe(PrimId::kDiv, t, {}));
  }
}

TEST(ElementwiseKernelTest, IntegerDivisionByZeroIsAnError) {
  for (DType t : {kI32, kI64}) {
    ExpectRunError(PrimId::kDiv, {MakeTensor(t, {3}, {1, 2, 3}), MakeTensor(t, {3}, {1, 0, 1})}, {},
                   "integer division by zero");
    ExpectRunError(PrimId::kDiv, {MakeTensor(t, {2, 2}, {1, 2, 3, 4}), MakeTensor(t, {}, {0})}, {},
                   "division by zero");
    // Nothing is divided when the output is empty.
    Tensor e = RunOk(PrimId::kDiv, {MakeTensor(t, {0}, {}), MakeTensor(t, {1}, {0})}, {},
                     "empty div");
    EXPECT_EQ(e.shape(), Shape({0}));
  }
  // Floating division by zero follows IEEE.
  Tensor f = RunOk(PrimId::kDiv, {MakeTensor(kF32, {3}, {1, -1, 0}), MakeTensor(kF32, {}, {0})},
                   {}, "f32 div by zero");
  ExpectClose(f, {kInf, -kInf, kNaN}, {0, 0}, "f32 div by zero");
}

TEST(ElementwiseKernelTest, RoundHalvesToEven) {
  for (DType t : {kF32, kF64}) {
    Tensor x = MakeTensor(t, {9}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, -3.7, kNaN});
    Tensor y = RunOk(PrimId::kRound, {x}, {}, "round");
    ExpectClose(y, {0, 2, 2, -0.0, -2, -2, 2, -4, kNaN}, {0, 0}, "round");
    if (y.defined()) {
      EXPECT_TRUE(std::signbit(y.ElementAsDouble(3)));  // -0.5 -> -0
    }
    ExpectClose(RunOk(PrimId::kFloor, {x}, {}, "floor"), {0, 1, 2, -1, -2, -3, 2, -4, kNaN},
                {0, 0}, "floor");
    ExpectClose(RunOk(PrimId::kCeil, {x}, {}, "ceil"), {1, 2, 3, -0.0, -1, -2, 3, -3, kNaN},
                {0, 0}, "ceil");
  }
}

// Python's % (the sign of b) and C's fmod (the sign of a), in double.
double PyMod(double a, double b) {
  double r = std::fmod(a, b);
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

TEST(ElementwiseKernelTest, ModMatchesBroadcastReference) {
  std::mt19937_64 rng(kSeed);
  for (bool fmod : {false, true}) {
    for (DType t : {kF32, kF64, kI32, kI64}) {
      const bool is_int = t == kI32 || t == kI64;
      for (const ShapeCase& s : BinaryShapes()) {
        std::string what = Describe(PrimId::kMod, t, {s.a, s.b}) + (fmod ? " fmod" : "");
        Tensor a = RandomTensor(t, s.a, rng, is_int ? -100 : -5, is_int ? 100 : 5);
        std::vector<double> bv =
            ToDoubles(RandomTensor(t, s.b, rng, is_int ? -9 : -2, is_int ? 9 : 2));
        for (double& d : bv) d = d == 0 ? 3 : d;
        Tensor b = MakeTensor(t, s.b, bv);
        std::vector<double> av = ToDoubles(a), want(NumElementsOf(s.out));
        for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i) {
          double x = av[SourceIndex(s.a, s.out, i)], y = bv[SourceIndex(s.b, s.out, i)];
          want[i] = fmod ? std::fmod(x, y) : PyMod(x, y);
        }
        Tensor out = RunOk(PrimId::kMod, {a, b}, {{"fmod", fmod}}, what);
        ASSERT_TRUE(out.defined()) << what;
        EXPECT_EQ(out.dtype(), t) << what;
        EXPECT_EQ(out.shape(), s.out) << what;
        ExpectClose(out, want, TolFor(t), what);
      }
    }
  }
}

TEST(ElementwiseKernelTest, ModSignsAndZeroDivisors) {
  const double min32 = std::numeric_limits<int32_t>::min();
  for (DType t : {kI32, kI64}) {
    Tensor a = MakeTensor(t, {6}, {-7, 7, -7, 7, 0, min32});
    Tensor b = MakeTensor(t, {6}, {3, -3, -3, 3, 5, -1});
    ExpectClose(RunOk(PrimId::kMod, {a, b}, {}, "mod"), {2, -2, -1, 1, 0, 0}, {0, 0}, "mod");
    ExpectClose(RunOk(PrimId::kMod, {a, b}, {{"fmod", true}}, "fmod"), {-1, 1, -1, 1, 0, 0},
                {0, 0}, "fmod");
    for (bool fmod : {false, true}) {
      ExpectRunError(PrimId::kMod, {MakeTensor(t, {3}, {1, 2, 3}), MakeTensor(t, {3}, {1, 0, 1})},
                     {{"fmod", fmod}}, "integer division by zero");
    }
  }
  Tensor a = MakeTensor(kF64, {5}, {-7.5, 7.5, -7.5, 4, 1});
  Tensor b = MakeTensor(kF64, {5}, {2, -2, -2, -2, 0});
  ExpectClose(RunOk(PrimId::kMod, {a, b}, {}, "f64 mod"), {0.5, -0.5, -1.5, -0.0, kNaN}, {0, 0},
              "f64 mod");
  ExpectClose(RunOk(PrimId::kMod, {a, b}, {{"fmod", true}}, "f64 fmod"),
              {-1.5, 1.5, -1.5, 0, kNaN}, {0, 0}, "f64 fmod");
  Tensor z = RunOk(PrimId::kMod, {a, b}, {}, "f64 mod");
  if (z.defined()) {
    EXPECT_TRUE(std::signbit(z.ElementAsDouble(3)));  // 4 mod -2 = -0, as Python
  }
}

TEST(ElementwiseKernelTest, MaximumAndMinimumPropagateNaN) {
  for (DType t : {kF32, kF64}) {
    Tensor a = MakeTensor(t, {3}, {kNaN, 1, 2});
    Tensor b = MakeTensor(t, {3}, {0, kNaN, 1});
    ExpectClose(RunOk(PrimId::kMaximum, {a, b}, {}, "max"), {kNaN, kNaN, 2}, {0, 0}, "maximum");
    ExpectClose(RunOk(PrimId::kMinimum, {a, b}, {}, "min"), {kNaN, kNaN, 1}, {0, 0}, "minimum");
  }
}

TEST(ElementwiseKernelTest, PowSpecialValuesMatchStdPow) {
  // Negative bases with integer exponents, zeros, infinities and NaNs, repeated so
  // that they land both in full vector packets and in the scalar tail.
  const std::vector<std::pair<double, double>> pairs = {
      {-2, 3},    {-2, 2},   {-2, 0.5}, {0, 0},     {0, -1},   {-0.0, -1}, {1, kNaN},
      {kNaN, 0},  {2, 2000}, {2, -2000}, {kInf, -1}, {-kInf, 3}, {0.5, kInf}, {-1, kInf},
      {3, 0.5},   {10, -3},  {-3, -3},  {1e-300, 2}, {7, 1}};
  for (DType t : {kF32, kF64}) {
    std::vector<double> a, b, want;
    for (int rep = 0; rep < 3; ++rep) {
      for (const auto& [x, y] : pairs) {
        a.push_back(x);
        b.push_back(y);
      }
    }
    Tensor ta = MakeTensor(t, {static_cast<int64_t>(a.size())}, a);
    Tensor tb = MakeTensor(t, {static_cast<int64_t>(b.size())}, b);
    std::vector<double> av = ToDoubles(ta), bv = ToDoubles(tb);
    for (size_t i = 0; i < av.size(); ++i) {
      want.push_back(t == kF32 ? std::pow(float(av[i]), float(bv[i])) : std::pow(av[i], bv[i]));
    }
    ExpectClose(RunOk(PrimId::kPow, {ta, tb}, {}, "pow"), want, TolFor(t),
                Describe(PrimId::kPow, t, {}));
  }
}

TEST(ElementwiseKernelTest, BinaryReusesOnlyAFullSizeUniquelyOwnedInput) {
  std::mt19937_64 rng(kSeed);
  Tensor a = RandomTensor(kF64, {40, 50}, rng);
  Tensor b = RandomTensor(kF64, {50}, rng);
  std::vector<double> av = ToDoubles(a), bv = ToDoubles(b);
  std::vector<double> want(av.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = av[i] * bv[i % 50];
  void* a_buffer = a.raw_data();
  std::vector<Value> in;
  in.emplace_back(std::move(a));  // the kernel holds the only reference
  in.emplace_back(b);             // shared with the test and too small: never reused
  Tensor out = RunOk(PrimId::kMul, std::move(in), {}, "mul in place");
  EXPECT_EQ(out.raw_data(), a_buffer);
  ExpectClose(out, want, TolFor(kF64), "mul in place");
  ExpectClose(b, bv, {0, 0}, "b after mul");
}

TEST(ElementwiseKernelTest, BinaryErrors) {
  Tensor f32 = MakeTensor(kF32, {2}, {1, 2});
  Tensor f64 = MakeTensor(kF64, {2}, {1, 2});
  Tensor i32 = MakeTensor(kI32, {2}, {1, 2});
  Tensor bl = MakeTensor(kBool, {2}, {1, 0});
  ExpectRunError(PrimId::kAdd, {f32, f64}, {}, "inputs 0 and 1 must have the same dtype");
  ExpectRunError(PrimId::kAdd, {f32, f64}, {}, "f32[2] and f64[2]");
  ExpectRunError(PrimId::kAdd, {f32, MakeTensor(kF32, {3}, {1, 2, 3})}, {}, "broadcast");
  ExpectRunError(PrimId::kMul, {f32, Value(Scalar::Float(2.0, kF32))}, {},
                 "input 1 must be a tensor");
  ExpectRunError(PrimId::kPow, {i32, i32}, {}, "input 0 must be a f32 or f64 tensor, got i32[2]");
  ExpectRunError(PrimId::kAdd, {bl, bl}, {}, "got bool[2]");
  ExpectRunError(PrimId::kLess, {bl, bl}, {}, "got bool[2]");
  ExpectRunError(PrimId::kLogicalAnd, {f32, f32}, {}, "input 0 must be a bool tensor");
  ExpectRunError(PrimId::kSub, {f32}, {}, "expected at least 2 inputs");
}

// ----- Select -------------------------------------------------------------------------------
TEST(ElementwiseKernelTest, SelectMatchesBroadcastReference) {
  struct Case {
    Shape c, a, b, out;
  };
  const std::vector<Case> cases = {
      {{4, 5}, {4, 5}, {4, 5}, {4, 5}},
      {{2, 1}, {1, 3}, {3}, {2, 3}},
      {{}, {4}, {4}, {4}},
      {{}, {}, {}, {}},
      {{0, 3}, {3}, {1}, {0, 3}},
      {{5, 1, 1}, {2, 1}, {3}, {5, 2, 3}},
      {{300, 400}, {300, 400}, {300, 400}, {300, 400}},
      {{1, 400}, {300, 1}, {}, {300, 400}},
      {{70000}, {2, 70000}, {1}, {2, 70000}},
      // Long rows (vector bodies and a tail) for every mix of contiguous and
      // broadcast operands (the kernel has one loop per mix); relu's backward
      // is the second one.
      {{3, 1037}, {3, 1037}, {3, 1037}, {3, 1037}},
      {{3, 1037}, {3, 1037}, {}, {3, 1037}},
      {{3, 1037}, {}, {3, 1037}, {3, 1037}},
      {{3, 1037}, {3, 1}, {1}, {3, 1037}},
      {{3, 1}, {1037}, {3, 1037}, {3, 1037}},
      {{}, {3, 1037}, {3, 1}, {3, 1037}},
      {{1}, {3, 1}, {1037}, {3, 1037}},
  };
  std::mt19937_64 rng(kSeed);
  for (DType t : {kF32, kF64, kI32, kI64, kBool}) {
    for (const Case& s : cases) {
      std::string what = Describe(PrimId::kSelect, t, {s.c, s.a, s.b});
      Tensor c = RandomTensor(kBool, s.c, rng);
      Tensor a = RandomTensor(t, s.a, rng, -100, 100);
      Tensor b = RandomTensor(t, s.b, rng, -100, 100);
      std::vector<double> cv = ToDoubles(c), av = ToDoubles(a), bv = ToDoubles(b);
      std::vector<double> want(NumElementsOf(s.out));
      for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i) {
        want[i] = cv[SourceIndex(s.c, s.out, i)] != 0 ? av[SourceIndex(s.a, s.out, i)]
                                                      : bv[SourceIndex(s.b, s.out, i)];
      }
      Tensor out = RunOk(PrimId::kSelect, {c, a, b}, {}, what);
      ASSERT_TRUE(out.defined()) << what;
      EXPECT_EQ(out.dtype(), t) << what;
      EXPECT_EQ(out.shape(), s.out) << what;
      ExpectClose(out, want, {0, 0}, what);
    }
  }
}

TEST(ElementwiseKernelTest, SelectErrors) {
  Tensor f = MakeTensor(kF32, {2}, {1, 2});
  ExpectRunError(PrimId::kSelect, {f, f, f}, {}, "input 0 must be a bool tensor, got f32[2]");
  Tensor c = MakeTensor(kBool, {2}, {1, 0});
  ExpectRunError(PrimId::kSelect, {c, f, MakeTensor(kF64, {2}, {1, 2})}, {},
                 "inputs 1 and 2 must have the same dtype, got f32[2] and f64[2]");
  ExpectRunError(PrimId::kSelect, {MakeTensor(kBool, {3}, {1, 0, 1}), f, f}, {}, "broadcast");
  ExpectRunError(PrimId::kSelect, {Value(Scalar::Bool(true)), f, f}, {},
                 "input 0 must be a tensor");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
