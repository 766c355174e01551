// Gradient rules of the shape family (ops/shape_ops.cc), checked in float64
// against central finite differences (tools/grad_check.h).
//
// Every op here is linear in its data input, so the gradient of <u, P(x)> is the
// constant P^T u and a second-order check of P alone sees only zeros. Each op is
// therefore also checked through f(x) = P(x) * P(x): the Hessian of <u, f> is
// 2 P^T diag(u) P, and the second-order check differentiates the rule's output
// P^T(...) with the adjoint's own rule (slice_grad -> slice, scatter_add -> gather,
// split -> concat, ...), i.e. it verifies that the adjoint's rule maps back.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ad/grad_operation.h"
#include "core/builder.h"
#include "core/shape.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/grad_test_util.h"
#include "tests/testing/op_test_util.h"
#include "tools/grad_check.h"

namespace kgrad {
namespace {

using ::kgrad::testing::MakeTensor;
using ::kgrad::testing::PrimGradOptions;
using ::kgrad::testing::PrimitiveGradientOk;
using ::kgrad::testing::RandomF64;
using ::testing::HasSubstr;

using Ints = std::vector<int64_t>;
// Arguments drawn from a seeded generator (a new point per seed).
using ArgsFn = std::function<std::vector<Value>(std::mt19937_64&)>;

constexpr uint64_t kSeeds[] = {1, 2, 3};

Value I64(Shape shape, const std::vector<double>& values) {
  return Value(MakeTensor(DType::kInt64, std::move(shape), values));
}

ArgsFn Random(std::vector<Shape> shapes) {
  return [shapes](std::mt19937_64& rng) {
    std::vector<Value> args;
    for (const Shape& s : shapes) args.push_back(RandomF64(s, rng));
    return args;
  };
}

bool IsIntegerValue(const Value& v) { return v.is_tensor() && !IsFloating(v.tensor().dtype()); }

// f(x...) = P(x...), or P(x...) * P(x...) when `squared` (element-wise over P's
// tuple of `tuple_size` when it returns one). Floating arguments are parameters
// named x<i> after their position; integer arguments (indices) are constants: the
// gradient operation refuses integer parameters (see the report in the commit).
// `params` gets the arguments of the parameters.
absl::StatusOr<FuncGraph*> OpGraph(Module& m, PrimId id, const std::vector<Value>& args,
                                   AttrMap attrs, bool squared, int tuple_size,
                                   std::vector<Value>* params) {
  GraphBuilder b(&m, absl::StrCat(squared ? "sq_" : "f_", PrimIdName(id)));
  std::vector<AnfNode*> xs;
  params->clear();
  for (size_t i = 0; i < args.size(); ++i) {
    if (IsIntegerValue(args[i])) {
      xs.push_back(b.Const(args[i]));
      continue;
    }
    xs.push_back(b.Param(absl::StrCat("x", i), Broaden(AbstractOfValue(args[i]))));
    params->push_back(args[i]);
  }
  AnfNode* y = b.Op(id, xs, std::move(attrs));
  if (!squared) return b.Return(y);
  if (tuple_size == 0) return b.Return(b.Op(PrimId::kMul, {y, y}));
  std::vector<AnfNode*> squares;
  for (int i = 0; i < tuple_size; ++i) {
    AnfNode* yi = b.GetItem(y, i);
    squares.push_back(b.Op(PrimId::kMul, {yi, yi}));
  }
  return b.Return(b.Tuple(std::move(squares)));
}

// The check of `f` at `args` to `o.order`; with `nonzero_input` >= 0, the
// derivatives of parameter x<nonzero_input> must not all be zero at the last order
// (so that the check is not vacuous).
::testing::AssertionResult GraphGradientOk(Module& m, FuncGraph* f, const std::vector<Value>& args,
                                           const GradCheckOptions& o, int nonzero_input = -1) {
  absl::StatusOr<GradCheckReport> r = CheckGradients(m, f, args, o);
  if (!r.ok()) return ::testing::AssertionFailure() << f->name() << ": " << r.status();
  if (!r->passed()) return ::testing::AssertionFailure() << f->name() << "\n" << r->ToString();
  if (nonzero_input >= 0) {
    std::string name = absl::StrCat("x", nonzero_input);
    bool found = false;
    for (const GradCheckEntry& e : r->entries) {
      if (e.order != o.order || e.input != name) continue;
      found = true;
      if (e.max_magnitude < 1e-6) {
        return ::testing::AssertionFailure()
               << f->name() << ": order " << o.order << " derivatives of " << name
               << " are all zero; the check is vacuous\n"
               << r->ToString();
      }
    }
    if (!found) {
      return ::testing::AssertionFailure() << f->name() << ": no entry for " << name << "\n"
                                           << r->ToString();
    }
  }
  return ::testing::AssertionSuccess();
}

// The check of the graph OpGraph builds.
::testing::AssertionResult OpGradientOk(PrimId id, const std::vector<Value>& args,
                                        const AttrMap& attrs, bool squared, int tuple_size,
                                        uint64_t seed, int nonzero_input) {
  Module m(DefaultRegistry());
  std::vector<Value> params;
  absl::StatusOr<FuncGraph*> f = OpGraph(m, id, args, attrs, squared, tuple_size, &params);
  if (!f.ok()) return ::testing::AssertionFailure() << "building the graph: " << f.status();
  GradCheckOptions o;
  o.seed = seed;
  o.order = 2;
  return GraphGradientOk(m, *f, params, o, nonzero_input);
}

// At one random point per seed: first and second order of P alone
// (PrimitiveGradientOk; with integer indices as constants when P has some), and
// second order of P(x) * P(x), whose Hessian in input 0 must not vanish.
// `tuple_size` > 0 for ops returning a tuple.
void CheckOp(PrimId id, const ArgsFn& make_args, AttrMap attrs, int tuple_size = 0) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(absl::StrCat(PrimIdName(id), " seed ", seed));
    std::mt19937_64 rng(seed);
    std::vector<Value> args = make_args(rng);
    bool has_indices = std::any_of(args.begin(), args.end(), IsIntegerValue);
    if (has_indices) {
      EXPECT_TRUE(OpGradientOk(id, args, attrs, /*squared=*/false, tuple_size, seed, -1));
    } else {
      PrimGradOptions po;
      po.seed = seed;
      po.order = 2;
      EXPECT_TRUE(PrimitiveGradientOk(id, args, attrs, po));
    }
    EXPECT_TRUE(OpGradientOk(id, args, attrs, /*squared=*/true, tuple_size, seed, 0));
  }
}

