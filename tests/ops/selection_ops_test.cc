// Selection by value (ops/selection_ops.cc): topk and nonzero. Inference with
// known, symbolic and unknown k, the CPU kernels against naive references (ties
// by ascending index, NaN as the largest value), the errors for bad operands at
// inference and at run time, and topk's gradient rule (float64 central
// differences, reverse mode and Jvp, to the second order).
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/abstract.h"
#include "core/builder.h"
#include "core/dim_symbol.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/grad_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

const int64_t kBatch = DimSymbol("batch");
constexpr auto kExact = [](size_t) { return 0.0; };

// An i64[] abstract with value v.
AbstractPtr Scalar(int64_t v) { return MakeAbstractShapeValue(kI64, {}, {v}); }
Value ScalarI64(int64_t v) { return Value(MakeTensor(kI64, {}, {static_cast<double>(v)})); }
AttrMap TopKAttrs(int64_t axis, bool largest) { return {{"axis", axis}, {"largest", largest}}; }

// ----- Inference ---------------------------------------------------------------------------
TEST(SelectionInferTest, RulesAndZeroGradient) {
  const PrimitiveRegistry& reg = DefaultRegistry();
  EXPECT_NE(reg.Find(PrimId::kTopK)->bprop, nullptr);
  EXPECT_FALSE(reg.Find(PrimId::kTopK)->zero_gradient);
  EXPECT_TRUE(reg.Find(PrimId::kNonZero)->zero_gradient);
}

TEST(SelectionInferTest, TopKDimIsKWhenKnown) {
  const PrimId p = PrimId::kTopK;
  EXPECT_EQ(Inferred(p, {T(kF32, {3, 4}), Scalar(2)}), "(f32[3,2], i64[3,2])");
  EXPECT_EQ(Inferred(p, {T(kF64, {kBatch, 4}), Scalar(3)}, TopKAttrs(-1, false)),
            "(f64[batch,3], i64[batch,3])");
  EXPECT_EQ(Inferred(p, {T(kI32, {5, kBatch}), Scalar(0)}, {{"axis", int64_t{0}}}),
            "(i32[0,batch], i64[0,batch])");
  // ONNX's K is an i64[1] computed at run time; what inference knows of its value
  // (a Shape chain's number or dim symbol) sets the dim, else it is unknown.
  EXPECT_EQ(Inferred(p, {T(kF32, {2, 7}), MakeAbstractShapeValue(kI64, {1}, {3})}),
            "(f32[2,3], i64[2,3])");
  EXPECT_EQ(Inferred(p, {T(kF32, {2, kBatch}), MakeAbstractShapeValue(kI64, {1}, {kBatch})}),
            "(f32[2,batch], i64[2,batch])");
  EXPECT_EQ(Inferred(p, {T(kF32, {2, 7}), T(kI64, {1})}), "(f32[2,?], i64[2,?])");
  EXPECT_EQ(Inferred(p, {T(kI64, {kU, 6}), T(kI32, {})}, {{"axis", int64_t{0}}}),
            "(i64[?,6], i64[?,6])");
  // An empty axis has nothing to give, whatever k is.
  EXPECT_EQ(Inferred(p, {T(kF32, {2, 0}), T(kI64, {1})}), "(f32[2,0], i64[2,0])");
}

TEST(SelectionInferTest, TopKBadOperandsAndAttributes) {
  const PrimId p = PrimId::kTopK;
  ExpectError(InferOp(p, {T(kF32, {3, 4}), Scalar(-1)}), "topk: input 1 (k) must be >= 0, got -1");
  ExpectError(InferOp(p, {T(kF32, {3, 4}), Scalar(5)}),
              "topk: input 1 (k) 5 is larger than dim 1 of input 0, f32[3,4], 4");
  ExpectError(InferOp(p, {T(kF32, {3, 4}), Scalar(4)}, {{"axis", int64_t{0}}}),
              "is larger than dim 0 of input 0, f32[3,4], 3");
  ExpectError(InferOp(p, {T(kF32, {3, 4}), Scalar(1)}, {{"axis", int64_t{2}}}),
              "attribute 'axis' of topk on f32[3,4]");
  ExpectError(InferOp(p, {T(kF32, {}), Scalar(1)}), "attribute 'axis' of topk on f32[]");
  ExpectError(InferOp(p, {T(kBool, {3}), Scalar(1)}), "input 0 must be");
  ExpectError(InferOp(p, {T(kF32, {3}), T(kF32, {})}),
              "input 1 (k) must be an i32 or i64 scalar (rank 0 or shape [1]), got f32[]");
  ExpectError(InferOp(p, {T(kF32, {3}), T(kI64, {2})}), "got i64[2]");
}

