// The importer's op table (proto/onnx/onnx_op_table.cc): each row of the
// elementwise table with an ONNX name imports as its primitive, with its operand
// count checked, a constant operand given the other operand's dtype and the
// attributes the primitive declares read by name; a family's mapping replaces the
// generated one where the ONNX op needs more (Pow, Max).
#include <map>
#include <string>
#include <vector>

#include "ops/elementwise_table.h"
#include "tests/onnx/onnx_elementwise_cases.h"
#include "tests/onnx/onnx_one_node.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The one application of `m`'s entry, which must be of primitive `id`.
const Primitive* OnlyPrim(Module& m, PrimId id) {
  std::vector<CNode*> order = m.manager().Info(m.entry()).order;
  EXPECT_EQ(order.size(), 1u);
  if (order.size() != 1 || order[0]->primitive() == nullptr) return nullptr;
  EXPECT_EQ(order[0]->primitive()->id(), id);
  return order[0]->primitive();
}

std::vector<double> RunEntry(Module& m, const std::vector<Value>& args) {
  absl::StatusOr<Value> out = RunGraph(m.entry(), args);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? kgrad::testing::ToDoubles(out->tensor()) : std::vector<double>();
}

TEST(OnnxOpTable, ThresholdedReluIsThePrimitiveWithTheDefaultAlpha) {
  absl::StatusOr<std::unique_ptr<Module>> m = OneNode("ThresholdedRelu", 17).In({6}).Import();
  ASSERT_TRUE(m.ok()) << m.status();
  const Primitive* p = OnlyPrim(**m, PrimId::kThresholdedRelu);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->GetFloat("alpha"), 1.0);
  std::vector<double> y = RunEntry(**m, {kgrad::testing::F64({6}, {-1, 0.5, 1, 1.5, kNaN, 3})});
  EXPECT_THAT(y, ElementsAre(0, 0, 0, 1.5, 0, 3));
}

TEST(OnnxOpTable, ThresholdedReluReadsAlpha) {
  absl::StatusOr<std::unique_ptr<Module>> m =
      OneNode("ThresholdedRelu", 17).In({5}, DType::kFloat32).Set({{"alpha", -0.25}}).Import();
  ASSERT_TRUE(m.ok()) << m.status();
  const Primitive* p = OnlyPrim(**m, PrimId::kThresholdedRelu);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->GetFloat("alpha"), -0.25);
  std::vector<double> y =
      RunEntry(**m, {Value(kgrad::testing::MakeTensor(DType::kFloat32, {5}, {-1, -0.25, 0, -0.125, 2}))});
  EXPECT_THAT(y, ElementsAre(0, 0, 0, -0.125, 2));
}

TEST(OnnxOpTable, AttributeOfTheWrongTypeNamesTheNode) {
  EXPECT_THAT(ImportError(OneNode("ThresholdedRelu", 17).In({3}).Set({{"alpha", int64_t{2}}})),
              HasSubstr("node 'n' (ThresholdedRelu): attribute 'alpha' must be a float, got type INT"));
}

TEST(OnnxOpTable, OperandAndOutputCountsFollowTheArity) {
  EXPECT_THAT(ImportError(OneNode("Add", 17).In({3}).In({3}).In({3})),
              HasSubstr("node 'n' (Add): has 3 inputs, expected 2"));
  EXPECT_THAT(ImportError(OneNode("Where", 17).In({3}, DType::kBool).In({3})),
              HasSubstr("node 'n' (Where): has 2 inputs, expected 3"));
  EXPECT_THAT(ImportError(OneNode("Relu", 17).In({3}).TwoOutputs()),
              HasSubstr("node 'n' (Relu): output 1 'indices' is not supported"));
}

// A float64 constant next to a float32 operand takes float32: Add's second
// operand, Where's third (its values, not its condition).
TEST(OnnxOpTable, ConstantOperandTakesTheOtherOperandsDType) {
  absl::StatusOr<std::unique_ptr<Module>> add =
      OneNode("Add", 17).In({2}, DType::kFloat32).Const(Tensor::FromScalar<double>(0.5)).Import();
  ASSERT_TRUE(add.ok()) << add.status();
  EXPECT_THAT(RunEntry(**add, {Value(kgrad::testing::MakeTensor(DType::kFloat32, {2}, {1, 2}))}),
              ElementsAre(1.5, 2.5));
  absl::StatusOr<std::unique_ptr<Module>> where = OneNode("Where", 17)
                                                      .In({2}, DType::kBool)
                                                      .In({2}, DType::kFloat32)
                                                      .Const(Tensor::FromScalar<double>(-1))
                                                      .Import();
  ASSERT_TRUE(where.ok()) << where.status();
  absl::StatusOr<Value> y = RunGraph((*where)->entry(), {Value(kgrad::testing::MakeTensor(DType::kBool, {2}, {1, 0})),
                                                         Value(kgrad::testing::MakeTensor(DType::kFloat32, {2}, {3, 4}))});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->tensor().dtype(), DType::kFloat32);
  EXPECT_THAT(kgrad::testing::ToDoubles(y->tensor()), ElementsAre(3, -1));
}

// Pow and Max have rows, but their families' mappings replace the generated ones:
// Pow(x, 2) is square, Max takes any number of inputs.
TEST(OnnxOpTable, FamilyMappingsReplaceGeneratedOnes) {
  absl::StatusOr<std::unique_ptr<Module>> pow =
      OneNode("Pow", 17).In({3}).Const(Tensor::FromScalar<double>(2)).Import();
  ASSERT_TRUE(pow.ok()) << pow.status();
  ASSERT_NE(OnlyPrim(**pow, PrimId::kSquare), nullptr);
  absl::StatusOr<std::unique_ptr<Module>> max = OneNode("Max", 17).In({2}).In({2}).In({2}).Import();
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_THAT(AppliedPrims(**max, (*max)->entry()), ElementsAre(PrimId::kMaximum, PrimId::kMaximum));
}

// Every ONNX name of the table is a supported op, named by one row only.
TEST(OnnxOpTable, EveryOnnxNameOfTheTableIsMappedOnce) {
  std::vector<std::string> supported = SupportedOnnxOps();
  std::map<std::string, std::string> rows;
  for (const ElementwiseRow& row : ElementwiseRows()) {
    if (!row.onnx_twin) continue;
    const std::string onnx = ops::ElementwiseOnnxName(row.id);
    EXPECT_TRUE(rows.emplace(onnx, row.wire).second) << onnx << " names " << rows[onnx] << " and " << row.wire;
    EXPECT_THAT(supported, ::testing::Contains(onnx));
  }
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
