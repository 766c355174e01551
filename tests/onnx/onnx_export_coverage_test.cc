// The export covers the whole primitive set: every PrimId has exactly one
// emitter or exactly one entry in the not-exportable table
// (proto/onnx/onnx_not_exportable.cc), whose reason the export's error gives. The
// primitives whose emitters came with the per-family tables (tuple_setitem, the
// run-time-axes ops, the cross-entropies) go out, come back through the importer
// and compute the same values.
#include <functional>
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

// f = body(b) (its parameters declared there) exported, imported back and
// compared with itself at `args` (to `tol`).
void ExpectRoundTrip(const std::function<AnfNode*(GraphBuilder& b)>& body, const std::vector<Value>& args,
                     double tol = 0) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  absl::StatusOr<FuncGraph*> f = b.Return(body(b));
  ASSERT_TRUE(f.ok()) << f.status();
  ExportRoundTrip r;
  ASSERT_NO_FATAL_FAILURE(RunExportRoundTrip(m, *f, args, &r));
  for (size_t i = 0; i < r.want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(r.got[i].shape(), r.want[i].shape());
    ExpectClose(Value(r.got[i]), r.want[i], tol, "output");
  }
}

// tuple_setitem((x, y), 1, z) flattens to the outputs x, z.
TEST(OnnxExportCoverage, TupleSetItem) {
  ExpectRoundTrip(
      [](GraphBuilder& b) {
        AnfNode* x = b.Param("x", kF32, {2});
        AnfNode* y = b.Param("y", kF32, {2});
        AnfNode* z = b.Param("z", kF32, {2});
        return b.Op(PrimId::kTupleSetItem, {b.Tuple({x, y}), b.Int(1), b.Op(PrimId::kNeg, {z})});
      },
      {Value(MakeTensor(kF32, {2}, {1, 2})), Value(MakeTensor(kF32, {2}, {3, 4})),
       Value(MakeTensor(kF32, {2}, {5, 6}))});
}

// Axes, axis and repeats as graph inputs: Unsqueeze, Squeeze, ReduceSum, CumSum,
// Tile and Split with run-time operands, which import as the same primitives.
TEST(OnnxExportCoverage, RunTimeAxesOps) {
  ExpectRoundTrip(
      [](GraphBuilder& b) {
        AnfNode* x = b.Param("x", kF32, {2, 3});
        AnfNode* axes = b.Param("axes", kI64, {1});
        AnfNode* axis = b.Param("axis", kI64, {});
        AnfNode* repeats = b.Param("repeats", kI64, {2});
        AnfNode* sizes = b.Param("sizes", kI64, {2});
        AnfNode* u = b.Op(PrimId::kDynamicUnsqueeze, {x, axes});
        AnfNode* split = b.Op(PrimId::kDynamicSplit, {x, sizes}, {{"axis", int64_t{1}}});
        return b.Tuple({u, b.Op(PrimId::kDynamicSqueeze, {u, axes}),
                        b.Op(PrimId::kDynamicReduceSum, {x, axes}, {{"keepdims", false}}),
                        b.Op(PrimId::kDynamicCumSum, {x, axis}, {{"exclusive", true}, {"reverse", true}}),
                        b.Op(PrimId::kDynamicTile, {x, repeats}), b.GetItem(split, 0), b.GetItem(split, 1)});
      },
      {Value(MakeTensor(kF32, {2, 3}, {1, 2, 3, 4, 5, 6})), Value(MakeTensor(kI64, {1}, {1})),
       Value(MakeTensor(kI64, {}, {1})), Value(MakeTensor(kI64, {2}, {2, 1})), Value(MakeTensor(kI64, {2}, {1, 2}))});
}

// softmax_cross_entropy as -ReduceSum(labels * LogSoftmax(logits)), and
// sparse_softmax_cross_entropy as SoftmaxCrossEntropyLoss{reduction=none}.
TEST(OnnxExportCoverage, CrossEntropies) {
  ExpectRoundTrip(
      [](GraphBuilder& b) {
        AnfNode* logits = b.Param("logits", kF64, {2, 3});
        AnfNode* probs = b.Param("probs", kF64, {2, 3});
        AnfNode* labels = b.Param("labels", kI64, {2});
        return b.Tuple({b.Op(PrimId::kSoftmaxCrossEntropy, {logits, probs}, {{"axis", int64_t{1}}}),
                        b.Op(PrimId::kSparseSoftmaxCrossEntropy, {logits, labels})});
      },
      {kgrad::testing::F64({2, 3}, {0.5, -1, 2, 0, 0.25, -0.5}), kgrad::testing::F64({2, 3}, {0.2, 0.3, 0.5, 1, 0, 0}),
       Value(MakeTensor(kI64, {2}, {2, 0}))},
      1e-14);
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
