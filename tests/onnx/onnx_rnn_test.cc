// ONNX LSTM / GRU / RNN import (proto/onnx/onnx_rnn_ops.cc):
//  - torch.nn.LSTM / GRU / RNN exported by torch.onnx (make_rnn_fixtures.py): outputs
//    and torch.autograd's gradients (input and every weight), float32;
//  - hand-built float64 models of the modes torch does not emit (reverse,
//    bidirectional, initial states, clip, peepholes, input_forget, GRU
//    linear_before_reset = 0, layout = 1, sequence_lens, every activation) against a
//    naive reference written here from the ONNX equations, and float64
//    finite-difference gradient checks through the loop;
//  - malformed nodes: a Status naming the node.
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/infer.h"
#include "core/passes/optimize.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/testing/grad_test_util.h"
#include "tests/testing/graph_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

// ----- torch fixtures ---------------------------------------------------------------

struct TorchFixture {
  const char* name;
  int num_outputs;
};

std::ostream& operator<<(std::ostream& os, const TorchFixture& f) { return os << f.name; }

// Float32 through a few dozen sequential steps: round-off stays near 1e-6 of the
// scale; the bound leaves room for different summation orders.
constexpr double kTorchTol = 1e-4;

class TorchRnnTest : public ::testing::TestWithParam<TorchFixture> {
 protected:
  std::string File(const std::string& suffix) const {
    return absl::StrCat(GetParam().name, "_", suffix, ".npy");
  }
};

TEST_P(TorchRnnTest, OutputsMatchTorch) {
  absl::StatusOr<std::unique_ptr<Module>> m = ImportFixture(GetParam().name);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Value> out = RunGraph((*m)->entry(), {Npy(File("in0"))});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->is_tuple() && static_cast<int>(out->tuple().size()) == GetParam().num_outputs)
      << out->TypeString();
  for (int k = 0; k < GetParam().num_outputs; ++k) {
    ExpectClose(out->tuple()[k], Npy(File(absl::StrCat("out", k))), kTorchTol,
                absl::StrCat("output ", k));
  }
}

// d<ct, outputs>/d(input, weights), the gradient graph optimised or not.
void CheckTorchGradients(const TorchFixture& f, bool optimize) {
  auto file = [&](const std::string& suffix) { return absl::StrCat(f.name, "_", suffix, ".npy"); };
  absl::StatusOr<std::unique_ptr<Module>> m = ImportFixture(f.name);
  ASSERT_TRUE(m.ok()) << m.status();
  GradOptions o;
  o.argnums = {0};
  std::vector<std::string> names;
  for (const auto& w : (*m)->weights()) {
    ASSERT_TRUE(Exists(DataPath(file("dw_" + w->name()))))
        << "no torch gradient for weight " << w->name();
    o.weights.push_back(w.get());
    names.push_back(w->name());
  }
  ASSERT_GE(names.size(), 3u);
  absl::StatusOr<FuncGraph*> g = SensGradient(**m, o, optimize);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<Value> cts;
  for (int k = 0; k < f.num_outputs; ++k) cts.push_back(Npy(file(absl::StrCat("ct", k))));
  absl::StatusOr<Value> r = RunGraph(*g, {Npy(file("in0")), Value::Tuple(cts)});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->is_tuple() && r->tuple().size() == 2) << r->TypeString();
  ExpectClose(r->tuple()[0], Npy(file("din0")), kTorchTol, "d input");
  const Value& dw = r->tuple()[1];
  ASSERT_TRUE(dw.is_tuple() && dw.tuple().size() == names.size()) << dw.TypeString();
  for (size_t k = 0; k < names.size(); ++k) {
    ExpectClose(dw.tuple()[k], Npy(file("dw_" + names[k])), kTorchTol, "d " + names[k]);
  }
}

TEST_P(TorchRnnTest, GradientsMatchTorch) { CheckTorchGradients(GetParam(), false); }

TEST_P(TorchRnnTest, OptimizedGradientsMatchTorch) { CheckTorchGradients(GetParam(), true); }

INSTANTIATE_TEST_SUITE_P(Torch, TorchRnnTest,
                         ::testing::Values(TorchFixture{"lstm", 3}, TorchFixture{"gru", 2},
                                           TorchFixture{"rnn_tanh", 2},
                                           TorchFixture{"rnn_relu", 2}),
                         [](const ::testing::TestParamInfo<TorchFixture>& i) {
                           return std::string(i.param.name);
                         });

