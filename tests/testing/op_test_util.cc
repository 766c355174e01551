#include "tests/testing/op_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/cpu_device.h"
#include "backends/cpu/parallel.h"
#include "core/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"

namespace kgrad {
namespace testing {

AttrMap Axes(Ints axes, bool keepdims) {
  return {{"axes", std::move(axes)}, {"keepdims", keepdims}};
}

absl::StatusOr<AbstractPtr> InferOp(PrimId id, const std::vector<AbstractPtr>& args,
                                    AttrMap attrs) {
  KGRAD_ASSIGN_OR_RETURN(PrimitivePtr p, DefaultRegistry().Make(id, std::move(attrs)));
  const PrimitiveDef& d = p->def();
  int n = static_cast<int>(args.size());
  if (n < d.min_inputs || (d.max_inputs >= 0 && n > d.max_inputs)) {
    return absl::InvalidArgumentError("wrong number of inputs");
  }
  return d.infer(InferCall{*p, args});
}

AbstractPtr T(DType dtype, Shape shape) { return MakeAbstractTensor(dtype, std::move(shape)); }

std::string Inferred(PrimId id, const std::vector<AbstractPtr>& args, AttrMap attrs) {
  absl::StatusOr<AbstractPtr> r = InferOp(id, args, std::move(attrs));
  if (!r.ok()) return std::string("error: ") + std::string(r.status().message());
  return (*r)->ToString();
}

std::string TypeOf(DType dtype, Shape shape) { return T(dtype, std::move(shape))->ToString(); }

absl::Status InferError(PrimId id, const std::vector<AbstractPtr>& args, AttrMap attrs) {
  absl::StatusOr<AbstractPtr> r = InferOp(id, args, std::move(attrs));
  return r.ok() ? absl::OkStatus() : r.status();
}

void ExpectTensor(const absl::StatusOr<AbstractPtr>& r, DType dtype, const Shape& shape) {
  ASSERT_TRUE(r.ok()) << r.status();
  const AbstractTensor* t = AsTensor(*r);
  ASSERT_NE(t, nullptr) << AbstractToString(*r);
  EXPECT_EQ(t->dtype(), dtype) << AbstractToString(*r);
  EXPECT_EQ(t->shape(), shape) << AbstractToString(*r);
}

void ExpectError(const absl::Status& s, const std::string& text, absl::StatusCode code) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(text));
}

void ExpectError(const absl::StatusOr<AbstractPtr>& r, const std::string& text,
                 absl::StatusCode code) {
  ASSERT_FALSE(r.ok()) << "expected an error mentioning '" << text << "', got "
                       << AbstractToString(*r);
  ExpectError(r.status(), text, code);
}

void ExpectError(const absl::StatusOr<Value>& r, const std::string& text, absl::StatusCode code) {
  ASSERT_FALSE(r.ok()) << "expected an error mentioning '" << text << "', got " << r->TypeString();
  ExpectError(r.status(), text, code);
}

void ExpectFailure(const absl::Status& s, const std::vector<std::string>& texts,
                   std::optional<absl::StatusCode> code) {
  EXPECT_FALSE(s.ok());
  if (code.has_value()) {
    EXPECT_EQ(s.code(), *code) << s;
  }
  for (const std::string& text : texts) {
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(text)) << s;
  }
}

absl::StatusOr<Value> RunCpuKernel(PrimId id, std::vector<Value> inputs, AttrMap attrs) {
  KGRAD_ASSIGN_OR_RETURN(PrimitivePtr p, DefaultRegistry().Make(id, std::move(attrs)));
  KernelFn fn = CpuKernels().Get(id);
  if (fn == nullptr) return absl::UnimplementedError("no CPU kernel");
  KernelContext ctx(*p, absl::MakeSpan(inputs), CpuDevice());
  return fn(ctx);
}

Tensor RunOk(PrimId id, std::vector<Value> inputs, AttrMap attrs, const std::string& what) {
  const std::string name = what.empty() ? std::string(PrimIdName(id)) : what;
  absl::StatusOr<Value> r = RunCpuKernel(id, std::move(inputs), std::move(attrs));
  EXPECT_TRUE(r.ok()) << name << ": " << r.status();
  if (!r.ok()) return Tensor();
  if (!r->is_tensor()) {
    ADD_FAILURE() << name << ": no tensor result but " << r->TypeString();
    return Tensor();
  }
  return r->tensor();
}

