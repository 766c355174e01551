// The run-time shape primitives (ops/dynamic_shape_ops.cc): inference with static,
// symbolic and unknown operands, shape values through Shape -> Gather ->
// Unsqueeze -> Concat -> Reshape chains, the CPU kernels against naive
// references, the run-time errors, and the gradient rules (float64 central
// differences, reverse mode and Jvp, to the second order).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/abstract.h"
#include "core/builder.h"
#include "core/dim_symbol.h"
#include "core/infer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/grad_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
const int64_t kBatch = DimSymbol("batch");

// An i64[n] abstract with shape value `v` (kUnknownValue entries allowed).
AbstractPtr Val(Shape v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return MakeAbstractShapeValue(kI64, {n}, std::move(v));
}

// ----- Inference ---------------------------------------------------------------------------
TEST(DynamicShapeInferTest, ShapeOfAndSizeOfCarryTheDims) {
  EXPECT_EQ(Inferred(PrimId::kShapeOf, {T(kF32, {kBatch, 3, kU})}), "i64[3]=[batch,3,?]");
  EXPECT_EQ(Inferred(PrimId::kShapeOf, {T(kF32, {})}), "i64[0]");
  EXPECT_EQ(Inferred(PrimId::kSizeOf, {T(kF32, {2, 3})}), "i64[]=6");
  EXPECT_EQ(Inferred(PrimId::kSizeOf, {T(kF32, {1, kBatch, 1})}), "i64[]=batch");
  EXPECT_EQ(Inferred(PrimId::kSizeOf, {T(kF32, {kBatch, 0})}), "i64[]=0");
  EXPECT_EQ(Inferred(PrimId::kSizeOf, {T(kF32, {kBatch, 3})}), "i64[]");
  const PrimitiveRegistry& reg = DefaultRegistry();
  for (PrimId id : {PrimId::kShapeOf, PrimId::kSizeOf, PrimId::kDynamicFill,
                    PrimId::kDynamicRange}) {
    EXPECT_TRUE(reg.Find(id)->zero_gradient) << PrimIdName(id);
  }
  for (PrimId id : {PrimId::kDynamicReshape, PrimId::kDynamicBroadcastTo, PrimId::kDynamicSlice,
                    PrimId::kDynamicSliceGrad, PrimId::kDynamicPad}) {
    EXPECT_NE(reg.Find(id)->bprop, nullptr) << PrimIdName(id);
  }
}

TEST(DynamicShapeInferTest, ReshapeStaticSymbolicAndUnknown) {
  const PrimId r = PrimId::kDynamicReshape;
  EXPECT_EQ(Inferred(r, {T(kF32, {2, 3, 4}), Val({4, -1})}), "f32[4,6]");
  // The symbols cancel: [batch,512,1,1] to [-1,512] is [batch,512].
  EXPECT_EQ(Inferred(r, {T(kF32, {kBatch, 512, 1, 1}), Val({-1, 512})}), "f32[batch,512]");
  // 0 copies x's dim, its symbol included; then the -1 is a number.
  EXPECT_EQ(Inferred(r, {T(kF32, {kBatch, 3, 4}), Val({0, -1})}), "f32[batch,12]");
  EXPECT_EQ(Inferred(r, {T(kF32, {kBatch, 3, 4}), Val({0, 0, 0})}), "f32[batch,3,4]");
  // With allowzero, 0 is a size.
  EXPECT_EQ(Inferred(r, {T(kF32, {0, 3}), Val({3, 0})}, {{"allowzero", true}}), "f32[3,0]");
  // What cannot cancel is unknown: another symbol, or a number left beside one.
  EXPECT_EQ(Inferred(r, {T(kF32, {kBatch, 6}), Val({-1, 3})}), "f32[?,3]");
  EXPECT_EQ(Inferred(r, {T(kF32, {kBatch, 6}), Val({DimSymbol("seq"), -1})}), "f32[seq,?]");
  EXPECT_EQ(Inferred(r, {T(kF32, {kU, 6}), Val({-1, 6})}), "f32[?,6]");
  // Unknown entries, and an operand without a value: the rank only.
  EXPECT_EQ(Inferred(r, {T(kF32, {2, 6}), Val({kUnknownValue, 4})}), "f32[?,4]");
  EXPECT_EQ(Inferred(r, {T(kF32, {2, 6}), T(kI32, {3})}), "f32[?,?,?]");
  ExpectError(InferOp(r, {T(kF32, {2, 6}), T(kI64, {kU})}), "must be known statically");
  ExpectError(InferOp(r, {T(kF32, {2, 6}), T(kF32, {2})}),
              "input 1 (shape) must be an i32 or i64 tensor of rank 1, got f32[2]");
  ExpectError(InferOp(r, {T(kF32, {2, 6}), Val({-1, -1})}), "more than one -1");
  ExpectError(InferOp(r, {T(kF32, {2, 6}), Val({5, 2})}), "does not have as many elements");
  ExpectError(InferOp(r, {T(kF32, {2, 6}), Val({5, -1})}), "cannot hold the 12 elements");
  ExpectError(InferOp(r, {T(kF32, {2, 6}), Val({0, 0, 0})}), "copies dim 2");
}

