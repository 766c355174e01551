// The run-time axes primitives (ops/dynamic_axes_ops.cc): inference with static,
// symbolic and unknown shapes and axes, the CPU kernels against naive references,
// the run-time errors, and the gradient rules (float64 central differences,
// reverse mode and Jvp, to the second order), also with axes that only the run
// knows.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/abstract.h"
#include "core/builder.h"
#include "core/dim_symbol.h"
#include "core/infer.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/grad_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

const int64_t kBatch = DimSymbol("batch");
const PrimId kUnsqueeze = PrimId::kDynamicUnsqueeze;
const PrimId kSqueeze = PrimId::kDynamicSqueeze;
const PrimId kSum = PrimId::kDynamicReduceSum;

// An i64[n] abstract with shape value `v` (kUnknownValue entries allowed).
AbstractPtr Val(Shape v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return MakeAbstractShapeValue(kI64, {n}, std::move(v));
}

AttrMap SumAttrs(bool keepdims, bool noop = false) {
  return {{"keepdims", keepdims}, {"noop_with_empty_axes", noop}};
}

// ----- Inference ---------------------------------------------------------------------------
TEST(DynamicAxesInferTest, UnsqueezeKnownAndUnknownAxes) {
  EXPECT_EQ(Inferred(kUnsqueeze, {T(kF32, {2, 3}), Val({0, 3})}), "f32[1,2,3,1]");
  EXPECT_EQ(Inferred(kUnsqueeze, {T(kF32, {2, 3}), Val({-1, 1})}), "f32[2,1,3,1]");
  EXPECT_EQ(Inferred(kUnsqueeze, {T(kF32, {kBatch, kU}), Val({1})}), "f32[batch,1,?]");
  // Axes without a value (or with an entry unknown): the rank only, unless
  // every dim is 1.
  EXPECT_EQ(Inferred(kUnsqueeze, {T(kF32, {kBatch, 3}), T(kI32, {2})}), "f32[?,?,?,?]");
  EXPECT_EQ(Inferred(kUnsqueeze, {T(kF32, {2, 3}), Val({0, kUnknownValue})}), "f32[?,?,?,?]");
  EXPECT_EQ(Inferred(kUnsqueeze, {T(kF32, {}), T(kI64, {2})}), "f32[1,1]");
  // A shape value passes: Shape -> Gather -> Unsqueeze chains keep their dims.
  EXPECT_EQ(Inferred(kUnsqueeze, {MakeAbstractShapeValue(kI64, {}, {kBatch}), Val({0})}),
            "i64[1]=[batch]");
  ExpectError(InferOp(kUnsqueeze, {T(kF32, {2, 3}), Val({3, 4})}),
              "dynamic_unsqueeze: axis 4 (entry 1 of input 1, axes [3,4]) is out of range "
              "[-4, 4) for the output's rank 4");
  ExpectError(InferOp(kUnsqueeze, {T(kF32, {2}), Val({0, -3})}), "axis -3 is repeated");
  ExpectError(InferOp(kUnsqueeze, {T(kF32, {2}), T(kI64, {kU})}), "must be known statically");
  ExpectError(InferOp(kUnsqueeze, {T(kF32, {2}), T(kF32, {1})}),
              "input 1 (axes) must be an i32 or i64 tensor of rank 1, got f32[1]");
  ExpectError(InferOp(kUnsqueeze, {T(kF32, Shape(15, 1)), Val({0, 1})}), "more than 16");
}

TEST(DynamicAxesInferTest, SqueezeKnownAndUnknownAxes) {
  EXPECT_EQ(Inferred(kSqueeze, {T(kF32, {2, 1, kBatch, 1}), Val({1, -1})}), "f32[2,batch]");
  // A symbol or unknown dim may be 1: the kernel checks.
  EXPECT_EQ(Inferred(kSqueeze, {T(kF32, {2, 1, kBatch, 1}), Val({2})}), "f32[2,1,1]");
  EXPECT_EQ(Inferred(kSqueeze, {T(kF32, {2, 1, kBatch, 1}), T(kI64, {1})}), "f32[?,?,?]");
  EXPECT_EQ(Inferred(kSqueeze, {T(kF32, {2, 1, 1}), Val({1, kUnknownValue})}), "f32[?]");
  EXPECT_EQ(Inferred(kSqueeze, {MakeAbstractShapeValue(kI64, {1}, {kBatch}), Val({0})}),
            "i64[]=batch");
  EXPECT_EQ(Inferred(kSqueeze, {T(kF32, {2, 3}), Val({})}), "f32[2,3]");
  ExpectError(InferOp(kSqueeze, {T(kF32, {2, 1, 3}), Val({0})}),
              "dynamic_squeeze: dim 0 of input 0, f32[2,1,3], has size 2, not 1");
  ExpectError(InferOp(kSqueeze, {T(kF32, {1, 1}), Val({0, 1, 0})}), "has more entries than");
  ExpectError(InferOp(kSqueeze, {T(kF32, {1, 1}), Val({2})}), "out of range [-2, 2)");
  ExpectError(InferOp(kSqueeze, {T(kF32, {1, 1}), Val({1, -1})}), "repeated");
}

