// The window ops (Conv, ConvTranspose, MaxPool, AveragePool, global pools) of the
// ONNX importer: hand-built models for each mode checked against naive references
// written here from the ONNX spec's formulas, float64 finite-difference gradients
// through each lowering, error cases, and the torch-exported fixtures of
// make_window_fixtures.py (Resize and Upsample: onnx_resize_test.cc).
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
#include "tests/onnx/onnx_one_node.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/testing/grad_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

using ::testing::HasSubstr;

// ----- Window references (2-D, NCHW; a 1-D op is its H = 1 case) --------------------------

struct Win {
  std::vector<int64_t> k, s{1, 1}, d{1, 1}, lo{0, 0}, hi{0, 0};
  int64_t Eff(int i) const { return d[i] * (k[i] - 1) + 1; }
};

// The ONNX spec's output size; with ceil_mode a window must start inside the
// input or the left padding.
int64_t OutSize(const Win& w, int i, int64_t in, bool ceil_mode) {
  const double span = static_cast<double>(in + w.lo[i] + w.hi[i] - w.Eff(i)) / w.s[i];
  int64_t n = static_cast<int64_t>(ceil_mode ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil_mode && (n - 1) * w.s[i] >= in + w.lo[i]) --n;
  return n;
}

Tensor RefConv(const Tensor& xt, const Tensor& wt, const Win& w, int64_t groups) {
  Nd x(xt), f(wt);
  const int64_t n = x.shape[0], c = x.shape[1], o = f.shape[0], cg = c / groups, og = o / groups;
  Nd y({n, o, OutSize(w, 0, x.shape[2], false), OutSize(w, 1, x.shape[3], false)});
  ForEach(y.shape, [&](const std::vector<int64_t>& i) {
    double acc = 0;
    for (int64_t ci = 0; ci < cg; ++ci) {
      for (int64_t a = 0; a < w.k[0]; ++a) {
        for (int64_t b = 0; b < w.k[1]; ++b) {
          const int64_t h = i[2] * w.s[0] - w.lo[0] + a * w.d[0], v = i[3] * w.s[1] - w.lo[1] + b * w.d[1];
          if (h < 0 || h >= x.shape[2] || v < 0 || v >= x.shape[3]) continue;
          acc += x.at({i[0], i[1] / og * cg + ci, h, v}) * f.at({i[1], ci, a, b});
        }
      }
    }
    y.at(i) = acc;
  });
  return y.ToTensor();
}

// ConvTranspose: every input cell scatters its weighted window into y (out: the
// output's spatial sizes).
Tensor RefConvTranspose(const Tensor& xt, const Tensor& wt, const Win& w, int64_t groups,
                        std::vector<int64_t> out) {
  Nd x(xt), f(wt);
  const int64_t c = x.shape[1], cg = c / groups, og = f.shape[1];
  Nd y({x.shape[0], og * groups, out[0], out[1]});
  ForEach(x.shape, [&](const std::vector<int64_t>& i) {
    const int64_t g = i[1] / cg;
    for (int64_t o = 0; o < og; ++o) {
      for (int64_t a = 0; a < w.k[0]; ++a) {
        for (int64_t b = 0; b < w.k[1]; ++b) {
          const int64_t h = i[2] * w.s[0] - w.lo[0] + a * w.d[0], v = i[3] * w.s[1] - w.lo[1] + b * w.d[1];
          if (h < 0 || h >= out[0] || v < 0 || v >= out[1]) continue;
          y.at({i[0], g * og + o, h, v}) += x.at(i) * f.at({i[1], o, a, b});
        }
      }
    }
  });
  return y.ToTensor();
}

