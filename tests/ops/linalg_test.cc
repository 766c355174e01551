// Inference of the linalg family: matmul and einsum.
#include <string>
#include <vector>

#include "core/primitive.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

AttrMap Eq(const std::string& equation) { return {{"equation", equation}}; }

// ----- matmul ---------------------------------------------------------------------------
TEST(MatMulInferTest, PlainProductKeepsTheDType) {
  EXPECT_EQ(Inferred(PrimId::kMatMul, {T(kF32, {2, 3}), T(kF32, {3, 4})}), TypeOf(kF32, {2, 4}));
  EXPECT_EQ(Inferred(PrimId::kMatMul, {T(kF64, {5, 1}), T(kF64, {1, 7})}), TypeOf(kF64, {5, 7}));
  EXPECT_EQ(Inferred(PrimId::kMatMul, {T(DType::kInt32, {2, 3}), T(DType::kInt32, {3, 1})}),
            TypeOf(DType::kInt32, {2, 1}));
  EXPECT_EQ(Inferred(PrimId::kMatMul, {T(DType::kInt64, {2, 3}), T(DType::kInt64, {3, 2})}),
            TypeOf(DType::kInt64, {2, 2}));
}

TEST(MatMulInferTest, TransposesSwapTheLastTwoDims) {
  auto a = T(kF32, {3, 2});  // transposed: [2, 3]
  auto b = T(kF32, {4, 3});  // transposed: [3, 4]
  EXPECT_EQ(Inferred(PrimId::kMatMul, {a, T(kF32, {3, 4})}, {{"transpose_a", true}}),
            TypeOf(kF32, {2, 4}));
  EXPECT_EQ(Inferred(PrimId::kMatMul, {T(kF32, {2, 3}), b}, {{"transpose_b", true}}),
            TypeOf(kF32, {2, 4}));
  EXPECT_EQ(Inferred(PrimId::kMatMul, {a, b}, {{"transpose_a", true}, {"transpose_b", true}}),
            TypeOf(kF32, {2, 4}));
}

TEST(MatMulInferTest, BatchDimsBroadcast) {
  EXPECT_EQ(Inferred(PrimId::kMatMul, {T(kF32, {5, 1, 2, 3}), T(kF32, {4, 3, 6})}),
            TypeOf(kF32, {5, 4, 2, 6}));
  EXPECT_EQ(Inferred(PrimId::kMatMul, {T(kF32, {2, 3}), T(kF32, {7, 3, 4})}),
            TypeOf(kF32, {7, 2, 4}));
  EXPECT_EQ(Inferred(PrimId::kMatMul, {T(kF32, {7, 2, 3}), T(kF32, {3, 4})}),
            TypeOf(kF32, {7, 2, 4}));
}

TEST(MatMulInferTest, UnknownDimsPropagate) {
  EXPECT_EQ(Inferred(PrimId::kMatMul, {T(kF32, {kU, 3}), T(kF32, {3, kU})}),
            TypeOf(kF32, {kU, kU}));
  // An unknown inner dim cannot be checked: accepted.
  EXPECT_EQ(Inferred(PrimId::kMatMul, {T(kF32, {2, kU}), T(kF32, {3, 4})}), TypeOf(kF32, {2, 4}));
  EXPECT_EQ(Inferred(PrimId::kMatMul, {T(kF32, {kU, 2, 3}), T(kF32, {5, 3, 4})}),
            TypeOf(kF32, {5, 2, 4}));
  EXPECT_EQ(Inferred(PrimId::kMatMul, {T(kF32, {kU, 2, 3}), T(kF32, {1, 3, 4})}),
            TypeOf(kF32, {kU, 2, 4}));
}