void ExpectRunError(PrimId id, std::vector<Value> inputs, AttrMap attrs, const std::string& text,
                    absl::StatusCode code) {
  SCOPED_TRACE(PrimIdName(id));
  ExpectError(RunCpuKernel(id, std::move(inputs), std::move(attrs)), text, code);
}

double KernelTolerance(DType dtype) { return dtype == DType::kFloat32 ? 1e-5 : 1e-12; }

void ExpectTensorNear(const absl::StatusOr<Value>& got, DType dtype, const Shape& shape,
                      const std::vector<double>& want, const std::function<double(size_t)>& tol) {
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->is_tensor()) << got->TypeString();
  const Tensor& t = got->tensor();
  EXPECT_EQ(t.dtype(), dtype);
  ASSERT_EQ(t.shape(), shape);
  std::vector<double> v = ToDoubles(t);
  ASSERT_EQ(v.size(), want.size());
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_NEAR(v[i], want[i], tol(i)) << "element " << i;
  }
}

Tensor RandomTensor(DType dtype, Shape shape, std::mt19937_64& rng, double lo, double hi) {
  Tensor t = Tensor::Create(dtype, shape).value();
  std::uniform_real_distribution<double> u(lo, hi);
  DispatchDType(dtype, [&](auto zero) {
    using V = decltype(zero);
    V* p = t.mutable_data<V>();
    for (int64_t i = 0; i < t.NumElements(); ++i) {
      double x = u(rng);
      if constexpr (std::is_same_v<V, bool>) {
        p[i] = x > (lo + hi) / 2;
      } else if constexpr (std::is_integral_v<V>) {
        p[i] = static_cast<V>(std::floor(x));
      } else {
        p[i] = static_cast<V>(x);
      }
    }
  });
  return t;
}

std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> out(t.NumElements());
  for (int64_t i = 0; i < t.NumElements(); ++i) out[i] = t.ElementAsDouble(i);
  return out;
}

Shape Unravel(const Shape& shape, int64_t flat) {
  Shape c(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    c[d] = flat % shape[d];
    flat /= shape[d];
  }
  return c;
}

int64_t Ravel(const Shape& shape, const Shape& coords) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + coords[d];
  return flat;
}

Tensor MakeTensor(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor t = Tensor::Create(dtype, shape).value();
  DispatchDType(dtype, [&](auto zero) {
    using V = decltype(zero);
    V* p = t.mutable_data<V>();
    for (int64_t i = 0; i < t.NumElements(); ++i) p[i] = static_cast<V>(values[i]);
  });
  return t;
}

Value I(int64_t v) { return Value(Scalar::Int(v)); }

Value Vec(std::vector<double> v) {
  return Value(Tensor::FromVector<double>({static_cast<int64_t>(v.size())}, v));
}

Value F64(Shape shape, const std::vector<double>& values) {
  return Value(MakeTensor(DType::kFloat64, std::move(shape), values));
}

Value I64(Shape shape, const std::vector<double>& values) {
  return Value(MakeTensor(DType::kInt64, std::move(shape), values));
}

void ExpectSameOnAnyThreadCount(PrimId id, const std::vector<Value>& inputs, const AttrMap& attrs) {
  const int saved = cpu::MaxThreads();
  std::vector<double> first;
  for (int threads : {1, 2, 3, 5}) {
    cpu::SetMaxThreads(threads);
    absl::StatusOr<Value> r = RunCpuKernel(id, inputs, attrs);
    ASSERT_TRUE(r.ok() && r->is_tensor()) << r.status();
    // Bits, not values: NaN == NaN and -0 != +0 here.
    std::vector<double> bits;
    for (int64_t i = 0; i < r->tensor().NumElements(); ++i) bits.push_back(r->tensor().ElementAsDouble(i));
    if (first.empty()) {
      first = bits;
      continue;
    }
    ASSERT_EQ(bits.size(), first.size());
    EXPECT_EQ(std::memcmp(bits.data(), first.data(), bits.size() * sizeof(double)), 0)
        << "differs on " << threads << " threads";
  }
  cpu::SetMaxThreads(saved);
}

double MaxAbsDiff(const Tensor& a, const std::vector<double>& expected) {
  if (a.NumElements() != static_cast<int64_t>(expected.size())) {
    return std::numeric_limits<double>::infinity();
  }
  double m = 0;
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    double d = std::abs(a.ElementAsDouble(i) - expected[i]);
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    m = std::max(m, d);
  }
  return m;
}

double MaxAbs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

}  // namespace testing
}  // namespace kgrad