// ----- hand-built models ------------------------------------------------------------

struct Case {
  std::string name;
  std::string op;  // LSTM, GRU, RNN
  std::string direction = "forward";
  int64_t layout = 0;
  int64_t linear_before_reset = -1;  // -1: attribute absent
  bool input_forget = false;
  double clip = 0;                // 0: absent
  std::vector<std::string> acts;  // empty: absent (the defaults)
  std::vector<float> alphas, betas;
  bool bias = true, init_h = false, init_c = false, peepholes = false;
  std::vector<int32_t> lens;  // empty: no sequence_lens
  bool runtime_lens = false;  // lens as a graph input "L" (after X), not an initializer
  int64_t opset = 14;
  int64_t seq = 4, batch = 2, input = 3, hidden = 3;
  bool symbolic = false;  // X, H0, C0 declare dim_params "seq", "batch"
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

int Gates(const Case& c) { return c.op == "LSTM" ? 4 : c.op == "GRU" ? 3 : 1; }
int Dirs(const Case& c) { return c.direction == "bidirectional" ? 2 : 1; }
int NumActs(const Case& c) { return c.op == "LSTM" ? 3 : c.op == "GRU" ? 2 : 1; }

// The data of one case, in layout 0 ([seq, batch, ...], [dirs, batch, hidden]).
struct Data {
  std::vector<double> x, w, r, b, p, h0, c0;
};

std::vector<double> Uniform(std::mt19937_64& rng, int64_t n, double scale) {
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<double> v(n);
  for (double& e : v) e = u(rng);
  return v;
}

Data MakeData(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t gh = Gates(c) * c.hidden, d = Dirs(c);
  Data x;
  x.x = Uniform(rng, c.seq * c.batch * c.input, 1.0);
  x.w = Uniform(rng, d * gh * c.input, 0.7);
  x.r = Uniform(rng, d * gh * c.hidden, 0.7);
  x.b = Uniform(rng, d * 2 * gh, 0.5);
  x.p = Uniform(rng, d * 3 * c.hidden, 0.5);
  x.h0 = Uniform(rng, d * c.batch * c.hidden, 0.8);
  x.c0 = Uniform(rng, d * c.batch * c.hidden, 0.8);
  return x;
}

// A [d0, d1, d2] array transposed to [d1, d0, d2].
std::vector<double> Swap01(const std::vector<double>& v, int64_t d0, int64_t d1, int64_t d2) {
  std::vector<double> out(v.size());
  for (int64_t i = 0; i < d0; ++i)
    for (int64_t j = 0; j < d1; ++j)
      for (int64_t k = 0; k < d2; ++k) out[(j * d0 + i) * d2 + k] = v[(i * d1 + j) * d2 + k];
  return out;
}

onnx::TensorProto DoubleTensor(const std::string& name, std::vector<int64_t> dims,
                               const std::vector<double>& v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::DOUBLE);
  for (int64_t d : dims) t.add_dims(d);
  for (double e : v) t.add_double_data(e);
  return t;
}

// A double input; where `params` names a dim, it is that dim_param instead.
void AddInput(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims,
              std::vector<std::string> params = {},
              onnx::TensorProto::DataType type = onnx::TensorProto::DOUBLE) {
  onnx::ValueInfoProto* vi = g->add_input();
  vi->set_name(name);
  onnx::TypeProto::Tensor* t = vi->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  params.resize(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (params[i].empty()) {
      t->mutable_shape()->add_dim()->set_dim_value(dims[i]);
    } else {
      t->mutable_shape()->add_dim()->set_dim_param(params[i]);
    }
  }
}

