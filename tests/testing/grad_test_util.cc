#include "tests/testing/grad_test_util.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/builder.h"
#include "core/status_macros.h"
#include "ops/registry.h"

namespace kgrad {
namespace testing {

absl::StatusOr<FuncGraph*> BuildPrimitiveGraph(Module& m, PrimId id, const std::vector<Value>& args,
                                               AttrMap attrs) {
  GraphBuilder b(&m, absl::StrCat("f_", PrimIdName(id)));
  std::vector<AnfNode*> xs;
  for (size_t i = 0; i < args.size(); ++i) {
    xs.push_back(b.Param(absl::StrCat("x", i), Broaden(AbstractOfValue(args[i]))));
  }
  return b.Return(b.Op(id, xs, std::move(attrs)));
}

::testing::AssertionResult PrimitiveGradientOk(PrimId id, const std::vector<Value>& args,
                                               AttrMap attrs, PrimGradOptions options) {
  Module m(DefaultRegistry());
  absl::StatusOr<FuncGraph*> f = BuildPrimitiveGraph(m, id, args, std::move(attrs));
  if (!f.ok()) return ::testing::AssertionFailure() << "building the graph: " << f.status();
  GradCheckOptions o;
  o.order = options.order;
  o.seed = options.seed;
  o.rtol = options.rtol;
  o.atol = options.atol;
  o.eps = options.eps;
  absl::StatusOr<GradCheckReport> r = CheckGradients(m, *f, args, o);
  if (!r.ok()) return ::testing::AssertionFailure() << PrimIdName(id) << ": " << r.status();
  if (!r->passed()) return ::testing::AssertionFailure() << PrimIdName(id) << "\n" << r->ToString();
  return ::testing::AssertionSuccess();
}

Value RandomF64(Shape shape, std::mt19937_64& rng, double lo, double hi) {
  return RandomF64Away(std::move(shape), rng, lo, hi, {}, 0.0);
}

Value RandomF64Away(Shape shape, std::mt19937_64& rng, double lo, double hi,
                    std::vector<double> avoid, double gap) {
  Tensor t = Tensor::Create(DType::kFloat64, shape).value();
  std::uniform_real_distribution<double> u(lo, hi);
  double* p = t.mutable_data<double>();
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    double x;
    bool ok;
    int tries = 0;
    do {
      x = u(rng);
      ok = true;
      for (double a : avoid) ok &= std::abs(x - a) >= gap;
    } while (!ok && ++tries < 1000);
    p[i] = x;
  }
  return Value(std::move(t));
}

}  // namespace testing
}  // namespace kgrad