TEST(MatMulInferTest, InnerDimsMustAgree) {
  absl::Status s = InferError(PrimId::kMatMul, {T(kF32, {2, 3}), T(kF32, {4, 5})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("inner dimensions must agree, got 3 and 4"));
  // [2,3] x [5,3] agrees once b is transposed; [2,3]^T x [3,4] does not.
  EXPECT_TRUE(
      InferError(PrimId::kMatMul, {T(kF32, {2, 3}), T(kF32, {5, 3})}, {{"transpose_b", true}})
          .ok());
  s = InferError(PrimId::kMatMul, {T(kF32, {2, 3}), T(kF32, {3, 4})}, {{"transpose_a", true}});
  EXPECT_THAT(s.message(), HasSubstr("got 2 and 3"));
  EXPECT_THAT(s.message(), HasSubstr("transpose_a=1"));
}

TEST(MatMulInferTest, RejectsBadOperands) {
  absl::Status s = InferError(PrimId::kMatMul, {T(kF32, {3}), T(kF32, {3, 4})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input 0 must be a tensor of rank >= 2"));
  s = InferError(PrimId::kMatMul, {T(kF32, {2, 3}), T(kF64, {3, 4})});
  EXPECT_THAT(s.message(), HasSubstr("same dtype, got f32 and f64"));
  s = InferError(PrimId::kMatMul, {T(DType::kBool, {2, 3}), T(DType::kBool, {3, 4})});
  EXPECT_THAT(s.message(), HasSubstr("f32, f64, i32 or i64"));
  s = InferError(PrimId::kMatMul, {T(kF32, {2, 2, 3}), T(kF32, {3, 3, 4})});
  EXPECT_THAT(s.message(), HasSubstr("batch dimensions"));
  EXPECT_THAT(s.message(), HasSubstr("do not broadcast"));
  s = InferError(PrimId::kMatMul, {MakeAbstractScalar(kF32), T(kF32, {3, 4})});
  EXPECT_THAT(s.message(), HasSubstr("input 0 must be a tensor"));
}

TEST(MatMulInferTest, DefinitionFlags) {
  const PrimitiveDef* d = DefaultRegistry().Find(PrimId::kMatMul);
  ASSERT_NE(d, nullptr);
  EXPECT_FALSE(d->linear);  // bilinear
  EXPECT_FALSE(d->zero_gradient);
  EXPECT_NE(d->bprop, nullptr);  // checked in tests/ad/linalg_grad_test
  EXPECT_EQ(d->min_inputs, 2);
  EXPECT_EQ(d->max_inputs, 2);
}

// ----- einsum ----------------------------------------------------------------------------
TEST(EinsumInferTest, ExplicitOutput) {
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {2, 3}), T(kF32, {3, 4})}, Eq("ij,jk->ik")),
            TypeOf(kF32, {2, 4}));
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF64, {2, 3}), T(kF64, {3, 4})}, Eq("ij,jk->ki")),
            TypeOf(kF64, {4, 2}));
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {5, 2, 3}), T(kF32, {5, 3, 4})}, Eq("bij,bjk->bik")),
            TypeOf(kF32, {5, 2, 4}));
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {3}), T(kF32, {4})}, Eq("i,j->ij")),
            TypeOf(kF32, {3, 4}));
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {3, 4})}, Eq("ij->")), TypeOf(kF32, {}));
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {3, 3})}, Eq("ii->i")), TypeOf(kF32, {3}));
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {2, 3}), T(kF32, {3, 4}), T(kF32, {4, 5})},
                     Eq("ij,jk,kl->il")),
            TypeOf(kF32, {2, 5}));
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {}), T(kF32, {4})}, Eq(",i->i")), TypeOf(kF32, {4}));
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {2, 3}), T(kF32, {3, 4})}, Eq(" ij , jk -> ik ")),
            TypeOf(kF32, {2, 4}));
}

TEST(EinsumInferTest, ImplicitOutputIsTheLettersSeenOnceInAsciiOrder) {
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {2, 3}), T(kF32, {3, 4})}, Eq("ij,jk")),
            TypeOf(kF32, {2, 4}));
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {3, 2})}, Eq("ba")), TypeOf(kF32, {2, 3}));
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {3, 3})}, Eq("ii")), TypeOf(kF32, {}));
  // Uppercase sorts before lowercase.
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {2, 5})}, Eq("bA")), TypeOf(kF32, {5, 2}));
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {2, 5}), T(kF32, {5, 2})}, Eq("Ab,bA")),
            TypeOf(kF32, {}));
}

TEST(EinsumInferTest, UnknownDimsTakeTheSizeFromAnotherOperand) {
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {kU, 3}), T(kF32, {kU, 4})}, Eq("ij,jk->ik")),
            TypeOf(kF32, {kU, 4}));
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {kU, 2}), T(kF32, {5, 3})}, Eq("ij,ik->ijk")),
            TypeOf(kF32, {5, 2, 3}));
  EXPECT_EQ(Inferred(PrimId::kEinsum, {T(kF32, {kU, 4})}, Eq("ii->i")), TypeOf(kF32, {4}));
}

