// Every row of the elementwise table (ops/elementwise_table.inc) goes out as ONNX,
// comes back through kgrad's importer and computes what the primitive's CPU kernel
// computes, on random inputs with NaN, +-0, halves and exact multiples among them
// (onnx_elementwise_cases.h): a row with an ONNX name as that op (the round trip
// gives the primitive back, so every bit agrees, zeros' signs included), a row
// without one as its functor's formula in standard ops (onnx_formula.h), within a
// few ulps (separate ops where the kernel may fuse a multiply-add), integers and
// bools exactly. ONNX has no log1p or expm1: their forms Log(x + 1) and Exp(x) - 1
// give +0 for -0; every other row keeps the sign of a zero.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backends/executor.h"
#include "core/builder.h"
#include "ops/elementwise_table.h"
#include "proto/onnx/onnx_export.h"
#include "tests/onnx/onnx_elementwise_cases.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

// `g` exported (into *model) and imported again.
absl::StatusOr<std::unique_ptr<Module>> RoundTrip(Module& m, FuncGraph* g, onnx::ModelProto* model) {
  absl::StatusOr<onnx::ModelProto> out = ExportOnnx(m, g);
  if (!out.ok()) return out.status();
  *model = *std::move(out);
  std::string bytes;
  if (!model->SerializeToString(&bytes)) return absl::InternalError("serialise");
  return ParseOnnx(bytes, DefaultRegistry(), OnnxImportOptions(), "<exported>");
}

bool KeepsZeroSign(PrimId id) { return id != PrimId::kLog1p && id != PrimId::kExpm1; }

// |got - want| <= tol * max(1, |want|): one-to-one rows and integer formulas
// exactly; floating formulas to a few ulps of float32 or float64.
double Tolerance(const ElementwiseCase& c) {
  if (c.row.onnx_twin || !IsFloating(c.dtype)) return 0;
  return c.dtype == DType::kFloat32 ? 2e-6 : 1e-13;
}

std::string InputsAt(const ElementwiseCase& c, int64_t i) {
  std::string s;
  for (const Tensor& t : c.inputs) absl::StrAppend(&s, s.empty() ? "" : ", ", t.ElementAsDouble(i));
  return s;
}

void ExpectSameValues(const ElementwiseCase& c, const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.TypeString(), want.TypeString());
  const double tol = Tolerance(c);
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    const double g = got.ElementAsDouble(i), w = want.ElementAsDouble(i);
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << "at (" << InputsAt(c, i) << "): got " << g << ", want NaN";
      continue;
    }
    if (g != w) {  // infinities only as equals
      EXPECT_LE(std::abs(g - w), tol * std::max(1.0, std::abs(w)))
          << "at (" << InputsAt(c, i) << "): got " << g << ", want " << w;
    } else if (g == 0 && KeepsZeroSign(c.row.id)) {
      EXPECT_EQ(std::signbit(g), std::signbit(w)) << "at (" << InputsAt(c, i) << "): got " << g
                                                  << ", want " << w;
    }
  }
}

class ElementwiseExportTest : public ::testing::TestWithParam<ElementwiseCase> {};

TEST_P(ElementwiseExportTest, RoundTripComputesTheKernelsValues) {
  const ElementwiseCase& c = GetParam();
  Module m(DefaultRegistry());
  absl::StatusOr<FuncGraph*> g = BuildCase(m, c);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<Value> args(c.inputs.begin(), c.inputs.end());
  absl::StatusOr<Value> want = RunGraph(*g, args);
  ASSERT_TRUE(want.ok()) << want.status();
  onnx::ModelProto model;
  absl::StatusOr<std::unique_ptr<Module>> back = RoundTrip(m, *g, &model);
  ASSERT_TRUE(back.ok()) << back.status();
  if (c.row.onnx_twin) {
    // One node of the row's ONNX op (then the output's Identity), and the primitive back.
    ASSERT_EQ(model.graph().node_size(), 2);
    EXPECT_EQ(model.graph().node(0).op_type(), ops::ElementwiseOnnxName(c.row.id));
    EXPECT_EQ(model.graph().node(0).attribute_size(), static_cast<int>(c.attrs.size()));
    EXPECT_THAT(AppliedPrims(**back, (*back)->entry()), ::testing::ElementsAre(c.row.id));
  }
  absl::StatusOr<Value> got = RunGraph((*back)->entry(), args);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->is_tensor() && want->is_tensor());
  ExpectSameValues(c, got->tensor(), want->tensor());
}

