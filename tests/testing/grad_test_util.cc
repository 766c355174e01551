#include "tests/testing/grad_test_util.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/status_macros.h"
#include "gmock/gmock.h"
#include "ops/registry.h"

namespace kgrad {
namespace testing {

namespace {

bool IsFloatTensor(const Value& v) { return v.is_tensor() && IsFloating(v.tensor().dtype()); }

// CheckGradients with the outcome as an assertion naming `what`.
::testing::AssertionResult Passes(Module& m, FuncGraph* f, const std::vector<Value>& args,
                                  const GradCheckOptions& o, const std::string& what,
                                  GradCheckReport* report) {
  absl::StatusOr<GradCheckReport> r = CheckGradients(m, f, args, o);
  if (!r.ok()) return ::testing::AssertionFailure() << what << ": " << r.status();
  if (!r->passed()) return ::testing::AssertionFailure() << what << "\n" << r->ToString();
  *report = *std::move(r);
  return ::testing::AssertionSuccess();
}

}  // namespace

GradCheckOptions Order(int order, uint64_t seed) {
  GradCheckOptions o;
  o.order = order;
  o.seed = seed;
  return o;
}

absl::StatusOr<FuncGraph*> BuildPrimitiveGraph(Module& m, PrimId id, const std::vector<Value>& args,
                                               AttrMap attrs) {
  GraphBuilder b(&m, absl::StrCat("f_", PrimIdName(id)));
  std::vector<AnfNode*> xs;
  for (size_t i = 0; i < args.size(); ++i) {
    xs.push_back(b.Param(absl::StrCat("x", i), Broaden(AbstractOfValue(args[i]))));
  }
  return b.Return(b.Op(id, xs, std::move(attrs)));
}

absl::StatusOr<FuncGraph*> OpGraph(Module& m, PrimId id, const std::vector<Value>& args,
                                   const AttrMap& attrs, const OpGraphOptions& o) {
  static const char* const kPrefix[] = {"f_", "f_", "sq_", "cube_"};
  GraphBuilder b(&m, absl::StrCat(kPrefix[std::clamp(o.power, 1, 3)], PrimIdName(id)));
  std::vector<AnfNode*> xs;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!IsFloatTensor(args[i])) {
      xs.push_back(b.Const(args[i]));
    } else if (i < o.declared.size()) {
      xs.push_back(b.Param(absl::StrCat("x", i), args[i].tensor().dtype(), o.declared[i]));
    } else {
      xs.push_back(b.Param(absl::StrCat("x", i), Broaden(AbstractOfValue(args[i]))));
    }
  }
  AnfNode* y = b.Op(id, xs, attrs);
  auto raise = [&](AnfNode* v) {
    AnfNode* p = v;
    for (int k = 1; k < o.power; ++k) p = b.Op(PrimId::kMul, {p, v});
    return p;
  };
  if (o.tuple_size == 0) return b.Return(raise(y));
  std::vector<AnfNode*> elems;
  for (int i = 0; i < o.tuple_size; ++i) elems.push_back(raise(b.GetItem(y, i)));
  return b.Return(b.Tuple(std::move(elems)));
}

std::vector<Value> FloatArgs(const std::vector<Value>& args) {
  std::vector<Value> out;
  for (const Value& v : args) {
    if (IsFloatTensor(v)) out.push_back(v);
  }
  return out;
}