TEST(DynamicAxesInferTest, ReduceSumKeepdimsEmptyAxesAndNoop) {
  const AbstractPtr x = T(kF32, {2, 3, kBatch});
  EXPECT_EQ(Inferred(kSum, {x, Val({1})}, SumAttrs(true)), "f32[2,1,batch]");
  EXPECT_EQ(Inferred(kSum, {x, Val({1})}, SumAttrs(false)), "f32[2,batch]");
  EXPECT_EQ(Inferred(kSum, {x, Val({-1, 0})}, SumAttrs(false)), "f32[3]");
  EXPECT_EQ(Inferred(kSum, {x, Val({})}, SumAttrs(true)), "f32[1,1,1]");
  EXPECT_EQ(Inferred(kSum, {x, Val({})}, SumAttrs(false)), "f32[]");
  EXPECT_EQ(Inferred(kSum, {x, Val({})}, SumAttrs(false, true)), "f32[2,3,batch]");
  EXPECT_EQ(Inferred(kSum, {x, Val({})}, SumAttrs(true, true)), "f32[2,3,batch]");
  EXPECT_EQ(Inferred(kSum, {T(kI32, {4}), Val({0})}), "i32[1]");  // keepdims by default
  // Unknown axes: with keepdims each dim is x's or 1 (so 1 where x's is, and
  // where a known axis is); without, the rank only. An unknown length needs
  // keepdims.
  const AbstractPtr y = T(kF32, {2, 1, 3});
  EXPECT_EQ(Inferred(kSum, {y, T(kI64, {1})}, SumAttrs(true)), "f32[?,1,?]");
  EXPECT_EQ(Inferred(kSum, {y, Val({0, kUnknownValue})}, SumAttrs(true)), "f32[1,1,?]");
  EXPECT_EQ(Inferred(kSum, {y, T(kI64, {1})}, SumAttrs(false)), "f32[?,?]");
  EXPECT_EQ(Inferred(kSum, {y, T(kI64, {kU})}, SumAttrs(true, true)), "f32[?,1,?]");
  ExpectError(InferOp(kSum, {y, T(kI64, {kU})}, SumAttrs(false)),
              "dynamic_reduce_sum: without keepdims the length of input 1 (axes)");
  ExpectError(InferOp(kSum, {y, Val({3})}), "axis 3 (entry 0 of input 1, axes [3]) is out of "
                                            "range [-3, 3) for input 0, f32[2,1,3]");
  ExpectError(InferOp(kSum, {y, Val({0, -3})}), "axis -3 is repeated");
  ExpectError(InferOp(kSum, {T(kBool, {2}), Val({0})}), "input 0 must be");
}

// ----- Kernels ---------------------------------------------------------------------------
Tensor Iota(DType dtype, Shape shape) {
  std::vector<double> v;
  for (int64_t i = 0; i < NumElementsOf(shape); ++i) v.push_back(static_cast<double>(i));
  return MakeTensor(dtype, shape, v);
}

auto Exact = [](size_t) { return 0.0; };

