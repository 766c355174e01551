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
namespace testing {
namespace {

using Build = std::function<AnfNode*(GraphBuilder&, const std::vector<AnfNode*>&)>;

// At one random point per seed: first and second order of P alone
// (PrimitiveGradientOk; with integer indices as constants when P has some), and
// second order of P(x) * P(x), whose Hessian in input 0 must not vanish.
// `tuple_size` > 0 for ops returning a tuple.
void CheckOp(PrimId id, const ArgsFn& make_args, const AttrMap& attrs, int tuple_size = 0) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(absl::StrCat(PrimIdName(id), " seed ", seed));
    std::mt19937_64 rng(seed);
    ExpectOpGradients(id, make_args(rng), attrs, seed, {/*power=*/2, tuple_size}, "x0");
  }
}

// At one random point per seed (drawn by `make`): the check with `o` of the graph
// `name` that returns build(b, x) of parameters x0, x1... (f64, declared with the
// arguments' shapes or `declared`); with `input`, the derivatives of that
// parameter at the last order must not all be zero.
void CheckGraph(const std::string& name, const ArgsFn& make, const Build& build, GradCheckOptions o,
                const std::string& input = "", const std::vector<Shape>& declared = {}) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(absl::StrCat(name, " seed ", seed));
    std::mt19937_64 rng(seed);
    std::vector<Value> args = make(rng);
    Module m(DefaultRegistry());
    GraphBuilder b(&m, name);
    std::vector<AnfNode*> x;
    for (size_t i = 0; i < args.size(); ++i) {
      Shape shape = i < declared.size() ? declared[i] : args[i].tensor().shape();
      x.push_back(b.Param(absl::StrCat("x", i), DType::kFloat64, shape));
    }
    absl::StatusOr<FuncGraph*> f = b.Return(build(b, x));
    ASSERT_TRUE(f.ok()) << f.status();
    o.seed = seed;
    EXPECT_TRUE(GraphGradientOk(m, *f, args, o, /*nonvacuous=*/!input.empty(), input));
  }
}

// ----- reshape family ------------------------------------------------------------------
TEST(ShapeGradTest, Reshape) {
  CheckOp(PrimId::kReshape, Uniform({{2, 3, 4}}), {{"shape", Ints{4, -1}}});
  CheckOp(PrimId::kReshape, Uniform({{2, 3, 4}}), {{"shape", Ints{24}}});
  CheckOp(PrimId::kReshape, Uniform({{1}}), {{"shape", Ints{}}});
}

TEST(ShapeGradTest, ReshapeLikeGivesTheReferenceNothing) {
  // The checker also verifies ref's gradient: zero against finite differences.
  CheckOp(PrimId::kReshapeLike, Uniform({{2, 6}, {3, 4}}), {});
  CheckOp(PrimId::kReshapeLike, Uniform({{2, 3, 2}, {12}}), {});
}

TEST(ShapeGradTest, ExpandDims) {
  for (int64_t axis : {0, 1, 2, -1, -3}) {
    CheckOp(PrimId::kExpandDims, Uniform({{2, 3}}), {{"axis", axis}});
  }
}

TEST(ShapeGradTest, Squeeze) {
  CheckOp(PrimId::kSqueeze, Uniform({{2, 1, 3, 1}}), {{"axes", Ints{}}});
  CheckOp(PrimId::kSqueeze, Uniform({{2, 1, 3, 1}}), {{"axes", Ints{-1}}});
  CheckOp(PrimId::kSqueeze, Uniform({{2, 1, 3, 1}}), {{"axes", Ints{1, 3}}});
}

// ----- transpose -------------------------------------------------------------------------
TEST(ShapeGradTest, Transpose) {
  CheckOp(PrimId::kTranspose, Uniform({{2, 3, 4}}), {{"perm", Ints{1, 2, 0}}});
  CheckOp(PrimId::kTranspose, Uniform({{2, 3, 4}}), {{"perm", Ints{2, 0, 1}}});
  CheckOp(PrimId::kTranspose, Uniform({{2, 3, 4}}), {{"perm", Ints{}}});  // reversed
  CheckOp(PrimId::kTranspose, Uniform({{2, 1, 3, 2}}), {{"perm", Ints{3, 1, 0, 2}}});
}

