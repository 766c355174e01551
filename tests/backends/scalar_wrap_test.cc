// Regression (found by UBSAN running executor_test: "signed integer overflow:
// 21 * 2432902008176640000"): integer scalar arithmetic overflowed in C++, which is
// undefined behaviour, in the kernels, in constant folding, in the inliner's
// partial evaluation and in type inference. It now wraps (two's complement), as
// integer tensors do. Checked here: kernels, inference and constant folding.
#include <cstdint>
#include <limits>

#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/infer.h"
#include "core/passes/optimize.h"
#include "gtest/gtest.h"
#include "ops/registry.h"

namespace kgrad {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

struct Case {
  PrimId op;
  int64_t a, b, want;
};

const Case kCases[] = {
    {PrimId::kScalarAdd, kMax, 1, kMin},
    {PrimId::kScalarSub, kMin, 1, kMax},
    {PrimId::kScalarMul, kMax, 2, -2},
    {PrimId::kScalarMul, 21, 2432902008176640000, -4249290049419214848},  // 21!, wrapped
    {PrimId::kScalarDiv, kMin, -1, kMin},
    {PrimId::kScalarDiv, -7, 2, -3},
};

// f(a, b) = a op b, at run time.
TEST(ScalarWrapTest, KernelsWrap) {
  for (const Case& c : kCases) {
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "f");
    AnfNode* x = b.Param("a", MakeAbstractScalar(DType::kInt64));
    AnfNode* y = b.Param("b", MakeAbstractScalar(DType::kInt64));
    FuncGraph* f = b.Return(b.Op(c.op, {x, y})).value();
    absl::StatusOr<Value> r = RunGraph(f, {Value(Scalar::Int(c.a)), Value(Scalar::Int(c.b))});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->scalar().AsInt(), c.want) << PrimIdName(c.op) << " " << c.a << " " << c.b;
  }
}

// g() = a op b on constants: inference and the optimiser fold it.
TEST(ScalarWrapTest, InferenceAndConstantFoldingWrap) {
  for (const Case& c : kCases) {
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "g");
    FuncGraph* g = b.Return(b.Op(c.op, {b.Int(c.a), b.Int(c.b)})).value();
    absl::StatusOr<AbstractPtr> t = InferGraph(g);
    ASSERT_TRUE(t.ok()) << t.status();
    const AbstractScalar* s = AsScalar(*t);
    ASSERT_NE(s, nullptr) << (*t)->ToString();
    ASSERT_TRUE(s->value().has_value()) << (*t)->ToString();  // constants fold in inference
    EXPECT_EQ(s->value()->AsInt(), c.want) << (*t)->ToString();
    OptimizeOptions oo;
    oo.evaluator = &CpuConstantEvaluator::Get();
    ASSERT_TRUE(Optimize(m, g, oo).ok());
    absl::StatusOr<Value> r = RunGraph(g, {});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->scalar().AsInt(), c.want) << PrimIdName(c.op) << " " << c.a << " " << c.b;
  }
}

}  // namespace
}  // namespace kgrad
