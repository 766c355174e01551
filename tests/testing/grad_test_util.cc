#include "tests/testing/grad_test_util.h"

#include <algorithm>
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

namespace {

bool IsFloatTensor(const Value& v) { return v.is_tensor() && IsFloating(v.tensor().dtype()); }

}  // namespace

// f(x...) = prim(args...){attrs} checked to order 2 at `args` with the full report:
// integer arguments become constants of f (the checker would try to differentiate
// them as parameters), and the check must not be vacuous: every first-order
// derivative is non-zero somewhere and, with `curved`, some second-order one is.
::testing::AssertionResult NonVacuousGradientsOk(PrimId id, const std::vector<Value>& args,
                                                 const AttrMap& attrs, uint64_t seed, bool curved) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, absl::StrCat("f_", PrimIdName(id)));
  std::vector<AnfNode*> xs;
  std::vector<Value> params;
  for (size_t i = 0; i < args.size(); ++i) {
    if (IsFloatTensor(args[i])) {
      xs.push_back(b.Param(absl::StrCat("x", i), Broaden(AbstractOfValue(args[i]))));
      params.push_back(args[i]);
    } else {
      xs.push_back(b.Const(args[i]));
    }
  }
  absl::StatusOr<FuncGraph*> f = b.Return(b.Op(id, xs, attrs));
  if (!f.ok()) return ::testing::AssertionFailure() << "building the graph: " << f.status();
  GradCheckOptions o;
  o.order = 2;
  o.seed = seed;
  absl::StatusOr<GradCheckReport> r = CheckGradients(m, *f, params, o);
  if (!r.ok()) return ::testing::AssertionFailure() << PrimIdName(id) << ": " << r.status();
  if (!r->passed()) return ::testing::AssertionFailure() << PrimIdName(id) << "\n" << r->ToString();
  double second = 0;
  for (const GradCheckEntry& e : r->entries) {
    if (e.order == 1 && e.max_magnitude < 1e-9) {
      return ::testing::AssertionFailure() << PrimIdName(id) << ": the derivatives of " << e.input
                                           << " are all zero; the check is vacuous\n"
                                           << r->ToString();
    }
    if (e.order == 2) second = std::max(second, e.max_magnitude);
  }
  if (curved && second < 1e-9) {
    return ::testing::AssertionFailure() << PrimIdName(id)
                                         << ": every second-order derivative is zero; the "
                                            "second-order check is vacuous\n"
                                         << r->ToString();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace testing
}  // namespace kgrad