// ----- broadcast_to / sum_to ---------------------------------------------------------------
TEST(ShapeGradTest, BroadcastTo) {
  CheckOp(PrimId::kBroadcastTo, Uniform({{3, 1}}), {{"shape", Ints{2, 3, 4}}});
  CheckOp(PrimId::kBroadcastTo, Uniform({{}}), {{"shape", Ints{2, 3}}});
  CheckOp(PrimId::kBroadcastTo, Uniform({{2, 1, 4}}), {{"shape", Ints{2, 3, 4}}});
  CheckOp(PrimId::kBroadcastTo, Uniform({{2, 3}}), {{"shape", Ints{2, 3}}});  // identity
}

TEST(ShapeGradTest, BroadcastToLike) {
  CheckOp(PrimId::kBroadcastToLike, Uniform({{3, 1}, {2, 3, 4}}), {});
  CheckOp(PrimId::kBroadcastToLike, Uniform({{4}, {2, 1, 4}}), {});
}

TEST(ShapeGradTest, SumTo) {
  CheckOp(PrimId::kSumTo, Uniform({{2, 3, 4}}), {{"shape", Ints{3, 1}}});
  CheckOp(PrimId::kSumTo, Uniform({{2, 3, 4}}), {{"shape", Ints{}}});
  CheckOp(PrimId::kSumTo, Uniform({{2, 3, 4}}), {{"shape", Ints{2, 1, 4}}});
  // A target of higher rank: extra leading 1s.
  CheckOp(PrimId::kSumTo, Uniform({{2, 3}}), {{"shape", Ints{1, 1, 3}}});
}

TEST(ShapeGradTest, SumToLike) {
  CheckOp(PrimId::kSumToLike, Uniform({{2, 3, 4}, {1, 4}}), {});
  CheckOp(PrimId::kSumToLike, Uniform({{2, 3, 4}, {3, 1}}), {});
  CheckOp(PrimId::kSumToLike, Uniform({{3, 4}, {1, 1, 3, 1}}), {});
}

// ----- concat / split ------------------------------------------------------------------------
TEST(ShapeGradTest, Concat) {
  CheckOp(PrimId::kConcat, Uniform({{2, 1, 3}, {2, 2, 3}, {2, 3, 3}}), {{"axis", int64_t{1}}});
  CheckOp(PrimId::kConcat, Uniform({{2, 2}, {2, 3}}), {{"axis", int64_t{-1}}});
  CheckOp(PrimId::kConcat, Uniform({{3, 2}}), {{"axis", int64_t{0}}});
}

TEST(ShapeGradTest, Split) {
  CheckOp(PrimId::kSplit, Uniform({{2, 6, 3}}), {{"axis", int64_t{1}}, {"sizes", Ints{1, 2, 3}}},
          3);
  CheckOp(PrimId::kSplit, Uniform({{2, 3}}), {{"axis", int64_t{-1}}, {"sizes", Ints{2, 1}}}, 2);
  CheckOp(PrimId::kSplit, Uniform({{4, 2}}), {{"axis", int64_t{0}}, {"sizes", Ints{4}}}, 1);
}

// Only the middle piece is used: dy is (0, dy_1, 0), with materialised zeros.
TEST(ShapeGradTest, SplitWithUnusedPieces) {
  CheckGraph(
      "middle", Uniform({{3, 5}}),
      [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
        AnfNode* parts =
            b.Op(PrimId::kSplit, {x[0]}, {{"axis", int64_t{1}}, {"sizes", Ints{1, 3, 1}}});
        AnfNode* mid = b.GetItem(parts, 1);
        return b.Op(PrimId::kMul, {mid, mid});
      },
      Order(3));
}

// ----- slice / slice_grad ---------------------------------------------------------------------
TEST(ShapeGradTest, Slice) {
  CheckOp(PrimId::kSlice, Uniform({{5, 6}}), {{"begin", Ints{1, 0}}, {"end", Ints{4, 6}}});
  CheckOp(PrimId::kSlice, Uniform({{5, 6}}),
          {{"begin", Ints{0, 1}}, {"end", Ints{5, 6}}, {"strides", Ints{2, 3}}});
  // Negative and out-of-range bounds, clamped NumPy-style.
  CheckOp(PrimId::kSlice, Uniform({{5, 6}}), {{"begin", Ints{-4, -100}}, {"end", Ints{-1, 100}}});
  CheckOp(PrimId::kSlice, Uniform({{2, 3, 4}}),
          {{"begin", Ints{0, 0, 0}}, {"end", Ints{2, 3, 4}}});  // the whole tensor
}