TEST(DynamicAxesKernelTest, UnsqueezeAndSqueezeKeepTheElements) {
  const Value x(Iota(kF32, {2, 3}));
  const std::vector<double> iota = ToDoubles(x.tensor());
  ExpectTensorNear(RunCpuKernel(kUnsqueeze, {x, Value(MakeTensor(kI32, {2}, {-1, 0}))}), kF32,
                   {1, 2, 3, 1}, iota, Exact);
  ExpectTensorNear(RunCpuKernel(kUnsqueeze, {x, I64({1}, {1})}), kF32, {2, 1, 3}, iota, Exact);
  ExpectTensorNear(RunCpuKernel(kUnsqueeze, {x, I64({0}, {})}), kF32, {2, 3}, iota, Exact);
  const Value y(Iota(kF64, {1, 3, 1, 1}));
  ExpectTensorNear(RunCpuKernel(kSqueeze, {y, I64({2}, {0, -2})}), kF64, {3, 1}, {0, 1, 2},
                   Exact);
  ExpectTensorNear(RunCpuKernel(kSqueeze, {y, I64({3}, {3, 2, 0})}), kF64, {3}, {0, 1, 2}, Exact);
}

// ONNX ReduceSum-13 written from its definition: each element of x added into the
// output element at its coordinates with the reduced ones set to 0 (kept) or
// dropped; empty axes sum everything, or nothing with noop.
std::vector<double> NaiveReduceSum(const Shape& shape, const std::vector<double>& x, Ints axes,
                                   bool keepdims, bool noop, Shape* out_shape) {
  const int rank = static_cast<int>(shape.size());
  if (axes.empty() && noop) {
    *out_shape = shape;
    return x;
  }
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) reduced[a < 0 ? a + rank : a] = true;
  out_shape->clear();
  for (int d = 0; d < rank; ++d) {
    if (!reduced[d]) out_shape->push_back(shape[d]);
    else if (keepdims) out_shape->push_back(1);
  }
  std::vector<double> out(NumElementsOf(*out_shape), 0.0);
  for (int64_t i = 0; i < NumElementsOf(shape); ++i) {
    const Shape at = Unravel(shape, i);
    Shape to;
    for (int d = 0; d < rank; ++d) {
      if (!reduced[d]) to.push_back(at[d]);
      else if (keepdims) to.push_back(0);
    }
    out[Ravel(*out_shape, to)] += x[i];
  }
  return out;
}

TEST(DynamicAxesKernelTest, ReduceSumMatchesTheOnnxReference) {
  std::mt19937_64 rng(7);
  const Shape shape = {2, 3, 4};
  const Value x = RandomF64(shape, rng);
  const std::vector<double> xs = ToDoubles(x.tensor());
  for (const Ints& axes : std::vector<Ints>{{}, {1}, {0, 2}, {-1}, {2, -3, 1}}) {
    for (bool keepdims : {true, false}) {
      for (bool noop : {false, true}) {
        SCOPED_TRACE(absl::StrCat("axes [", absl::StrJoin(axes, ","), "] keepdims ", keepdims,
                                  " noop ", noop));
        Shape out;
        const std::vector<double> want = NaiveReduceSum(shape, xs, axes, keepdims, noop, &out);
        Tensor a = MakeTensor(kI64, {static_cast<int64_t>(axes.size())},
                              std::vector<double>(axes.begin(), axes.end()));
        ExpectTensorNear(RunCpuKernel(kSum, {x, Value(a)}, SumAttrs(keepdims, noop)), kF64, out,
                         want, [](size_t) { return 1e-12; });
      }
    }
  }
  // Integers (i32 axes too), and a scalar x.
  ExpectTensorNear(RunCpuKernel(kSum, {Value(Iota(kI32, {2, 3})),
                                       Value(MakeTensor(kI32, {1}, {0}))}, SumAttrs(false)),
                   kI32, {3}, {3, 5, 7}, Exact);
  ExpectTensorNear(RunCpuKernel(kSum, {F64({}, {2.5}), I64({0}, {})}, SumAttrs(false)), kF64, {},
                   {2.5}, Exact);
}

// ----- Run-time errors --------------------------------------------------------------------
TEST(DynamicAxesKernelTest, BadAxesAreStatuses) {
  const Value x(Iota(kF32, {2, 1}));
  ExpectRunError(kUnsqueeze, {x, I64({1}, {3})}, {},
                 "dynamic_unsqueeze: axis 3 (entry 0 of input 1, axes [3]) is out of range "
                 "[-3, 3) for the output's rank 3");
  ExpectRunError(kUnsqueeze, {x, I64({2}, {2, -2})}, {}, "axis -2 is repeated");
  ExpectRunError(kUnsqueeze, {x, F64({1}, {0})}, {},
                 "input 1 (axes) must be an i32 or i64 tensor of rank 1, got f64[1]");
  ExpectRunError(kSqueeze, {x, I64({1}, {0})}, {},
                 "dynamic_squeeze: dim 0 of input 0, f32[2,1], has size 2, not 1");
  ExpectRunError(kSqueeze, {x, I64({1}, {-3})}, {}, "out of range [-2, 2)");
  ExpectRunError(kSqueeze, {x, I64({3}, {1, 1, 1})}, {}, "has more entries than");
  ExpectRunError(kSum, {x, I64({1}, {2})}, {}, "dynamic_reduce_sum: axis 2");
  ExpectRunError(kSum, {x, I64({2}, {0, 0})}, {}, "axis 0 is repeated");
  ExpectRunError(kSum, {x, I64({1, 1}, {0})}, {}, "of rank 1, got i64[1,1]");
  ExpectRunError(kSum, {Value(MakeTensor(kBool, {2}, {1, 0})), I64({1}, {0})}, {},
                 "input 0 must be");
}