// The node's attributes: those of `c` that differ from the defaults (hidden_size
// and direction always).
void AddAttributes(const Case& c, onnx::NodeProto* n) {
  auto attr = [&](const char* name) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    return a;
  };
  onnx::AttributeProto* a = attr("hidden_size");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(c.hidden);
  a = attr("direction");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(c.direction);
  auto int_attr = [&](const char* name, int64_t v) {
    onnx::AttributeProto* a = attr(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  };
  if (c.layout != 0) int_attr("layout", c.layout);
  if (c.linear_before_reset >= 0) int_attr("linear_before_reset", c.linear_before_reset);
  if (c.input_forget) int_attr("input_forget", 1);
  if (c.clip > 0) {
    a = attr("clip");
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(static_cast<float>(c.clip));
  }
  if (!c.acts.empty()) {
    a = attr("activations");
    a->set_type(onnx::AttributeProto::STRINGS);
    for (const std::string& s : c.acts) a->add_strings(s);
  }
  for (const auto& [name, list] :
       {std::pair{"activation_alpha", &c.alphas}, std::pair{"activation_beta", &c.betas}}) {
    if (list->empty()) continue;
    a = attr(name);
    a->set_type(onnx::AttributeProto::FLOATS);
    for (float f : *list) a->add_floats(f);
  }
}

// The model of `c`: X (and initial_h, initial_c) are graph inputs, the weights
// initializers (module weights), sequence_lens an int32 initializer.
onnx::ModelProto BuildModel(const Case& c, const Data& x) {
  const int64_t gh = Gates(c) * c.hidden, d = Dirs(c);
  const bool l1 = c.layout == 1;
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(c.opset);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name(c.name);
  onnx::NodeProto* n = g->add_node();
  n->set_name("rnn");
  n->set_op_type(c.op);
  using Names = std::vector<std::string>;
  const Names x_params = !c.symbolic ? Names{} : l1 ? Names{"batch", "seq"} : Names{"seq", "batch"};
  const Names state_params = !c.symbolic ? Names{} : l1 ? Names{"batch"} : Names{"", "batch"};
  AddInput(g, "X",
           l1 ? std::vector<int64_t>{c.batch, c.seq, c.input}
              : std::vector<int64_t>{c.seq, c.batch, c.input},
           x_params);
  std::vector<int64_t> state =
      l1 ? std::vector<int64_t>{c.batch, d, c.hidden} : std::vector<int64_t>{d, c.batch, c.hidden};
  *g->add_initializer() = DoubleTensor("W", {d, gh, c.input}, x.w);
  *g->add_initializer() = DoubleTensor("R", {d, gh, c.hidden}, x.r);
  if (c.bias) *g->add_initializer() = DoubleTensor("B", {d, 2 * gh}, x.b);
  if (c.runtime_lens) {
    AddInput(g, "L", {c.batch}, {c.symbolic ? "batch" : ""}, onnx::TensorProto::INT32);
  } else if (!c.lens.empty()) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name("L");
    t->set_data_type(onnx::TensorProto::INT32);
    t->add_dims(c.batch);
    for (int32_t l : c.lens) t->add_int32_data(l);
  }
  if (c.init_h) AddInput(g, "H0", state, state_params);
  if (c.init_c) AddInput(g, "C0", state, state_params);
  if (c.peepholes) *g->add_initializer() = DoubleTensor("P", {d, 3 * c.hidden}, x.p);
  for (const char* in : {"X", "W", "R"}) n->add_input(in);
  n->add_input(c.bias ? "B" : "");
  n->add_input(c.lens.empty() ? "" : "L");
  n->add_input(c.init_h ? "H0" : "");
  if (c.op == "LSTM") {
    n->add_input(c.init_c ? "C0" : "");
    n->add_input(c.peepholes ? "P" : "");
  }
  const int outs = c.op == "LSTM" ? 3 : 2;
  for (int k = 0; k < outs; ++k) {
    n->add_output(absl::StrCat("out", k));
    g->add_output()->set_name(absl::StrCat("out", k));
  }
  AddAttributes(c, n);
  return m;
}

// ----- the reference, from the ONNX operator documentation ---------------------------

struct RefAct {
  std::string name;
  double alpha, beta;
};

double ApplyRef(const RefAct& a, double x) {
  if (a.name == "sigmoid") return 1 / (1 + std::exp(-x));
  if (a.name == "tanh") return std::tanh(x);
  if (a.name == "relu") return std::max(x, 0.0);
  if (a.name == "hardsigmoid") return std::max(0.0, std::min(1.0, a.alpha * x + a.beta));
  if (a.name == "leakyrelu") return x < 0 ? a.alpha * x : x;
  if (a.name == "elu") return x < 0 ? a.alpha * (std::exp(x) - 1) : x;
  if (a.name == "softsign") return x / (1 + std::abs(x));
  if (a.name == "softplus") return std::log(1 + std::exp(x));
  if (a.name == "affine") return a.alpha * x + a.beta;
  if (a.name == "scaledtanh") return a.alpha * std::tanh(a.beta * x);
  if (a.name == "thresholdedrelu") return x > a.alpha ? x : 0;
  ADD_FAILURE() << "reference: unknown activation " << a.name;
  return 0;
}

