// The window ops (Conv, ConvTranspose, MaxPool, AveragePool, global pools) and
// Resize / Upsample of the ONNX importer: hand-built models for each mode checked
// against naive references written here from the ONNX spec's formulas, float64
// finite-difference gradients through each lowering, error cases, and the
// torch-exported fixtures of make_window_fixtures.py.
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

namespace kgrad {
namespace onnx_test {
namespace {

using ::testing::HasSubstr;

// ----- Building models ----------------------------------------------------------------

struct Attr {
  std::string name;
  std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>> v;
};

// A one-node model: inputs x0, x1, ... (declared shapes, float64 unless said),
// optional constant inputs (Constant nodes), output "y".
class OneNode {
 public:
  OneNode(const std::string& op, int opset) {
    m_.set_ir_version(8);
    m_.add_opset_import()->set_version(opset);
    node_.set_op_type(op);
    node_.set_name("n");
    node_.add_output("y");
    m_.mutable_graph()->add_output()->set_name("y");
  }
  OneNode& In(const Shape& shape, DType t = DType::kFloat64) {
    const std::string name = absl::StrCat("x", num_inputs_++);
    onnx::ValueInfoProto* v = m_.mutable_graph()->add_input();
    v->set_name(name);
    TypeToOnnx(AbstractTensor(t, shape), v->mutable_type());
    node_.add_input(name);
    return *this;
  }
  OneNode& Const(const Tensor& t) {  // a Constant node's output
    const std::string name = absl::StrCat("k", node_.input_size());
    onnx::NodeProto* k = m_.mutable_graph()->add_node();
    k->set_op_type("Constant");
    k->add_output(name);
    onnx::AttributeProto* a = k->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    TensorToOnnx(t, name, a->mutable_t());
    node_.add_input(name);
    return *this;
  }
  OneNode& Skip() {  // an omitted optional input
    node_.add_input("");
    return *this;
  }
  OneNode& Set(const Attr& a) {
    onnx::AttributeProto* p = node_.add_attribute();
    p->set_name(a.name);
    if (auto* i = std::get_if<int64_t>(&a.v)) p->set_type(onnx::AttributeProto::INT), p->set_i(*i);
    if (auto* f = std::get_if<double>(&a.v)) p->set_type(onnx::AttributeProto::FLOAT), p->set_f(*f);
    if (auto* s = std::get_if<std::string>(&a.v)) p->set_type(onnx::AttributeProto::STRING), p->set_s(*s);
    if (auto* is = std::get_if<std::vector<int64_t>>(&a.v)) {
      p->set_type(onnx::AttributeProto::INTS);
      for (int64_t x : *is) p->add_ints(x);
    }
    if (auto* fs = std::get_if<std::vector<double>>(&a.v)) {
      p->set_type(onnx::AttributeProto::FLOATS);
      for (double x : *fs) p->add_floats(static_cast<float>(x));
    }
    return *this;
  }
  OneNode& Set(std::initializer_list<Attr> attrs) {
    for (const Attr& a : attrs) Set(a);
    return *this;
  }
  OneNode& TwoOutputs() {
    node_.add_output("indices");
    m_.mutable_graph()->add_output()->set_name("indices");
    return *this;
  }
  absl::StatusOr<std::unique_ptr<Module>> Import() const {
    onnx::ModelProto m = m_;
    *m.mutable_graph()->add_node() = node_;
    OnnxImportOptions o;
    return ImportOnnx(m, DefaultRegistry(), o, "<test>");
  }