TEST(EinsumInferTest, LetterSizesMustAgreeAndOneDoesNotBroadcast) {
  absl::Status s = InferError(PrimId::kEinsum, {T(kF32, {2, 3}), T(kF32, {4, 5})}, Eq("ij,jk->ik"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("subscript 'j' has size 3 in operand 0 but 4 in operand 1"));
  s = InferError(PrimId::kEinsum, {T(kF32, {2, 3}), T(kF32, {1, 3})}, Eq("ij,ij->ij"));
  EXPECT_THAT(s.message(), HasSubstr("subscript 'i' has size 2"));
  s = InferError(PrimId::kEinsum, {T(kF32, {2, 3})}, Eq("ii->i"));
  EXPECT_THAT(s.message(), HasSubstr("subscript 'i' has size 2 in operand 0 but 3 in operand 0"));
}

TEST(EinsumInferTest, RejectsBadEquations) {
  auto two = std::vector<AbstractPtr>{T(kF32, {2, 3}), T(kF32, {3, 4})};
  struct Case {
    const char* equation;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"...ij,jk->ik", "ellipsis '...' is unsupported"},
           {"ij,jk->iki", "output subscript 'i' is repeated"},
           {"ij,jk->iz", "output subscript 'z' does not appear in any input"},
           {"ij->ij", "names 1 operands, got 2 inputs"},
           {"ij,jk,kl->il", "names 3 operands, got 2 inputs"},
           {"i1,jk->ik", "'1' is not a letter"},
           {"ij,jk->i-k", "must contain letters only"},
           {"ijk,jk->ik", "operand 0 has 3 subscripts 'ijk' but is f32[2,3]"},
       }) {
    absl::Status s = InferError(PrimId::kEinsum, two, Eq(c.equation));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.equation;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.equation;
    EXPECT_THAT(s.message(), HasSubstr(c.equation)) << c.equation;
  }
}

TEST(EinsumInferTest, RejectsBadOperands) {
  absl::Status s = InferError(PrimId::kEinsum, {T(DType::kInt32, {2, 3})}, Eq("ij->ji"));
  EXPECT_THAT(s.message(), HasSubstr("input 0 must be a floating-point tensor"));
  s = InferError(PrimId::kEinsum, {T(kF32, {2, 3}), T(kF64, {3, 4})}, Eq("ij,jk->ik"));
  EXPECT_THAT(s.message(), HasSubstr("same dtype, got f32 and f64"));
  s = InferError(PrimId::kEinsum, {T(kF32, {2, 3})}, {});
  EXPECT_THAT(s.message(), HasSubstr("needs attribute 'equation'"));
}

TEST(EinsumInferTest, OperandCountIsOneToEight) {
  PrimitivePtr p = DefaultRegistry().Make(PrimId::kEinsum, Eq("i,i,i,i,i,i,i,i,i->i")).value();
  std::vector<AbstractPtr> nine(9, T(kF32, {3}));
  absl::StatusOr<AbstractPtr> r = p->def().infer(InferCall{*p, nine});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("1 to 8 operands, got 9"));
  std::vector<AbstractPtr> eight(8, T(kF32, {3}));
  EXPECT_EQ(Inferred(PrimId::kEinsum, eight, Eq("i,i,i,i,i,i,i,i->i")), TypeOf(kF32, {3}));
  EXPECT_EQ(p->def().max_inputs, 8);
  EXPECT_EQ(p->def().min_inputs, 1);
  EXPECT_FALSE(p->def().linear);
  EXPECT_FALSE(p->def().zero_gradient);
}

// det(a [..., n, n]) -> [...]; matrix_inverse keeps the shape; unknown dims stay.
TEST(DetInferTest, ShapesAndErrors) {
  EXPECT_EQ(Inferred(PrimId::kDet, {T(kF32, {2, 3, 4, 4})}), TypeOf(kF32, {2, 3}));
  EXPECT_EQ(Inferred(PrimId::kDet, {T(kF64, {5, 5})}), TypeOf(kF64, {}));
  EXPECT_EQ(Inferred(PrimId::kDet, {T(kF64, {kU, kU, 3})}), TypeOf(kF64, {kU}));
  EXPECT_EQ(Inferred(PrimId::kMatrixInverse, {T(kF32, {2, kU, 3})}), TypeOf(kF32, {2, kU, 3}));
  ExpectError(InferOp(PrimId::kDet, {T(kF32, {2, 3})}), "det: input 0 must be square matrices [..., n, n], got f32[2,3]");
  ExpectError(InferOp(PrimId::kDet, {T(kF32, {3})}), "square matrices");
  ExpectError(InferOp(PrimId::kMatrixInverse, {T(DType::kInt32, {2, 2})}), "floating-point");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