// Max or average pooling; the average divides by the cells inside the input (plus
// the declared pads with count_include_pad).
Tensor RefPool(const Tensor& xt, const Win& w, bool is_max, bool ceil_mode, bool include_pad) {
  Nd x(xt);
  Nd y({x.shape[0], x.shape[1], OutSize(w, 0, x.shape[2], ceil_mode), OutSize(w, 1, x.shape[3], ceil_mode)});
  ForEach(y.shape, [&](const std::vector<int64_t>& i) {
    double acc = is_max ? -std::numeric_limits<double>::infinity() : 0;
    int64_t count = 0;
    for (int64_t a = 0; a < w.k[0]; ++a) {
      for (int64_t b = 0; b < w.k[1]; ++b) {
        const int64_t h = i[2] * w.s[0] - w.lo[0] + a * w.d[0], v = i[3] * w.s[1] - w.lo[1] + b * w.d[1];
        const bool in_h = h >= 0 && h < x.shape[2], in_v = v >= 0 && v < x.shape[3];
        const bool pad_h = h >= -w.lo[0] && h < x.shape[2] + w.hi[0];
        const bool pad_v = v >= -w.lo[1] && v < x.shape[3] + w.hi[1];
        count += include_pad ? pad_h && pad_v : in_h && in_v;
        if (!in_h || !in_v) continue;
        const double e = x.at({i[0], i[1], h, v});
        acc = is_max ? std::max(acc, e) : acc + e;
      }
    }
    y.at(i) = is_max ? acc : acc / count;
  });
  return y.ToTensor();
}

// MaxPool's Indices: the flat NCHW index of each window's first maximum, the
// plane position row-major or (storage_order=1) column-major.
Tensor RefMaxIndices(const Tensor& xt, const Win& w, bool ceil_mode, bool column_major) {
  Nd x(xt);
  const int64_t hh = x.shape[2], ww = x.shape[3];
  Shape out = {x.shape[0], x.shape[1], OutSize(w, 0, hh, ceil_mode), OutSize(w, 1, ww, ceil_mode)};
  std::vector<int64_t> idx;
  ForEach(out, [&](const std::vector<int64_t>& i) {
    double best = -std::numeric_limits<double>::infinity();
    int64_t at = -1;
    for (int64_t a = 0; a < w.k[0]; ++a) {
      for (int64_t b = 0; b < w.k[1]; ++b) {
        const int64_t h = i[2] * w.s[0] - w.lo[0] + a * w.d[0], v = i[3] * w.s[1] - w.lo[1] + b * w.d[1];
        if (h < 0 || h >= hh || v < 0 || v >= ww || !(x.at({i[0], i[1], h, v}) > best)) continue;
        best = x.at({i[0], i[1], h, v});
        at = (i[0] * x.shape[1] + i[1]) * hh * ww + (column_major ? h + v * hh : h * ww + v);
      }
    }
    idx.push_back(at);
  });
  return Tensor::FromVector<int64_t>(out, idx);
}

Tensor Reshaped(const Tensor& t, const Shape& s) { return Tensor::FromVector<double>(s, Nd(t).v); }

// ----- Conv ---------------------------------------------------------------------------------

TEST(OnnxConv, DilatedGroupedAsymmetricPads) {
  Tensor x = Random({2, 4, 7, 6}, 1), w = Random({6, 2, 3, 2}, 2);
  Win win{{3, 2}, {2, 1}, {2, 2}, {1, 0}, {2, 1}};
  ExpectModel(OneNode("Conv", 13).In({2, 4, 7, 6}).In({6, 2, 3, 2}).Set({{"group", int64_t{2}},
              {"strides", I({2, 1})}, {"dilations", I({2, 2})}, {"pads", I({1, 0, 2, 1})}}),
              {x, w}, RefConv(x, w, win, 2));
}

TEST(OnnxConv, SameUpperAndLowerWithUnknownBatch) {
  Tensor x = Random({2, 2, 6, 5}, 3), w = Random({3, 2, 4, 3}, 4);
  // out = ceil(6 / 2) = 3: total pad (3-1)*2 + 4 - 6 = 2 -> 1/1; width 5 / 2 -> 3,
  // total (3-1)*2 + 3 - 5 = 2 -> 1/1; stride 1 on width below gives total 2.
  ExpectModel(OneNode("Conv", 11).In({kUnknownDim, 2, 6, 5}).In({3, 2, 4, 3})
                  .Set({{"auto_pad", std::string("SAME_UPPER")}, {"strides", I({2, 2})}}),
              {x, w}, RefConv(x, w, Win{{4, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}}, 1));
  // Odd totals: height 6 stride 1 kernel 4 -> total 3: SAME_UPPER 1/2, SAME_LOWER 2/1.
  ExpectModel(OneNode("Conv", 11).In({2, 2, 6, 5}).In({3, 2, 4, 3}).Set({{"auto_pad", std::string("SAME_LOWER")}}),
              {x, w}, RefConv(x, w, Win{{4, 3}, {1, 1}, {1, 1}, {2, 1}, {1, 1}}, 1), false);
  ExpectModel(OneNode("Conv", 11).In({2, 2, 6, 5}).In({3, 2, 4, 3}).Set({{"auto_pad", std::string("SAME_UPPER")}}),
              {x, w}, RefConv(x, w, Win{{4, 3}, {1, 1}, {1, 1}, {1, 1}, {2, 1}}, 1), false);
  ExpectModel(OneNode("Conv", 11).In({2, 2, 6, 5}).In({3, 2, 4, 3}).Set({{"auto_pad", std::string("VALID")},
              {"pads", I({5, 5, 5, 5})}}), {x, w}, RefConv(x, w, Win{{4, 3}}, 1), false);
}