TEST(DynamicShapeInferTest, BroadcastFillAndPad) {
  const PrimId e = PrimId::kDynamicBroadcastTo;
  EXPECT_EQ(Inferred(e, {T(kF32, {3, 1}), Val({2, 1, 4})}), "f32[2,3,4]");
  EXPECT_EQ(Inferred(e, {T(kF32, {kBatch, 1}), Val({1, 5})}), "f32[batch,5]");  // both ways
  EXPECT_EQ(Inferred(e, {T(kF32, {3, 1}), T(kI64, {2})}), "f32[3,?]");
  EXPECT_EQ(Inferred(e, {T(kF32, {3}), Val({kBatch, 1})}), "f32[batch,3]");
  ExpectError(InferOp(e, {T(kF32, {3}), Val({4})}), "do not broadcast");
  EXPECT_EQ(Inferred(PrimId::kDynamicFill, {Val({2, kBatch})}, {{"dtype", kI64}}),
            "i64[2,batch]");
  EXPECT_EQ(Inferred(PrimId::kDynamicFill, {Val({kUnknownValue, 3})}), "f32[?,3]");
  ExpectError(InferOp(PrimId::kDynamicFill, {Val({2, -3})}), "negative entry");
  const PrimId p = PrimId::kDynamicPad;
  EXPECT_EQ(Inferred(p, {T(kF32, {2, kBatch}), Val({1, 0, 2, 0})}), "f32[5,batch]");
  EXPECT_EQ(Inferred(p, {T(kF32, {4, kBatch}), Val({-1, 1, 0, 0})}), "f32[3,?]");
  EXPECT_EQ(Inferred(p, {T(kF32, {4, 5}), Val({kUnknownValue, 0, 0, -2})}), "f32[?,3]");
  EXPECT_EQ(Inferred(p, {T(kF32, {4, 5}), T(kI64, {kU})}), "f32[?,?]");
  ExpectError(InferOp(p, {T(kF32, {4, 5}), Val({0, 0})}), "must have 2 * rank = 4 entries");
  ExpectError(InferOp(p, {T(kF32, {4, 5}), Val({-3, 0, -2, 0})}), "to a negative size -1");
}

TEST(DynamicShapeInferTest, SliceBoundsStepsAndSymbols) {
  const PrimId s = PrimId::kDynamicSlice;
  // Clamped bounds, negative starts, the full range of a symbolic dim kept.
  EXPECT_EQ(Inferred(s, {T(kF32, {10, kBatch}), Val({-3, 0}), Val({kMax, kMax})}),
            "f32[3,batch]");
  EXPECT_EQ(Inferred(s, {T(kF32, {10, kBatch}), Val({-1}), Val({kMin}), Val({-1}), Val({-1})}),
            "f32[10,batch]");
  EXPECT_EQ(Inferred(s, {T(kF32, {10, kBatch}), Val({1}), Val({kMax}), Val({1})}), "f32[10,?]");
  // Negative steps: 8, 6, 4, 2.
  EXPECT_EQ(Inferred(s, {T(kF32, {10, 3}), Val({8}), Val({1}), Val({0}), Val({-2})}),
            "f32[4,3]");
  // An unknown bound: that dim unknown; unknown axes: every dim.
  EXPECT_EQ(Inferred(s, {T(kF32, {10, 3}), T(kI64, {1}), Val({5}), Val({0})}), "f32[?,3]");
  EXPECT_EQ(Inferred(s, {T(kF32, {10, 3}), Val({0}), Val({5}), T(kI64, {1})}), "f32[?,?]");
  ExpectError(InferOp(s, {T(kF32, {10, 3}), Val({0}), Val({5}), Val({2})}), "out of range");
  ExpectError(InferOp(s, {T(kF32, {10, 3}), Val({0, 0}), Val({5, 5}), Val({0, -2})}),
              "repeated");
  ExpectError(InferOp(s, {T(kF32, {10, 3}), Val({0}), Val({5}), Val({0}), Val({0})}),
              "step 0 is 0");
  ExpectError(InferOp(s, {T(kF32, {10, 3}), Val({0, 1}), Val({5})}), "must have one length");
  EXPECT_EQ(Inferred(PrimId::kDynamicSliceGrad,
                     {T(kF32, {3, kBatch}), T(kF32, {10, kBatch}), Val({-3}), Val({kMax})}),
            "f32[10,batch]");
  ExpectError(InferOp(PrimId::kDynamicSliceGrad,
                      {T(kF32, {4, 2}), T(kF32, {10, 2}), Val({-3}), Val({kMax})}),
              "the slice's shape [3,2]");
}

