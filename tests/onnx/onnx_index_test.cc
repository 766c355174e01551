// ONNX import of rounding, Mod, element-wise indexing, scans and the N-d
// gather/scatter (proto/onnx/onnx_index_ops.cc), on hand-built one-node models:
// each op and mode run and compared with hand-computed values (most from the ONNX
// operator documentation) or a naive reference, negative indices, and the error
// cases (out-of-range index, bad axis, non-constant axis input, bad modes).
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/abstract.h"
#include "core/builder.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_export.h"
#include "proto/onnx/onnx_tensor.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

using ::kgrad::testing::Ravel;
using ::kgrad::testing::Unravel;

// One node `op` (named "n") from graph inputs and initializers to output "y".
class OneNode {
 public:
  OneNode(const std::string& op, int opset) {
    m_.set_ir_version(8);
    m_.add_opset_import()->set_version(opset);
    node_ = m_.mutable_graph()->add_node();
    node_->set_op_type(op);
    node_->set_name("n");
    node_->add_output("y");
    m_.mutable_graph()->add_output()->set_name("y");
  }
  // A graph input (run-time value).
  OneNode& In(const std::string& name, DType t, const Shape& shape) {
    node_->add_input(name);
    onnx::ValueInfoProto* v = m_.mutable_graph()->add_input();
    v->set_name(name);
    TypeToOnnx(*AsTensor(MakeAbstractTensor(t, shape)), v->mutable_type());
    return *this;
  }
  // An initializer (integer ones are import-time constants).
  OneNode& Init(const std::string& name, const Tensor& t) {
    node_->add_input(name);
    TensorToOnnx(t, name, m_.mutable_graph()->add_initializer());
    return *this;
  }
  OneNode& Int(const std::string& name, int64_t v) {
    onnx::AttributeProto* a = node_->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
    return *this;
  }
  OneNode& Str(const std::string& name, const std::string& v) {
    onnx::AttributeProto* a = node_->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
    return *this;
  }

  absl::StatusOr<std::unique_ptr<Module>> Import() const {
    OnnxImportOptions o;
    return ImportOnnx(m_, DefaultRegistry(), o, "<test>");
  }
  // Imported and run on `args`; the result's elements as doubles.
  // d<ct, y>/d(input 0), through the imported graph.
  absl::StatusOr<std::vector<double>> Grad0(std::vector<Value> args, const Tensor& ct) const {
    KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, Import());
    GradOptions o;
    o.sens_param = true;
    KGRAD_ASSIGN_OR_RETURN(FuncGraph * g, Grad(*m, m->entry(), o));
    args.push_back(ct);
    KGRAD_ASSIGN_OR_RETURN(Value v, RunGraph(g, std::move(args)));
    if (!v.is_tensor()) return absl::InternalError("not a tensor: " + v.TypeString());
    return kgrad::testing::ToDoubles(v.tensor());
  }
  // A second, third ... output ("y1", "y2", ...) for a node with several.
  OneNode& MoreOutputs(int n) {
    for (int i = 1; i <= n; ++i) {
      node_->add_output(absl::StrCat("y", i));
      m_.mutable_graph()->add_output()->set_name(absl::StrCat("y", i));
    }
    return *this;
  }
  // Imported and run on `args`: each output's elements as doubles.
  absl::StatusOr<std::vector<std::vector<double>>> RunAll(std::vector<Value> args) const {
    KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, Import());
    KGRAD_ASSIGN_OR_RETURN(Value v, RunGraph(m->entry(), std::move(args)));
    std::vector<std::vector<double>> out;
    for (const Value& e : v.tuple()) out.push_back(kgrad::testing::ToDoubles(e.tensor()));
    return out;
  }
  absl::StatusOr<std::vector<double>> Run(std::vector<Value> args) const {
    KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, Import());
    KGRAD_ASSIGN_OR_RETURN(Value v, RunGraph(m->entry(), std::move(args)));
    if (!v.is_tensor()) return absl::InternalError("not a tensor: " + v.TypeString());
    return kgrad::testing::ToDoubles(v.tensor());
  }

 private:
  onnx::ModelProto m_;
  onnx::NodeProto* node_;
};