TEST(ShapeGradTest, SliceGrad) {
  CheckOp(PrimId::kSliceGrad, Uniform({{3, 2}, {5, 6}}),
          {{"begin", Ints{1, 0}}, {"end", Ints{4, 6}}, {"strides", Ints{1, 3}}});
  CheckOp(PrimId::kSliceGrad, Uniform({{2, 4}, {4, 4}}),
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
    EXPECT_TRUE(OpGradientOk(PrimId::kScatterAdd, args, {{"axis", int64_t{0}}}, {/*power=*/2},
                             Order(2, seed), /*nonvacuous=*/true, "x2"));
  }
}

// ----- gather_elements / scatter_elements / cumsum ------------------------------------------
// Data random, indices (negative and repeated ones included) constant.
ArgsFn DataAnd(Shape data, Value indices) {
  return [data, indices](std::mt19937_64& rng) {
    return std::vector<Value>{RandomF64(data, rng), indices};
  };
}
ArgsFn DataIndicesUpdates(Shape data, Value indices, Shape updates) {
  return [data, indices, updates](std::mt19937_64& rng) {
    Value x = RandomF64(data, rng);
    return std::vector<Value>{x, indices, RandomF64(updates, rng)};
  };
}

TEST(ShapeGradTest, GatherElements) {
  CheckOp(PrimId::kGatherElements, DataAnd({4, 3}, I64({5, 3}, {0, 3, -1, 2, 2, 0, 1, -4, 3,
                                                                 0, 0, 0, 3, 1, 2})),
          {{"axis", int64_t{0}}});
  CheckOp(PrimId::kGatherElements, DataAnd({2, 3, 2}, I64({2, 2, 2}, {2, 0, -1, 1, 0, 0, 1, 2})),
          {{"axis", int64_t{-2}}});
}

TEST(ShapeGradTest, ScatterElements) {
  // add: repeated indices accumulate.
  CheckOp(PrimId::kScatterElements,
          DataIndicesUpdates({4, 3}, I64({3, 3}, {0, 3, -1, 0, 2, 0, 1, -1, 3}), {3, 3}),
          {{"axis", int64_t{0}}, {"reduction", std::string("add")}});
  // none: distinct indices along the axis, then repeated ones (the last wins).
  CheckOp(PrimId::kScatterElements,
          DataIndicesUpdates({4, 3}, I64({2, 3}, {0, 3, -1, 2, 1, 0}), {2, 3}),
          {{"axis", int64_t{0}}});
  CheckOp(PrimId::kScatterElements,
          DataIndicesUpdates({4, 3}, I64({3, 3}, {0, 3, -1, 0, 2, 3, 1, 3, -1}), {3, 3}),
          {{"axis", int64_t{0}}});
  CheckOp(PrimId::kScatterElements,
          DataIndicesUpdates({2, 5}, I64({2, 2}, {4, -5, 1, 2}), {2, 2}),
          {{"axis", int64_t{1}}, {"reduction", std::string("none")}});
}

// By hand: x = [1, 2, 3], scatter (none) updates [u0, u1] to [2, 0]: y = [u1, 2, u0].
TEST(ShapeGradTest, ScatterElementsNoneByHand) {
  auto g = Gradients(PrimId::kScatterElements,
                     {F64({3}, {1, 2, 3}), I64({2}, {2, 0}), F64({2}, {5, 6})});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_THAT(g[0], ::testing::ElementsAre(0.0, 1.0, 0.0));
  EXPECT_THAT(g[1], ::testing::ElementsAre(1.0, 1.0));
  // Repeated indices: y = [u1, 2, u2]; u0 is overwritten by u1 and gets nothing.
  g = Gradients(PrimId::kScatterElements,
                {F64({3}, {1, 2, 3}), I64({3}, {0, -3, 2}), F64({3}, {5, 6, 7})});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_THAT(g[0], ::testing::ElementsAre(0.0, 1.0, 0.0));
  EXPECT_THAT(g[1], ::testing::ElementsAre(0.0, 1.0, 1.0));
}

TEST(ShapeGradTest, ScatterElementsWithoutARuleIsAnError) {
  for (const char* red : {"mul", "max", "min"}) {
    SCOPED_TRACE(red);
    Module m(DefaultRegistry());
    std::vector<Value> args = {F64({3}, {1, 2, 3}), I64({1}, {0}), F64({1}, {5})};
    ExpectGradError(m,
                    OpGraph(m, PrimId::kScatterElements, args, {{"reduction", std::string(red)}}),
                    {absl::StrCat("reduction '", red, "' has no gradient rule")}, true);
  }
}

TEST(ShapeGradTest, CumSum) {
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      AttrMap attrs = {{"axis", int64_t{1}}, {"exclusive", exclusive}, {"reverse", reverse}};
      CheckOp(PrimId::kCumSum, Uniform({{2, 4, 3}}), attrs);
    }
  }
  CheckOp(PrimId::kCumSum, Uniform({{5}}), {{"axis", int64_t{-1}}, {"reverse", true}});
}

// ----- pad -------------------------------------------------------------------------------------
TEST(ShapeGradTest, Pad) {
  CheckOp(PrimId::kPad, Uniform({{2, 3}}), {{"pads", Ints{1, 2, 0, 1}}});
  CheckOp(PrimId::kPad, Uniform({{2, 3}}), {{"pads", Ints{0, 0, 2, 0}}, {"value", 1.5}});
  CheckOp(PrimId::kPad, Uniform({{2, 1, 2}}), {{"pads", Ints{0, 0, 0, 0, 0, 0}}});
  CheckOp(PrimId::kPad, Uniform({{3}}), {{"pads", Ints{3, 2}}, {"value", -0.5}});
}

// ----- cast ------------------------------------------------------------------------------------
TEST(ShapeGradTest, CastToTheSameDtype) {
  CheckOp(PrimId::kCast, Uniform({{2, 3}}), {{"dtype", DType::kFloat64}});
}

// y = cast(cast(x){f32}){f64}; f = y * y. The rule casts dy back to each input's
// dtype. Tolerances: y carries float32 rounding (relative 6e-8), which central
// differences divide by 2 eps; f is quadratic, so a large eps costs no truncation
// error and keeps that noise near 1e-6.
TEST(ShapeGradTest, CastThroughFloat32) {
  GradCheckOptions o = Order(2);
  o.eps = 0.25;
  o.rtol = 1e-4;
  o.atol = 1e-5;
  CheckGraph(
      "via_f32", Uniform({{2, 3}}),
      [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
        AnfNode* y =
            b.Op(PrimId::kCast, {b.Op(PrimId::kCast, {x[0]}, {{"dtype", DType::kFloat32}})},
                 {{"dtype", DType::kFloat64}});
        return b.Op(PrimId::kMul, {y, y});
      },
      o, "x0");
}

// f(x) = x + x + cast(cast(x){i32, i64 or bool}){f64}: the integer path carries no
// gradient, so df/dx = 2 (x stays away from the integer steps).
TEST(ShapeGradTest, CastToIntegerOrBoolCarriesNoGradient) {
  for (DType t : {DType::kInt32, DType::kInt64, DType::kBool}) {
    SCOPED_TRACE(DTypeName(t));
    CheckGraph(
        "via_int",
        [](std::mt19937_64& rng) {
          return std::vector<Value>{RandomF64Away({2, 3}, rng, -2.0, 2.0, {-1.0, 0.0, 1.0}, 0.05)};
        },
        [t](GraphBuilder& b, const std::vector<AnfNode*>& x) {
          AnfNode* back = b.Op(PrimId::kCast, {b.Op(PrimId::kCast, {x[0]}, {{"dtype", t}})},
                               {{"dtype", DType::kFloat64}});
          return b.Op(PrimId::kAdd, {b.Op(PrimId::kAdd, {x[0], x[0]}), back});
        },
        Order(2));
  }
}

// ----- zero-gradient ops of the family ---------------------------------------------------------
// one_hot and fill need no rule: f(x) = (x * one_hot(i))^2 + fill() differentiates.
TEST(ShapeGradTest, OneHotAndFillNeedNoRule) {
  CheckGraph(
      "masked", Uniform({{3, 4}}),
      [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
        AnfNode* i = b.Const(I64({3}, {0, 3, 1}));
        AnfNode* mask =
            b.Op(PrimId::kOneHot, {i}, {{"depth", int64_t{4}}, {"dtype", DType::kFloat64}});
        AnfNode* bias = b.Op(PrimId::kFill, {},
                             {{"shape", Ints{3, 4}}, {"value", 0.5}, {"dtype", DType::kFloat64}});
        AnfNode* xm = b.Op(PrimId::kMul, {x[0], mask});
        return b.Op(PrimId::kAdd, {b.Op(PrimId::kMul, {xm, xm}), bias});
      },
      Order(2), "x0");
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
      {PrimId::kBroadcastTo, {kU, 1}, {3, 1}, {{"shape", Ints{2, 3, 4}}}},
      {PrimId::kPad, {kU, kU}, {2, 3}, {{"pads", Ints{1, 0, 2, 1}}}},
      {PrimId::kReshape, {kU, 4}, {3, 4}, {{"shape", Ints{-1}}}},
      {PrimId::kSumTo, {kU, 3}, {2, 3}, {{"shape", Ints{1, 1, 3}}}},
      {PrimId::kSlice, {kU, 5}, {4, 5}, {{"begin", Ints{1, -3}}, {"end", Ints{100, 5}}}},
  };
  for (const Case& k : cases) {
    CheckGraph(absl::StrCat("unknown_", PrimIdName(k.id)), Uniform({k.actual}),
               [&k](GraphBuilder& b, const std::vector<AnfNode*>& x) {
                 AnfNode* y = b.Op(k.id, {x[0]}, k.attrs);
                 return b.Op(PrimId::kMul, {y, y});
               },
               Order(2), "x0", {k.declared});
  }
}

// concat splits dy by the inputs' static sizes along the axis; where one is not
// static (a symbol or ?), the pieces are cut at run time (dynamic_slice at the
// running offsets of shape_of), to second order.
TEST(ShapeGradTest, ConcatWithSizesAlongTheAxisThatAreNotStatic) {
  CheckGraph("cat_dynamic_axis", Uniform({{2, 4}, {2, 3}, {2, 1}}),
             [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
               AnfNode* cat = b.Op(PrimId::kConcat, {x[0], x[1], x[2]}, {{"axis", int64_t{-1}}});
               return b.Op(PrimId::kMul, {cat, cat});
             },
             Order(2), "x0", {{2, kU}, {2, DimSymbol("n")}, {2, 1}});
}

// Unknown dims off the axis are fine for concat.
TEST(ShapeGradTest, ConcatWithUnknownDimsOffTheAxis) {
  CheckGraph("cat_unknown", Uniform({{3, 2}, {3, 1}}),
             [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
               AnfNode* cat = b.Op(PrimId::kConcat, {x[0], x[1]}, {{"axis", int64_t{1}}});
               return b.Op(PrimId::kMul, {cat, cat});
             },
             Order(2), "x1", {{kU, 2}, {kU, 1}});
}

// Third order through a chain of the family's ops (each rule differentiated twice).
TEST(ShapeGradTest, ThirdOrderThroughAChain) {
  CheckGraph(
      "chain", Uniform({{2, 3}, {3}}),
      [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
        AnfNode* t = b.Op(PrimId::kTranspose, {x[0]}, {{"perm", Ints{1, 0}}});  // [3,2]
        AnfNode* p = b.Op(PrimId::kPad, {t}, {{"pads", Ints{1, 0, 0, 2}}});     // [4,4]
        AnfNode* s =
            b.Op(PrimId::kSlice, {p}, {{"begin", Ints{0, 1}}, {"end", Ints{4, 3}}});  // [4,2]
        AnfNode* r = b.Op(PrimId::kReshape, {s}, {{"shape", Ints{2, 4}}});
        AnfNode* e = b.Op(PrimId::kExpandDims, {x[1]}, {{"axis", int64_t{0}}});  // [1,3]
        AnfNode* bv = b.Op(PrimId::kBroadcastTo, {e}, {{"shape", Ints{2, 3}}});
        AnfNode* cat = b.Op(PrimId::kConcat, {r, bv}, {{"axis", int64_t{1}}});  // [2,7]
        AnfNode* cube = b.Op(PrimId::kMul, {b.Op(PrimId::kMul, {cat, cat}), cat});
        return b.Op(PrimId::kSumTo, {cube}, {{"shape", Ints{1, 7}}});
      },
      Order(3), "x0");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
