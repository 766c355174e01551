// The export covers the whole primitive set: every PrimId has exactly one
// emitter or exactly one entry in the not-exportable table
// (proto/onnx/onnx_not_exportable.cc), whose reason the export's error gives. The
// primitives whose emitters came with the per-family tables (tuple_setitem, the
// run-time-axes ops, the cross-entropies) go out, come back through the importer
// and compute the same values.
#include <memory>
#include <string>
#include <vector>

#include "core/builder.h"
#include "proto/onnx/onnx_export.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

using ::testing::HasSubstr;
using kgrad::testing::MakeTensor;

TEST(OnnxExportCoverage, EveryPrimitiveExportsOrSaysWhy) {
  for (int i = 0; i < kNumPrimIds; ++i) {
    const PrimId id = static_cast<PrimId>(i);
    SCOPED_TRACE(PrimIdName(id));
    const OnnxExportSupport s = OnnxExportSupportOf(id);
    EXPECT_LE(s.emitters, 1) << "registered by more than one family";
    EXPECT_LE(s.refusals, 1) << "listed twice as not exportable";
    EXPECT_TRUE((s.emitters == 1) != (s.refusals == 1))
        << (s.emitters == 0 ? "neither exported nor listed as not exportable (with a reason)"
                            : "both exported and listed as not exportable");
    if (s.refusals == 1) {
      ASSERT_NE(s.reason, nullptr);
      EXPECT_GT(std::string(s.reason).size(), 10u) << "say why";
    }
  }
}

TEST(OnnxExportCoverage, ErrorGivesTheReason) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat32, {4});
  absl::StatusOr<FuncGraph*> g = b.Return(b.Op(PrimId::kDropout, {x}, {{"rate", 0.5}}));
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<onnx::ModelProto> model = ExportOnnx(m, *g);
  ASSERT_FALSE(model.ok());
  const std::string message(model.status().message());
  EXPECT_THAT(message, HasSubstr("cannot export to ONNX: dropout is random: "));
  EXPECT_THAT(message, HasSubstr(OnnxExportSupportOf(PrimId::kDropout).reason));
}

// Exports f, imports it back and compares the outputs at `args` (to `tol`).
void ExpectRoundTrip(Module& m, FuncGraph* f, const std::vector<Value>& args, double tol = 0) {
  absl::StatusOr<Value> want = RunGraph(f, args);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<onnx::ModelProto> model = ExportOnnx(m, f);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::unique_ptr<Module>> back = ImportOnnx(*model, DefaultRegistry(), OnnxImportOptions());
  ASSERT_TRUE(back.ok()) << back.status();
  absl::StatusOr<Value> got = RunGraph((*back)->entry(), args);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<Tensor> w, g;
  for (const Value* v : {&*want, &*got}) {
    std::vector<Tensor>& out = v == &*want ? w : g;
    if (v->is_tensor()) out.push_back(v->tensor());
    for (size_t i = 0; v->is_tuple() && i < v->tuple().size(); ++i) out.push_back(v->tuple()[i].tensor());
  }
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(g[i].shape(), w[i].shape());
    ExpectClose(Value(g[i]), w[i], tol, "output");
  }
}

// tuple_setitem((x, y), 1, z) flattens to the outputs x, z.
TEST(OnnxExportCoverage, TupleSetItem) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat32, {2});
  AnfNode* y = b.Param("y", DType::kFloat32, {2});
  AnfNode* z = b.Param("z", DType::kFloat32, {2});
  AnfNode* t = b.Op(PrimId::kTupleSetItem, {b.Tuple({x, y}), b.Int(1), b.Op(PrimId::kNeg, {z})});
  absl::StatusOr<FuncGraph*> f = b.Return(t);
  ASSERT_TRUE(f.ok()) << f.status();
  ExpectRoundTrip(m, *f, {Value(MakeTensor(DType::kFloat32, {2}, {1, 2})),
                          Value(MakeTensor(DType::kFloat32, {2}, {3, 4})),
                          Value(MakeTensor(DType::kFloat32, {2}, {5, 6}))});
}

// Axes, axis and repeats as graph inputs: Unsqueeze, Squeeze, ReduceSum, CumSum,
// Tile and Split with run-time operands, which import as the same primitives.
TEST(OnnxExportCoverage, RunTimeAxesOps) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat32, {2, 3});
  AnfNode* axes = b.Param("axes", DType::kInt64, {1});
  AnfNode* axis = b.Param("axis", DType::kInt64, {});
  AnfNode* repeats = b.Param("repeats", DType::kInt64, {2});
  AnfNode* sizes = b.Param("sizes", DType::kInt64, {2});
  AnfNode* u = b.Op(PrimId::kDynamicUnsqueeze, {x, axes});
  AnfNode* split = b.Op(PrimId::kDynamicSplit, {x, sizes}, {{"axis", int64_t{1}}});
  std::vector<AnfNode*> outs = {
      u,
      b.Op(PrimId::kDynamicSqueeze, {u, axes}),
      b.Op(PrimId::kDynamicReduceSum, {x, axes}, {{"keepdims", false}}),
      b.Op(PrimId::kDynamicCumSum, {x, axis}, {{"exclusive", true}, {"reverse", true}}),
      b.Op(PrimId::kDynamicTile, {x, repeats}),
      b.GetItem(split, 0),
      b.GetItem(split, 1)};
  absl::StatusOr<FuncGraph*> f = b.Return(b.Tuple(outs));
  ASSERT_TRUE(f.ok()) << f.status();
  ExpectRoundTrip(m, *f, {Value(MakeTensor(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6})),
                          Value(MakeTensor(DType::kInt64, {1}, {1})),
                          Value(MakeTensor(DType::kInt64, {}, {1})),
                          Value(MakeTensor(DType::kInt64, {2}, {2, 1})),
                          Value(MakeTensor(DType::kInt64, {2}, {1, 2}))});
}

// softmax_cross_entropy as -ReduceSum(labels * LogSoftmax(logits)), and
// sparse_softmax_cross_entropy as SoftmaxCrossEntropyLoss{reduction=none}.
TEST(OnnxExportCoverage, CrossEntropies) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* logits = b.Param("logits", DType::kFloat64, {2, 3});
  AnfNode* probs = b.Param("probs", DType::kFloat64, {2, 3});
  AnfNode* labels = b.Param("labels", DType::kInt64, {2});
  absl::StatusOr<FuncGraph*> f =
      b.Return(b.Tuple({b.Op(PrimId::kSoftmaxCrossEntropy, {logits, probs}, {{"axis", int64_t{1}}}),
                        b.Op(PrimId::kSparseSoftmaxCrossEntropy, {logits, labels})}));
  ASSERT_TRUE(f.ok()) << f.status();
  ExpectRoundTrip(m, *f, {kgrad::testing::F64({2, 3}, {0.5, -1, 2, 0, 0.25, -0.5}),
                          kgrad::testing::F64({2, 3}, {0.2, 0.3, 0.5, 1, 0, 0}),
                          Value(MakeTensor(DType::kInt64, {2}, {2, 0}))},
                  1e-14);
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