// ----- reshape family ------------------------------------------------------------------
TEST(ShapeGradTest, Reshape) {
  CheckOp(PrimId::kReshape, Random({{2, 3, 4}}), {{"shape", Ints{4, -1}}});
  CheckOp(PrimId::kReshape, Random({{2, 3, 4}}), {{"shape", Ints{24}}});
  CheckOp(PrimId::kReshape, Random({{1}}), {{"shape", Ints{}}});
}

TEST(ShapeGradTest, ReshapeLikeGivesTheReferenceNothing) {
  // The checker also verifies ref's gradient: zero against finite differences.
  CheckOp(PrimId::kReshapeLike, Random({{2, 6}, {3, 4}}), {});
  CheckOp(PrimId::kReshapeLike, Random({{2, 3, 2}, {12}}), {});
}

TEST(ShapeGradTest, ExpandDims) {
  for (int64_t axis : {0, 1, 2, -1, -3}) {
    CheckOp(PrimId::kExpandDims, Random({{2, 3}}), {{"axis", axis}});
  }
}

TEST(ShapeGradTest, Squeeze) {
  CheckOp(PrimId::kSqueeze, Random({{2, 1, 3, 1}}), {{"axes", Ints{}}});
  CheckOp(PrimId::kSqueeze, Random({{2, 1, 3, 1}}), {{"axes", Ints{-1}}});
  CheckOp(PrimId::kSqueeze, Random({{2, 1, 3, 1}}), {{"axes", Ints{1, 3}}});
}

// ----- transpose -------------------------------------------------------------------------
TEST(ShapeGradTest, Transpose) {
  CheckOp(PrimId::kTranspose, Random({{2, 3, 4}}), {{"perm", Ints{1, 2, 0}}});
  CheckOp(PrimId::kTranspose, Random({{2, 3, 4}}), {{"perm", Ints{2, 0, 1}}});
  CheckOp(PrimId::kTranspose, Random({{2, 3, 4}}), {{"perm", Ints{}}});  // reversed
  CheckOp(PrimId::kTranspose, Random({{2, 1, 3, 2}}), {{"perm", Ints{3, 1, 0, 2}}});
}