TEST(OnnxConv, OneDimensionalWithBias) {
  Tensor x = Random({2, 3, 9}, 5), w = Random({4, 3, 3}, 6), b = Random({4}, 7);
  Tensor want = RefConv(Reshaped(x, {2, 3, 1, 9}), Reshaped(w, {4, 3, 1, 3}),
                        Win{{1, 3}, {1, 2}, {1, 2}, {0, 2}, {0, 1}}, 1);
  Nd y(want);
  ForEach(y.shape, [&](const std::vector<int64_t>& i) { y.at(i) += b.data<double>()[i[1]]; });
  ExpectModel(OneNode("Conv", 13).In({2, 3, 9}).In({4, 3, 3}).In({4})
                  .Set({{"strides", I({2})}, {"dilations", I({2})}, {"pads", I({2, 1})}}),
              {x, w, b}, Reshaped(y.ToTensor(), {2, 4, 4}));
}

TEST(OnnxConv, Errors) {
  EXPECT_THAT(ImportError(OneNode("Conv", 13).In({1, 1, 3, 3, 3, 3}).In({1, 1, 1, 1, 1, 1})),
              HasSubstr("node 'n' (Conv): needs a 1-D (N, C, L), 2-D (N, C, H, W) or 3-D (N, C, D, H, W) input"));
  EXPECT_THAT(ImportError(OneNode("Conv", 13).In({1, 1, 3, 3, 3}).In({1, 1, 1, 1})),
              HasSubstr("the filter must have rank 5 like the input"));
  EXPECT_THAT(ImportError(OneNode("Conv", 13).In({1, 1, 5}).In({1, 1, 3}).Set({{"pads", I({1, 1, 1, 1})}})),
              HasSubstr("pads must have 2 entries"));
  EXPECT_THAT(ImportError(OneNode("Conv", 13).In({1, 1, 5, 5}).In({1, 1, 3, 3})
                              .Set({{"auto_pad", std::string("SAME")}})),
              HasSubstr("auto_pad must be NOTSET, VALID, SAME_UPPER or SAME_LOWER"));
  EXPECT_THAT(ImportError(OneNode("Conv", 13).In({1, 1, kUnknownDim, 5}).In({1, 1, 3, 3})
                              .Set({{"auto_pad", std::string("SAME_UPPER")}})),
              HasSubstr("auto_pad SAME needs static spatial sizes"));
  EXPECT_THAT(ImportError(OneNode("Conv", 13).In({1, 1, 5, 5}).In({1, 1, 3, 3}).Set({{"strides", I({0, 1})}})),
              HasSubstr("strides must be >= 1"));
}

// ----- ConvTranspose ----------------------------------------------------------------------

TEST(OnnxConvTranspose, StridedDilatedGroupedOutputPadding) {
  Tensor x = Random({2, 4, 3, 4}, 8), w = Random({4, 2, 3, 2}, 9);
  Win win{{3, 2}, {3, 2}, {2, 1}, {1, 0}, {2, 1}};
  // out = s*(in-1) + output_padding + eff - lo - hi: 3*2 + 2 + 5 - 3 = 10, 2*3 + 1 + 2 - 1 = 8.
  ExpectModel(OneNode("ConvTranspose", 13).In({2, 4, 3, 4}).In({4, 2, 3, 2})
                  .Set({{"group", int64_t{2}}, {"strides", I({3, 2})}, {"dilations", I({2, 1})},
                        {"pads", I({1, 0, 2, 1})}, {"output_padding", I({2, 1})}}),
              {x, w}, RefConvTranspose(x, w, win, 2, {10, 8}));
}

