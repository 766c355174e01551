// The structural kernels on values: tuples, switch, partial, envs, hyper_add,
// zeros_like/ones_like and scalar arithmetic.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

Value Key(const char* k) { return Value::String(k); }

TEST(StructuralKernelsTest, Tuples) {
  Value t = *RunCpuKernel(PrimId::kMakeTuple, {I(1), I(2), I(3)});
  EXPECT_EQ(t.ToString(), "(1, 2, 3)");
  EXPECT_EQ(RunCpuKernel(PrimId::kTupleGetItem, {t, I(-1)})->ToString(), "3");
  EXPECT_EQ(RunCpuKernel(PrimId::kTupleSetItem, {t, I(0), I(9)})->ToString(), "(9, 2, 3)");
  absl::StatusOr<Value> bad = RunCpuKernel(PrimId::kTupleGetItem, {t, I(3)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(RunCpuKernel(PrimId::kTupleGetItem, {I(1), I(0)}).status().message(), HasSubstr("must be a tuple"));
}

TEST(StructuralKernelsTest, SwitchOnScalarsAndBoolTensors) {
  EXPECT_EQ(RunCpuKernel(PrimId::kSwitch, {Value(Scalar::Bool(true)), I(1), I(2)})->ToString(), "1");
  EXPECT_EQ(RunCpuKernel(PrimId::kSwitch, {I(0), I(1), I(2)})->ToString(), "2");
  Value c = Value(MakeTensor(DType::kBool, {}, {1}));
  EXPECT_EQ(RunCpuKernel(PrimId::kSwitch, {c, I(1), I(2)})->ToString(), "1");
  absl::StatusOr<Value> bad = RunCpuKernel(PrimId::kSwitch, {Value(MakeTensor(DType::kFloat32, {}, {1})), I(1), I(2)});
  EXPECT_THAT(bad.status().message(), HasSubstr("condition must be a bool scalar"));
}

TEST(StructuralKernelsTest, EnvsAddByKey) {
  Value x = Value(MakeTensor(DType::kFloat64, {2}, {1, 2}));
  Value y = Value(MakeTensor(DType::kFloat64, {2}, {10, 20}));
  Value e1 = *RunCpuKernel(PrimId::kEnvSetItem, {Value::EmptyEnv(), Key("a"), x});
  Value e2 = *RunCpuKernel(PrimId::kEnvSetItem, {Value::EmptyEnv(), Key("a"), y});
  e2 = *RunCpuKernel(PrimId::kEnvSetItem, {e2, Key("b"), y});
  Value sum = *RunCpuKernel(PrimId::kEnvAdd, {e1, e2});
  Value a = *RunCpuKernel(PrimId::kEnvGetItem, {sum, Key("a"), I(0)});
  EXPECT_EQ(ToDoubles(a.tensor()), (std::vector<double>{11, 22}));
  Value b = *RunCpuKernel(PrimId::kEnvGetItem, {sum, Key("b"), I(0)});
  EXPECT_EQ(ToDoubles(b.tensor()), (std::vector<double>{10, 20}));
  EXPECT_EQ(RunCpuKernel(PrimId::kEnvGetItem, {sum, Key("c"), I(7)})->ToString(), "7");
  // The original env is unchanged (envs are persistent).
  EXPECT_EQ(e1.env().size(), 1u);
}

TEST(StructuralKernelsTest, HyperAddAndZerosOverStructures) {
  Value x = Value(MakeTensor(DType::kFloat32, {2}, {1, 2}));
  Value t = Value::Tuple({x, Value(Scalar::Float(0.5)), Value::EmptyEnv()});
  Value z = *RunCpuKernel(PrimId::kZerosLike, {t});
  EXPECT_EQ(z.ToString(), "(f32[2]{0, 0}, 0.0, newenv)");
  Value o = *RunCpuKernel(PrimId::kOnesLike, {Value::Tuple({x, I(3)})});
  EXPECT_EQ(o.ToString(), "(f32[2]{1, 1}, 1)");
  Value s = *RunCpuKernel(PrimId::kHyperAdd, {t, t});
  EXPECT_EQ(s.ToString(), "(f32[2]{2, 4}, 1.0, newenv)");
  EXPECT_THAT(RunCpuKernel(PrimId::kHyperAdd, {t, x}).status().message(), HasSubstr("different structure"));
}

TEST(StructuralKernelsTest, Scalars) {
  EXPECT_EQ(RunCpuKernel(PrimId::kScalarAdd, {I(2), I(3)})->ToString(), "5");
  EXPECT_EQ(RunCpuKernel(PrimId::kScalarSub, {I(2), Value(Scalar::Float(0.5))})->ToString(), "1.5");
  EXPECT_EQ(RunCpuKernel(PrimId::kScalarDiv, {I(7), I(-2)})->ToString(), "-3");
  EXPECT_THAT(RunCpuKernel(PrimId::kScalarDiv, {I(7), I(0)}).status().message(), HasSubstr("division by zero"));
  EXPECT_EQ(RunCpuKernel(PrimId::kScalarLt, {I(2), I(3)})->ToString(), "true");
  EXPECT_EQ(RunCpuKernel(PrimId::kScalarNe, {I(2), I(2)})->ToString(), "false");
  Value t = *RunCpuKernel(PrimId::kScalarToTensor, {I(4)}, {{"dtype", DType::kFloat64}});
  EXPECT_EQ(t.ToString(), "f64[]{4}");
  EXPECT_EQ(RunCpuKernel(PrimId::kTensorToScalar, {t})->ToString(), "4.0");
  EXPECT_THAT(RunCpuKernel(PrimId::kTensorToScalar, {Value(MakeTensor(DType::kFloat32, {2}, {1, 2}))}).status().message(),
              HasSubstr("one element"));
}

TEST(StructuralKernelsTest, PartialAndPlumbing) {
  Value p = *RunCpuKernel(PrimId::kPartial, {Value::Prim(DefaultRegistry().Make(PrimId::kScalarAdd).value()), I(1)});
  EXPECT_TRUE(p.is_partial());
  EXPECT_EQ(p.partial().args.size(), 1u);
  EXPECT_THAT(RunCpuKernel(PrimId::kPartial, {I(1)}).status().message(), HasSubstr("must be a function"));
  EXPECT_EQ(RunCpuKernel(PrimId::kDepend, {I(1), I(2)})->ToString(), "1");
  EXPECT_EQ(RunCpuKernel(PrimId::kStopGradient, {I(5)})->ToString(), "5");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
