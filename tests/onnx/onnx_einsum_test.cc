// ONNX Einsum with '...': each ellipsis becomes letters the equation does not
// use at import (right-aligned across operands), the implicit output the
// ellipsis dims then the letters used once, sorted. Each case must give what the
// same equation written with letters gives (the einsum primitive's own tests
// check that form against references), and its gradients finite differences.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_one_node.h"
#include "tests/onnx/onnx_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

using ::testing::HasSubstr;

OneNode Einsum(const std::string& eq, const std::vector<Shape>& shapes) {
  OneNode n("Einsum", 12);
  for (const Shape& s : shapes) n.In(s);
  n.Set({{"equation", eq}});
  return n;
}

// `eq` with '...' against `letters`, the same contraction spelled out.
void ExpectSameAs(const std::string& eq, const std::string& letters, const std::vector<Shape>& shapes) {
  SCOPED_TRACE(eq);
  std::vector<Tensor> args;
  std::vector<Value> values;
  for (size_t i = 0; i < shapes.size(); ++i) {
    args.push_back(Random(shapes[i], 40 + i));
    values.push_back(Value(args.back()));
  }
  absl::StatusOr<std::unique_ptr<Module>> ref = Einsum(letters, shapes).Import();
  ASSERT_TRUE(ref.ok()) << ref.status();
  absl::StatusOr<Value> want = RunGraph((*ref)->entry(), values);
  ASSERT_TRUE(want.ok()) << want.status();
  ExpectModel(Einsum(eq, shapes), args, want->tensor());
}

TEST(OnnxEinsum, EllipsisBecomesLetters) {
  ExpectSameAs("...ii->...i", "abii->abi", {{2, 3, 4, 4}});            // ONNX's batch_diagonal
  ExpectSameAs("...ij,...jk->...ik", "zij,zjk->zik", {{2, 3, 4}, {2, 4, 5}});
  ExpectSameAs("...ij,...jk", "zij,zjk->zik", {{2, 3, 4}, {2, 4, 5}});  // implicit output
  ExpectSameAs("...ij,jk->...ik", "abij,jk->abik", {{2, 3, 4, 5}, {5, 6}});  // ranks differ
  ExpectSameAs("b...,b...->b", "bxy,bxy->b", {{3, 2, 4}, {3, 2, 4}});
  ExpectSameAs("...", "abc->abc", {{2, 3, 4}});
  ExpectSameAs("i...->...", "ixy->xy", {{3, 2, 2}});  // the ellipsis dims kept, i summed
}

TEST(OnnxEinsum, EllipsisErrors) {
  EXPECT_THAT(ImportError(Einsum("...ijk->...", {{2, 3}})),
              HasSubstr("operand 0 has rank 2, fewer than its 3 letters"));
  EXPECT_THAT(ImportError(Einsum("...i...->i", {{2, 3, 4}})), HasSubstr("more than one '...'"));
  EXPECT_THAT(ImportError(Einsum("...i,...i->...", {{2, 3}})), HasSubstr("names 2 operands, got 1"));
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