Tensor F(const Shape& shape, const std::vector<double>& v) { return MakeTensor(kF32, shape, v); }
Tensor L(const Shape& shape, const std::vector<double>& v) { return MakeTensor(kI64, shape, v); }

void ExpectValues(const absl::StatusOr<std::vector<double>>& got, const std::vector<double>& want) {
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, ElementsAreArray(want));
}

void ExpectImportError(const OneNode& m, const std::string& text) {
  absl::StatusOr<std::unique_ptr<Module>> r = m.Import();
  ASSERT_FALSE(r.ok()) << "expected an error mentioning " << text;
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(text));
}

template <typename T>
void ExpectRunError(const absl::StatusOr<T>& r, const std::string& text) {
  ASSERT_FALSE(r.ok()) << "expected an error mentioning " << text;
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(text));
}

// ----- Floor, Ceil, Round, Mod -----------------------------------------------------------
TEST(OnnxIndexTest, FloorCeilRound) {
  const Tensor x = F({7}, {-1.5, -0.5, 0.5, 1.5, 2.5, 2.7, -2.2});
  ExpectValues(OneNode("Floor", 13).In("x", kF32, {7}).Run({x}), {-2, -1, 0, 1, 2, 2, -3});
  ExpectValues(OneNode("Ceil", 13).In("x", kF32, {7}).Run({x}), {-1, 0, 1, 2, 3, 3, -2});
  // Halves to even.
  ExpectValues(OneNode("Round", 13).In("x", kF32, {7}).Run({x}), {-2, 0, 0, 2, 2, 3, -2});
  ExpectImportError(OneNode("Floor", 13).In("x", kI64, {2}), "node 'n' (Floor)");
}

TEST(OnnxIndexTest, Mod) {
  const Tensor a = L({4}, {-7, 7, -7, 7}), b = L({4}, {3, -3, -3, 3});
  auto mod = [](int64_t fmod) {
    return OneNode("Mod", 13).In("a", kI64, {4}).In("b", kI64, {4}).Int("fmod", fmod);
  };
  ExpectValues(mod(0).Run({a, b}), {2, -2, -1, 1});  // the sign of b
  ExpectValues(mod(1).Run({a, b}), {-1, 1, -1, 1});  // the sign of a
  // Broadcast against a constant divisor.
  ExpectValues(OneNode("Mod", 13).In("a", kI64, {4}).Init("b", L({}, {4})).Run({a}), {1, 3, 1, 3});
  ExpectValues(OneNode("Mod", 13)
                   .In("a", kF32, {2})
                   .In("b", kF32, {2})
                   .Int("fmod", 1)
                   .Run({F({2}, {-7.5, 7.5}), F({2}, {2, -2})}),
               {-1.5, 1.5});
  ExpectRunError(mod(0).Run({a, L({4}, {3, 0, 1, 1})}), "integer division by zero");
  ExpectImportError(OneNode("Mod", 13).In("a", kF32, {2}).In("b", kF32, {2}),
                    "node 'n' (Mod): fmod must be 1 for a floating-point input");
  ExpectImportError(mod(2), "fmod must be 0 or 1");
}

