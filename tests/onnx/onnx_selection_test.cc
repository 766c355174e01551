// ONNX import and export of selection by value (TopK, NonZero;
// proto/onnx/onnx_index_ops.cc) on one-node models: ONNX's own examples at each
// form (k an attribute before opset 10, an input after), K known at import (a
// static dim) or computed at run time (an unknown dim), the errors naming the
// node, gradients through the imported graph, and the export round trip.
#include <random>
#include <string>
#include <vector>

#include "core/builder.h"
#include "core/infer.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_export.h"
#include "tests/onnx/onnx_one_node.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

Tensor K(int64_t k) { return MakeTensor(kI64, {1}, {static_cast<double>(k)}); }
Tensor Iota34() { return MakeTensor(kF64, {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}); }

// The imported model's output type, and its outputs' elements on `args`.
std::string OutputType(const OneNode& model) {
  absl::StatusOr<std::unique_ptr<Module>> m = model.Import();
  if (!m.ok()) return std::string(m.status().message());
  absl::StatusOr<AbstractPtr> t = InferGraph((*m)->entry());
  return t.ok() ? (*t)->ToString() : std::string(t.status().message());
}
absl::StatusOr<std::vector<std::vector<double>>> Outputs(const OneNode& model,
                                                        std::vector<Value> args) {
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, model.Import());
  KGRAD_ASSIGN_OR_RETURN(Value v, RunGraph(m->entry(), std::move(args)));
  if (v.is_tensor()) return std::vector<std::vector<double>>{ToDoubles(v.tensor())};
  std::vector<std::vector<double>> out;
  for (const Value& e : v.tuple()) out.push_back(ToDoubles(e.tensor()));
  return out;
}
void ExpectOutputs(const OneNode& model, std::vector<Value> args,
                   const std::vector<std::vector<double>>& want) {
  absl::StatusOr<std::vector<std::vector<double>>> got = Outputs(model, std::move(args));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_THAT((*got)[i], ElementsAreArray(want[i])) << i;
}

// ----- TopK ---------------------------------------------------------------------------------
// onnx/backend/test/case/node/topk.py: test_top_k, test_top_k_negative_axis,
// test_top_k_smallest, with K an input (opsets 10, 11) or the attribute k
// (opsets 1 and 9: the form before 10).
TEST(OnnxSelectionTest, TopKOnnxExamples) {
  const std::vector<std::vector<double>> largest = {{3, 2, 1, 7, 6, 5, 11, 10, 9},
                                                    {3, 2, 1, 3, 2, 1, 3, 2, 1}};
  for (int opset : {10, 11, 17}) {
    SCOPED_TRACE(opset);
    OneNode m("TopK", opset);
    m.In({3, 4}).Const(K(3)).Set({{"axis", int64_t{1}}}).TwoOutputs();
    EXPECT_EQ(OutputType(m), "(f64[3,3], i64[3,3])");
    ExpectOutputs(m, {Iota34()}, largest);
    OneNode neg("TopK", opset);
    neg.In({3, 4}).Const(K(3)).Set({{"axis", int64_t{-1}}}).TwoOutputs();
    ExpectOutputs(neg, {Iota34()}, largest);
  }
  for (int opset : {1, 9}) {
    SCOPED_TRACE(opset);
    OneNode m("TopK", opset);
    m.In({3, 4}).Set({{"axis", int64_t{1}}, {"k", int64_t{3}}}).TwoOutputs();
    EXPECT_EQ(OutputType(m), "(f64[3,3], i64[3,3])");
    ExpectOutputs(m, {Iota34()}, largest);
  }
  OneNode smallest("TopK", 11);
  smallest.In({3, 4}).Const(K(3)).Set({{"axis", int64_t{1}}, {"largest", int64_t{0}},
                                       {"sorted", int64_t{1}}}).TwoOutputs();
  ExpectOutputs(smallest,
                {MakeTensor(kF64, {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 11, 10, 9, 8})},
                {{0, 1, 2, 4, 5, 6, 8, 9, 10}, {0, 1, 2, 0, 1, 2, 3, 2, 1}});
  // Ties: the lower index first.
  OneNode ties("TopK", 11);
  ties.In({5}).Const(K(2)).TwoOutputs();
  ExpectOutputs(ties, {MakeTensor(kF64, {5}, {1, 4, 2, 4, 4})}, {{4, 4}, {1, 3}});
}