// The case's activations with their alpha and beta (defaults of the ONNX
// operators; the lists consumed in order by the activations that take them).
std::vector<RefAct> RefActs(const Case& c) {
  std::vector<std::string> names = c.acts;
  if (names.empty()) {
    names = c.op == "LSTM"  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
            : c.op == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                            : std::vector<std::string>{"Tanh"};
  }
  if (static_cast<int>(names.size()) == NumActs(c) && Dirs(c) == 2) {
    const std::vector<std::string> once = names;
    names.insert(names.end(), once.begin(), once.end());
  }
  size_t ia = 0, ib = 0;
  std::vector<RefAct> acts;
  for (std::string n : names) {
    n = absl::AsciiStrToLower(n);  // activation names are case-insensitive
    RefAct a{n, 0, 0};
    bool alpha = true, beta = false;
    if (n == "hardsigmoid")
      a = {n, 0.2, 0.5}, beta = true;
    else if (n == "leakyrelu")
      a.alpha = 0.01;
    else if (n == "elu" || n == "thresholdedrelu")
      a.alpha = 1.0;
    else if (n == "affine")
      a = {n, 1.0, 0.0}, beta = true;
    else if (n == "scaledtanh")
      a = {n, 1.0, 1.0}, beta = true;
    else
      alpha = false;
    if (alpha && ia < c.alphas.size()) a.alpha = c.alphas[ia++];
    if (beta && ib < c.betas.size()) a.beta = c.betas[ib++];
    acts.push_back(a);
  }
  return acts;
}

struct RefOut {
  std::vector<double> y, yh, yc;  // [S, D, B, H], [D, B, H], [D, B, H]
};

// One direction's step for one batch row: `h`, `cs` (LSTM) updated from the
// pre-activations xw = x_t W^T + Wb and hr = h R^T + Rb (gate-major, G*H each).
void RefStep(const Case& c, const Data& x, int64_t d, const RefAct* f,
             const std::vector<double>& xw, const std::vector<double>& hr, std::vector<double>& h,
             std::vector<double>& cs) {
  const int64_t H = c.hidden, GH = Gates(c) * H;
  const double bound = static_cast<float>(c.clip);  // the attribute is a float
  auto clip = [&](double v) { return c.clip > 0 ? std::max(-bound, std::min(bound, v)) : v; };
  auto act = [&](int k, double v) { return ApplyRef(f[k], clip(v)); };
  std::vector<double> hn(H), cn(H);
  if (c.op == "RNN") {
    for (int64_t j = 0; j < H; ++j) hn[j] = act(0, xw[j] + hr[j]);
  } else if (c.op == "GRU") {
    std::vector<double> rv(H);
    for (int64_t j = 0; j < H; ++j) rv[j] = act(0, xw[H + j] + hr[H + j]);
    for (int64_t j = 0; j < H; ++j) {
      const double z = act(0, xw[j] + hr[j]);
      double hh;
      if (c.linear_before_reset > 0) {
        hh = act(1, xw[2 * H + j] + rv[j] * hr[2 * H + j]);
      } else {  // (r . h) Rh^T + Rbh
        double s = c.bias ? x.b[d * 2 * GH + GH + 2 * H + j] : 0;
        for (int64_t i = 0; i < H; ++i) s += rv[i] * h[i] * x.r[(d * GH + 2 * H + j) * H + i];
        hh = act(1, xw[2 * H + j] + s);
      }
      hn[j] = (1 - z) * hh + z * h[j];
    }
  } else {  // LSTM, gates i o f c; peepholes i o f
    const double* p = &x.p[d * 3 * H];
    for (int64_t j = 0; j < H; ++j) {
      const double pi = c.peepholes ? p[j] : 0, po = c.peepholes ? p[H + j] : 0;
      const double pf = c.peepholes ? p[2 * H + j] : 0;
      const double i = act(0, xw[j] + hr[j] + pi * cs[j]);
      const double fg = c.input_forget ? 1 - i : act(0, xw[2 * H + j] + hr[2 * H + j] + pf * cs[j]);
      cn[j] = fg * cs[j] + i * act(1, xw[3 * H + j] + hr[3 * H + j]);
      const double o = act(0, xw[H + j] + hr[H + j] + po * cn[j]);
      hn[j] = o * ApplyRef(f[2], cn[j]);  // h() without clip
    }
    cs = cn;
  }
  h = hn;
}