TEST(OnnxConvTranspose, OutputShapeAndAutoPad) {
  Tensor x = Random({1, 2, 3, 3}, 10), w = Random({2, 3, 3, 3}, 11);
  // output_shape 6x5, stride 2: total = 2*2 + 3 - out = 1 (height), 2 (width). The
  // spec puts the odd cell at the start unless SAME_UPPER.
  ExpectModel(OneNode("ConvTranspose", 13).In({1, 2, 3, 3}).In({2, 3, 3, 3})
                  .Set({{"strides", I({2, 2})}, {"output_shape", I({6, 5})}}),
              {x, w}, RefConvTranspose(x, w, Win{{3, 3}, {2, 2}, {1, 1}, {1, 1}, {0, 1}}, 1, {6, 5}));
  ExpectModel(OneNode("ConvTranspose", 13).In({1, 2, 3, 3}).In({2, 3, 3, 3})
                  .Set({{"strides", I({2, 2})}, {"auto_pad", std::string("SAME_UPPER")}}),
              {x, w}, RefConvTranspose(x, w, Win{{3, 3}, {2, 2}, {1, 1}, {0, 0}, {1, 1}}, 1, {6, 6}), false);
  ExpectModel(OneNode("ConvTranspose", 13).In({1, 2, 3, 3}).In({2, 3, 3, 3})
                  .Set({{"strides", I({2, 2})}, {"auto_pad", std::string("SAME_LOWER")}}),
              {x, w}, RefConvTranspose(x, w, Win{{3, 3}, {2, 2}, {1, 1}, {1, 1}, {0, 0}}, 1, {6, 6}), false);
}

// An output_shape beyond the window's reach: negative pads, as ONNX's reference
// computes them with floor division, add zero cells (here height: reach 7, want 9,
// total -2: one zero row at each end; width: total 2, pads 1 and 1).
TEST(OnnxConvTranspose, OutputShapeBeyondTheReachAddsZeros) {
  Tensor x = Random({1, 2, 3, 3}, 15), w = Random({2, 3, 3, 3}, 16);
  Tensor reach = RefConvTranspose(x, w, Win{{3, 3}, {2, 2}, {1, 1}, {0, 1}, {0, 1}}, 1, {7, 5});
  Tensor want = Tensor::Zeros(DType::kFloat64, {1, 3, 9, 5}).value();
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t i = 0; i < 7; ++i) {
      for (int64_t j = 0; j < 5; ++j) {
        want.mutable_data<double>()[(c * 9 + i + 1) * 5 + j] = reach.data<double>()[(c * 7 + i) * 5 + j];
      }
    }
  }
  ExpectModel(OneNode("ConvTranspose", 13).In({1, 2, 3, 3}).In({2, 3, 3, 3})
                  .Set({{"strides", I({2, 2})}, {"output_shape", I({9, 5})}}),
              {x, w}, want);
}

TEST(OnnxConvTranspose, OneDimensionalUnknownBatch) {
  // out = 2 * (5 - 1) + 1 + 4 - 1 - 2 = 10.
  Tensor x = Random({2, 2, 5}, 12), w = Random({2, 3, 4}, 13), b = Random({3}, 14);
  Tensor want = RefConvTranspose(Reshaped(x, {2, 2, 1, 5}), Reshaped(w, {2, 3, 1, 4}),
                                 Win{{1, 4}, {1, 2}, {1, 1}, {0, 1}, {0, 2}}, 1, {1, 10});
  Nd y(want);
  ForEach(y.shape, [&](const std::vector<int64_t>& i) { y.at(i) += b.data<double>()[i[1]]; });
  ExpectModel(OneNode("ConvTranspose", 13).In({kUnknownDim, 2, 5}).In({2, 3, 4}).In({3})
                  .Set({{"strides", I({2})}, {"pads", I({1, 2})}, {"output_padding", I({1})}}),
              {x, w, b}, Reshaped(y.ToTensor(), {2, 3, 10}));
}

TEST(OnnxConvTranspose, Errors) {
  EXPECT_THAT(ImportError(OneNode("ConvTranspose", 13).In({1, 2, 3, 3}).In({2, 3, 3, 3})
                              .Set({{"strides", I({2, 2})}, {"output_padding", I({2, 0})}})),
              HasSubstr("output_padding must be smaller than the stride"));
  EXPECT_THAT(ImportError(OneNode("ConvTranspose", 13).In({1, 2, 3, 3}).In({2, 3, 3, 3})
                              .Set({{"output_shape", I({int64_t{1} << 40, 5})}})),
              HasSubstr("is too large"));
  EXPECT_THAT(ImportError(OneNode("ConvTranspose", 13).In({1, 2, kUnknownDim, 3}).In({2, 3, 3, 3})),
              HasSubstr("needs static input (but the batch) and filter shapes"));
}