// K computed at run time: the dim at axis is unknown at import and K's value is
// checked when the model runs.
TEST(OnnxSelectionTest, TopKRunTimeK) {
  OneNode m("TopK", 11);
  m.In({3, 4}).In({1}, kI64).Set({{"axis", int64_t{0}}, {"largest", int64_t{0}}}).TwoOutputs();
  EXPECT_EQ(OutputType(m), "(f64[?,4], i64[?,4])");
  ExpectOutputs(m, {Iota34(), K(2)}, {{0, 1, 2, 3, 4, 5, 6, 7}, {0, 0, 0, 0, 1, 1, 1, 1}});
  ExpectOutputs(m, {Iota34(), K(0)}, {{}, {}});
  absl::StatusOr<std::vector<std::vector<double>>> r = Outputs(m, {Iota34(), K(4)});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("topk: input 1 (k) 4 is larger than dim 0 of input 0, f64[3,4], 3"));
  r = Outputs(m, {Iota34(), K(-2)});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("must be >= 0, got -2"));
}

TEST(OnnxSelectionTest, TopKErrorsNameTheNode) {
  auto topk = [](const Tensor& k, std::initializer_list<Attr> attrs) {
    OneNode m("TopK", 11);
    m.In({3, 4}).Const(k).Set(attrs).TwoOutputs();
    return m;
  };
  EXPECT_THAT(ImportError(topk(K(5), {})),
              HasSubstr("node 'n' (TopK): topk: input 1 (k) 5 is larger than dim 1 of input 0, "
                        "f64[3,4], 4"));
  EXPECT_THAT(ImportError(topk(K(-1), {})),
              HasSubstr("node 'n' (TopK): topk: input 1 (k) must be >= 0, got -1"));
  EXPECT_THAT(ImportError(topk(K(1), {{"axis", int64_t{2}}})),
              HasSubstr("node 'n' (TopK): attribute 'axis' of topk on f64[3,4]"));
  EXPECT_THAT(ImportError(topk(K(1), {{"largest", int64_t{2}}})),
              HasSubstr("node 'n' (TopK): largest and sorted must be 0 or 1, got 2 and 1"));
  EXPECT_THAT(ImportError(topk(MakeTensor(kF64, {1}, {1}), {})),
              HasSubstr("input 1 (k) must be an i32 or i64 scalar (rank 0 or shape [1])"));
  EXPECT_THAT(ImportError(topk(MakeTensor(kI64, {2}, {1, 1}), {})), HasSubstr("got i64[2]"));
  OneNode no_k("TopK", 9);
  no_k.In({3, 4}).TwoOutputs();
  EXPECT_THAT(ImportError(no_k),
              HasSubstr("node 'n' (TopK): attribute 'k' is required before opset 10"));
  OneNode one_input("TopK", 11);
  one_input.In({3, 4}).TwoOutputs();
  EXPECT_THAT(ImportError(one_input), HasSubstr("node 'n' (TopK): has 1 inputs, expected 2"));
}

// The Values output differentiated through the imported graph (reverse mode to
// the second order, and Jvp), K a constant or a run-time input.
TEST(OnnxSelectionTest, TopKGradients) {
  std::mt19937_64 rng(11);
  const Value x = testing::RandomF64({3, 5}, rng);
  OneNode constant_k("TopK", 11);
  constant_k.In({3, 5}).Const(K(2)).TwoOutputs();
  absl::StatusOr<std::unique_ptr<Module>> m = constant_k.Import();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(testing::GraphGradientOk(**m, (*m)->entry(), {x}, testing::Order(2, 7),
                                       /*nonvacuous=*/false));
  EXPECT_TRUE(testing::GraphGradientOk(**m, (*m)->entry(), {x}, testing::Order(1, 7),
                                       /*nonvacuous=*/true));
  OneNode run_time_k("TopK", 11);
  run_time_k.In({3, 5}).In({1}, kI64).Set({{"axis", int64_t{0}}}).TwoOutputs();
  m = run_time_k.Import();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(testing::GraphGradientOk(**m, (*m)->entry(), {x, Value(K(2))}, testing::Order(1, 7),
                                       /*nonvacuous=*/true));
}