// ----- broadcast_to / sum_to ---------------------------------------------------------------
TEST(ShapeGradTest, BroadcastTo) {
  CheckOp(PrimId::kBroadcastTo, Random({{3, 1}}), {{"shape", Ints{2, 3, 4}}});
  CheckOp(PrimId::kBroadcastTo, Random({{}}), {{"shape", Ints{2, 3}}});
  CheckOp(PrimId::kBroadcastTo, Random({{2, 1, 4}}), {{"shape", Ints{2, 3, 4}}});
  CheckOp(PrimId::kBroadcastTo, Random({{2, 3}}), {{"shape", Ints{2, 3}}});  // identity
}

TEST(ShapeGradTest, BroadcastToLike) {
  CheckOp(PrimId::kBroadcastToLike, Random({{3, 1}, {2, 3, 4}}), {});
  CheckOp(PrimId::kBroadcastToLike, Random({{4}, {2, 1, 4}}), {});
}

TEST(ShapeGradTest, SumTo) {
  CheckOp(PrimId::kSumTo, Random({{2, 3, 4}}), {{"shape", Ints{3, 1}}});
  CheckOp(PrimId::kSumTo, Random({{2, 3, 4}}), {{"shape", Ints{}}});
  CheckOp(PrimId::kSumTo, Random({{2, 3, 4}}), {{"shape", Ints{2, 1, 4}}});
  // A target of higher rank: extra leading 1s.
  CheckOp(PrimId::kSumTo, Random({{2, 3}}), {{"shape", Ints{1, 1, 3}}});
}

TEST(ShapeGradTest, SumToLike) {
  CheckOp(PrimId::kSumToLike, Random({{2, 3, 4}, {1, 4}}), {});
  CheckOp(PrimId::kSumToLike, Random({{2, 3, 4}, {3, 1}}), {});
  CheckOp(PrimId::kSumToLike, Random({{3, 4}, {1, 1, 3, 1}}), {});
}

// ----- concat / split ------------------------------------------------------------------------
TEST(ShapeGradTest, Concat) {
  CheckOp(PrimId::kConcat, Random({{2, 1, 3}, {2, 2, 3}, {2, 3, 3}}), {{"axis", int64_t{1}}});
  CheckOp(PrimId::kConcat, Random({{2, 2}, {2, 3}}), {{"axis", int64_t{-1}}});
  CheckOp(PrimId::kConcat, Random({{3, 2}}), {{"axis", int64_t{0}}});
}

TEST(ShapeGradTest, Split) {
  CheckOp(PrimId::kSplit, Random({{2, 6, 3}}), {{"axis", int64_t{1}}, {"sizes", Ints{1, 2, 3}}}, 3);
  CheckOp(PrimId::kSplit, Random({{2, 3}}), {{"axis", int64_t{-1}}, {"sizes", Ints{2, 1}}}, 2);
  CheckOp(PrimId::kSplit, Random({{4, 2}}), {{"axis", int64_t{0}}, {"sizes", Ints{4}}}, 1);
}

// Only the middle piece is used: dy is (0, dy_1, 0), with materialised zeros.
TEST(ShapeGradTest, SplitWithUnusedPieces) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937_64 rng(seed);
    std::vector<Value> args = {RandomF64({3, 5}, rng)};
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "middle");
    AnfNode* x = b.Param("x0", DType::kFloat64, {3, 5});
    AnfNode* parts = b.Op(PrimId::kSplit, {x}, {{"axis", int64_t{1}}, {"sizes", Ints{1, 3, 1}}});
    AnfNode* mid = b.GetItem(parts, 1);
    absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kMul, {mid, mid}));
    ASSERT_TRUE(f.ok()) << f.status();
    GradCheckOptions o;
    o.seed = seed;
    o.order = 3;
    EXPECT_TRUE(GraphGradientOk(m, *f, args, o));
  }
}

// ----- slice / slice_grad ---------------------------------------------------------------------
TEST(ShapeGradTest, Slice) {
  CheckOp(PrimId::kSlice, Random({{5, 6}}), {{"begin", Ints{1, 0}}, {"end", Ints{4, 6}}});
  CheckOp(PrimId::kSlice, Random({{5, 6}}),
          {{"begin", Ints{0, 1}}, {"end", Ints{5, 6}}, {"strides", Ints{2, 3}}});
  // Negative and out-of-range bounds, clamped NumPy-style.
  CheckOp(PrimId::kSlice, Random({{5, 6}}), {{"begin", Ints{-4, -100}}, {"end", Ints{-1, 100}}});
  CheckOp(PrimId::kSlice, Random({{2, 3, 4}}),
          {{"begin", Ints{0, 0, 0}}, {"end", Ints{2, 3, 4}}});  // the whole tensor
}