::testing::AssertionResult GraphGradientOk(Module& m, FuncGraph* f, const std::vector<Value>& args,
                                           const GradCheckOptions& o, bool nonvacuous,
                                           const std::string& input) {
  GradCheckReport r;
  ::testing::AssertionResult ok = Passes(m, f, args, o, f->name(), &r);
  if (!ok || !nonvacuous) return ok;
  bool found = false;
  for (const GradCheckEntry& e : r.entries) {
    if (e.order != o.order || (!input.empty() && e.input != input)) continue;
    found = true;
    if (e.max_magnitude < 1e-6) {
      return ::testing::AssertionFailure()
             << f->name() << ": the order " << o.order << " derivatives of " << e.input
             << " are all zero; the check is vacuous\n"
             << r.ToString();
    }
  }
  if (!input.empty() && !found) {
    return ::testing::AssertionFailure() << f->name() << ": no entry for " << input << "\n"
                                         << r.ToString();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult OpGradientOk(PrimId id, const std::vector<Value>& args,
                                        const AttrMap& attrs, const OpGraphOptions& graph,
                                        const GradCheckOptions& o, bool nonvacuous,
                                        const std::string& input) {
  Module m(DefaultRegistry());
  absl::StatusOr<FuncGraph*> f = OpGraph(m, id, args, attrs, graph);
  if (!f.ok()) return ::testing::AssertionFailure() << "building the graph: " << f.status();
  return GraphGradientOk(m, *f, FloatArgs(args), o, nonvacuous, input);
}

::testing::AssertionResult PrimitiveGradientOk(PrimId id, const std::vector<Value>& args,
                                               AttrMap attrs, PrimGradOptions options) {
  Module m(DefaultRegistry());
  absl::StatusOr<FuncGraph*> f = BuildPrimitiveGraph(m, id, args, std::move(attrs));
  if (!f.ok()) return ::testing::AssertionFailure() << "building the graph: " << f.status();
  GradCheckReport r;
  return Passes(m, *f, args, options, std::string(PrimIdName(id)), &r);
}

::testing::AssertionResult NonVacuousGradientsOk(PrimId id, const std::vector<Value>& args,
                                                 const AttrMap& attrs, uint64_t seed, bool curved) {
  Module m(DefaultRegistry());
  absl::StatusOr<FuncGraph*> f = OpGraph(m, id, args, attrs);
  if (!f.ok()) return ::testing::AssertionFailure() << "building the graph: " << f.status();
  GradCheckReport r;
  ::testing::AssertionResult ok =
      Passes(m, *f, FloatArgs(args), Order(2, seed), std::string(PrimIdName(id)), &r);
  if (!ok) return ok;
  double second = 0;
  for (const GradCheckEntry& e : r.entries) {
    if (e.order == 1 && e.max_magnitude < 1e-9) {
      return ::testing::AssertionFailure() << PrimIdName(id) << ": the derivatives of " << e.input
                                           << " are all zero; the check is vacuous\n"
                                           << r.ToString();
    }
    if (e.order == 2) second = std::max(second, e.max_magnitude);
  }
  if (curved && second < 1e-9) {
    return ::testing::AssertionFailure() << PrimIdName(id)
                                         << ": every second-order derivative is zero; the "
                                            "second-order check is vacuous\n"
                                         << r.ToString();
  }
  return ::testing::AssertionSuccess();
}

void ExpectOpGradients(PrimId id, const std::vector<Value>& args, const AttrMap& attrs,
                       uint64_t seed, const OpGraphOptions& raised, const std::string& input) {
  if (std::all_of(args.begin(), args.end(), IsFloatTensor)) {
    EXPECT_TRUE(PrimitiveGradientOk(id, args, attrs, Order(2, seed)));
  } else {
    EXPECT_TRUE(OpGradientOk(id, args, attrs, {}, Order(2, seed)));
  }
  EXPECT_TRUE(OpGradientOk(id, args, attrs, raised, Order(2, seed), /*nonvacuous=*/true, input));
}

ArgsFn Uniform(std::vector<Shape> shapes) {
  return [shapes](std::mt19937_64& rng) {
    std::vector<Value> args;
    for (const Shape& s : shapes) args.push_back(RandomF64(s, rng));
    return args;
  };
}

std::vector<Value> RandomOperands(const std::vector<Shape>& shapes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return Uniform(shapes)(rng);
}

void ExpectDynamicOpGradients(PrimId id, const std::vector<Shape>& floats, const std::vector<Value>& ints,
                              const AttrMap& attrs, int tuple_size) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(absl::StrCat(PrimIdName(id), " seed ", seed));
    std::vector<Value> args = RandomOperands(floats, seed);
    args.insert(args.end(), ints.begin(), ints.end());
    ExpectOpGradients(id, args, attrs, seed, {/*power=*/2, tuple_size}, "x0");
  }
}

void ExpectGradientsAtSeeds(PrimId id, const ArgsFn& make, const AttrMap& attrs, bool curved) {
  for (uint64_t seed : kSeeds) {
    std::mt19937_64 rng(seed);
    std::vector<Value> args = make(rng);
    bool all_float = std::all_of(args.begin(), args.end(), IsFloatTensor);
    if (all_float) {
      EXPECT_TRUE(PrimitiveGradientOk(id, args, attrs, Order(2, seed))) << "seed " << seed;
    }
    if (seed == kSeeds[0] || !all_float) {
      EXPECT_TRUE(NonVacuousGradientsOk(id, args, attrs, seed, curved)) << "seed " << seed;
    }
  }
}

std::vector<std::vector<double>> Gradients(PrimId id, const std::vector<Value>& args,
                                           const AttrMap& attrs) {
  Module m(DefaultRegistry());
  absl::StatusOr<FuncGraph*> f = OpGraph(m, id, args, attrs);
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return {};
  absl::StatusOr<FuncGraph*> g = GradOperation(/*get_all=*/true)(m, *f);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return {};
  absl::StatusOr<Value> r = RunGraph(*g, FloatArgs(args));
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  std::vector<std::vector<double>> out;
  for (const Value& v : r->tuple()) out.push_back(ToDoubles(v.tensor()));
  return out;
}

void ExpectGradError(Module& m, const absl::StatusOr<FuncGraph*>& f,
                     const std::vector<std::string>& fragments, bool get_all) {
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<FuncGraph*> g = GradOperation(get_all)(m, *f);
  ExpectFailure(g, fragments, absl::StatusCode::kInvalidArgument);
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