// ----- GatherElements ------------------------------------------------------------------------
TEST(OnnxIndexTest, GatherElements) {
  const Tensor data = F({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto gather = [](const Tensor& idx, int64_t axis) {
    return OneNode("GatherElements", 13)
        .In("data", kF32, {3, 3})
        .Init("idx", idx)
        .Int("axis", axis);
  };
  ExpectValues(gather(L({2, 3}, {1, 2, 0, 2, 0, 0}), 0).Run({data}), {4, 8, 3, 7, 2, 3});
  ExpectValues(gather(L({2, 3}, {-2, -1, 0, -1, -3, 0}), 0).Run({data}), {4, 8, 3, 7, 2, 3});
  ExpectValues(gather(L({3, 2}, {0, 0, 1, 0, 2, -1}), 1).Run({data}), {1, 1, 5, 4, 9, 9});
  ExpectValues(gather(L({3, 1}, {2, 1, 0}), -1).Run({data}), {3, 5, 7});
  ExpectValues(  // indices at run time, i32
      OneNode("GatherElements", 13)
          .In("data", kF32, {3, 3})
          .In("idx", DType::kInt32, {1, 3})
          .Run({data, MakeTensor(DType::kInt32, {1, 3}, {2, -3, 1})}),
      {7, 2, 6});
  ExpectRunError(gather(L({1, 3}, {0, 3, 0}), 0).Run({data}),
                 "index 3 (at position 1 of the indices) is out of range [-3, 3)");
  ExpectRunError(gather(L({1, 3}, {-4, 0, 0}), 0).Run({data}), "out of range");
  ExpectImportError(gather(L({1, 3}, {0, 0, 0}), 2), "node 'n' (GatherElements)");
  ExpectImportError(gather(L({1, 3}, {0, 0, 0}), 2), "'axis'");
  ExpectImportError(gather(L({3}, {0, 0, 0}), 0), "rank of input 0");
}

// ----- ScatterElements and Scatter ------------------------------------------------------------
TEST(OnnxIndexTest, ScatterElementsModes) {
  const Tensor data = F({1, 5}, {1, 2, 3, 4, 5});
  const Tensor upd = F({1, 2}, {10, 20});
  auto scatter = [](const Tensor& idx, const std::string& reduction, int opset) {
    OneNode n("ScatterElements", opset);
    n.In("data", kF32, {1, 5}).Init("idx", idx).In("upd", kF32, {1, 2}).Int("axis", 1);
    if (!reduction.empty()) n.Str("reduction", reduction);
    return n;
  };
  const Tensor twice = L({1, 2}, {2, -3});  // both hit element 2
  ExpectValues(scatter(L({1, 2}, {1, -2}), "", 13).Run({data, upd}), {1, 10, 3, 20, 5});
  ExpectValues(scatter(twice, "none", 16).Run({data, upd}), {1, 2, 20, 4, 5});  // the last wins
  ExpectValues(scatter(twice, "add", 16).Run({data, upd}), {1, 2, 33, 4, 5});
  ExpectValues(scatter(twice, "mul", 16).Run({data, upd}), {1, 2, 600, 4, 5});
  ExpectValues(scatter(twice, "max", 18).Run({data, upd}), {1, 2, 20, 4, 5});
  ExpectValues(scatter(twice, "min", 18).Run({data, F({1, 2}, {-1, 7})}), {1, 2, -1, 4, 5});
  ExpectImportError(scatter(twice, "mean", 18),
                    "attribute 'reduction' must be none, add, mul, max or min");
  ExpectRunError(scatter(L({1, 2}, {5, 0}), "", 13).Run({data, upd}),
                 "index 5 (at position 0 of the indices) is out of range [-5, 5)");
  OneNode bad_axis("ScatterElements", 13);
  bad_axis.In("data", kF32, {1, 5}).Init("idx", L({1, 2}, {0, 0})).In("upd", kF32, {1, 2});
  ExpectImportError(bad_axis.Int("axis", 2), "node 'n' (ScatterElements)");
  ExpectImportError(bad_axis, "'axis'");
}

// ONNX's ScatterElements example 1 through the deprecated Scatter (opset 10),
// and against a naive reference on random indices.
TEST(OnnxIndexTest, ScatterOpset10AndReference) {
  OneNode n("Scatter", 10);
  n.In("data", kF32, {3, 3}).Init("idx", L({2, 3}, {1, 0, 2, 0, 2, 1})).In("upd", kF32, {2, 3});
  ExpectValues(n.Run({F({3, 3}, std::vector<double>(9, 0)), F({2, 3}, {1, 2, 3, 4, 5, 6})}),
               {4, 2, 0, 1, 0, 6, 0, 5, 3});
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> pick(-4, 3);
  std::vector<double> idx(3 * 5), upd(3 * 5), data(4 * 5), want;
  for (size_t i = 0; i < idx.size(); ++i) {
    idx[i] = pick(rng);
    upd[i] = 100 + static_cast<double>(i);
  }
  for (size_t i = 0; i < data.size(); ++i) data[i] = i;
  want = data;
  for (int r = 0; r < 3; ++r) {
    for (int col = 0; col < 5; ++col) {
      int k = static_cast<int>(idx[r * 5 + col]);
      want[(k < 0 ? k + 4 : k) * 5 + col] += upd[r * 5 + col];
    }
  }
  OneNode add("ScatterElements", 16);
  add.In("data", kF32, {4, 5})
      .Init("idx", L({3, 5}, idx))
      .In("upd", kF32, {3, 5})
      .Str("reduction", "add");
  ExpectValues(add.Run({F({4, 5}, data), F({3, 5}, upd)}), want);
}

// ----- CumSum ---------------------------------------------------------------------------------
TEST(OnnxIndexTest, CumSum) {
  const Tensor x = F({2, 3}, {1, 2, 3, 4, 5, 6});
  auto cumsum = [](const Tensor& axis, int64_t exclusive, int64_t reverse) {
    return OneNode("CumSum", 14)
        .In("x", kF32, {2, 3})
        .Init("axis", axis)
        .Int("exclusive", exclusive)
        .Int("reverse", reverse);
  };
  ExpectValues(cumsum(L({}, {1}), 0, 0).Run({x}), {1, 3, 6, 4, 9, 15});
  ExpectValues(cumsum(L({1}, {-1}), 1, 0).Run({x}), {0, 1, 3, 0, 4, 9});
  ExpectValues(cumsum(L({}, {1}), 0, 1).Run({x}), {6, 5, 3, 15, 11, 6});
  ExpectValues(cumsum(L({}, {1}), 1, 1).Run({x}), {5, 3, 0, 11, 6, 0});
  ExpectValues(cumsum(MakeTensor(DType::kInt32, {}, {0}), 0, 0).Run({x}), {1, 2, 3, 5, 7, 9});
  ExpectImportError(cumsum(L({}, {2}), 0, 0), "'axis'");
  ExpectImportError(cumsum(L({2}, {0, 1}), 0, 0), "the axis input must be one i32 or i64");
}

// ----- Run-time counts and axes ----------------------------------------------------------
// CumSum's axis, OneHot's depth, Split's sizes and Tile's repeats as graph inputs:
// the dynamic_* primitives, checked when the model runs.
TEST(OnnxIndexTest, CumSumWithARunTimeAxis) {
  const Tensor x = F({2, 3}, {1, 2, 3, 4, 5, 6});
  const OneNode m =
      OneNode("CumSum", 14).In("x", kF32, {2, 3}).In("axis", kI64, {}).Int("exclusive", 1);
  ExpectValues(m.Run({x, L({}, {1})}), {0, 1, 3, 0, 4, 9});
  ExpectValues(m.Run({x, L({}, {-2})}), {0, 0, 0, 1, 2, 3});
  ExpectRunError(m.Run({x, L({}, {2})}), "input 1 (axis) 2 is out of range");
  // The gradient: a reversed exclusive sum of the cotangent.
  ExpectValues(m.Grad0({x, L({}, {1})}, F({2, 3}, {1, 1, 1, 1, 1, 1})), {2, 1, 0, 2, 1, 0});
}

TEST(OnnxIndexTest, OneHotWithARunTimeDepth) {
  auto onehot = [](DType depth) {
    return OneNode("OneHot", 11)
        .In("i", kI64, {3})
        .In("depth", depth, {1})
        .Init("values", L({2}, {0, 1}));  // integer initializers are constants
  };
  // Negative indices wrap; a float depth is truncated (ONNX casts it to int64).
  const std::vector<double> want = {0, 0, 1, 1, 0, 0, 0, 1, 0};
  ExpectValues(onehot(kI64).Run({L({3}, {2, 0, -2}), L({1}, {3})}), want);
  ExpectValues(onehot(kF32).Run({L({3}, {2, 0, -2}), F({1}, {3.7f})}), want);
  ExpectRunError(onehot(kI64).Run({L({3}, {0, 0, 0}), L({1}, {0})}), "input 1 (depth) must be");
  // Values computed at run time too (selected by a bool one-hot).
  const OneNode v = OneNode("OneHot", 11).In("i", kI64, {2}).In("depth", kI64, {}).In(
      "values", kF32, {2});
  ExpectValues(v.Run({L({2}, {1, -1}), L({}, {2}), F({2}, {-1, 5})}), {-1, 5, -1, 5});
}

TEST(OnnxIndexTest, SplitWithRunTimeSizes) {
  const OneNode m =
      OneNode("Split", 13).In("x", kF32, {2, 3}).In("split", kI64, {2}).Int("axis", 1).MoreOutputs(1);
  absl::StatusOr<std::vector<std::vector<double>>> r =
      m.RunAll({F({2, 3}, {1, 2, 3, 4, 5, 6}), L({2}, {1, 2})});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_THAT((*r)[0], ElementsAreArray({1.0, 4.0}));
  EXPECT_THAT((*r)[1], ElementsAreArray({2.0, 3.0, 5.0, 6.0}));
  ExpectRunError(m.RunAll({F({2, 3}, {1, 2, 3, 4, 5, 6}), L({2}, {1, 1})}), "sums to 2");
  ExpectImportError(OneNode("Split", 13).In("x", kF32, {2, 3}).In("split", kI64, {3}),
                    "3 split sizes for 1 outputs");
}

TEST(OnnxIndexTest, TileWithRunTimeRepeats) {
  const OneNode m = OneNode("Tile", 13).In("x", kF32, {2, 2}).In("r", kI64, {2});
  const Tensor x = F({2, 2}, {1, 2, 3, 4});
  ExpectValues(m.Run({x, L({2}, {1, 2})}), {1, 2, 1, 2, 3, 4, 3, 4});
  ExpectValues(m.Run({x, L({2}, {2, 1})}), {1, 2, 3, 4, 1, 2, 3, 4});
  ExpectRunError(m.Run({x, L({2}, {1, -1})}), "input 1 (repeats) has an entry outside");
  // d<ct, tile(x)>/dx: the sum of the cotangent's tiles.
  ExpectValues(m.Grad0({x, L({2}, {1, 2})}, F({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})), {4, 6, 12, 14});
  // Constant repeats on a dim that is not static.
  const OneNode d = OneNode("Tile", 13).In("x", kF32, {kUnknownDim, 2}).Init("r", L({2}, {2, 1}));
  ExpectValues(d.Run({F({1, 2}, {5, 6})}), {5, 6, 5, 6});
}

// ----- GatherND -------------------------------------------------------------------------------
absl::StatusOr<std::vector<double>> GatherNd(const Tensor& data, const Tensor& idx,
                                             int64_t batch_dims = 0) {
  OneNode n("GatherND", 13);
  n.In("data", kF32, data.shape()).Init("idx", idx).Int("batch_dims", batch_dims);
  return n.Run({data});
}

// The ONNX documentation's examples, then negative indices and errors.
TEST(OnnxIndexTest, GatherND) {
  const Tensor d2 = F({2, 2}, {0, 1, 2, 3});
  const Tensor d3 = F({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  ExpectValues(GatherNd(d2, L({2, 2}, {0, 0, 1, 1})), {0, 3});
  ExpectValues(GatherNd(d2, L({2, 1}, {1, 0})), {2, 3, 0, 1});
  ExpectValues(GatherNd(d3, L({2, 2}, {0, 1, 1, 0})), {2, 3, 4, 5});
  ExpectValues(GatherNd(d3, L({2, 1, 2}, {0, 1, 1, 0})), {2, 3, 4, 5});
  ExpectValues(GatherNd(d3, L({2, 1}, {1, 0}), 1), {2, 3, 4, 5});
  ExpectValues(GatherNd(d3, L({2, 1, 2}, {1, 1, 0, 1}), 1), {3, 5});
  ExpectValues(GatherNd(d3, L({3}, {1, 0, 1})), {5});
  ExpectValues(GatherNd(d2, L({2, 2}, {-1, -2, 0, -1})), {2, 1});
  ExpectRunError(GatherNd(d2, L({1, 2}, {0, 2})), "out of range");  // not row 1, col 0
  ExpectRunError(GatherNd(d2, L({1, 2}, {-3, 0})), "out of range");
  ExpectImportError(OneNode("GatherND", 13).In("d", kF32, {2, 2}).Init("i", L({1, 3}, {0, 0, 0})),
                    "node 'n' (GatherND): indices' last dim 3 must be in [1, 2]");
  ExpectImportError(OneNode("GatherND", 13)
                        .In("d", kF32, {2, 2})
                        .Init("i", L({2, 1}, {0, 0}))
                        .Int("batch_dims", 2),
                    "batch_dims 2 must be in");
  ExpectImportError(OneNode("GatherND", 13)
                        .In("d", kF32, {2, 2})
                        .Init("i", L({3, 1}, {0, 0, 0}))
                        .Int("batch_dims", 1),
                    "batch dims");
}

// Random index tuples in [-dim, dim) for the dims of `data` from `first` on.
Tensor RandomTuples(const Shape& data, const Shape& indices, int first, std::mt19937_64& rng) {
  const int64_t k = indices.back();
  std::vector<double> v(NumElementsOf(indices));
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t dim = data[first + i % k];
    v[i] = static_cast<double>(std::uniform_int_distribution<int64_t>(-dim, dim - 1)(rng));
  }
  return L(indices, v);
}

// GatherND against ONNX's definition, element by element: out[o] =
// data[o's batch coords, the tuple at o's indices position, o's trailing coords].
TEST(OnnxIndexTest, GatherNDMatchesReference) {
  std::mt19937_64 rng(11);
  const Shape data_shape = {2, 3, 4, 5};
  struct Case {
    Shape indices;
    int64_t batch_dims;
  };
  const std::vector<Case> cases = {{{6, 1}, 0},    {{2, 3, 2}, 0}, {{4, 4}, 0},      {{2, 3}, 1},
                                   {{2, 5, 2}, 1}, {{2, 3, 1}, 2}, {{2, 3, 4, 2}, 2}};
  std::vector<double> dv(NumElementsOf(data_shape));
  for (size_t i = 0; i < dv.size(); ++i) dv[i] = static_cast<double>(i);
  const Tensor data = F(data_shape, dv);
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(ShapeToString(c.indices), " batch_dims ", c.batch_dims));
    const int b = static_cast<int>(c.batch_dims), q = static_cast<int>(c.indices.size());
    const int64_t k = c.indices.back();
    const Tensor idx = RandomTuples(data_shape, c.indices, b, rng);
    const std::vector<double> iv = kgrad::testing::ToDoubles(idx);
    Shape out_shape(c.indices.begin(), c.indices.end() - 1);
    out_shape.insert(out_shape.end(), data_shape.begin() + b + k, data_shape.end());
    std::vector<double> want(NumElementsOf(out_shape));
    for (size_t o = 0; o < want.size(); ++o) {
      const Shape oc = Unravel(out_shape, o);
      Shape dc(oc.begin(), oc.begin() + b);
      Shape ic(oc.begin(), oc.begin() + q - 1);
      ic.push_back(0);
      for (int64_t j = 0; j < k; ++j) {
        ic.back() = j;
        const int64_t v = static_cast<int64_t>(iv[Ravel(c.indices, ic)]), dim = data_shape[b + j];
        dc.push_back(v < 0 ? v + dim : v);
      }
      dc.insert(dc.end(), oc.begin() + q - 1, oc.end());
      want[o] = dv[Ravel(data_shape, dc)];
    }
    ExpectValues(GatherNd(data, idx, c.batch_dims), want);
  }
}

// The composition's constant tables are bounded: a huge declared dim is refused.
TEST(OnnxIndexTest, GatherNDRefusesHugeIndexedDims) {
  OneNode n("GatherND", 13);
  n.In("data", kF32, {int64_t{1} << 30, 2}).In("idx", kI64, {1, 1});
  ExpectImportError(n, "node 'n' (GatherND): dim 0 of data (1073741824) is too large");
  OneNode b("GatherND", 13);
  b.In("data", kF32, {1 << 19, 1 << 19, 2}).In("idx", kI64, {1 << 19, 1 << 19, 1});
  ExpectImportError(b.Int("batch_dims", 2), "hold 274877906944 batches");
}

// Indices known only at run time: the same composition, run (and checked) by the
// kernels; and its gradient in the data, a scatter-add of the cotangent.
TEST(OnnxIndexTest, GatherNDWithRunTimeIndices) {
  OneNode n("GatherND", 13);
  n.In("data", kF32, {2, 3}).In("idx", kI64, {3, 2});
  const Tensor data = F({2, 3}, {0, 1, 2, 3, 4, 5});
  ExpectValues(n.Run({data, L({3, 2}, {1, 2, -2, -1, 1, 2})}), {5, 2, 5});
  ExpectValues(n.Grad0({data, L({3, 2}, {1, 2, -2, -1, 1, 2})}, F({3}, {1, 10, 100})),
               {0, 0, 10, 0, 0, 101});
  ExpectRunError(n.Run({data, L({3, 2}, {0, 3, 0, 0, 0, 0})}), "out of range");
  OneNode b("GatherND", 13);
  b.In("data", kF32, {2, 2, 2}).In("idx", kI64, {2, 1}).Int("batch_dims", 1);
  ExpectValues(b.Run({F({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}), L({2, 1}, {1, -2})}), {2, 3, 4, 5});
}

// ----- ScatterND ------------------------------------------------------------------------------
absl::StatusOr<std::vector<double>> ScatterNd(const Tensor& data, const Tensor& idx,
                                              const Tensor& upd, const std::string& red = "") {
  OneNode n("ScatterND", red.empty() ? 13 : 18);
  n.In("data", kF32, data.shape()).Init("idx", idx).In("upd", kF32, upd.shape());
  if (!red.empty()) n.Str("reduction", red);
  return n.Run({data, upd});
}

// ScatterND with reduction add (repeated tuples accumulate) against ONNX's
// definition: out[tuple t, r..] += updates[t, r..] for every tuple in order.
TEST(OnnxIndexTest, ScatterNDMatchesReference) {
  std::mt19937_64 rng(12);
  const Shape data_shape = {3, 4, 2};
  for (const Shape& indices : std::vector<Shape>{{5, 1}, {2, 3, 2}, {6, 3}}) {
    SCOPED_TRACE(ShapeToString(indices));
    const int64_t k = indices.back();
    const Tensor idx = RandomTuples(data_shape, indices, 0, rng);
    const std::vector<double> iv = kgrad::testing::ToDoubles(idx);
    const Shape tuples(indices.begin(), indices.end() - 1);
    const Shape rest(data_shape.begin() + k, data_shape.end());
    Shape upd_shape = tuples;
    upd_shape.insert(upd_shape.end(), rest.begin(), rest.end());
    std::vector<double> dv(NumElementsOf(data_shape)), uv(NumElementsOf(upd_shape));
    for (size_t i = 0; i < dv.size(); ++i) dv[i] = static_cast<double>(i);
    for (size_t i = 0; i < uv.size(); ++i) uv[i] = 100.0 * static_cast<double>(i + 1);
    std::vector<double> want = dv;
    const int64_t n = NumElementsOf(tuples), m = NumElementsOf(rest);
    for (int64_t t = 0; t < n; ++t) {
      Shape dc;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t v = static_cast<int64_t>(iv[t * k + j]), dim = data_shape[j];
        dc.push_back(v < 0 ? v + dim : v);
      }
      for (int64_t r = 0; r < m; ++r) {
        Shape full = dc;
        const Shape rc = Unravel(rest, r);
        full.insert(full.end(), rc.begin(), rc.end());
        want[Ravel(data_shape, full)] += uv[t * m + r];
      }
    }
    ExpectValues(ScatterNd(F(data_shape, dv), idx, F(upd_shape, uv), "add"), want);
  }
}