// The ONNX equations, step by step and row by row, in float64.
RefOut Reference(const Case& c, const Data& x) {
  const int64_t S = c.seq, B = c.batch, I = c.input, H = c.hidden, GH = Gates(c) * H, D = Dirs(c);
  const std::vector<RefAct> acts = RefActs(c);
  RefOut out{std::vector<double>(S * D * B * H, 0.0), std::vector<double>(D * B * H),
             std::vector<double>(D * B * H)};
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = c.direction == "reverse" || d == 1;
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> h(H, 0.0), cs(H, 0.0);
      for (int64_t j = 0; j < H; ++j) {
        if (c.init_h) h[j] = x.h0[(d * B + b) * H + j];
        if (c.init_c) cs[j] = x.c0[(d * B + b) * H + j];
      }
      const int64_t len = c.lens.empty() ? S : c.lens[b];
      for (int64_t k = 0; k < S; ++k) {
        const int64_t t = reverse ? S - 1 - k : k;
        if (t >= len) continue;  // Y stays zero, the state is carried
        std::vector<double> xw(GH), hr(GH);
        for (int64_t q = 0; q < GH; ++q) {
          double s1 = c.bias ? x.b[d * 2 * GH + q] : 0, s2 = c.bias ? x.b[d * 2 * GH + GH + q] : 0;
          for (int64_t i = 0; i < I; ++i)
            s1 += x.x[(t * B + b) * I + i] * x.w[(d * GH + q) * I + i];
          for (int64_t i = 0; i < H; ++i) s2 += h[i] * x.r[(d * GH + q) * H + i];
          xw[q] = s1;
          hr[q] = s2;
        }
        RefStep(c, x, d, &acts[d * NumActs(c)], xw, hr, h, cs);
        for (int64_t j = 0; j < H; ++j) out.y[((t * D + d) * B + b) * H + j] = h[j];
      }
      for (int64_t j = 0; j < H; ++j) {
        out.yh[(d * B + b) * H + j] = h[j];
        out.yc[(d * B + b) * H + j] = cs[j];
      }
    }
  }
  return out;
}

// ----- the hand-built tests -----------------------------------------------------------

Tensor F64(std::vector<int64_t> shape, const std::vector<double>& v) {
  return Tensor::FromVector<double>(shape, v);
}

// The graph's arguments: X (and initial_h, initial_c) as the layout writes them.
std::vector<Value> ModelArgs(const Case& c, const Data& x) {
  const int64_t d = Dirs(c);
  std::vector<Value> args;
  if (c.layout == 0) {
    args.push_back(F64({c.seq, c.batch, c.input}, x.x));
  } else {
    args.push_back(F64({c.batch, c.seq, c.input}, Swap01(x.x, c.seq, c.batch, c.input)));
  }
  if (c.runtime_lens) args.push_back(Tensor::FromVector<int32_t>({c.batch}, c.lens));
  for (auto [on, v] : {std::pair{c.init_h, &x.h0}, std::pair{c.init_c, &x.c0}}) {
    if (!on) continue;
    if (c.layout == 0) {
      args.push_back(F64({d, c.batch, c.hidden}, *v));
    } else {
      args.push_back(F64({c.batch, d, c.hidden}, Swap01(*v, d, c.batch, c.hidden)));
    }
  }
  return args;
}