INSTANTIATE_TEST_SUITE_P(EveryRow, ElementwiseExportTest, ::testing::ValuesIn(ElementwiseCases(true)),
                         [](const ::testing::TestParamInfo<ElementwiseCase>& i) { return i.param.name; });

TEST(ElementwiseExport, EveryRowHasCasesAndEveryAttributeAMode) {
  std::vector<ElementwiseCase> cases = ElementwiseCases(true);
  for (const ElementwiseRow& row : ElementwiseRows()) {
    SCOPED_TRACE(row.wire);
    EXPECT_TRUE(std::any_of(cases.begin(), cases.end(), [&](const ElementwiseCase& c) { return c.row.id == row.id; }));
    const PrimitiveDef* def = DefaultRegistry().Find(row.id);
    ASSERT_NE(def, nullptr);
    for (const AttrSpec& spec : def->attrs) {
      std::vector<std::pair<std::string, AttrMap>> modes = AttrModes(row.id);
      EXPECT_GE(modes.size(), 2u) << "list the modes of attribute '" << spec.name << "' in AttrModes";
      for (const auto& [name, attrs] : modes) EXPECT_TRUE(attrs.count(spec.name)) << name;
    }
  }
}

// A row without an ONNX name writes its functor's formula, node for node:
// tanh_grad(y, d) = d * (1 - y * y) with 1 an initializer of y's dtype.
TEST(ElementwiseExport, FormulaIsTheFunctors) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* y = b.Param("y", DType::kFloat32, {3});
  AnfNode* d = b.Param("d", DType::kFloat32, {3});
  absl::StatusOr<FuncGraph*> g = b.Return(b.Op(PrimId::kTanhGrad, {y, d}));
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<onnx::ModelProto> model = ExportOnnx(m, *g);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<std::string> ops;
  for (const onnx::NodeProto& n : model->graph().node()) ops.push_back(n.op_type());
  EXPECT_THAT(ops, ::testing::ElementsAre("Mul", "Sub", "Mul", "Identity"));
  const onnx::GraphProto& gp = model->graph();
  EXPECT_THAT(std::vector<std::string>(gp.node(0).input().begin(), gp.node(0).input().end()),
              ::testing::ElementsAre("y", "y"));
  ASSERT_EQ(gp.initializer_size(), 1);
  EXPECT_EQ(gp.initializer(0).data_type(), onnx::TensorProto::FLOAT);
  EXPECT_EQ(gp.node(1).input(0), gp.initializer(0).name());
  EXPECT_EQ(gp.node(2).input(0), "d");
}

// mod{fmod=false} on floats: Python's sign rule built from Mod{fmod=1}, a zero
// result taking b's sign (Copysign through Where); the functor's meaning, so the
// zeros of 3 mod -1.5 and -3 mod 1.5 are -0 and +0.
TEST(ElementwiseExport, PythonModKeepsTheSignOfZeros) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {4});
  AnfNode* y = b.Param("y", DType::kFloat64, {4});
  absl::StatusOr<FuncGraph*> g = b.Return(b.Op(PrimId::kMod, {x, y}, {{"fmod", false}}));
  ASSERT_TRUE(g.ok()) << g.status();
  onnx::ModelProto model;
  absl::StatusOr<std::unique_ptr<Module>> back = RoundTrip(m, *g, &model);
  ASSERT_TRUE(back.ok()) << back.status();
  absl::StatusOr<Value> got = RunGraph((*back)->entry(), {kgrad::testing::F64({4}, {3, -3, 7, -7}), kgrad::testing::F64({4}, {-1.5, 1.5, -2, 2})});
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<double> v = kgrad::testing::ToDoubles(got->tensor());
  EXPECT_THAT(v, ::testing::ElementsAre(0.0, 0.0, -1.0, 1.0));
  EXPECT_TRUE(std::signbit(v[0]));
  EXPECT_FALSE(std::signbit(v[1]));
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
