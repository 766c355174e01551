// Inference of the structural primitives: tuples, switch, partial, envs,
// gradient plumbing and scalars.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

AbstractPtr I(int64_t v) { return MakeAbstractScalarValue(Scalar::Int(v)); }
AbstractPtr Key(const char* k) { return MakeAbstractString(std::string(k)); }

TEST(StructuralInferTest, Tuples) {
  AbstractPtr t = *InferOp(PrimId::kMakeTuple, {T(DType::kFloat32, {2}), I(3)});
  EXPECT_EQ(t->ToString(), "(f32[2], i64=3)");
  EXPECT_EQ((*InferOp(PrimId::kTupleGetItem, {t, I(0)}))->ToString(), "f32[2]");
  EXPECT_EQ((*InferOp(PrimId::kTupleGetItem, {t, I(-1)}))->ToString(), "i64=3");
  EXPECT_EQ((*InferOp(PrimId::kTupleSetItem, {t, I(1), T(DType::kFloat64, {})}))->ToString(),
            "(f32[2], f64[])");
  absl::StatusOr<AbstractPtr> bad = InferOp(PrimId::kTupleGetItem, {t, I(2)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(bad.status().message(), HasSubstr("index 2 is out of range for a tuple of 2"));
  bad = InferOp(PrimId::kTupleGetItem, {t, MakeAbstractScalar(DType::kInt64)});
  EXPECT_THAT(bad.status().message(), HasSubstr("must be a constant integer"));
  bad = InferOp(PrimId::kTupleGetItem, {T(DType::kFloat32, {2}), I(0)});
  EXPECT_THAT(bad.status().message(), HasSubstr("input 0 must be a tuple"));
}

TEST(StructuralInferTest, SwitchJoinsOrPicks) {
  AbstractPtr a = T(DType::kFloat32, {2, 3});
  AbstractPtr b = T(DType::kFloat32, {2, 4});
  EXPECT_EQ((*InferOp(PrimId::kSwitch, {MakeAbstractScalar(DType::kBool), a, b}))->ToString(), "f32[2,?]");
  EXPECT_EQ((*InferOp(PrimId::kSwitch, {MakeAbstractScalarValue(Scalar::Bool(false)), a, b}))->ToString(),
            "f32[2,4]");
  absl::StatusOr<AbstractPtr> bad =
      InferOp(PrimId::kSwitch, {MakeAbstractScalar(DType::kBool), a, T(DType::kFloat64, {2, 3})});
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("dtypes differ"));
}

TEST(StructuralInferTest, EnvsAndPlumbing) {
  AbstractPtr env = MakeAbstractEnv();
  AbstractPtr x = T(DType::kFloat32, {3});
  EXPECT_EQ((*InferOp(PrimId::kEnvSetItem, {env, Key("k"), x}))->ToString(), "env");
  EXPECT_EQ((*InferOp(PrimId::kEnvGetItem, {env, Key("k"), x}))->ToString(), "f32[3]");
  EXPECT_EQ((*InferOp(PrimId::kEnvAdd, {env, env}))->ToString(), "env");
  EXPECT_THAT(InferOp(PrimId::kEnvSetItem, {x, Key("k"), x}).status().message(), HasSubstr("input 0 must be an env"));
  EXPECT_THAT(InferOp(PrimId::kEnvGetItem, {env, I(1), x}).status().message(), HasSubstr("a string key"));
  AbstractPtr fn = MakeAbstractPrimFunction(DefaultRegistry().Make(PrimId::kScalarAdd).value());
  EXPECT_EQ((*InferOp(PrimId::kZerosLike, {fn}))->ToString(), "env");  // zero of a function
  AbstractPtr t = MakeAbstractTuple({x, MakeAbstractScalarValue(Scalar::Float(2.0))});
  EXPECT_EQ((*InferOp(PrimId::kZerosLike, {t}))->ToString(), "(f32[3], f64)");
  EXPECT_EQ((*InferOp(PrimId::kHyperAdd, {t, t}))->ToString(), "(f32[3], f64)");
  EXPECT_FALSE(InferOp(PrimId::kHyperAdd, {x, T(DType::kFloat32, {3, 1})}).ok());
  EXPECT_EQ((*InferOp(PrimId::kStopGradient, {x}))->ToString(), "f32[3]");
  EXPECT_EQ((*InferOp(PrimId::kDepend, {x, env}))->ToString(), "f32[3]");
  EXPECT_THAT(InferOp(PrimId::kOnesLike, {env}).status().message(), HasSubstr("tensor, scalar, tuple or list"));
}

TEST(StructuralInferTest, ScalarsFoldConstants) {
  EXPECT_EQ((*InferOp(PrimId::kScalarAdd, {I(2), I(5)}))->ToString(), "i64=7");
  EXPECT_EQ((*InferOp(PrimId::kScalarMul, {I(2), MakeAbstractScalarValue(Scalar::Float(1.5))}))->ToString(),
            "f64=3.0");
  EXPECT_EQ((*InferOp(PrimId::kScalarLt, {I(2), MakeAbstractScalar(DType::kInt64)}))->ToString(), "bool");
  EXPECT_EQ((*InferOp(PrimId::kScalarGe, {I(2), I(2)}))->ToString(), "bool=true");
  EXPECT_EQ((*InferOp(PrimId::kScalarDiv, {I(7), I(2)}))->ToString(), "i64=3");
  EXPECT_EQ((*InferOp(PrimId::kScalarToTensor, {I(2)}, {{"dtype", DType::kFloat64}}))->ToString(), "f64[]");
  EXPECT_EQ((*InferOp(PrimId::kTensorToScalar, {T(DType::kInt32, {1, 1})}))->ToString(), "i32");
  EXPECT_THAT(InferOp(PrimId::kTensorToScalar, {T(DType::kInt32, {2})}).status().message(),
              HasSubstr("a tensor with one element"));
  EXPECT_THAT(InferOp(PrimId::kScalarAdd, {T(DType::kInt32, {}), I(1)}).status().message(),
              HasSubstr("input 0 must be a scalar"));
}

TEST(StructuralInferTest, PartialBindsArguments) {
  AbstractPtr add = *InferOp(PrimId::kPartial, {MakeAbstractPrimFunction(DefaultRegistry().Make(PrimId::kScalarAdd).value()), I(1)});
  EXPECT_EQ(add->ToString(), "fn{partial(scalar_add, 1)}");
  EXPECT_THAT(InferOp(PrimId::kPartial, {I(1)}).status().message(), HasSubstr("must be a function"));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad

namespace kgrad {
namespace {

// Every primitive can be differentiated: it has a gradient rule, or its outputs
// carry no gradient. (partial is lowered to a closure before differentiation.)
// The contractions the dots_saveable checkpoint policy keeps (PrimitiveDef::dot).
TEST(RegistryTest, DotsAreTheContractions) {
  for (int i = 0; i < kNumPrimIds; ++i) {
    PrimId id = static_cast<PrimId>(i);
    // tc: a comprehension is a contraction in general (mv, convolution), so the
    // policy keeps its outputs rather than recompute a loop nest.
    bool want = id == PrimId::kMatMul || id == PrimId::kEinsum || id == PrimId::kConv2d ||
                id == PrimId::kConv2dBackpropInput || id == PrimId::kConv2dBackpropFilter ||
                id == PrimId::kTc;
    EXPECT_EQ(DefaultRegistry().Find(id)->dot, want) << PrimIdName(id);
  }
}

TEST(RegistryTest, EveryPrimitiveIsRegisteredAndDifferentiable) {
  for (int i = 0; i < kNumPrimIds; ++i) {
    PrimId id = static_cast<PrimId>(i);
    const PrimitiveDef* d = DefaultRegistry().Find(id);
    ASSERT_NE(d, nullptr) << PrimIdName(id) << " is not registered";
    EXPECT_NE(d->infer, nullptr) << d->name;
    if (id == PrimId::kPartial) continue;
    // Differentiation operators are expanded before anything is differentiated
    // (ad/expand_differentiation.h); they describe their derived function instead.
    if (d->derived_args != nullptr || d->derived_result != nullptr) {
      EXPECT_TRUE(d->derived_args != nullptr && d->derived_result != nullptr) << d->name;
      EXPECT_EQ(d->bprop, nullptr) << d->name;
      continue;
    }
    EXPECT_TRUE(d->zero_gradient || d->bprop != nullptr) << d->name << " has no gradient rule";
  }
}

}  // namespace
}  // namespace kgrad
