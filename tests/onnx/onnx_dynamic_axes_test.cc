// ONNX import of Unsqueeze, Squeeze and the Reduce* ops whose axes are a graph
// input (computed at run time): the run-time forms (dynamic_unsqueeze,
// dynamic_squeeze, dynamic_reduce_sum) against hand-computed values, at two axes
// values each through one imported graph, their gradients, and the reductions
// that stay refused.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_model_builder.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

Tensor Axes(const std::vector<double>& v) {
  return MakeTensor(kI64, {static_cast<int64_t>(v.size())}, v);
}

// y = op(x, axes){attrs} at `opset` with x: f32[shape] and axes: i64[n] inputs.
OnnxModelBuilder OneNode(const std::string& op, int64_t opset, const Shape& shape, int64_t n,
                         const std::vector<std::pair<std::string, int64_t>>& attrs = {}) {
  OnnxModelBuilder b(opset);
  b.Input("x", kF32, shape).Input("axes", kI64, {n});
  onnx::NodeProto& node = b.Node(op, {"x", "axes"}, {"y"});
  for (const auto& [name, v] : attrs) SetAttr(node, name, v);
  b.Output("y");
  return b;
}

// The single output's shape and elements.
void ExpectOutput(const absl::StatusOr<std::vector<Tensor>>& out, const Shape& shape,
                  const std::vector<double>& values) {
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].shape(), shape);
  EXPECT_THAT(ToDoubles((*out)[0]), ElementsAreArray(values));
}

const Tensor kX23 = MakeTensor(kF32, {2, 3}, {0, 1, 2, 3, 4, 5});

TEST(OnnxDynamicAxesTest, UnsqueezeAndSqueezeWithAxesInputs) {
  const OnnxModelBuilder u = OneNode("Unsqueeze", 13, {2, 3}, 2);
  const std::vector<double> iota = {0, 1, 2, 3, 4, 5};
  ExpectOutput(u.Run({kX23, Axes({0, -1})}), {1, 2, 3, 1}, iota);
  ExpectOutput(u.Run({kX23, Axes({2, 1})}), {2, 1, 1, 3}, iota);
  absl::StatusOr<std::vector<Tensor>> bad = u.Run({kX23, Axes({1, 1})});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("dynamic_unsqueeze: axis 1 is repeated"));

  const OnnxModelBuilder s = OneNode("Squeeze", 13, {2, 1, 3, 1}, 1);
  const Tensor x = MakeTensor(kF32, {2, 1, 3, 1}, iota);
  ExpectOutput(s.Run({x, Axes({1})}), {2, 3, 1}, iota);
  ExpectOutput(s.Run({x, Axes({-1})}), {2, 1, 3}, iota);
  bad = s.Run({x, Axes({0})});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("has size 2, not 1"));
}

TEST(OnnxDynamicAxesTest, ReduceSumKeepdimsEmptyAxesAndNoop) {
  const OnnxModelBuilder kept = OneNode("ReduceSum", 13, {2, 3}, 1);
  ExpectOutput(kept.Run({kX23, Axes({1})}), {2, 1}, {3, 12});
  ExpectOutput(kept.Run({kX23, Axes({-2})}), {1, 3}, {3, 5, 7});
  const OnnxModelBuilder dropped = OneNode("ReduceSum", 13, {2, 3}, 2, {{"keepdims", 0}});
  ExpectOutput(dropped.Run({kX23, Axes({1, 0})}), {}, {15});
  // Empty axes: every dim, or (noop_with_empty_axes) none.
  ExpectOutput(OneNode("ReduceSum", 13, {2, 3}, 0, {{"keepdims", 0}}).Run({kX23, Axes({})}), {},
               {15});
  ExpectOutput(OneNode("ReduceSum", 13, {2, 3}, 0).Run({kX23, Axes({})}), {1, 1}, {15});
  ExpectOutput(OneNode("ReduceSum", 13, {2, 3}, 0, {{"noop_with_empty_axes", 1}})
                   .Run({kX23, Axes({})}),
               {2, 3}, {0, 1, 2, 3, 4, 5});
}

TEST(OnnxDynamicAxesTest, Opset18MeanAndSumsOfSquares) {
  ExpectOutput(OneNode("ReduceMean", 18, {2, 3}, 1, {{"keepdims", 0}}).Run({kX23, Axes({1})}),
               {2}, {1, 4});
  ExpectOutput(OneNode("ReduceMean", 18, {2, 3}, 0).Run({kX23, Axes({})}), {1, 1}, {2.5});
  ExpectOutput(OneNode("ReduceSumSquare", 18, {2, 3}, 1).Run({kX23, Axes({0})}), {1, 3},
               {9, 17, 29});
  // Max, min, prod and logsumexp have no run-time form.
  absl::StatusOr<std::unique_ptr<Module>> m = OneNode("ReduceMax", 18, {2, 3}, 1).Import();
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("axes computed at run time"));
}