TEST(SelectionInferTest, NonZeroCountIsUnknownUnlessEmpty) {
  const PrimId p = PrimId::kNonZero;
  EXPECT_EQ(Inferred(p, {T(kBool, {2, 3})}), "i64[2,?]");
  EXPECT_EQ(Inferred(p, {T(kF32, {kBatch, 3, 4})}), "i64[3,?]");
  EXPECT_EQ(Inferred(p, {T(kI32, {})}), "i64[0,?]");  // ONNX: [0, N] for a scalar
  EXPECT_EQ(Inferred(p, {T(kF64, {4, 0})}), "i64[2,0]");
}

// ----- Kernels ---------------------------------------------------------------------------
// The naive topk: k rounds, each taking the best element not yet taken (the
// first of equal ones; a NaN beats every number). Values as doubles, then the
// indices, each in the output's row-major order.
struct TopKResult {
  std::vector<double> values, indices;
  Shape shape;
};
bool Beats(double a, double b, bool largest) {
  if (std::isnan(a) || std::isnan(b)) return largest ? std::isnan(a) && !std::isnan(b)
                                                     : std::isnan(b) && !std::isnan(a);
  return largest ? a > b : a < b;
}
TopKResult NaiveTopK(const Tensor& x, int axis, int64_t k, bool largest) {
  const std::vector<double> v = ToDoubles(x);
  TopKResult r;
  r.shape = x.shape();
  r.shape[axis] = k;
  const int64_t n = NumElementsOf(r.shape);
  for (int64_t o = 0; o < n; ++o) {
    const Shape c = Unravel(r.shape, o);
    auto at = [&](int64_t j) {
      Shape s = c;
      s[axis] = j;
      return v[Ravel(x.shape(), s)];
    };
    std::vector<bool> taken(x.shape()[axis], false);
    int64_t best = -1;
    for (int64_t round = 0; round <= c[axis]; ++round) {
      best = -1;
      for (int64_t j = 0; j < x.shape()[axis]; ++j) {
        if (!taken[j] && (best < 0 || Beats(at(j), at(best), largest))) best = j;
      }
      taken[best] = true;
    }
    r.values.push_back(at(best));
    r.indices.push_back(static_cast<double>(best));
  }
  return r;
}

void ExpectTopK(const absl::StatusOr<Value>& got, DType dtype, const TopKResult& want) {
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->is_tuple() && got->tuple().size() == 2) << got->TypeString();
  ExpectTensorNear(got->tuple()[0], dtype, want.shape, want.values, kExact);
  ExpectTensorNear(got->tuple()[1], kI64, want.shape, want.indices, kExact);
}

TEST(SelectionKernelTest, TopKMatchesTheNaiveReference) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> small(-3, 3);
  // Small integers: many ties, broken by ascending index.
  for (DType dtype : {kF64, kF32, kI32, kI64}) {
    std::vector<double> v(60);
    for (double& e : v) e = small(rng);
    const Tensor x = MakeTensor(dtype, {3, 5, 4}, v);
    for (int axis = 0; axis < 3; ++axis) {
      for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{2}, x.shape()[axis]}) {
        for (bool largest : {true, false}) {
          SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " axis ", axis, " k ", k, " largest ",
                                    largest));
          const AttrMap attrs = TopKAttrs(axis - 3 * (k % 2), largest);  // negative axes too
          ExpectTopK(RunCpuKernel(PrimId::kTopK, {Value(x), ScalarI64(k)}, attrs), dtype,
                     NaiveTopK(x, axis, k, largest));
        }
      }
    }
  }
}