 private:
  onnx::ModelProto m_;
  onnx::NodeProto node_;
  int num_inputs_ = 0;
};

std::vector<int64_t> I(std::initializer_list<int64_t> v) { return v; }

// ----- Running and checking --------------------------------------------------------------

Tensor Random(const Shape& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return testing::RandomF64(shape, rng).tensor();
}

// A dense NCHW-style view of a float64 tensor, any rank.
struct Nd {
  Shape shape;
  std::vector<double> v;
  explicit Nd(const Shape& s) : shape(s), v(CheckedNumElements(s).value(), 0.0) {}
  explicit Nd(const Tensor& t) : shape(t.shape()), v(t.data<double>(), t.data<double>() + t.NumElements()) {}
  int64_t Flat(const std::vector<int64_t>& i) const {
    int64_t f = 0;
    for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + i[d];
    return f;
  }
  double& at(const std::vector<int64_t>& i) { return v[Flat(i)]; }
  double at(const std::vector<int64_t>& i) const { return v[Flat(i)]; }
  Tensor ToTensor() const { return Tensor::FromVector<double>(shape, v); }
};

// Calls f on every index of `shape`.
void ForEach(const Shape& shape, const std::function<void(const std::vector<int64_t>&)>& f) {
  std::vector<int64_t> i(shape.size(), 0);
  const int64_t n = CheckedNumElements(shape).value();
  for (int64_t k = 0; k < n; ++k) {
    f(i);
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++i[d] < shape[d]) break;
      i[d] = 0;
    }
  }
}

// Imports, runs at `args` and compares with `want`; then checks the gradient of
// the imported graph by finite differences.
void ExpectModel(const OneNode& model, const std::vector<Tensor>& args, const Tensor& want,
                 bool check_grad = true) {
  absl::StatusOr<std::unique_ptr<Module>> m = model.Import();
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<Value> in(args.begin(), args.end());
  absl::StatusOr<Value> out = RunGraph((*m)->entry(), in);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->is_tensor());
  ASSERT_EQ(out->tensor().shape(), want.shape()) << out->tensor().DebugString(8);
  ExpectClose(*out, want, 1e-12, "output");
  if (check_grad) {
    EXPECT_TRUE(testing::GraphGradientOk(**m, (*m)->entry(), in, testing::Order(1, 7), /*nonvacuous=*/true));
  }
}

std::string ImportError(const OneNode& model) {
  absl::StatusOr<std::unique_ptr<Module>> m = model.Import();
  EXPECT_FALSE(m.ok());
  return m.ok() ? "" : std::string(m.status().message());
}

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
  EXPECT_THAT(ImportError(OneNode("Conv", 13).In({1, 1, 3, 3, 3}).In({1, 1, 1, 1, 1})),
              HasSubstr("node 'n' (Conv): 3-D (N, C, D, H, W) windows are not supported"));
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
                              .Set({{"output_shape", I({20, 5})}})),
              HasSubstr("is larger than the transposed window reaches"));
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
  EXPECT_THAT(ImportError(OneNode("AveragePool", 12).In({1, 1, 4, 4, 4}).Set({{"kernel_shape", I({2, 2, 2})}})),
              HasSubstr("3-D (N, C, D, H, W) windows are not supported"));
  EXPECT_THAT(ImportError(OneNode("AveragePool", 12).In({1, 1, kUnknownDim, 4}).Set({{"kernel_shape", I({2, 2})}})),
              HasSubstr("AveragePool needs static spatial sizes"));
  EXPECT_THAT(ImportError(OneNode("MaxPool", 12).In({1, 1, 4, 4}).Set({{"kernel_shape", I({5, 2})}})),
              HasSubstr("is smaller than the window"));
  EXPECT_THAT(ImportError(OneNode("MaxPool", 12).In({1, 1, 4, 4}).Set({{"kernel_shape", I({1 << 20, 1 << 20})},
              {"dilations", I({2, 2})}, {"pads", I({1 << 21, 1 << 21, 1 << 21, 1 << 21})}})),
              HasSubstr("is too large to compose"));
}

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
  if (m.transform == "align_corners") return ax.out == 1 ? 0 : x * (in - 1) / (out - 1);
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
  // Transforms that read the output length: sizes only for align_corners.
  for (const char* t : {"pytorch_half_pixel", "half_pixel_symmetric"}) {
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
  EXPECT_THAT(ImportError(OneNode("Resize", 13).In({1, 1, 2, 2}).Skip().In({4}, DType::kFloat32)
                              .Set({{"coordinate_transformation_mode", std::string("align_corners")}})),
              HasSubstr("align_corners with scales computed at run time"));
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
                                           "win_upsample9"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