// The reference outputs as the node writes them (Y, Y_h[, Y_c]).
std::vector<Tensor> ExpectedOutputs(const Case& c, const RefOut& r) {
  const int64_t S = c.seq, B = c.batch, H = c.hidden, D = Dirs(c);
  std::vector<Tensor> outs;
  if (c.layout == 0) {
    outs = {F64({S, D, B, H}, r.y), F64({D, B, H}, r.yh), F64({D, B, H}, r.yc)};
  } else {  // Y [S, D, B, H] -> [B, S, D, H]
    std::vector<double> y(r.y.size());
    for (int64_t t = 0; t < S; ++t)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t b = 0; b < B; ++b)
          for (int64_t j = 0; j < H; ++j)
            y[((b * S + t) * D + d) * H + j] = r.y[((t * D + d) * B + b) * H + j];
    outs = {F64({B, S, D, H}, y), F64({B, D, H}, Swap01(r.yh, D, B, H)),
            F64({B, D, H}, Swap01(r.yc, D, B, H))};
  }
  if (c.op != "LSTM") outs.pop_back();
  return outs;
}

absl::StatusOr<std::unique_ptr<Module>> Import(const onnx::ModelProto& m) {
  return ImportOnnx(m, DefaultRegistry(), OnnxImportOptions());
}

class HandBuiltRnnTest : public ::testing::TestWithParam<Case> {};

TEST_P(HandBuiltRnnTest, MatchesReference) {
  const Case& c = GetParam();
  const Data x = MakeData(c, 7);
  absl::StatusOr<std::unique_ptr<Module>> m = Import(BuildModel(c, x));
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Value> out = RunGraph((*m)->entry(), ModelArgs(c, x));
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<Tensor> want = ExpectedOutputs(c, Reference(c, x));
  ASSERT_TRUE(out->is_tuple() && out->tuple().size() == want.size()) << out->TypeString();
  for (size_t k = 0; k < want.size(); ++k) {
    ExpectClose(out->tuple()[k], want[k], 1e-12, absl::StrCat("output ", k));
  }
}

// Reverse mode (backpropagation through the loop) and forward mode, inputs and
// weights, against central differences.
TEST_P(HandBuiltRnnTest, GradientsMatchFiniteDifferences) {
  const Case& c = GetParam();
  for (uint64_t seed : {1, 2}) {
    const Data x = MakeData(c, seed);
    absl::StatusOr<std::unique_ptr<Module>> m = Import(BuildModel(c, x));
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_TRUE(testing::GraphGradientOk(**m, (*m)->entry(), ModelArgs(c, x),
                                         testing::Order(1, seed),
                                         /*nonvacuous=*/true));
  }
}

Case Make(std::string name, std::string op, std::function<void(Case&)> edit) {
  Case c;
  c.name = std::move(name);
  c.op = std::move(op);
  edit(c);
  return c;
}

