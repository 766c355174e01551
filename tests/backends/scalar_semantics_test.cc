// One semantics for scalar arithmetic (core/scalar_arith.h), whichever part of
// kgrad computes it: the kernels at run time, inference folding constants, the
// constant-folding pass, the inliner's partial evaluation, and hyper_add. The four
// copies that existed disagreed: i32 op bool promoted to i64 in one and to i32 in
// the others, the inliner widened i32 and f32 to i64 and f64, i32 results did not
// wrap at 32 bits, hyper_add overflowed (undefined behaviour), and comparisons of
// i64 went through double (2^53 + 1 == 2^53).
#include <cstdint>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_device.h"
#include "backends/executor.h"
#include "backends/structural_kernels.h"
#include "core/builder.h"
#include "core/infer.h"
#include "core/passes/constant_fold.h"
#include "core/passes/inline.h"
#include "core/scalar_arith.h"
#include "gtest/gtest.h"
#include "ops/registry.h"

namespace kgrad {
namespace {

constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t k2p53 = int64_t{1} << 53;

Scalar I32(int64_t v) { return Scalar::Int(v, DType::kInt32); }
Scalar I64(int64_t v) { return Scalar::Int(v, DType::kInt64); }
Scalar F32(double v) { return Scalar::Float(v, DType::kFloat32); }
Scalar F64(double v) { return Scalar::Float(v, DType::kFloat64); }
Scalar B(bool v) { return Scalar::Bool(v); }

struct Case {
  PrimId op;
  Scalar a, b, want;
};

const Case kCases[] = {
    {PrimId::kScalarAdd, I32(kI32Max), I32(1), I32(kI32Min)},   // wraps at 32 bits
    {PrimId::kScalarSub, I32(kI32Min), I32(1), I32(kI32Max)},
    {PrimId::kScalarMul, I32(65536), I32(65536), I32(0)},
    {PrimId::kScalarDiv, I32(kI32Min), I32(-1), I32(kI32Min)},
    {PrimId::kScalarDiv, I32(-7), I32(2), I32(-3)},              // toward zero
    {PrimId::kScalarAdd, I32(5), B(true), I32(6)},               // bool takes the int type
    {PrimId::kScalarAdd, B(true), B(true), I64(2)},
    {PrimId::kScalarAdd, I32(7), I64(1), I64(8)},
    {PrimId::kScalarAdd, I64(kI64Max), I64(1), I64(kI64Min)},
    {PrimId::kScalarEq, I64(k2p53 + 1), I64(k2p53), B(false)},   // exact, not via double
    {PrimId::kScalarGt, I64(k2p53 + 1), I64(k2p53), B(true)},
    {PrimId::kScalarLt, I32(-1), I64(0), B(true)},
    {PrimId::kScalarAdd, F32(0.1), F32(0.2), F32(static_cast<float>(0.1f + 0.2f))},  // f32 arithmetic
    {PrimId::kScalarAdd, I32(1), F32(0.5), F32(1.5)},
    {PrimId::kScalarAdd, F32(1.0), F64(0.1), F64(1.0 + 0.1)},  // the f64 operand stays f64
    {PrimId::kScalarDiv, F64(1.0), F64(0.0), F64(std::numeric_limits<double>::infinity())},
};

std::string Describe(const Case& c) {
  return absl::StrCat(PrimIdName(c.op), "(", c.a.ToString(), ":", DTypeName(c.a.dtype()), ", ",
                      c.b.ToString(), ":", DTypeName(c.b.dtype()), ")");
}

void ExpectSame(const Scalar& got, const Scalar& want, const std::string& what) {
  EXPECT_EQ(got.dtype(), want.dtype()) << what << ": got " << DTypeName(got.dtype());
  EXPECT_EQ(got, want) << what << ": got " << got.ToString() << ", want " << want.ToString();
}

TEST(ScalarSemanticsTest, TheOneImplementation) {
  for (const Case& c : kCases) {
    absl::StatusOr<Scalar> r = ApplyScalarOp(c.op, c.a, c.b);
    ASSERT_TRUE(r.ok()) << Describe(c) << ": " << r.status();
    ExpectSame(*r, c.want, Describe(c));
  }
  EXPECT_FALSE(ApplyScalarOp(PrimId::kScalarDiv, I32(1), I32(0)).ok());
  EXPECT_FALSE(ApplyScalarOp(PrimId::kAdd, I32(1), I32(0)).ok());
}

TEST(ScalarSemanticsTest, Kernels) {
  for (const Case& c : kCases) {
    Module m(DefaultRegistry());
    GraphBuilder b(&m, "f");
    AnfNode* x = b.Param("a", MakeAbstractScalar(c.a.dtype()));
    AnfNode* y = b.Param("b", MakeAbstractScalar(c.b.dtype()));
    FuncGraph* f = b.Return(b.Op(c.op, {x, y})).value();
    absl::StatusOr<Value> r = RunGraph(f, {Value(c.a), Value(c.b)});
    ASSERT_TRUE(r.ok()) << Describe(c) << ": " << r.status();
    ExpectSame(r->scalar(), c.want, "kernel " + Describe(c));
  }
}

// g() = a op b on constants.
FuncGraph* ConstantGraph(Module* m, const Case& c) {
  GraphBuilder b(m, "g");
  return b.Return(b.Op(c.op, {b.Const(Value(c.a)), b.Const(Value(c.b))})).value();
}

TEST(ScalarSemanticsTest, InferenceFolds) {
  for (const Case& c : kCases) {
    Module m(DefaultRegistry());
    absl::StatusOr<AbstractPtr> t = InferGraph(ConstantGraph(&m, c));
    ASSERT_TRUE(t.ok()) << Describe(c) << ": " << t.status();
    const AbstractScalar* s = AsScalar(*t);
    ASSERT_TRUE(s != nullptr && s->value().has_value()) << (*t)->ToString();
    ExpectSame(*s->value(), c.want, "inference " + Describe(c));
  }
}

TEST(ScalarSemanticsTest, ConstantFolding) {
  for (const Case& c : kCases) {
    Module m(DefaultRegistry());
    FuncGraph* g = ConstantGraph(&m, c);
    ASSERT_TRUE(ConstantFoldPass().Run(m, g).ok());
    const Value* v = ConstantOf(g->output());
    ASSERT_TRUE(v != nullptr && v->is_scalar()) << Describe(c);
    ExpectSame(v->scalar(), c.want, "constant folding " + Describe(c));
  }
}

// main() = id(a op b): the inliner evaluates the scalar argument itself (it used
// to widen i32 and f32 to i64 and f64 there).
TEST(ScalarSemanticsTest, InlinerPartialEvaluation) {
  for (const Case& c : kCases) {
    Module m(DefaultRegistry());
    GraphBuilder ib(&m, "id");
    FuncGraph* id = ib.Return(ib.Param("v")).value();
    GraphBuilder b(&m, "main");
    FuncGraph* g = b.Return(b.Call(id, {b.Op(c.op, {b.Const(Value(c.a)), b.Const(Value(c.b))})})).value();
    m.set_entry(g);
    absl::StatusOr<bool> changed = InlinePass().Run(m, g);
    ASSERT_TRUE(changed.ok()) << changed.status();
    const Value* v = ConstantOf(g->output());
    ASSERT_TRUE(v != nullptr && v->is_scalar()) << Describe(c);
    ExpectSame(v->scalar(), c.want, "inliner " + Describe(c));
  }
}

TEST(ScalarSemanticsTest, HyperAddWraps) {
  for (const Case& c : kCases) {
    if (c.op != PrimId::kScalarAdd) continue;
    absl::StatusOr<Value> r = HyperAdd(Value(c.a), Value(c.b), CpuDevice());
    ASSERT_TRUE(r.ok()) << Describe(c) << ": " << r.status();
    ExpectSame(r->scalar(), c.want, "hyper_add " + Describe(c));
  }
}

// Integers cross between tensors and scalars exactly; doubles saturate into ints.
TEST(ScalarSemanticsTest, ConversionsAreExactOrSaturate) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "t2s");
  AnfNode* t = b.Param("t", MakeAbstractTensor(DType::kInt64, {}));
  FuncGraph* f = b.Return(b.Op(PrimId::kTensorToScalar, {t})).value();
  absl::StatusOr<Value> r = RunGraph(f, {Value(Tensor::FromScalar<int64_t>(k2p53 + 1))});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->scalar().AsInt(), k2p53 + 1);
  EXPECT_EQ(Scalar::FromDouble(DType::kInt32, 1e10).AsInt(), kI32Max);
  EXPECT_EQ(Scalar::FromDouble(DType::kInt64, -1e30).AsInt(), kI64Min);
  EXPECT_EQ(Scalar::FromDouble(DType::kInt64, std::nan("")).AsInt(), 0);
  EXPECT_EQ(Scalar::FromDouble(DType::kInt32, -2.9).AsInt(), -2);
}

}  // namespace
}  // namespace kgrad