// ----- Pooling ------------------------------------------------------------------------------

TEST(OnnxMaxPool, CeilModeAsymmetricPads) {
  Tensor x = Random({2, 3, 7, 8}, 15);
  // Height: span 7 + 1 + 0 - 3 = 5, ceil(5/2) + 1 = 4 windows; width 8 + 0 + 1 - 2
  // = 7 / 3 -> 4, but window 3 would start at 9 >= 8 + 0: dropped, 3 windows.
  ExpectModel(OneNode("MaxPool", 12).In({2, 3, 7, 8}).Set({{"kernel_shape", I({3, 2})}, {"strides", I({2, 3})},
              {"pads", I({1, 0, 0, 1})}, {"ceil_mode", int64_t{1}}}),
              {x}, RefPool(x, Win{{3, 2}, {2, 3}, {1, 1}, {1, 0}, {0, 1}}, true, true, false));
}

TEST(OnnxMaxPool, DilatedAndSame) {
  Tensor x = Random({1, 2, 9, 8}, 16);
  ExpectModel(OneNode("MaxPool", 12).In({1, 2, 9, 8}).Set({{"kernel_shape", I({3, 2})}, {"strides", I({2, 1})},
              {"dilations", I({2, 3})}, {"pads", I({1, 2, 0, 1})}, {"ceil_mode", int64_t{1}}}),
              {x}, RefPool(x, Win{{3, 2}, {2, 1}, {2, 3}, {1, 2}, {0, 1}}, true, true, false));
  // SAME_LOWER: 9 / 2 -> 5 windows, total (5-1)*2 + 3 - 9 = 2 -> 1/1; 8 / 2 -> 4,
  // total 6 + 3 - 8 = 1 -> 1/0 (the odd cell first).
  ExpectModel(OneNode("MaxPool", 12).In({1, 2, 9, 8}).Set({{"kernel_shape", I({3, 3})}, {"strides", I({2, 2})},
              {"auto_pad", std::string("SAME_LOWER")}}),
              {x}, RefPool(x, Win{{3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 0}}, true, false, false), false);
}

// uint8 and int8 (MaxPool's integer types): pooled exactly, the result in the
// input's type.
TEST(OnnxMaxPool, NarrowIntegers) {
  for (DType t : {DType::kUInt8, DType::kInt8}) {
    Nd q(Random({2, 2, 5, 6}, 18));
    for (double& v : q.v) v = std::round(v * 100) + (t == DType::kUInt8 ? 120 : 0);  // 20..220 or -100..100
    Tensor xd = q.ToTensor();
    Tensor want = RefPool(xd, Win{{3, 2}, {2, 2}, {1, 1}, {1, 1}, {0, 0}}, true, false, false);
    absl::StatusOr<Value> x = testing::RunCpuKernel(PrimId::kCast, {Value(xd)}, {{"dtype", AttrValue(t)}});
    absl::StatusOr<Value> y = testing::RunCpuKernel(PrimId::kCast, {Value(want)}, {{"dtype", AttrValue(t)}});
    ASSERT_TRUE(x.ok() && y.ok());
    absl::StatusOr<std::unique_ptr<Module>> m =
        OneNode("MaxPool", 12).In({2, 2, 5, 6}, t).Set({{"kernel_shape", I({3, 2})}, {"strides", I({2, 2})},
                                                        {"pads", I({1, 1, 0, 0})}}).Import();
    ASSERT_TRUE(m.ok()) << m.status();
    absl::StatusOr<Value> out = RunGraph((*m)->entry(), {*x});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->tensor().dtype(), t);
    EXPECT_EQ(testing::ToDoubles(out->tensor()), testing::ToDoubles(y->tensor())) << DTypeName(t);
  }
}

TEST(OnnxMaxPool, OneDimensionalUnknownBatch) {
  Tensor x = Random({2, 3, 10}, 17);
  Tensor want = RefPool(Reshaped(x, {2, 3, 1, 10}), Win{{1, 4}, {1, 3}, {1, 1}, {0, 2}, {0, 2}}, true, false, false);
  ExpectModel(OneNode("MaxPool", 12).In({kUnknownDim, 3, 10}).Set({{"kernel_shape", I({4})}, {"strides", I({3})},
              {"pads", I({2, 2})}}), {x}, Reshaped(want, {2, 3, 4}));
}