std::vector<Case> Cases() {
  std::vector<Case> v = {
      Make("lstm_reverse_initial_states", "LSTM",
           [](Case& c) {
             c.direction = "reverse";
             c.init_h = c.init_c = true;
           }),
      Make("lstm_bidirectional_peepholes_clip_lens", "LSTM",
           [](Case& c) {
             c.direction = "bidirectional";
             c.peepholes = c.init_h = c.init_c = true;
             c.clip = 0.9;
             c.lens = {4, 2};
           }),
      Make("lstm_layout1_input_forget_lens", "LSTM",
           [](Case& c) {
             c.layout = 1;
             c.input_forget = c.init_h = c.init_c = true;
             c.lens = {1, 3};
           }),
      Make("lstm_activations_no_bias", "LSTM",
           [](Case& c) {
             c.bias = false;
             c.acts = {"HardSigmoid", "Softsign", "ScaledTanh"};
             c.alphas = {0.3f, 0.8f};
             c.betas = {0.4f, 1.2f};
           }),
      Make("lstm_opset7", "LSTM",
           [](Case& c) {
             c.opset = 7;
             c.peepholes = true;
           }),
      Make("gru_before_reset0_bidirectional_lens", "GRU",
           [](Case& c) {
             c.direction = "bidirectional";
             c.linear_before_reset = 0;
             c.init_h = true;
             c.lens = {1, 4};
           }),
      Make("gru_before_reset1_reverse_clip", "GRU",
           [](Case& c) {
             c.direction = "reverse";
             c.linear_before_reset = 1;
             c.clip = 0.7;
             c.init_h = true;
           }),
      Make("gru_layout1_elu", "GRU",
           [](Case& c) {
             c.layout = 1;
             c.init_h = true;
             c.acts = {"Sigmoid", "Elu"};
             c.alphas = {0.9f};
           }),
      Make("rnn_bidirectional_relu_tanh", "RNN",
           [](Case& c) {
             c.direction = "bidirectional";
             c.acts = {"Relu", "Tanh"};
             c.init_h = true;
           }),
      Make("rnn_leaky_relu", "RNN", [](Case& c) { c.acts = {"LeakyRelu"}, c.alphas = {0.2f}; }),
      Make("rnn_thresholded_relu", "RNN",
           [](Case& c) { c.acts = {"ThresholdedRelu"}, c.alphas = {0.1f}; }),
      Make("rnn_affine", "RNN",
           [](Case& c) { c.acts = {"Affine"}, c.alphas = {0.5f}, c.betas = {0.2f}; }),
      Make("rnn_softplus", "RNN", [](Case& c) { c.acts = {"softplus"}; }),
      Make("rnn_sigmoid_reverse_lens", "RNN",
           [](Case& c) {
             c.acts = {"Sigmoid"};
             c.direction = "reverse";
             c.lens = {2, 3};
           }),
      // Symbolic sequence length and batch: zero states and trip count at run time.
      Make("lstm_symbolic_bidirectional", "LSTM",
           [](Case& c) {
             c.symbolic = true;
             c.direction = "bidirectional";
           }),
      Make("lstm_symbolic_layout1_initial_states", "LSTM",
           [](Case& c) {
             c.symbolic = true;
             c.layout = 1;
             c.init_h = c.init_c = true;
           }),
      Make("gru_symbolic_reverse", "GRU",
           [](Case& c) {
             c.symbolic = true;
             c.direction = "reverse";
             c.linear_before_reset = 1;
           }),
      Make("rnn_symbolic_initial_state", "RNN",
           [](Case& c) {
             c.symbolic = true;
             c.init_h = true;
           }),
      // Constant lengths with symbolic sequence and batch dims.
      Make("gru_symbolic_lens", "GRU",
           [](Case& c) {
             c.symbolic = true;
             c.direction = "bidirectional";
             c.lens = {3, 1};
           }),
  };
  // Every case with lengths again with the lengths computed at run time (a graph
  // input, as pack_padded_sequence's export computes them), in every direction
  // and layout they cover.
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) {
    if (v[i].lens.empty()) continue;
    Case c = v[i];
    c.name += "_runtime";
    c.runtime_lens = true;
    v.push_back(c);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Modes, HandBuiltRnnTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// One import of a model with symbolic "seq" and "batch", compiled once, runs at
// several sizes; the outputs keep the symbols.
TEST(RnnImport, SymbolicSequenceAndBatchRunAtSeveralSizes) {
  Case c = Make("symbolic", "LSTM", [](Case& c) {
    c.symbolic = true;
    c.direction = "bidirectional";
  });
  const Data weights = MakeData(c, 3);
  absl::StatusOr<std::unique_ptr<Module>> m = Import(BuildModel(c, weights));
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<AbstractPtr> type = InferGraph((*m)->entry());
  ASSERT_TRUE(type.ok()) << type.status();
  EXPECT_EQ((*type)->ToString(),
            "(f64[seq,2,batch,3], f64[2,batch,3], f64[2,batch,3])");
  absl::StatusOr<std::unique_ptr<Executor>> run = Executor::Create((*m)->entry());
  ASSERT_TRUE(run.ok()) << run.status();
  for (auto [seq, batch] : {std::pair{1, 1}, std::pair{6, 3}, std::pair{2, 5}}) {
    c.seq = seq;
    c.batch = batch;
    Data x = MakeData(c, 9);
    x.w = weights.w;
    x.r = weights.r;
    x.b = weights.b;
    absl::StatusOr<Value> out = (*run)->Run(ModelArgs(c, x));
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<Tensor> want = ExpectedOutputs(c, Reference(c, x));
    for (size_t k = 0; k < want.size(); ++k) {
      ExpectClose(out->tuple()[k], want[k], 1e-12,
                  absl::StrCat("seq ", seq, " batch ", batch, " output ", k));
    }
  }
}

// The recurrence is a loop: the imported graph does not grow with the sequence, and
// a long sequence still matches the reference.
TEST(RnnImport, LongSequenceIsALoopNotUnrolled) {
  Case c = Make("long", "LSTM", [](Case& c) { c.direction = "bidirectional"; });
  std::vector<int> sizes;
  for (int64_t seq : {3, 300}) {
    c.seq = seq;
    c.lens = {static_cast<int32_t>(seq), static_cast<int32_t>(seq / 2)};
    const Data x = MakeData(c, 5);
    absl::StatusOr<std::unique_ptr<Module>> m = Import(BuildModel(c, x));
    ASSERT_TRUE(m.ok()) << m.status();
    sizes.push_back(testing::CountApplications((*m)->entry()));
    EXPECT_EQ(testing::CountPrim((*m)->entry(), PrimId::kMatMul), 2 * 2);  // X W^T, h R^T
    absl::StatusOr<Value> out = RunGraph((*m)->entry(), ModelArgs(c, x));
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<Tensor> want = ExpectedOutputs(c, Reference(c, x));
    for (size_t k = 0; k < want.size(); ++k) {
      ExpectClose(out->tuple()[k], want[k], 1e-12, absl::StrCat("seq ", seq, " output ", k));
    }
  }
  EXPECT_EQ(sizes[0], sizes[1]);
}

// ----- malformed nodes ----------------------------------------------------------------

void ExpectImportError(const onnx::ModelProto& m, const std::string& node,
                       const std::string& what) {
  absl::StatusOr<std::unique_ptr<Module>> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr(node)) << r.status();
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr(what)) << r.status();
}

