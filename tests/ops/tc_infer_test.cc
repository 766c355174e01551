// Inference of `tc` through the registry: the outputs' types (a tuple for
// several outputs, unknown dims kept unknown) and errors naming the block.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

AttrMap Def(const std::string& def) { return {{"def", def}}; }

TEST(TcInferTest, OutputsTakeTheirRanges) {
  EXPECT_EQ(Inferred(PrimId::kTc, {T(kF32, {3, 4}), T(kF32, {4})},
                     Def("def mv(float(M,N) A, float(N) B) -> (C) { C(i) +=! A(i,j) * B(j) }")),
            TypeOf(kF32, {3}));
  EXPECT_EQ(Inferred(PrimId::kTc, {T(kF64, {2, 5})},
                     Def("def s(double(N,D) I) -> (M, E) { M(n) max=! I(n,d); E(n,d) = exp(I(n,d) - M(n)) }")),
            "(" + TypeOf(kF64, {2}) + ", " + TypeOf(kF64, {2, 5}) + ")");
  EXPECT_EQ(Inferred(PrimId::kTc, {T(kF32, {-1, 3, 8, 8}), T(kF32, {4, 3, 3, 3})},
                     Def("def c(float(N,C,H,W) I, float(F,C,KH,KW) K) -> (O) {"
                         " O(n,f,h,w) +=! I(n,c,h+kh,w+kw) * K(f,c,kh,kw) }")),
            TypeOf(kF32, {-1, 4, 6, 6}));
}

TEST(TcInferTest, ErrorsNameTheBlockAndStatement) {
  absl::Status s = InferError(PrimId::kTc, {T(kF32, {3})}, Def("def f(float(N) A) -> (O) { O(i) +=! A(i) * k }"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("tc block 'f': statement 1 (`O(i) +=! A(i) * k`): index k has no range"));
  s = InferError(PrimId::kTc, {T(kF32, {3}), T(kF32, {3})}, Def("def f(float(N) A) -> (O) { O(i) = A(i) }"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("tc block 'f': takes 1 inputs, got 2"));
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