// d/dx sum(ReduceMean(x, axes){keepdims 0} * w): w_j / n at each x_i summed
// into output j; one gradient graph for both axes.
TEST(OnnxDynamicAxesTest, GradientsThroughRunTimeAxes) {
  OnnxModelBuilder b(18);
  b.Input("x", kF32, {2, 3}).Input("axes", kI64, {1});
  SetAttr(b.Node("ReduceMean", {"x", "axes"}, {"m"}), "keepdims", int64_t{0});
  b.Node("Unsqueeze", {"m", "axes"}, {"u"});
  b.Node("Mul", {"u", "x"}, {"p"});
  SetAttr(b.Node("ReduceSum", {"p"}, {"y"}), "keepdims", int64_t{0});
  b.Output("y");
  absl::StatusOr<std::unique_ptr<Module>> m = b.Import();
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<FuncGraph*> g = GradOperation()(**m, (*m)->entry());
  ASSERT_TRUE(g.ok()) << g.status();
  // y = sum_j n m_j^2 (each mean times the sum of its n elements): dy/dx_i = 2 m_j.
  absl::StatusOr<Value> rows = RunGraph(*g, {Value(kX23), Value(Axes({1}))});
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(ToDoubles(rows->tensor()), ElementsAreArray({2., 2., 2., 8., 8., 8.}));
  absl::StatusOr<Value> cols = RunGraph(*g, {Value(kX23), Value(Axes({0}))});
  ASSERT_TRUE(cols.ok()) << cols.status();
  EXPECT_THAT(ToDoubles(cols->tensor()), ElementsAreArray({3., 5., 7., 3., 5., 7.}));
}

// Pad with its pads a graph input, in every mode, against the same pads given as
// a constant (the static form), with negative pads (crops); reflect pads beyond
// the dim are refused at run time as the static form refuses them at import.
TEST(OnnxDynamicAxesTest, PadModesWithPadsInputsMatchTheConstantForm) {
  const Tensor x = MakeTensor(kF32, {2, 3}, {0, 1, 2, 3, 4, 5});
  const std::vector<std::vector<double>> pad_sets = {
      {1, 2, 0, 1}, {0, -1, 1, 0}, {1, 0, 1, 2}, {0, 0, 0, 0}};  // reflect: < the dim
  for (const std::string mode : {"constant", "edge", "reflect", "wrap"}) {
    OnnxModelBuilder dynamic(13);
    dynamic.Input("x", kF32, {2, 3}).Input("pads", kI64, {4});
    SetAttr(dynamic.Node("Pad", {"x", "pads"}, {"y"}), "mode", mode);
    dynamic.Output("y");
    for (const std::vector<double>& pads : pad_sets) {
      OnnxModelBuilder fixed(13);
      fixed.Input("x", kF32, {2, 3}).Constant("pads", Axes(pads));
      SetAttr(fixed.Node("Pad", {"x", "pads"}, {"y"}), "mode", mode);
      fixed.Output("y");
      absl::StatusOr<std::vector<Tensor>> want = fixed.Run({x});
      ASSERT_TRUE(want.ok()) << mode << ": " << want.status();
      ExpectOutput(dynamic.Run({x, Axes(pads)}), (*want)[0].shape(), ToDoubles((*want)[0]));
    }
  }
  // Reflect: pads up to dim - 1 mirror (rows 1 | 7, 8 | 7 for b = e = 1); 2 is refused.
  OnnxModelBuilder r(13);
  r.Input("x", kF32, {2, 1}).Input("pads", kI64, {4});
  SetAttr(r.Node("Pad", {"x", "pads"}, {"y"}), "mode", std::string("reflect"));
  r.Output("y");
  const Tensor x21 = MakeTensor(kF32, {2, 1}, {7, 8});
  ExpectOutput(r.Run({x21, Axes({1, 0, 1, 0})}), {4, 1}, {8, 7, 8, 7});
  absl::StatusOr<std::vector<Tensor>> bad = r.Run({x21, Axes({2, 0, 0, 0})});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("out of range"));
}

// Split into equal parts of a dim that is not static: the sizes are computed at
// run time as the static form computes them (the last part smaller), and a split
// that would leave a part empty is refused.
TEST(OnnxDynamicAxesTest, SplitIntoEqualPartsOfASymbolicDim) {
  OnnxModelBuilder b(13);
  b.Input("x", kF32, {-1, 2});
  SetAttr(b.Node("Split", {"x"}, {"a", "b", "c"}), "axis", int64_t{0});
  b.Output("a").Output("b").Output("c");
  for (int64_t rows : {5, 6}) {
    std::vector<double> v(rows * 2);
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<double>(k);
    absl::StatusOr<std::vector<Tensor>> out = b.Run({MakeTensor(kF32, {rows, 2}, v)});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 3u);
    const int64_t sizes[3] = {2, 2, rows - 4};
    int64_t at = 0;
    for (int p = 0; p < 3; ++p) {
      EXPECT_EQ((*out)[p].shape(), (Shape{sizes[p], 2})) << rows;
      EXPECT_THAT(ToDoubles((*out)[p]),
                  ElementsAreArray(std::vector<double>(v.begin() + at, v.begin() + at + 2 * sizes[p])));
      at += 2 * sizes[p];
    }
  }
  absl::StatusOr<std::vector<Tensor>> bad = b.Run({MakeTensor(kF32, {4, 2}, std::vector<double>(8, 1))});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("dynamic_split: input 1 (sizes)"));
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