Case Plain(const std::string& op) {
  return Make("plain", op, [](Case&) {});
}

TEST(RnnImportErrors, WrongWShape) {
  Case c = Plain("LSTM");
  onnx::ModelProto m = BuildModel(c, MakeData(c, 1));
  *m.mutable_graph()->mutable_initializer(0) =
      DoubleTensor("W", {1, 12, 4}, std::vector<double>(48, 0.1));
  ExpectImportError(m, "node 'rnn' (LSTM)", "W must be f64[1,12,3], got f64[1,12,4]");
}

TEST(RnnImportErrors, UnknownActivation) {
  Case c = Make("act", "GRU", [](Case& c) { c.acts = {"Sigmoid", "Swish"}; });
  ExpectImportError(BuildModel(c, MakeData(c, 1)), "node 'rnn' (GRU)",
                    "unknown activation 'Swish'");
}

TEST(RnnImportErrors, HiddenSizeMismatch) {
  Case c = Plain("RNN");
  onnx::ModelProto m = BuildModel(c, MakeData(c, 1));
  m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->set_i(5);  // hidden_size
  ExpectImportError(m, "node 'rnn' (RNN)", "hidden_size is 5 but R f64[1,3,3] has hidden size 3");
}

TEST(RnnImportErrors, SequenceLensOfTheWrongTypeOrShape) {
  Case c = Plain("LSTM");
  onnx::ModelProto m = BuildModel(c, MakeData(c, 1));
  AddInput(m.mutable_graph(), "L", {c.batch + 1}, {}, onnx::TensorProto::INT32);
  m.mutable_graph()->mutable_node(0)->set_input(4, "L");
  ExpectImportError(m, "node 'rnn' (LSTM)", "sequence_lens must be int32[2] (one length per sequence), got i32[3]");
  m.mutable_graph()->mutable_input()->rbegin()->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::FLOAT);
  ExpectImportError(m, "node 'rnn' (LSTM)", "sequence_lens must be int32[2]");
}

TEST(RnnImportErrors, BadDirectionAndLeftOverAlphas) {
  Case c = Make("dir", "RNN", [](Case& c) { c.direction = "sideways"; });
  ExpectImportError(BuildModel(c, MakeData(c, 1)), "node 'rnn' (RNN)",
                    "direction must be forward, reverse or bidirectional");
  c = Make("alpha", "RNN", [](Case& c) { c.acts = {"Tanh"}, c.alphas = {0.5f}; });
  ExpectImportError(BuildModel(c, MakeData(c, 1)), "node 'rnn' (RNN)",
                    "activation_alpha/activation_beta have 1/0 values");
}

TEST(RnnImportErrors, SequenceLensOutOfRange) {
  Case c = Make("lens", "GRU", [](Case& c) { c.lens = {2, 5}; });
  ExpectImportError(BuildModel(c, MakeData(c, 1)), "node 'rnn' (GRU)",
                    "sequence_lens[1] = 5 is outside [0, 4]");
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad
