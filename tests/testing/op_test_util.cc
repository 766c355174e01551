#include "tests/testing/op_test_util.h"

#include <cmath>
#include <limits>

#include "backends/cpu/cpu_device.h"
#include "core/status_macros.h"
#include "ops/registry.h"

namespace kgrad {
namespace testing {

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

absl::StatusOr<Value> RunCpuKernel(PrimId id, std::vector<Value> inputs, AttrMap attrs) {
  KGRAD_ASSIGN_OR_RETURN(PrimitivePtr p, DefaultRegistry().Make(id, std::move(attrs)));
  KernelFn fn = CpuKernels().Get(id);
  if (fn == nullptr) return absl::UnimplementedError("no CPU kernel");
  KernelContext ctx(*p, absl::MakeSpan(inputs), CpuDevice());
  return fn(ctx);
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

Tensor MakeTensor(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor t = Tensor::Create(dtype, shape).value();
  DispatchDType(dtype, [&](auto zero) {
    using V = decltype(zero);
    V* p = t.mutable_data<V>();
    for (int64_t i = 0; i < t.NumElements(); ++i) p[i] = static_cast<V>(values[i]);
  });
  return t;
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

}  // namespace testing
}  // namespace kgrad