TEST(ShapeGradTest, SliceGrad) {
  CheckOp(PrimId::kSliceGrad, Random({{3, 2}, {5, 6}}),
          {{"begin", Ints{1, 0}}, {"end", Ints{4, 6}}, {"strides", Ints{1, 3}}});
  CheckOp(PrimId::kSliceGrad, Random({{2, 4}, {4, 4}}),
          {{"begin", Ints{-3, 0}}, {"end", Ints{100, 4}}, {"strides", Ints{2, 1}}});
}

// ----- gather / scatter_add ---------------------------------------------------------------------
TEST(ShapeGradTest, GatherWithRepeatedIndices) {
  auto args = [](Shape params, Value indices) {
    return [params, indices](std::mt19937_64& rng) {
      return std::vector<Value>{RandomF64(params, rng), indices};
    };
  };
  CheckOp(PrimId::kGather, args({4, 3}, I64({5}, {2, 0, 2, 3, 2})), {{"axis", int64_t{0}}});
  CheckOp(PrimId::kGather, args({2, 4, 3}, I64({2, 2}, {1, 3, 3, 0})), {{"axis", int64_t{-2}}});
  CheckOp(PrimId::kGather, args({2, 3}, I64({}, {2})), {{"axis", int64_t{1}}});
}

TEST(ShapeGradTest, ScatterAdd) {
  auto args = [](Shape input, Value indices, Shape updates) {
    return [input, indices, updates](std::mt19937_64& rng) {
      Value x = RandomF64(input, rng);
      return std::vector<Value>{x, indices, RandomF64(updates, rng)};
    };
  };
  CheckOp(PrimId::kScatterAdd, args({4, 3}, I64({5}, {2, 0, 2, 3, 2}), {5, 3}),
          {{"axis", int64_t{0}}});
  CheckOp(PrimId::kScatterAdd, args({2, 4, 3}, I64({2, 2}, {1, 3, 3, 0}), {2, 2, 2, 3}),
          {{"axis", int64_t{-2}}});
}

// f(u) = scatter_add(x, i, u) * scatter_add(x, i, u): the second order in the
// updates (input 2) goes through gather's rule, scatter_add.
TEST(ShapeGradTest, ScatterAddSecondOrderInTheUpdates) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937_64 rng(seed);
    std::vector<Value> args = {RandomF64({4, 3}, rng), I64({5}, {2, 0, 2, 3, 2}),
                               RandomF64({5, 3}, rng)};
    EXPECT_TRUE(OpGradientOk(PrimId::kScatterAdd, args, {{"axis", int64_t{0}}},
                             /*squared=*/true, 0, seed, /*nonzero_input=*/2));
  }
}

// ----- pad -------------------------------------------------------------------------------------
TEST(ShapeGradTest, Pad) {
  CheckOp(PrimId::kPad, Random({{2, 3}}), {{"pads", Ints{1, 2, 0, 1}}});
  CheckOp(PrimId::kPad, Random({{2, 3}}), {{"pads", Ints{0, 0, 2, 0}}, {"value", 1.5}});
  CheckOp(PrimId::kPad, Random({{2, 1, 2}}), {{"pads", Ints{0, 0, 0, 0, 0, 0}}});
  CheckOp(PrimId::kPad, Random({{3}}), {{"pads", Ints{3, 2}}, {"value", -0.5}});
}

// ----- cast ------------------------------------------------------------------------------------
TEST(ShapeGradTest, CastToTheSameDtype) {
  CheckOp(PrimId::kCast, Random({{2, 3}}), {{"dtype", DType::kFloat64}});
}

// y = cast(cast(x){f32}){f64}; f = y * y. The rule casts dy back to each input's
// dtype. Tolerances: y carries float32 rounding (relative 6e-8), which central
// differences divide by 2 eps; f is quadratic, so a large eps costs no truncation
// error and keeps that noise near 1e-6.
TEST(ShapeGradTest, CastThroughFloat32) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937_64 rng(seed);
    std::vector<Value> args = {RandomF64({2, 3}, rng)};
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "via_f32");
    AnfNode* x = b.Param("x0", DType::kFloat64, {2, 3});
    AnfNode* y = b.Op(PrimId::kCast, {b.Op(PrimId::kCast, {x}, {{"dtype", DType::kFloat32}})},
                      {{"dtype", DType::kFloat64}});
    absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kMul, {y, y}));
    ASSERT_TRUE(f.ok()) << f.status();
    GradCheckOptions o;
    o.seed = seed;
    o.order = 2;
    o.eps = 0.25;
    o.rtol = 1e-4;
    o.atol = 1e-5;
    EXPECT_TRUE(GraphGradientOk(m, *f, args, o, /*nonzero_input=*/0));
  }
}