// ----- Gradients ---------------------------------------------------------------------------
// P and P^2 checked in float64 against central differences to the second order,
// reverse mode and (at order 1) Jvp; the axes are constants of the checked graph.
void CheckAxesOp(PrimId id, Shape x, Value axes, AttrMap attrs = {}) {
  ExpectDynamicOpGradients(id, {x}, {axes}, attrs);
}

TEST(DynamicAxesGradTest, UnsqueezeAndSqueeze) {
  CheckAxesOp(kUnsqueeze, {2, 3}, I64({2}, {0, -1}));
  CheckAxesOp(kUnsqueeze, {}, I64({1}, {0}));
  CheckAxesOp(kSqueeze, {2, 1, 3, 1}, I64({2}, {1, -1}));
}

TEST(DynamicAxesGradTest, ReduceSumEveryForm) {
  CheckAxesOp(kSum, {2, 3, 4}, I64({1}, {1}), SumAttrs(true));
  CheckAxesOp(kSum, {2, 3, 4}, I64({1}, {1}), SumAttrs(false));
  CheckAxesOp(kSum, {2, 3, 4}, I64({2}, {-1, 0}), SumAttrs(false));
  CheckAxesOp(kSum, {2, 3}, I64({0}, {}), SumAttrs(false));        // all: rank 0
  CheckAxesOp(kSum, {2, 3}, I64({0}, {}), SumAttrs(true));         // all, kept
  CheckAxesOp(kSum, {2, 3}, I64({0}, {}), SumAttrs(false, true));  // the identity
}

// f(x, axes) = sum(sin(dynamic_reduce_sum(x, axes){keepdims 0}) * w) for x:
// f64[2,3,4] and axes an i64[1] parameter: inference knows the rank only, the
// gradient graph unsqueezes dy at run time, and one graph serves every axis.
TEST(DynamicAxesGradTest, OneGradientGraphForEveryAxis) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", kF64, {2, 3, 4});
  AnfNode* axes = b.Param("axes", kI64, {1});
  CNode* s = b.Op(kSum, {x, axes}, SumAttrs(false));
  CNode* w = b.Op(PrimId::kMul, {b.Op(PrimId::kSin, {s}), b.Const(F64({}, {3.0}))});
  absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kReduceSum, {w}));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(InferGraph(*f).ok());
  EXPECT_EQ(s->abstract()->ToString(), "f64[?,?]");
  absl::StatusOr<FuncGraph*> g = GradOperation()(m, *f);
  ASSERT_TRUE(g.ok()) << g.status();
  const Shape shape = {2, 3, 4};
  std::mt19937_64 rng(3);
  const Value xv = RandomF64(shape, rng);
  const std::vector<double> xs = ToDoubles(xv.tensor());
  for (int64_t axis : {1, -3, 2}) {
    SCOPED_TRACE(absl::StrCat("axis ", axis));
    // df/dx_i = 3 cos(s_j), j: x_i's coordinates without the axis.
    Shape out;
    const std::vector<double> sums = NaiveReduceSum(shape, xs, {axis}, true, false, &out);
    std::vector<double> want;
    for (int64_t i = 0; i < NumElementsOf(shape); ++i) {
      Shape at = Unravel(shape, i);
      at[axis < 0 ? axis + 3 : axis] = 0;
      want.push_back(3.0 * std::cos(sums[Ravel(out, at)]));
    }
    ExpectTensorNear(RunGraph(*g, {xv, I64({1}, {static_cast<double>(axis)})}), kF64, shape, want,
                     [](size_t) { return 1e-12; });
  }
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
