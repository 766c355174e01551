// ONNX Resize and Upsample: every mode and coordinate transform against a
// reference written from the spec, gradients by finite differences, and the
// run-time form (scales, sizes or roi as graph inputs) against the import-time one.
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/passes/optimize.h"
#include "proto/onnx/onnx_tensor.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/testing/grad_test_util.h"

#include "tests/onnx/onnx_one_node.h"

namespace kgrad {
namespace onnx_test {
namespace {

using ::testing::HasSubstr;

// ----- Resize -------------------------------------------------------------------------------

// One axis of a reference resize: the spec's coordinate transform, then the
// mode's taps on an edge-padded input (index clamped), weights from the spec.
struct RefAxis {
  int64_t in, out;
  double scale;  // used by the transforms
  double roi_start = 0, roi_end = 1;
};

struct RefMode {
  std::string mode = "nearest", transform = "half_pixel", nearest = "round_prefer_floor";
  double a = -0.75;
  bool exclude = false;
  double extrapolation = 0;
};

double RefOriginal(const RefMode& m, const RefAxis& ax, int64_t o) {
  const double x = o, in = ax.in, out = ax.out, s = ax.scale;
  if (m.transform == "half_pixel") return (x + 0.5) / s - 0.5;
  if (m.transform == "pytorch_half_pixel") return ax.out > 1 ? (x + 0.5) / s - 0.5 : 0;
  if (m.transform == "align_corners") {  // length_resized = in * scale (out for sizes)
    return in * s == 1 ? 0 : x * (in - 1) / (in * s - 1);
  }
  if (m.transform == "asymmetric") return x / s;
  if (m.transform == "tf_half_pixel_for_nn") return (x + 0.5) / s;
  if (m.transform == "half_pixel_symmetric") {
    return in / 2 * (1 - out / (s * in)) + (x + 0.5) / s - 0.5;
  }
  return ax.out > 1 ? ax.roi_start * (in - 1) + x * (ax.roi_end - ax.roi_start) * (in - 1) / (out - 1)
                    : 0.5 * (ax.roi_start + ax.roi_end) * (in - 1);
}

// (index, weight) pairs of output o; empty when tf_crop_and_resize extrapolates.
std::vector<std::pair<int64_t, double>> RefTaps(const RefMode& m, const RefAxis& ax, int64_t o) {
  const double x = RefOriginal(m, ax, o);
  if (m.transform == "tf_crop_and_resize" && (x < 0 || x > ax.in - 1)) return {};
  auto edge = [&](int64_t i) { return std::min<int64_t>(std::max<int64_t>(i, 0), ax.in - 1); };
  const double f = std::floor(x), r = x - f;
  if (m.mode == "nearest") {
    double n = std::round(x);
    if (m.nearest == "round_prefer_floor" && r == 0.5) n = f;
    if (m.nearest == "round_prefer_ceil" && r == 0.5) n = f + 1;
    if (m.nearest == "floor") n = f;
    if (m.nearest == "ceil") n = std::ceil(x);
    return {{edge(static_cast<int64_t>(n)), 1.0}};
  }
  if (m.mode == "linear") return {{edge(f), 1 - r}, {edge(f + 1), r}};
  const double a = m.a;
  auto k = [a](double d) {  // Keys' cubic kernel at distance d
    d = std::abs(d);
    if (d <= 1) return (a + 2) * d * d * d - (a + 3) * d * d + 1;
    if (d < 2) return a * d * d * d - 5 * a * d * d + 8 * a * d - 4 * a;
    return 0.0;
  };
  std::vector<std::pair<int64_t, double>> taps;
  double sum = 0;
  for (int t = -1; t <= 2; ++t) {
    const int64_t i = static_cast<int64_t>(f) + t;
    const double w = m.exclude && (i < 0 || i >= ax.in) ? 0 : k(x - i);
    taps.push_back({edge(i), w});
    sum += w;
  }
  if (m.exclude) {
    for (auto& tw : taps) tw.second /= sum;
  }
  return taps;
}

// y[o] = sum over every combination of the axes' taps of prod(weights) * x[index]
// (not separable on purpose: the lowering is).
Tensor RefResize(const Tensor& xt, const RefMode& m, const std::vector<RefAxis>& axes) {
  Nd x(xt);
  Shape out = x.shape;
  for (size_t d = 0; d < axes.size(); ++d) out[d] = axes[d].out;
  Nd y(out);
  ForEach(out, [&](const std::vector<int64_t>& o) {
    std::vector<std::vector<std::pair<int64_t, double>>> taps;
    bool outside = false;
    for (size_t d = 0; d < axes.size(); ++d) {
      taps.push_back(axes[d].in == axes[d].out && axes[d].scale == 1 && m.transform != "tf_crop_and_resize"
                         ? std::vector<std::pair<int64_t, double>>{{o[d], 1.0}}
                         : RefTaps(m, axes[d], o[d]));
      outside = outside || taps.back().empty();
    }
    if (outside) {
      y.at(o) = m.extrapolation;
      return;
    }
    Shape counts;
    for (const auto& t : taps) counts.push_back(t.size());
    double acc = 0;
    ForEach(counts, [&](const std::vector<int64_t>& c) {
      std::vector<int64_t> i(out.size());
      double w = 1;
      for (size_t d = 0; d < out.size(); ++d) i[d] = taps[d][c[d]].first, w *= taps[d][c[d]].second;
      acc += w * x.at(i);
    });
    y.at(o) = acc;
  });
  return y.ToTensor();
}

Tensor Floats(std::vector<float> v) { return Tensor::FromVector<float>({static_cast<int64_t>(v.size())}, v); }
Tensor Ints64(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v); }

// Resize-13 of x [1, 2, 4, 5] by scales [1, 1, 1.5, 0.7] (-> [1, 2, 6, 3]). The
// heights have exact ties (half_pixel: 0.5 at o = 1) for the nearest modes; the
// widths none that float32 scales would blur (ONNX Runtime rounds in float32,
// the ONNX reference and kgrad in float64).
void ExpectScaled(const RefMode& m, bool check_grad) {
  SCOPED_TRACE(absl::StrCat(m.mode, " ", m.transform, " ", m.nearest, " a=", m.a, " exclude=", m.exclude));
  Tensor x = Random({1, 2, 4, 5}, 21);
  std::vector<RefAxis> axes = {{1, 1, 1}, {2, 2, 1}, {4, 6, 1.5}, {5, 3, 0.7f}};
  ExpectModel(OneNode("Resize", 13).In({1, 2, 4, 5}).Skip().Const(Floats({1, 1, 1.5, 0.7f}))
                  .Set({{"mode", m.mode}, {"coordinate_transformation_mode", m.transform},
                        {"nearest_mode", m.nearest}, {"cubic_coeff_a", m.a}, {"exclude_outside", int64_t{m.exclude}}}),
              {x}, RefResize(x, m, axes), check_grad);
}

TEST(OnnxResize, NearestModesAndTransforms) {
  for (const char* t : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"}) {
    for (const char* n : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      ExpectScaled(RefMode{"nearest", t, n}, false);
    }
  }
  ExpectScaled(RefMode{"nearest", "half_pixel", "round_prefer_floor"}, true);
}

TEST(OnnxResize, LinearAndCubic) {
  for (const char* t : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"}) {
    ExpectScaled(RefMode{"linear", t}, std::string(t) == "half_pixel");
    ExpectScaled(RefMode{"cubic", t, "floor", -0.75, false}, std::string(t) == "half_pixel");
    ExpectScaled(RefMode{"cubic", t, "floor", -0.5, true}, false);
  }
}

TEST(OnnxResize, HandComputed) {
  // Nearest, asymmetric/floor (PyTorch's), scale 2: each cell twice.
  Tensor x = Tensor::FromVector<double>({1, 1, 1, 2}, {1, 2});
  ExpectModel(OneNode("Resize", 13).In({1, 1, 1, 2}).Skip().Const(Floats({1, 1, 1, 2}))
                  .Set({{"coordinate_transformation_mode", std::string("asymmetric")},
                        {"nearest_mode", std::string("floor")}}),
              {x}, Tensor::FromVector<double>({1, 1, 1, 4}, {1, 1, 2, 2}), false);
  // Linear, align_corners, 2 -> 4 cells: 0, 1, 2, 3 from 0 and 3.
  Tensor y = Tensor::FromVector<double>({1, 1, 1, 2}, {0, 3});
  ExpectModel(OneNode("Resize", 13).In({1, 1, 1, 2}).Skip().Skip().Const(Ints64({1, 1, 1, 4}))
                  .Set({{"mode", std::string("linear")},
                        {"coordinate_transformation_mode", std::string("align_corners")}}),
              {y}, Tensor::FromVector<double>({1, 1, 1, 4}, {0, 1, 2, 3}), false);
}

TEST(OnnxResize, TrilinearUnknownBatch) {
  Tensor x = Random({2, 1, 3, 2, 4}, 22);
  ExpectModel(OneNode("Resize", 13).In({kUnknownDim, 1, 3, 2, 4}).Skip().Const(Floats({1, 1, 2, 1.5, 0.5}))
                  .Set({{"mode", std::string("linear")}}),
              {x}, RefResize(x, RefMode{"linear", "half_pixel"},
                             {{2, 2, 1}, {1, 1, 1}, {3, 6, 2}, {2, 3, 1.5}, {4, 2, 0.5}}));
}

TEST(OnnxResize, AxesAndKeepAspectRatio) {
  Tensor x = Random({1, 2, 4, 6}, 23);
  RefMode m{"linear", "half_pixel_symmetric"};
  // sizes [8, 8] on axes (2, 3): not_larger takes min(8/4, 8/6) = 4/3 for both
  // axes, out = round(4 * 4/3) = 5, round(6 * 4/3) = 8.
  const double s = 8.0 / 6;
  ExpectModel(OneNode("Resize", 19).In({1, 2, 4, 6}).Skip().Skip().Const(Ints64({8, 8}))
                  .Set({{"mode", std::string("linear")}, {"axes", I({2, 3})},
                        {"coordinate_transformation_mode", std::string("half_pixel_symmetric")},
                        {"keep_aspect_ratio_policy", std::string("not_larger")}}),
              {x}, RefResize(x, m, {{1, 1, 1}, {2, 2, 1}, {4, 5, s}, {6, 8, s}}), false);
  RefMode n{"nearest", "asymmetric", "floor"};
  // not_smaller: max(3/4, 2/6) = 3/4 -> out 3 and round(4.5) = 5 (half up).
  ExpectModel(OneNode("Resize", 18).In({1, 2, 4, 6}).Skip().Skip().Const(Ints64({3, 2}))
                  .Set({{"axes", I({-2, -1})}, {"coordinate_transformation_mode", std::string("asymmetric")},
                        {"nearest_mode", std::string("floor")},
                        {"keep_aspect_ratio_policy", std::string("not_smaller")}}),
              {x}, RefResize(x, n, {{1, 1, 1}, {2, 2, 1}, {4, 3, 0.75}, {6, 5, 0.75}}), false);
}

TEST(OnnxResize, TfCropAndResize) {
  Tensor x = Random({1, 1, 4, 5}, 24);
  RefMode m{"linear", "tf_crop_and_resize"};
  m.extrapolation = 7;  // the crop [-0.2, 0.6] x [0.1, 1.3] reaches outside the input
  ExpectModel(OneNode("Resize", 13).In({1, 1, 4, 5}).Const(Floats({0, 0, -0.2f, 0.1f, 1, 1, 0.6f, 1.3f})).Skip()
                  .Const(Ints64({1, 1, 3, 4}))
                  .Set({{"mode", std::string("linear")},
                        {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                        {"extrapolation_value", 7.0}}),
              {x}, RefResize(x, m, {{1, 1, 1, 0, 1}, {1, 1, 1, 0, 1}, {4, 3, 0.75, -0.2f, 0.6f},
                                    {5, 4, 0.8, 0.1f, 1.3f}}));
}

TEST(OnnxUpsample, Opsets7And9) {
  Tensor x = Random({1, 2, 3, 2}, 25);
  for (const char* mode : {"nearest", "linear"}) {
    RefMode m{mode, "asymmetric", "floor"};
    Tensor want = RefResize(x, m, {{1, 1, 1}, {2, 2, 1}, {3, 6, 2}, {2, 5, 2.5}});
    ExpectModel(OneNode("Upsample", 7).In({1, 2, 3, 2}).Set({{"mode", std::string(mode)},
                {"scales", std::vector<double>{1, 1, 2, 2.5}}}), {x}, want, false);
    ExpectModel(OneNode("Upsample", 9).In({1, 2, 3, 2}).Const(Floats({1, 1, 2, 2.5}))
                    .Set({{"mode", std::string(mode)}}),
                {x}, want, std::string(mode) == "linear");
    ExpectModel(OneNode("Resize", 10).In({1, 2, 3, 2}).Const(Floats({1, 1, 2, 2.5})).Set({{"mode", std::string(mode)}}),
                {x}, want, false);
  }
}

TEST(OnnxResize, Opset10DownsamplingRoundsUp) {
  // ONNX Runtime's rule before opset 11: asymmetric, floor up and ceil down.
  Tensor x = Random({1, 1, 2, 5}, 27);
  ExpectModel(OneNode("Resize", 10).In({1, 1, 2, 5}).Const(Floats({1, 1, 1, 0.6f})), {x},
              RefResize(x, RefMode{"nearest", "asymmetric", "ceil"}, {{1, 1, 1}, {1, 1, 1}, {2, 2, 1}, {5, 3, 0.6f}}),
              false);
}

TEST(OnnxResize, Errors) {
  EXPECT_THAT(ImportError(OneNode("Resize", 18).In({1, 1, 2, 2}).Skip().Const(Floats({1, 1, 2, 2}))
                              .Set({{"mode", std::string("linear")}, {"antialias", int64_t{1}}})),
              HasSubstr("node 'n' (Resize): antialias=1 is not supported"));
  EXPECT_THAT(ImportError(OneNode("Resize", 13).In({1, 1, 2, 2}).Skip().In({kUnknownDim}, DType::kFloat32)),
              HasSubstr("must be a 1-D float tensor of static length"));
  EXPECT_THAT(ImportError(OneNode("Resize", 13).In({1, 1, 2, 2}).Skip().Const(Floats({1, 1, 2, 2}))
                              .Const(Ints64({1, 1, 4, 4}))),
              HasSubstr("exactly one of scales and sizes"));
  EXPECT_THAT(ImportError(OneNode("Resize", 13).In({1, 1, 2, 2}).Skip().Const(Floats({1, 1, 1e30f, 2}))),
              HasSubstr("the output size along axis 2 would be"));
  EXPECT_THAT(ImportError(OneNode("Resize", 13).In({1, 1, 2, 2}).Skip().Const(Floats({1, 1, 2}))),
              HasSubstr("scales or sizes must have 4 entries"));
  EXPECT_THAT(ImportError(OneNode("Resize", 13).In({1, 1, 2, 2}).Skip().Const(Floats({1, 1, 2, 2}))
                              .Set({{"mode", std::string("area")}})),
              HasSubstr("mode must be nearest, linear or cubic"));
  EXPECT_THAT(ImportError(OneNode("Resize", 13).In({1, 1, 2, 2}).Skip().Const(Floats({1, 1, 2, 2}))
                              .Set({{"coordinate_transformation_mode", std::string("bogus")}})),
              HasSubstr("coordinate_transformation_mode must be one of"));
}

// ----- Scales and sizes computed at run time ------------------------------------------------

// The outputs and d<ct, y>/dx of `model` at (x, extra...), with ct of y's shape.
struct RunAndGrad {
  Tensor y, dx;
};
RunAndGrad RunWithGrad(const OneNode& model, const Tensor& x, const std::vector<Tensor>& extra) {
  absl::StatusOr<std::unique_ptr<Module>> m = model.Import();
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return {};
  std::vector<Value> in = {x};
  for (const Tensor& t : extra) in.push_back(t);
  absl::StatusOr<Value> y = RunGraph((*m)->entry(), in);
  EXPECT_TRUE(y.ok()) << y.status();
  if (!y.ok()) return {};
  GradOptions o;
  o.sens_param = true;
  absl::StatusOr<FuncGraph*> g = Grad(**m, (*m)->entry(), o);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return {};
  in.push_back(Random(y->tensor().shape(), 31));
  absl::StatusOr<Value> dx = RunGraph(*g, in);
  EXPECT_TRUE(dx.ok()) << dx.status();
  if (!dx.ok()) return {};
  return {y->tensor(), dx->tensor()};
}

OneNode ResizeWith(const RefMode& m, int opset = 13) {
  OneNode n("Resize", opset);
  n.In({1, 2, 4, 5});
  return n;
}
void SetMode(OneNode& n, const RefMode& m) {
  n.Set({{"mode", m.mode}, {"coordinate_transformation_mode", m.transform}, {"nearest_mode", m.nearest},
         {"cubic_coeff_a", m.a}, {"exclude_outside", int64_t{m.exclude}}});
}

// The run-time form (scales or sizes a graph input) against the import-time form
// (the same values as constants): the same output and the same gradient for x.
void ExpectRunTimeAgrees(const RefMode& m, const Tensor& scales, const Tensor& sizes, bool scales_too = true) {
  SCOPED_TRACE(absl::StrCat(m.mode, " ", m.transform, " ", m.nearest, " a=", m.a, " exclude=", m.exclude));
  Tensor x = Random({1, 2, 4, 5}, 41);
  for (bool by_sizes : {false, true}) {
    if (!by_sizes && !scales_too) continue;
    SCOPED_TRACE(by_sizes ? "sizes" : "scales");
    OneNode fixed = ResizeWith(m), dynamic = ResizeWith(m);
    fixed.Skip();
    dynamic.Skip();
    if (by_sizes) {
      fixed.Skip().Const(sizes);
      dynamic.Skip().In({4}, DType::kInt64);
    } else {
      fixed.Const(scales);
      dynamic.In({4}, DType::kFloat32);
    }
    SetMode(fixed, m);
    SetMode(dynamic, m);
    RunAndGrad want = RunWithGrad(fixed, x, {});
    RunAndGrad got = RunWithGrad(dynamic, x, {by_sizes ? sizes : scales});
    ASSERT_EQ(got.y.shape(), want.y.shape());
    ExpectClose(Value(got.y), want.y, 1e-12, "output");
    ExpectClose(Value(got.dx), want.dx, 1e-12, "dx");
  }
}

TEST(OnnxResizeRunTime, AgreesWithImportTime) {
  const Tensor scales = Floats({1, 1, 1.5, 0.7f}), sizes = Ints64({1, 2, 6, 3});
  for (const char* t : {"half_pixel", "asymmetric"}) {
    ExpectRunTimeAgrees(RefMode{"nearest", t, "round_prefer_floor"}, scales, sizes);
    ExpectRunTimeAgrees(RefMode{"nearest", t, "ceil"}, scales, sizes);
    ExpectRunTimeAgrees(RefMode{"linear", t}, scales, sizes);
    ExpectRunTimeAgrees(RefMode{"cubic", t, "floor", -0.75, false}, scales, sizes);
    ExpectRunTimeAgrees(RefMode{"cubic", t, "floor", -0.5, true}, scales, sizes);
  }
  // Transforms that read the output length or in * scale.
  for (const char* t : {"pytorch_half_pixel", "half_pixel_symmetric", "align_corners"}) {
    ExpectRunTimeAgrees(RefMode{"linear", t}, scales, sizes);
  }
  // tf_half_pixel_for_nn moves a scale-1 axis by half a cell: at import a
  // constant scale 1 leaves the axis as it is, at run time the formula applies
  // (they differ for linear there); sizes agree.
  ExpectRunTimeAgrees(RefMode{"linear", "tf_half_pixel_for_nn"}, scales, sizes, /*scales_too=*/false);
  // Scale 1 on N and C at run time is the identity there, as at import.
  ExpectRunTimeAgrees(RefMode{"nearest", "half_pixel"}, Floats({1, 1, 2, 2}), Ints64({1, 2, 8, 10}));
}

TEST(OnnxResizeRunTime, TfCropAndResizeWithRunTimeRoi) {
  Tensor x = Random({1, 1, 4, 5}, 42);
  RefMode m{"linear", "tf_crop_and_resize"};
  m.extrapolation = 7;
  const Tensor roi = Floats({0, 0, -0.2f, 0.1f, 1, 1, 0.6f, 1.3f});
  Tensor want = RefResize(x, m, {{1, 1, 1, 0, 1}, {1, 1, 1, 0, 1}, {4, 3, 0.75, -0.2f, 0.6f}, {5, 4, 0.8, 0.1f, 1.3f}});
  OneNode model = OneNode("Resize", 13).In({1, 1, 4, 5}).In({8}, DType::kFloat32).Skip().In({4}, DType::kInt64);
  model.Set({{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
             {"extrapolation_value", 7.0}});
  RunAndGrad got = RunWithGrad(model, x, {roi, Ints64({1, 1, 3, 4})});
  ExpectClose(Value(got.y), want, 1e-6, "output");  // roi in float32 as in the reference
}

TEST(OnnxResizeRunTime, SymbolicInputDimAndUpsample) {
  Tensor x = Random({2, 1, 3, 2}, 43);
  RefMode m{"linear", "half_pixel"};
  // Constant scales on an input whose H is a dim symbol: shape_of gives it.
  ExpectModel(OneNode("Resize", 13).In({1, 1, kUnknownDim, 2}).Skip().Const(Floats({1, 1, 2, 1.5f}))
                  .Set({{"mode", std::string("linear")}}),
              {Random({1, 1, 3, 2}, 44)}, RefResize(Random({1, 1, 3, 2}, 44), m, {{1, 1, 1}, {1, 1, 1}, {3, 6, 2},
                                                                                 {2, 3, 1.5}}),
              false);
  // Upsample-9 with its scales a graph input.
  RefMode n{"nearest", "asymmetric", "floor"};
  absl::StatusOr<std::unique_ptr<Module>> mod =
      OneNode("Upsample", 9).In({2, 1, 3, 2}).In({4}, DType::kFloat32).Set({{"mode", std::string("nearest")}}).Import();
  ASSERT_TRUE(mod.ok()) << mod.status();
  absl::StatusOr<Value> y = RunGraph((*mod)->entry(), {x, Floats({1, 1, 2, 2.5})});
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectClose(*y, RefResize(x, n, {{2, 2, 1}, {1, 1, 1}, {3, 6, 2}, {2, 5, 2.5}}), 1e-12, "output");
}

TEST(OnnxResizeRunTime, BadScalesAreErrors) {
  absl::StatusOr<std::unique_ptr<Module>> m =
      OneNode("Resize", 13).In({1, 1, 2, 2}).Skip().In({4}, DType::kFloat32).Set({{"mode", std::string("linear")}})
          .Import();
  ASSERT_TRUE(m.ok()) << m.status();
  Tensor x = Random({1, 1, 2, 2}, 45);
  for (const Tensor& scales : {Floats({1, 1, 0, 2}), Floats({1, 1, -2, 2}), Floats({1, 1, 2, std::nanf("")}),
                               Floats({1, 1, 2, 1e30f})}) {
    absl::StatusOr<Value> y = RunGraph((*m)->entry(), {x, scales});
    EXPECT_FALSE(y.ok()) << scales.DebugString(4);
  }
  absl::StatusOr<std::unique_ptr<Module>> sized =
      OneNode("Resize", 13).In({1, 1, 2, 2}).Skip().Skip().In({4}, DType::kInt64).Import();
  ASSERT_TRUE(sized.ok()) << sized.status();
  EXPECT_FALSE(RunGraph((*sized)->entry(), {x, Ints64({1, 1, 0, 2})}).ok());
  EXPECT_FALSE(RunGraph((*sized)->entry(), {x, Ints64({1, 1, -3, 2})}).ok());
}

// align_corners with scales whose in * scale is not an integer: H 3 * 1.5 = 4.5
// (4 rows), W 5 * 0.75 = 3.75 (3 columns). The spec's length_resized is in *
// scale, so x_H = o * 2 / 3.5 and x_W = o * 4 / 2.75 (ONNX Runtime and PyTorch
// would divide by 4 - 1 and 3 - 1). Bilinear interpolation of x = 100 h + 10 w
// reproduces it: y = 100 x_H + 10 x_W. Constant and run-time scales agree.
TEST(OnnxResizeRunTime, AlignCornersWithScalesUsesInTimesScale) {
  Nd x(Shape{1, 1, 3, 5}), want(Shape{1, 1, 4, 3});
  ForEach(x.shape, [&](const std::vector<int64_t>& i) { x.at(i) = 100.0 * i[2] + 10.0 * i[3]; });
  ForEach(want.shape, [&](const std::vector<int64_t>& o) {
    want.at(o) = 100.0 * (o[2] * 2 / 3.5) + 10.0 * (o[3] * 4 / 2.75);
  });
  EXPECT_NEAR(want.at({0, 0, 1, 1}), 100.0 * 4 / 7 + 10.0 * 16 / 11, 1e-12);
  const Tensor scales = Floats({1, 1, 1.5, 0.75});
  auto model = [](OneNode n) {
    return n.Set({{"mode", std::string("linear")},
                  {"coordinate_transformation_mode", std::string("align_corners")}});
  };
  ExpectModel(model(OneNode("Resize", 13).In({1, 1, 3, 5}).Skip().Const(scales)), {x.ToTensor()},
              want.ToTensor());
  absl::StatusOr<std::unique_ptr<Module>> m =
      model(OneNode("Resize", 13).In({1, 1, 3, 5}).Skip().In({4}, DType::kFloat32)).Import();
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Value> y = RunGraph((*m)->entry(), {x.ToTensor(), scales});
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->tensor().shape(), want.shape);
  ExpectClose(*y, want.ToTensor(), 1e-12, "output");
  // Sizes [4, 3] instead: length_resized is the output size, x_H = o, x_W = 2 o.
  Nd by_size(Shape{1, 1, 4, 3});
  ForEach(by_size.shape, [&](const std::vector<int64_t>& o) {
    by_size.at(o) = 100.0 * (o[2] * 2 / 3.0) + 10.0 * (o[3] * 4 / 2.0);
  });
  ExpectModel(model(OneNode("Resize", 13).In({1, 1, 3, 5}).Skip().Skip().Const(Ints64({1, 1, 4, 3}))),
              {x.ToTensor()}, by_size.ToTensor(), false);
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