// The ONNX operator documentation's examples (onnx/backend/test/case/node/topk.py).
TEST(SelectionKernelTest, TopKOnnxExamplesAndTies) {
  const Value x(MakeTensor(kF32, {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  const Value k3(MakeTensor(kI64, {1}, {3}));
  absl::StatusOr<Value> r = RunCpuKernel(PrimId::kTopK, {x, k3}, TopKAttrs(1, true));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectTensorNear(r->tuple()[0], kF32, {3, 3}, {3, 2, 1, 7, 6, 5, 11, 10, 9}, kExact);
  ExpectTensorNear(r->tuple()[1], kI64, {3, 3}, {3, 2, 1, 3, 2, 1, 3, 2, 1}, kExact);
  const Value y(MakeTensor(kF32, {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 11, 10, 9, 8}));
  r = RunCpuKernel(PrimId::kTopK, {y, k3}, TopKAttrs(1, false));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectTensorNear(r->tuple()[0], kF32, {3, 3}, {0, 1, 2, 4, 5, 6, 8, 9, 10}, kExact);
  ExpectTensorNear(r->tuple()[1], kI64, {3, 3}, {0, 1, 2, 0, 1, 2, 3, 2, 1}, kExact);
  // Equal values: the lower index first, whether largest or smallest.
  const Value t(MakeTensor(kF64, {6}, {1, 3, 3, 2, 3, 1}));
  r = RunCpuKernel(PrimId::kTopK, {t, ScalarI64(4)});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectTensorNear(r->tuple()[0], kF64, {4}, {3, 3, 3, 2}, kExact);
  ExpectTensorNear(r->tuple()[1], kI64, {4}, {1, 2, 4, 3}, kExact);
  r = RunCpuKernel(PrimId::kTopK, {t, ScalarI64(3)}, TopKAttrs(0, false));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectTensorNear(r->tuple()[1], kI64, {3}, {0, 5, 3}, kExact);
}

// A NaN sorts above every number (NumPy's order): first when largest, last when
// smallest, NaNs among themselves by index.
TEST(SelectionKernelTest, TopKNaNIsLargest) {
  const Value x(MakeTensor(kF64, {5}, {1, kNaN, 3, kNaN, -kInf}));
  absl::StatusOr<Value> r = RunCpuKernel(PrimId::kTopK, {x, ScalarI64(3)});
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<double> v = ToDoubles(r->tuple()[0].tensor());
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1])) << v[0] << " " << v[1];
  EXPECT_EQ(v[2], 3);
  ExpectTensorNear(r->tuple()[1], kI64, {3}, {1, 3, 2}, kExact);
  r = RunCpuKernel(PrimId::kTopK, {x, ScalarI64(4)}, TopKAttrs(0, false));
  ASSERT_TRUE(r.ok()) << r.status();
  v = ToDoubles(r->tuple()[0].tensor());
  EXPECT_EQ(v[0], -kInf);
  EXPECT_TRUE(std::isnan(v[3]));
  ExpectTensorNear(r->tuple()[1], kI64, {4}, {4, 0, 2, 1}, kExact);
}

TEST(SelectionKernelTest, TopKBadKIsAStatus) {
  const Value x(MakeTensor(kF32, {3, 4}, std::vector<double>(12, 0.0)));
  ExpectRunError(PrimId::kTopK, {x, ScalarI64(-1)}, {}, "topk: input 1 (k) must be >= 0, got -1");
  ExpectRunError(PrimId::kTopK, {x, I64({1}, {5})}, {},
                 "topk: input 1 (k) 5 is larger than dim 1 of input 0, f32[3,4], 4");
  ExpectRunError(PrimId::kTopK, {x, ScalarI64(1)}, {{"axis", int64_t{-3}}},
                 "attribute 'axis' of topk on f32[3,4]");
  ExpectRunError(PrimId::kTopK, {x, F64({1}, {1})}, {},
                 "input 1 (k) must be an i32 or i64 scalar (rank 0 or shape [1]), got f64[1]");
  ExpectRunError(PrimId::kTopK, {Value(MakeTensor(kBool, {2}, {1, 0})), ScalarI64(1)}, {},
                 "input 0 must be");
}

// nonzero against the definition: the coordinates of each nonzero element, in
// row-major order, one row per dim.
TEST(SelectionKernelTest, NonZeroMatchesTheDefinition) {
  ExpectTensorNear(RunCpuKernel(PrimId::kNonZero, {Value(MakeTensor(kBool, {2, 2}, {1, 0, 1, 1}))}),
                   kI64, {2, 3}, {0, 1, 1, 0, 0, 1}, kExact);
  std::mt19937_64 rng(3);
  for (DType dtype : {kF64, kF32, kI32, kI64, kBool}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor x = RandomTensor(dtype, {3, 2, 4}, rng, -1, 2);
    const std::vector<double> v = ToDoubles(x);
    std::vector<Shape> hits;
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      if (v[i] != 0) hits.push_back(Unravel(x.shape(), i));
    }
    const int64_t n = static_cast<int64_t>(hits.size());
    std::vector<double> want(3 * n);
    for (int d = 0; d < 3; ++d) {
      for (int64_t j = 0; j < n; ++j) want[d * n + j] = static_cast<double>(hits[j][d]);
    }
    ExpectTensorNear(RunCpuKernel(PrimId::kNonZero, {Value(x)}), kI64, {3, n}, want, kExact);
  }
  // NaN is nonzero; a scalar gives [0, 1] or [0, 0]; an empty tensor [rank, 0].
  ExpectTensorNear(RunCpuKernel(PrimId::kNonZero, {F64({3}, {0, kNaN, -0.0})}), kI64, {1, 1}, {1},
                   kExact);
  ExpectTensorNear(RunCpuKernel(PrimId::kNonZero, {Value(MakeTensor(kF32, {}, {5}))}), kI64,
                   {0, 1}, {}, kExact);
  ExpectTensorNear(RunCpuKernel(PrimId::kNonZero, {Value(MakeTensor(kI32, {}, {0}))}), kI64,
                   {0, 0}, {}, kExact);
  ExpectTensorNear(RunCpuKernel(PrimId::kNonZero, {F64({2, 0}, {})}), kI64, {2, 0}, {}, kExact);
}

// ----- Gradients ---------------------------------------------------------------------------
// topk and topk(.)[0]^2 checked in float64 against central differences to the
// second order, reverse mode and (at order 1) Jvp; k is a constant. Random
// values are distinct, so the selection is locally constant.
void CheckTopK(const Shape& shape, Value k, const AttrMap& attrs) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(absl::StrCat("topk seed ", seed));
    std::mt19937_64 rng(seed);
    ExpectOpGradients(PrimId::kTopK, {RandomF64(shape, rng), k}, attrs, seed,
                      {/*power=*/2, /*tuple_size=*/1}, "x0");
  }
}

TEST(SelectionGradTest, TopK) {
  CheckTopK({3, 5}, ScalarI64(2), {});
  CheckTopK({4, 3}, ScalarI64(3), TopKAttrs(0, false));
  CheckTopK({2, 3, 4}, I64({1}, {2}), TopKAttrs(-2, true));
  CheckTopK({6}, I64({1}, {6}), TopKAttrs(0, false));
}

// The rule places dv at the selected positions and zeros elsewhere:
// d sum(topk(x, 2)[0] * w) / dx = w scattered to the selected positions.
TEST(SelectionGradTest, TopKSensitivityLandsOnTheSelected) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", kF64, {2, 3});
  AnfNode* top = b.GetItem(b.Op(PrimId::kTopK, {x, b.Const(ScalarI64(2))}), 0);
  AnfNode* w = b.Const(F64({2, 2}, {10, 20, 30, 40}));
  absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {top, w})}));
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<FuncGraph*> g = GradOperation(/*get_all=*/false)(m, *f);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Value> r = RunGraph(*g, {F64({2, 3}, {0.5, -1, 2, 3, 1, 3})});
  ASSERT_TRUE(r.ok()) << r.status();
  // Row 0: 2 (index 2) then 0.5 (index 0); row 1: the tied 3s, index 0 first.
  ExpectTensorNear(*r, kF64, {2, 3}, {20, 0, 10, 30, 0, 40}, kExact);
}

// unique(x){axis, sorted}: (y, indices, inverse, counts); the distinct count is
// known only for an empty x.
TEST(UniqueInferTest, ShapesAndErrors) {
  EXPECT_EQ(Inferred(PrimId::kUnique, {T(kF32, {2, 3})}), "(f32[?], i64[?], i64[6], i64[?])");
  EXPECT_EQ(Inferred(PrimId::kUnique, {T(kF32, {2, 3, 4})}, {{"axis", Ints{-2}}}),
            "(f32[2,?,4], i64[?], i64[3], i64[?])");
  EXPECT_EQ(Inferred(PrimId::kUnique, {T(DType::kInt64, {0, 3})}), "(i64[0], i64[0], i64[0], i64[0])");
  EXPECT_EQ(Inferred(PrimId::kUnique, {T(kF32, {kU, 3})}), "(f32[?], i64[?], i64[?], i64[?])");
  ExpectError(InferOp(PrimId::kUnique, {T(kF32, {2, 3})}, {{"axis", Ints{2}}}), "axis 2 is out of range");
  ExpectError(InferOp(PrimId::kUnique, {T(kF32, {2, 3})}, {{"axis", Ints{0, 1}}}), "empty or one axis");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