// f(x) = x + x + cast(cast(x){i32, i64 or bool}){f64}: the integer path carries no
// gradient, so df/dx = 2 (x stays away from the integer steps).
TEST(ShapeGradTest, CastToIntegerOrBoolCarriesNoGradient) {
  for (DType t : {DType::kInt32, DType::kInt64, DType::kBool}) {
    for (uint64_t seed : kSeeds) {
      SCOPED_TRACE(absl::StrCat(DTypeName(t), " seed ", seed));
      std::mt19937_64 rng(seed);
      std::vector<Value> args = {
          testing::RandomF64Away({2, 3}, rng, -2.0, 2.0, {-1.0, 0.0, 1.0}, 0.05)};
      Module m(DefaultRegistry());
      GraphBuilder b(&m, "via_int");
      AnfNode* x = b.Param("x0", DType::kFloat64, {2, 3});
      AnfNode* back = b.Op(PrimId::kCast, {b.Op(PrimId::kCast, {x}, {{"dtype", t}})},
                           {{"dtype", DType::kFloat64}});
      AnfNode* twice = b.Op(PrimId::kAdd, {x, x});
      absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kAdd, {twice, back}));
      ASSERT_TRUE(f.ok()) << f.status();
      GradCheckOptions o;
      o.seed = seed;
      o.order = 2;
      EXPECT_TRUE(GraphGradientOk(m, *f, args, o, /*nonzero_input=*/-1));
    }
  }
}

// ----- zero-gradient ops of the family ---------------------------------------------------------
// one_hot and fill need no rule: f(x) = (x * one_hot(i))^2 + fill() differentiates.
TEST(ShapeGradTest, OneHotAndFillNeedNoRule) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937_64 rng(seed);
    std::vector<Value> args = {RandomF64({3, 4}, rng)};
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "masked");
    AnfNode* x = b.Param("x0", DType::kFloat64, {3, 4});
    AnfNode* i = b.Const(I64({3}, {0, 3, 1}));
    AnfNode* mask = b.Op(PrimId::kOneHot, {i}, {{"depth", int64_t{4}}, {"dtype", DType::kFloat64}});
    AnfNode* bias = b.Op(PrimId::kFill, {}, {{"shape", Ints{3, 4}}, {"value", 0.5}, {"dtype", DType::kFloat64}});
    AnfNode* xm = b.Op(PrimId::kMul, {x, mask});
    absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kAdd, {b.Op(PrimId::kMul, {xm, xm}), bias}));
    ASSERT_TRUE(f.ok()) << f.status();
    GradCheckOptions o;
    o.seed = seed;
    o.order = 2;
    EXPECT_TRUE(GraphGradientOk(m, *f, args, o, /*nonzero_input=*/0));
  }
}

// ----- unknown dims ------------------------------------------------------------------------------
// Parameters declared with unknown dims: broadcast_to's rule falls back to
// sum_to_like, pad's and reshape's rules need no shapes at all.
TEST(ShapeGradTest, RulesWithUnknownDims) {
  struct Case {
    PrimId id;
    Shape declared, actual;
    AttrMap attrs;
  };
  const Case cases[] = {
      {PrimId::kBroadcastTo, {kUnknownDim, 1}, {3, 1}, {{"shape", Ints{2, 3, 4}}}},
      {PrimId::kPad, {kUnknownDim, kUnknownDim}, {2, 3}, {{"pads", Ints{1, 0, 2, 1}}}},
      {PrimId::kReshape, {kUnknownDim, 4}, {3, 4}, {{"shape", Ints{-1}}}},
      {PrimId::kSumTo, {kUnknownDim, 3}, {2, 3}, {{"shape", Ints{1, 1, 3}}}},
      {PrimId::kSlice, {kUnknownDim, 5}, {4, 5}, {{"begin", Ints{1, -3}}, {"end", Ints{100, 5}}}},
  };
  for (const Case& k : cases) {
    for (uint64_t seed : kSeeds) {
      SCOPED_TRACE(absl::StrCat(PrimIdName(k.id), " seed ", seed));
      std::mt19937_64 rng(seed);
      std::vector<Value> args = {RandomF64(k.actual, rng)};
      Module m(DefaultRegistry());
      GraphBuilder b(&m, absl::StrCat("unknown_", PrimIdName(k.id)));
      AnfNode* x = b.Param("x0", MakeAbstractTensor(DType::kFloat64, k.declared));
      AnfNode* y = b.Op(k.id, {x}, k.attrs);
      absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kMul, {y, y}));
      ASSERT_TRUE(f.ok()) << f.status();
      GradCheckOptions o;
      o.seed = seed;
      o.order = 2;
      EXPECT_TRUE(GraphGradientOk(m, *f, args, o, /*nonzero_input=*/0));
    }
  }
}