TEST(OnnxIndexTest, ScatterND) {
  const Tensor d8 = F({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  ExpectValues(ScatterNd(d8, L({4, 1}, {4, 3, 1, 7}), F({4}, {9, 10, 11, 12})),
               {1, 11, 3, 10, 9, 6, 7, 12});
  const Tensor d2 = F({2, 2}, {1, 2, 3, 4});
  ExpectValues(ScatterNd(d2, L({1, 2}, {1, 0}), F({1}, {9})), {1, 2, 9, 4});
  ExpectValues(ScatterNd(d2, L({1, 1}, {-1}), F({1, 2}, {7, 8})), {1, 2, 7, 8});
  const Tensor twice = L({2, 1}, {0, -4});  // both hit element 0 of a [4]
  const Tensor d4 = F({4}, {1, 2, 3, 4});
  const Tensor u = F({2}, {10, 20});
  ExpectValues(ScatterNd(d4, twice, u), {20, 2, 3, 4});
  ExpectValues(ScatterNd(d4, twice, u, "add"), {31, 2, 3, 4});
  ExpectValues(ScatterNd(d4, twice, u, "mul"), {200, 2, 3, 4});
  ExpectValues(ScatterNd(d4, twice, F({2}, {-5, 0}), "max"), {1, 2, 3, 4});
  ExpectValues(ScatterNd(d4, twice, F({2}, {-5, 0}), "min"), {-5, 2, 3, 4});
  ExpectRunError(ScatterNd(d4, L({1, 1}, {4}), F({1}, {0})),
                 "node 'n' (ScatterND): index 4 (entry 0 of tuple 0) is out of range [-4, 4)");
  // Run-time indices, and the gradients of reduction none: dy with the written
  // elements zeroed for the data, dy at them for the updates.
  OneNode rt("ScatterND", 13);
  rt.In("data", kF32, {2, 2}).In("idx", kI64, {1, 2}).In("upd", kF32, {1});
  ExpectValues(rt.Run({d2, L({1, 2}, {-1, 1}), F({1}, {9})}), {1, 2, 3, 9});
  ExpectValues(rt.Grad0({d2, L({1, 2}, {-1, 1}), F({1}, {9})}, F({2, 2}, {1, 2, 3, 4})),
               {1, 2, 3, 0});
  ExpectRunError(rt.Run({d2, L({1, 2}, {2, 0}), F({1}, {9})}), "out of range");
  ExpectImportError(
      OneNode("ScatterND", 13).In("d", kF32, {2, 2}).Init("i", L({1, 1}, {0})).In("u", kF32, {1}),
      "node 'n' (ScatterND): updates must be shaped [1,2]");
}

// ----- Export ----------------------------------------------------------------------------------
// Each new primitive goes out as ONNX (Mod on floats without fmod as a Where
// over Mod{fmod=1}), comes back through the importer and gives the same numbers.
TEST(OnnxIndexTest, ExportRoundTrip) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", kF32, {2, 3});
  AnfNode* z = b.Param("z", kF32, {2, 3});
  AnfNode* idx = b.Const(Value(L({2, 3}, {1, 0, -1, 0, 1, 1})));
  const AttrMap axis0 = {{"axis", int64_t{0}}};
  std::vector<AnfNode*> outs = {
      b.Op(PrimId::kFloor, {x}),
      b.Op(PrimId::kCeil, {x}),
      b.Op(PrimId::kRound, {x}),
      b.Op(PrimId::kMod, {x, z}),
      b.Op(PrimId::kMod, {x, z}, {{"fmod", true}}),
      b.Op(PrimId::kGatherElements, {x, idx}, axis0),
      b.Op(PrimId::kScatterElements, {x, idx, z},
           {{"axis", int64_t{0}}, {"reduction", std::string("add")}}),
      b.Op(PrimId::kCumSum, {x}, {{"axis", int64_t{1}}, {"exclusive", true}, {"reverse", true}})};
  absl::StatusOr<FuncGraph*> f = b.Return(b.Tuple(outs));
  ASSERT_TRUE(f.ok()) << f.status();
  const std::vector<Value> args = {F({2, 3}, {-2.5, -1.25, 0.5, 1.5, 3.75, 7}),
                                   F({2, 3}, {2, -2, 0.75, -1, 1.5, 3})};
  ExportRoundTrip r;
  ASSERT_NO_FATAL_FAILURE(ExpectExactExportRoundTrip(m, *f, args, &r));
  ASSERT_EQ(r.want.size(), outs.size());
  // Spot checks of the originals: mod's signs and the reversed exclusive sum.
  EXPECT_THAT(ToDoubles(r.want[3]), ElementsAreArray(std::vector<double>{1.5, -1.25, 0.5, -0.5, 0.75, 1}));
  EXPECT_THAT(ToDoubles(r.want[7]),
              ElementsAreArray(std::vector<double>{-0.75, 0.5, 0, 10.75, 7, 0}));
}

TEST(OnnxIndexTest, ExportRefusesScatterMaxAtOpset17) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", kF32, {3});
  AnfNode* y =
      b.Op(PrimId::kScatterElements, {x, b.Const(Value(L({1}, {0}))), b.Const(Value(F({1}, {5})))},
           {{"reduction", std::string("max")}});
  absl::StatusOr<FuncGraph*> f = b.Return(y);
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<onnx::ModelProto> model = ExportOnnx(m, *f);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("reduction 'max' needs opset 18"));
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