// ----- NonZero ------------------------------------------------------------------------------
// onnx/backend/test/case/node/nonzero.py's example, at opsets 9 and 13.
TEST(OnnxSelectionTest, NonZero) {
  for (int opset : {9, 13}) {
    SCOPED_TRACE(opset);
    OneNode m("NonZero", opset);
    m.In({2, 2}, DType::kBool);
    EXPECT_EQ(OutputType(m), "i64[2,?]");
    ExpectOutputs(m, {MakeTensor(DType::kBool, {2, 2}, {1, 0, 1, 1})}, {{0, 1, 1, 0, 0, 1}});
  }
  OneNode f("NonZero", 13);
  f.In({2, 3});
  ExpectOutputs(f, {MakeTensor(kF64, {2, 3}, {0, -1, 0, 2.5, 0, 0})}, {{0, 1, 1, 0}});
  OneNode two("NonZero", 13);
  two.In({2}).In({2});
  EXPECT_THAT(ImportError(two), HasSubstr("node 'n' (NonZero): has 2 inputs, expected 1"));
}

// ----- Export --------------------------------------------------------------------------------
// topk (k of rank 0 and i32, or ONNX's i64 [1]) and nonzero go out as TopK and
// NonZero, come back through the importer and give the same numbers.
TEST(OnnxSelectionTest, ExportRoundTrip) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat32, {2, 3});
  AnfNode* k2 = b.Const(Value(MakeTensor(DType::kInt32, {}, {2})));
  AnfNode* k1 = b.Const(Value(K(1)));
  AnfNode* top = b.Op(PrimId::kTopK, {x, k2}, {{"axis", int64_t{1}}});
  AnfNode* low = b.Op(PrimId::kTopK, {x, k1}, {{"axis", int64_t{0}}, {"largest", false}});
  AnfNode* zero = b.Const(Value(MakeTensor(DType::kFloat32, {}, {0})));
  std::vector<AnfNode*> outs = {b.GetItem(top, 0), b.GetItem(top, 1), b.GetItem(low, 0),
                                b.GetItem(low, 1),
                                b.Op(PrimId::kNonZero, {b.Op(PrimId::kGreater, {x, zero})})};
  absl::StatusOr<FuncGraph*> fg = b.Return(b.Tuple(outs));
  ASSERT_TRUE(fg.ok()) << fg.status();
  const std::vector<Value> args = {
      Value(MakeTensor(DType::kFloat32, {2, 3}, {0.5, -2, 3, 1, 4, -1}))};
  ExportRoundTrip r;
  ASSERT_NO_FATAL_FAILURE(ExpectExactExportRoundTrip(m, *fg, args, &r));
  ASSERT_EQ(r.want.size(), outs.size());
  std::vector<std::string> ops;
  for (const onnx::NodeProto& n : r.model.graph().node()) ops.push_back(n.op_type());
  EXPECT_THAT(ops, ::testing::Contains("TopK").Times(2));
  EXPECT_THAT(ops, ::testing::Contains("NonZero"));
  // Spot checks of the originals: row-wise top 2, column-wise minimum, positives.
  EXPECT_THAT(ToDoubles(r.want[1]), ElementsAreArray({2, 0, 1, 0}));
  EXPECT_THAT(ToDoubles(r.want[3]), ElementsAreArray({0, 0, 1}));
  EXPECT_THAT(ToDoubles(r.want[4]), ElementsAreArray({0, 0, 1, 1, 0, 2, 0, 1}));
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