TEST(DynamicShapeInferTest, RangeLengthAndValue) {
  auto scalar = [](DType t, int64_t v) { return MakeAbstractShapeValue(t, {}, {v}); };
  EXPECT_EQ(Inferred(PrimId::kDynamicRange, {scalar(kI64, 0), scalar(kI64, 5), scalar(kI64, 2)}),
            "i64[3]=[0,2,4]");
  EXPECT_EQ(Inferred(PrimId::kDynamicRange, {scalar(kI32, 10), scalar(kI32, 1), scalar(kI32, -3)}),
            "i32[3]=[10,7,4]");
  EXPECT_EQ(Inferred(PrimId::kDynamicRange, {T(kF32, {}), T(kF32, {}), T(kF32, {})}), "f32[?]");
  EXPECT_EQ(Inferred(PrimId::kDynamicRange, {scalar(kI64, 5), scalar(kI64, 0), scalar(kI64, 1)}),
            "i64[0]");
  ExpectError(InferOp(PrimId::kDynamicRange, {T(kF32, {}), T(kF64, {}), T(kF32, {})}),
              "same dtype");
  ExpectError(InferOp(PrimId::kDynamicRange, {scalar(kI64, 0), scalar(kI64, 5), scalar(kI64, 0)}),
              "delta) is 0");
}

// ----- Shape values through the integer ops ---------------------------------------------------
TEST(ShapeValueTest, ShapeGatherUnsqueezeConcatReshapeKeepsTheDims) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", kF32, {kBatch, 512, 1, 1});
  AnfNode* s = b.Op(PrimId::kShapeOf, {x});
  CNode* n = b.Op(PrimId::kGather, {s, b.Const(I64({}, {-4}))});  // wraps to 0
  CNode* u = b.Op(PrimId::kExpandDims, {n}, {{"axis", int64_t{0}}});
  // 512 * 1 * 1 from the dims, through cast, mul and a slice.
  CNode* rest = b.Op(PrimId::kSlice, {s}, {{"begin", Ints{1}}, {"end", Ints{4}}});
  CNode* c = b.Op(PrimId::kCast, {b.Op(PrimId::kGather, {rest, b.Const(I64({2}, {0, 1}))})},
                  {{"dtype", kI32}});
  CNode* prod = b.Op(PrimId::kMul, {c, b.Op(PrimId::kGather, {c, b.Const(I64({1}, {-1}))})});
  CNode* target = b.Op(PrimId::kConcat, {u, b.Op(PrimId::kCast, {prod}, {{"dtype", kI64}})});
  CNode* y = b.Op(PrimId::kDynamicReshape,
                  {x, b.Op(PrimId::kSlice, {target}, {{"begin", Ints{0}}, {"end", Ints{2}}})});
  CNode* z = b.Op(PrimId::kDynamicReshape, {x, b.Const(I64({2}, {-1, 512}))});
  FuncGraph* f = b.Return(b.Tuple({y, z})).value();
  absl::StatusOr<AbstractPtr> out = InferGraph(f);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(n->abstract()->ToString(), "i64[]=batch");
  EXPECT_EQ(u->abstract()->ToString(), "i64[1]=[batch]");
  EXPECT_EQ(c->abstract()->ToString(), "i32[2]=[512,1]");
  EXPECT_EQ(prod->abstract()->ToString(), "i32[2]=[512,1]");
  EXPECT_EQ(target->abstract()->ToString(), "i64[3]=[batch,512,1]");
  EXPECT_EQ((*out)->ToString(), "(f32[batch,512], f32[batch,512])");
}

TEST(ShapeValueTest, ArithmeticFoldsNumbersAndKeepsIdentities) {
  const AbstractPtr a = Val({kBatch, 7, -7, kUnknownValue});
  auto arith = [&](PrimId id, Shape b) { return Inferred(id, {a, Val(std::move(b))}); };
  EXPECT_EQ(arith(PrimId::kMul, {1, 2, 1, 1}), "i64[4]=[batch,14,-7,?]");
  EXPECT_EQ(arith(PrimId::kMul, {0, 1, 1, 0}), "i64[4]=[0,7,-7,0]");
  EXPECT_EQ(arith(PrimId::kAdd, {0, 1, 1, 0}), "i64[4]=[batch,8,-6,?]");
  EXPECT_EQ(arith(PrimId::kSub, {0, 10, 1, 1}), "i64[4]=[batch,-3,-8,?]");
  // Division truncates toward zero, as the kernel: 7 / 2 = 3, -7 / 2 = -3.
  EXPECT_EQ(arith(PrimId::kDiv, {1, 2, 2, 1}), "i64[4]=[batch,3,-3,?]");
  EXPECT_EQ(arith(PrimId::kDiv, {2, 0, 2, 1}), "i64[4]=[?,?,-3,?]");
  EXPECT_EQ(arith(PrimId::kMaximum, {kBatch, 9, 0, 0}), "i64[4]=[batch,9,0,?]");
  EXPECT_EQ(arith(PrimId::kMinimum, {2, 9, 0, 0}), "i64[4]=[?,7,-7,?]");
  EXPECT_EQ(Inferred(PrimId::kAdd, {a, MakeAbstractShapeValue(kI64, {}, {1})}),
            "i64[4]=[?,8,-6,?]");  // a scalar broadcasts
  EXPECT_EQ(Inferred(PrimId::kNeg, {a}), "i64[4]=[?,-7,7,?]");
  // i32 wraps at 32 bits; no value for float results or larger ranks.
  EXPECT_EQ(Inferred(PrimId::kAdd, {MakeAbstractShapeValue(kI32, {1}, {2147483647}),
                                    MakeAbstractShapeValue(kI32, {1}, {1})}),
            "i32[1]=[-2147483648]");
  EXPECT_EQ(Inferred(PrimId::kCast, {a}, {{"dtype", kF32}}), "f32[4]");
  EXPECT_EQ(Inferred(PrimId::kCast, {Val({kBatch, 4294967298})}, {{"dtype", kI32}}),
            "i32[2]=[batch,2]");
  EXPECT_EQ(Inferred(PrimId::kConcat, {a, T(kI64, {2})}), "i64[6]=[batch,7,-7,?,?,?]");
}

// ----- Kernels ---------------------------------------------------------------------------
Tensor Iota(DType dtype, Shape shape) {
  std::vector<double> v;
  for (int64_t i = 0; i < NumElementsOf(shape); ++i) v.push_back(static_cast<double>(i));
  return MakeTensor(dtype, shape, v);
}

TEST(DynamicShapeKernelTest, ShapeSizeReshapeFill) {
  const Value x(Iota(kF32, {2, 3, 4}));
  ExpectTensorNear(RunCpuKernel(PrimId::kShapeOf, {x}), kI64, {3}, {2, 3, 4},
                   [](size_t) { return 0; });
  ExpectTensorNear(RunCpuKernel(PrimId::kSizeOf, {x}), kI64, {}, {24}, [](size_t) { return 0; });
  std::vector<double> iota = ToDoubles(x.tensor());
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicReshape, {x, I64({2}, {0, -1})}), kF32, {2, 12},
                   iota, [](size_t) { return 0; });
  ExpectTensorNear(
      RunCpuKernel(PrimId::kDynamicReshape, {x, Value(MakeTensor(kI32, {3}, {4, -1, 2}))}), kF32,
      {4, 3, 2}, iota, [](size_t) { return 0; });
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicFill, {I64({2}, {2, 3})},
                                {{"value", 1.5}, {"dtype", kF64}}),
                   kF64, {2, 3}, std::vector<double>(6, 1.5), [](size_t) { return 0; });
}

// ONNX Slice on one axis, written from the spec's loop: the indices taken.
std::vector<int64_t> SliceIndices(int64_t dim, int64_t start, int64_t end, int64_t step) {
  auto fix = [dim](int64_t v) { return v < 0 ? v + dim : v; };
  start = fix(start);
  end = fix(end);
  std::vector<int64_t> out;
  if (step > 0) {
    start = std::min(std::max<int64_t>(start, 0), dim);
    end = std::min(std::max<int64_t>(end, 0), dim);
    // (No i += step past end: a huge step would overflow.)
    for (int64_t i = start; i < end; i = end - i <= step ? end : i + step) out.push_back(i);
  } else {
    start = std::min(std::max<int64_t>(start, 0), dim - 1);
    end = std::min(std::max<int64_t>(end, -1), dim - 1);
    for (int64_t i = start; i > end; i = i - end <= -step ? end : i + step) out.push_back(i);
  }
  return out;
}

struct SliceCase {
  Ints starts, ends, axes, steps;
};

TEST(DynamicShapeKernelTest, SliceMatchesTheOnnxReference) {
  const Shape shape = {5, 6, 7};
  const Value x(Iota(kF64, shape));
  const std::vector<SliceCase> cases = {
      {{1, 0}, {4, kMax}, {0, 2}, {1, 2}},
      {{-1, 5}, {kMin, 0}, {1, 2}, {-1, -2}},       // whole reversed; 5, 3, 1
      {{10}, {-10}, {-1}, {-3}},                     // clamped to 6, 3, 0
      {{-100, 2}, {100, 2}, {0, 1}, {2, 1}},         // an empty dim
      {{3, -2, 1}, {0, 100, 6}, {-3, -2, -1}, {-1, 3, kMax}},
  };
  for (const SliceCase& c : cases) {
    SCOPED_TRACE(absl::StrCat("starts ", c.starts[0], " axes ", c.axes[0]));
    std::vector<std::vector<int64_t>> idx;
    for (int64_t d = 0; d < 3; ++d) {
      std::vector<int64_t> all;
      for (int64_t i = 0; i < shape[d]; ++i) all.push_back(i);
      idx.push_back(all);
    }
    for (size_t k = 0; k < c.axes.size(); ++k) {
      const int64_t a = c.axes[k] < 0 ? c.axes[k] + 3 : c.axes[k];
      idx[a] = SliceIndices(shape[a], c.starts[k], c.ends[k], c.steps[k]);
    }
    Shape out = {static_cast<int64_t>(idx[0].size()), static_cast<int64_t>(idx[1].size()),
                 static_cast<int64_t>(idx[2].size())};
    std::vector<double> want;
    for (int64_t i : idx[0]) {
      for (int64_t j : idx[1]) {
        for (int64_t k : idx[2]) want.push_back(static_cast<double>(Ravel(shape, {i, j, k})));
      }
    }
    // MakeTensor goes through double: write the extreme bounds exactly.
    auto exact = [](const Ints& v) {
      Tensor t = MakeTensor(kI64, {static_cast<int64_t>(v.size())},
                            std::vector<double>(v.size(), 0));
      std::copy(v.begin(), v.end(), t.mutable_data<int64_t>());
      return Value(t);
    };
    absl::StatusOr<Value> y = RunCpuKernel(
        PrimId::kDynamicSlice, {x, exact(c.starts), exact(c.ends), exact(c.axes), exact(c.steps)});
    ExpectTensorNear(y, kF64, out, want, [](size_t) { return 0; });
    // slice_grad puts them back: zeros elsewhere.
    std::vector<double> back(NumElementsOf(shape), 0.0);
    for (double v : want) back[static_cast<int64_t>(v)] = v;
    if (y.ok()) {
      ExpectTensorNear(RunCpuKernel(PrimId::kDynamicSliceGrad, {*y, x, exact(c.starts),
                                                                exact(c.ends), exact(c.axes),
                                                                exact(c.steps)}),
                       kF64, shape, back, [](size_t) { return 0; });
    }
  }
  // Axes and steps left out: 0..n-1 and 1.
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicSlice, {Value(Iota(kI32, {4})), I64({1}, {1}),
                                                        I64({1}, {-1})}),
                   kI32, {2}, {1, 2}, [](size_t) { return 0; });
}

TEST(DynamicShapeKernelTest, ExpandBroadcastsBothWays) {
  // x [3,1] to [2,1,4]: out [2,3,4], out[a,i,j] = x[i].
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicBroadcastTo,
                                {F64({3, 1}, {1, 2, 3}), I64({3}, {2, 1, 4})}),
                   kF64, {2, 3, 4},
                   {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3},
                   [](size_t) { return 0; });
  // x [1,4] with a target of lower rank and a 1 where x is larger.
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicBroadcastTo,
                                {F64({2, 1, 2}, {1, 2, 3, 4}), I64({2}, {3, 1})}),
                   kF64, {2, 3, 2}, {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4},
                   [](size_t) { return 0; });
}

TEST(DynamicShapeKernelTest, PadWithNegativePadsCrops) {
  const Shape shape = {3, 4};
  const Value x(Iota(kF64, shape));
  const Ints pads = {1, -1, 0, 2};  // dim 0: 1 before; dim 1: crop 1 before, 2 after
  const Shape out = {4, 5};
  std::vector<double> want;
  for (int64_t i = 0; i < out[0]; ++i) {
    for (int64_t j = 0; j < out[1]; ++j) {
      const int64_t si = i - pads[0], sj = j - pads[1];
      const bool in = si >= 0 && si < shape[0] && sj >= 0 && sj < shape[1];
      want.push_back(in ? static_cast<double>(Ravel(shape, {si, sj})) : -1.0);
    }
  }
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicPad, {x, I64({4}, {1, -1, 0, 2})},
                                {{"value", -1.0}}),
                   kF64, out, want, [](size_t) { return 0; });
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicPad, {F64({2}, {5, 6}), I64({2}, {-2, 1})}),
                   kF64, {1}, {0}, [](size_t) { return 0; });
}

TEST(DynamicShapeKernelTest, RangeIntegersAndFloats) {
  auto scalar = [](DType t, double v) { return Value(MakeTensor(t, {}, {v})); };
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicRange,
                                {scalar(kF32, 1.0), scalar(kF32, 2.0), scalar(kF32, 0.3)}),
                   kF32, {4}, {1.0, 1.3, 1.6, 1.9}, [](size_t) { return 1e-6; });
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicRange,
                                {scalar(kF64, 1.0), scalar(kF64, -1.0), scalar(kF64, -0.5)}),
                   kF64, {4}, {1.0, 0.5, 0.0, -0.5}, [](size_t) { return 0; });
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicRange,
                                {scalar(kI64, 10), scalar(kI64, 1), scalar(kI64, -3)}),
                   kI64, {3}, {10, 7, 4}, [](size_t) { return 0; });
  ExpectTensorNear(RunCpuKernel(PrimId::kDynamicRange,
                                {scalar(kI32, 0), scalar(kI32, -5), scalar(kI32, 1)}),
                   kI32, {0}, {}, [](size_t) { return 0; });
}

// ----- Run-time errors --------------------------------------------------------------------
TEST(DynamicShapeKernelTest, BadShapeTensorsAreStatuses) {
  const Value x(Iota(kF32, {2, 3}));
  ExpectRunError(PrimId::kDynamicReshape, {x, F64({2}, {3, 2})}, {},
                 "dynamic_reshape: input 1 (shape) must be an i32 or i64 tensor of rank 1, "
                 "got f64[2]");
  ExpectRunError(PrimId::kDynamicReshape, {x, I64({2, 1}, {3, 2})}, {}, "of rank 1, got i64[2,1]");
  ExpectRunError(PrimId::kDynamicReshape, {x, I64({2}, {-1, -1})}, {}, "more than one -1");
  ExpectRunError(PrimId::kDynamicReshape, {x, I64({2}, {-2, -3})}, {}, "negative entry");
  ExpectRunError(PrimId::kDynamicReshape, {x, I64({2}, {4, 2})}, {},
                 "does not have as many elements as input 0, f32[2,3]");
  ExpectRunError(PrimId::kDynamicFill, {I64({2}, {2, -3})}, {},
                 "dynamic_fill: input 0 (shape) has a negative entry: [2,-3]");
  ExpectRunError(PrimId::kDynamicFill, {I64({2}, {1 << 30, 1 << 30})}, {}, "dynamic_fill");
  ExpectRunError(PrimId::kDynamicBroadcastTo, {x, I64({1}, {4})}, {}, "dynamic_broadcast_to");
  ExpectRunError(PrimId::kDynamicSlice, {x, I64({1}, {0}), I64({1}, {1}), I64({1}, {2})}, {},
                 "axis 2 (entry 0 of the axes) is out of range");
  ExpectRunError(PrimId::kDynamicSlice,
                 {x, I64({1}, {0}), I64({1}, {1}), I64({1}, {0}), I64({1}, {0})}, {}, "is 0");
  ExpectRunError(PrimId::kDynamicPad, {x, I64({2}, {0, 0})}, {}, "2 * rank = 4 entries");
  ExpectRunError(PrimId::kDynamicPad, {x, I64({4}, {0, -2, 0, -2})}, {}, "negative size");
  ExpectRunError(PrimId::kDynamicRange, {I(0), I(5), I(1)}, {}, "must be a tensor");
  ExpectRunError(PrimId::kDynamicRange,
                 {Value(MakeTensor(kI64, {}, {0})), Value(MakeTensor(kI64, {}, {3})),
                  Value(MakeTensor(kI64, {}, {0}))},
                 {}, "dynamic_range: input 2 (delta) is 0");
}