// concat splits dy by the inputs' static sizes along the axis: an unknown one is
// a transform-time error naming the primitive and the node.
TEST(ShapeGradTest, ConcatWithAnUnknownSizeAlongTheAxisIsAnError) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", MakeAbstractTensor(DType::kFloat64, {2, kUnknownDim}));
  AnfNode* y = b.Param("y", MakeAbstractTensor(DType::kFloat64, {2, 3}));
  CNode* cat = b.Op(PrimId::kConcat, {x, y}, {{"axis", int64_t{-1}}});
  cat->set_name("cat");
  absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kReduceSum, {cat}));
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<FuncGraph*> g = GradOperation(/*get_all=*/true)(m, *f);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("graph 'f', node 'cat'"));
  EXPECT_THAT(g.status().message(), HasSubstr("cannot differentiate concat"));
  EXPECT_THAT(g.status().message(), HasSubstr("input 0 has an unknown size"));
}

// Unknown dims off the axis are fine for concat.
TEST(ShapeGradTest, ConcatWithUnknownDimsOffTheAxis) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937_64 rng(seed);
    std::vector<Value> args = {RandomF64({3, 2}, rng), RandomF64({3, 1}, rng)};
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "cat_unknown");
    AnfNode* x = b.Param("x0", MakeAbstractTensor(DType::kFloat64, {kUnknownDim, 2}));
    AnfNode* y = b.Param("x1", MakeAbstractTensor(DType::kFloat64, {kUnknownDim, 1}));
    AnfNode* cat = b.Op(PrimId::kConcat, {x, y}, {{"axis", int64_t{1}}});
    absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kMul, {cat, cat}));
    ASSERT_TRUE(f.ok()) << f.status();
    GradCheckOptions o;
    o.seed = seed;
    o.order = 2;
    EXPECT_TRUE(GraphGradientOk(m, *f, args, o, /*nonzero_input=*/1));
  }
}

// Third order through a chain of the family's ops (each rule differentiated twice).
TEST(ShapeGradTest, ThirdOrderThroughAChain) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937_64 rng(seed);
    std::vector<Value> args = {RandomF64({2, 3}, rng), RandomF64({3}, rng)};
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "chain");
    AnfNode* x = b.Param("x0", DType::kFloat64, {2, 3});
    AnfNode* v = b.Param("x1", DType::kFloat64, {3});
    AnfNode* t = b.Op(PrimId::kTranspose, {x}, {{"perm", Ints{1, 0}}});           // [3,2]
    AnfNode* p = b.Op(PrimId::kPad, {t}, {{"pads", Ints{1, 0, 0, 2}}});            // [4,4]
    AnfNode* s = b.Op(PrimId::kSlice, {p}, {{"begin", Ints{0, 1}}, {"end", Ints{4, 3}}});  // [4,2]
    AnfNode* r = b.Op(PrimId::kReshape, {s}, {{"shape", Ints{2, 4}}});
    AnfNode* e = b.Op(PrimId::kExpandDims, {v}, {{"axis", int64_t{0}}});           // [1,3]
    AnfNode* bv = b.Op(PrimId::kBroadcastTo, {e}, {{"shape", Ints{2, 3}}});
    AnfNode* cat = b.Op(PrimId::kConcat, {r, bv}, {{"axis", int64_t{1}}});        // [2,7]
    AnfNode* sq = b.Op(PrimId::kMul, {cat, cat});
    AnfNode* cube = b.Op(PrimId::kMul, {sq, cat});
    absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kSumTo, {cube}, {{"shape", Ints{1, 7}}}));
    ASSERT_TRUE(f.ok()) << f.status();
    GradCheckOptions o;
    o.seed = seed;
    o.order = 3;
    EXPECT_TRUE(GraphGradientOk(m, *f, args, o, /*nonzero_input=*/0));
  }
}

}  // namespace
}  // namespace kgrad