// Y and Indices, with ties (the input rounded to quarters) that the first
// maximum breaks.
void ExpectIndices(const Shape& shape, std::initializer_list<Attr> attrs, const Win& w, bool ceil_mode,
                   bool column_major) {
  Nd q(Random(shape, 26));
  for (double& v : q.v) v = std::round(v * 4) / 4;
  Tensor x = q.ToTensor();
  Shape lifted = shape;
  if (shape.size() == 3) lifted.insert(lifted.begin() + 2, 1);
  Tensor y = RefPool(Reshaped(x, lifted), w, true, ceil_mode, false);
  Tensor idx = RefMaxIndices(Reshaped(x, lifted), w, ceil_mode, column_major);
  absl::StatusOr<std::unique_ptr<Module>> m = OneNode("MaxPool", 12).In(shape).Set(attrs).TwoOutputs().Import();
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Value> out = RunGraph((*m)->entry(), {x});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->is_tuple() && out->tuple().size() == 2) << out->TypeString();
  Shape want_shape = y.shape();
  if (shape.size() == 3) want_shape.erase(want_shape.begin() + 2);
  ExpectClose(out->tuple()[0], Reshaped(y, want_shape), 0, "Y");
  ASSERT_TRUE(out->tuple()[1].is_tensor());
  const Tensor& got = out->tuple()[1].tensor();
  ASSERT_EQ(got.TypeString(), absl::StrCat("i64", ShapeToString(want_shape)));
  EXPECT_EQ(std::vector<int64_t>(got.data<int64_t>(), got.data<int64_t>() + got.NumElements()),
            std::vector<int64_t>(idx.data<int64_t>(), idx.data<int64_t>() + idx.NumElements()));
}

TEST(OnnxMaxPool, IndicesRowAndColumnMajor) {
  for (int64_t order : {0, 1}) {
    SCOPED_TRACE(absl::StrCat("storage_order ", order));
    ExpectIndices({2, 3, 7, 8}, {{"kernel_shape", I({3, 2})}, {"strides", I({2, 3})}, {"pads", I({1, 0, 0, 1})},
                  {"ceil_mode", int64_t{1}}, {"storage_order", order}}, Win{{3, 2}, {2, 3}, {1, 1}, {1, 0}, {0, 1}},
                  true, order == 1);
    ExpectIndices({1, 2, 9, 8}, {{"kernel_shape", I({3, 2})}, {"dilations", I({2, 3})}, {"storage_order", order}},
                  Win{{3, 2}, {1, 1}, {2, 3}}, false, order == 1);
  }
  ExpectIndices({2, 2, 10}, {{"kernel_shape", I({3})}, {"strides", I({2})}, {"pads", I({1, 1})}},
                Win{{1, 3}, {1, 2}, {1, 1}, {0, 1}, {0, 1}}, false, false);
}

TEST(OnnxAveragePool, CountIncludePadAndCeilMode) {
  Tensor x = Random({2, 2, 7, 8}, 18);
  for (int64_t include : {0, 1}) {
    for (int64_t ceil_mode : {0, 1}) {
      SCOPED_TRACE(absl::StrCat("count_include_pad ", include, " ceil_mode ", ceil_mode));
      ExpectModel(OneNode("AveragePool", 11).In({2, 2, 7, 8}).Set({{"kernel_shape", I({3, 3})},
                  {"strides", I({2, 3})}, {"pads", I({1, 0, 1, 2})}, {"ceil_mode", ceil_mode},
                  {"count_include_pad", include}}),
                  {x}, RefPool(x, Win{{3, 3}, {2, 3}, {1, 1}, {1, 0}, {1, 2}}, false, ceil_mode, include),
                  include == ceil_mode);
    }
  }
}

TEST(OnnxAveragePool, DilatedOneDimensional) {
  Tensor x = Random({1, 2, 11}, 19);
  Tensor want = RefPool(Reshaped(x, {1, 2, 1, 11}), Win{{1, 3}, {1, 2}, {1, 2}, {0, 1}, {0, 1}}, false, true, false);
  ExpectModel(OneNode("AveragePool", 19).In({1, 2, 11}).Set({{"kernel_shape", I({3})}, {"strides", I({2})},
              {"dilations", I({2})}, {"pads", I({1, 1})}, {"ceil_mode", int64_t{1}}}),
              {x}, Reshaped(want, {1, 2, want.dim(3)}));
}