// ----- Gradients ---------------------------------------------------------------------------
// P and P^2 checked in float64 against central differences to the second order,
// reverse mode and (at order 1) Jvp; the integer operands are constants
// (ExpectDynamicOpGradients).
TEST(DynamicShapeGradTest, ReshapeBroadcastSlicePad) {
  ExpectDynamicOpGradients(PrimId::kDynamicReshape, {{2, 3, 2}}, {I64({2}, {0, -1})});
  ExpectDynamicOpGradients(PrimId::kDynamicBroadcastTo, {{3, 1}}, {I64({3}, {2, 1, 4})});
  ExpectDynamicOpGradients(PrimId::kDynamicBroadcastTo, {{2, 1, 2}}, {I64({2}, {3, 1})});
  ExpectDynamicOpGradients(PrimId::kDynamicSlice, {{5, 4}},
                           {I64({2}, {4, 1}), I64({2}, {0, 100}), I64({2}, {0, -1}), I64({2}, {-2, 2})});
  ExpectDynamicOpGradients(PrimId::kDynamicSlice, {{5, 4}}, {I64({1}, {1}), I64({1}, {-1})});
  ExpectDynamicOpGradients(PrimId::kDynamicSliceGrad, {{2, 2}, {5, 4}},
                           {I64({2}, {4, 1}), I64({2}, {0, 100}), I64({2}, {0, -1}), I64({2}, {-2, 2})});
  ExpectDynamicOpGradients(PrimId::kDynamicPad, {{3, 4}}, {I64({4}, {1, -1, 0, 2})});
  ExpectDynamicOpGradients(PrimId::kDynamicPad, {{2, 3}}, {I64({4}, {0, 2, 1, -2})});
}

// f(x) = sum(sin(reshape(x, [3, batch])) * [[1], [2], [3]]) for x: f64[batch, 3],
// the target computed from x's shape at run time; one gradient graph serves every
// batch size.
TEST(DynamicShapeGradTest, OneGradientGraphForEveryBatch) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", kF64, {kBatch, 3});
  CNode* batch = b.Op(PrimId::kGather, {b.Op(PrimId::kShapeOf, {x}), b.Const(I64({1}, {0}))});
  CNode* target = b.Op(PrimId::kConcat, {b.Const(I64({1}, {3})), batch});
  CNode* t = b.Op(PrimId::kDynamicReshape, {x, target});
  CNode* w = b.Op(PrimId::kMul, {b.Op(PrimId::kSin, {t}), b.Const(F64({3, 1}, {1, 2, 3}))});
  absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kReduceSum, {w}));
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<FuncGraph*> g = GradOperation()(m, *f);
  ASSERT_TRUE(g.ok()) << g.status();
  for (int64_t n : {2, 5}) {
    SCOPED_TRACE(absl::StrCat("batch ", n));
    std::mt19937_64 rng(n);
    Value xv = RandomF64({n, 3}, rng);
    std::vector<double> xs = ToDoubles(xv.tensor()), want;
    for (int64_t k = 0; k < 3 * n; ++k) want.push_back(std::cos(xs[k]) * (k / n + 1));
    ExpectTensorNear(RunGraph(*g, {xv}), kF64, {n, 3}, want, [](size_t) { return 1e-12; });
  }
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