TEST(OnnxGlobalPool, OneTwoAndThreeDimensional) {
  for (const Shape& s : {Shape{2, 3, 5}, Shape{2, 3, 4, 2}, Shape{1, 2, 2, 3, 2}}) {
    Tensor x = Random(s, 20);
    Nd in(x);
    const int64_t spatial = in.v.size() / (s[0] * s[1]);
    Shape out = s;
    for (size_t i = 2; i < s.size(); ++i) out[i] = 1;
    Nd avg(out), mx(out);
    for (int64_t nc = 0; nc < s[0] * s[1]; ++nc) {
      avg.v[nc] = 0, mx.v[nc] = -1e300;
      for (int64_t k = 0; k < spatial; ++k) {
        avg.v[nc] += in.v[nc * spatial + k] / spatial;
        mx.v[nc] = std::max(mx.v[nc], in.v[nc * spatial + k]);
      }
    }
    ExpectModel(OneNode("GlobalAveragePool", 13).In(s), {x}, avg.ToTensor(), false);
    ExpectModel(OneNode("GlobalMaxPool", 13).In(s), {x}, mx.ToTensor(), false);
  }
}

TEST(OnnxPool, Errors) {
  EXPECT_THAT(ImportError(OneNode("MaxPool", 12).In({kUnknownDim, 1, 4, 4}).Set({{"kernel_shape", I({2, 2})}})
                              .TwoOutputs()),
              HasSubstr("node 'n' (MaxPool): the Indices output needs a static input shape"));
  EXPECT_THAT(ImportError(OneNode("MaxPool", 12).In({1, 1, 4, 4})), HasSubstr("kernel_shape is required"));
  EXPECT_THAT(ImportError(OneNode("AveragePool", 12).In({1, 1, 4, 4, 4}).Set({{"kernel_shape", I({2, 2})}})),
              HasSubstr("kernel_shape must have 3 entries"));
  EXPECT_THAT(ImportError(OneNode("AveragePool", 12).In({1, 1, kUnknownDim, 4}).Set({{"kernel_shape", I({2, 2})}})),
              HasSubstr("AveragePool needs static spatial sizes"));
  EXPECT_THAT(ImportError(OneNode("MaxPool", 12).In({1, 1, 4, 4}).Set({{"kernel_shape", I({5, 2})}})),
              HasSubstr("is smaller than the window"));
  EXPECT_THAT(ImportError(OneNode("MaxPool", 12).In({1, 1, 4, 4}).Set({{"kernel_shape", I({1 << 20, 1 << 20})},
              {"dilations", I({2, 2})}, {"pads", I({1 << 21, 1 << 21, 1 << 21, 1 << 21})}})),
              HasSubstr("is too large to compose"));
}

// ----- Torch fixtures (make_window_fixtures.py) -------------------------------------------

constexpr double kFixtureTol = 1e-4;

class WindowFixtureTest : public ::testing::TestWithParam<const char*> {};

// Output, then d<ct, f>/d(input, weights) with the gradient graph optimised or not
// (onnx_test_util.h); every window fixture has weights, each with torch's gradient.
TEST_P(WindowFixtureTest, OutputAndGradientsMatchTorch) {
  const std::string name = GetParam();
  absl::StatusOr<std::unique_ptr<Module>> m = ImportFixture(name);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_FALSE((*m)->weights().empty());
  for (const auto& w : (*m)->weights()) {  // each is differentiated and compared
    ASSERT_TRUE(Exists(DataPath(name + "_dw_" + w->name() + ".npy"))) << w->name();
  }
  CheckFixtureOutput(name, 1, kFixtureTol);
  for (bool optimize : {false, true}) {
    SCOPED_TRACE(optimize ? "optimized" : "not optimized");
    CheckFixtureGradients(name, 1, optimize, kFixtureTol);
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, WindowFixtureTest,
                         ::testing::Values("win_conv1d", "win_maxpool_ceil", "win_avgpool_ceil", "win_maxpool1d",
                                           "win_convt", "win_nearest", "win_bilinear_ac", "win_bilinear", "win_bicubic",
                                           "win_upsample9", "win_zoo3d", "win_avgpool3d_ceil"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
