// ONNX LSTM, GRU and RNN (opsets 7-21) as kgrad loops.
//
// Per direction, the input projection of every step is one matmul before the loop:
//   XP[t] = X[t] W^T + biases                                   [seq, batch, G*H]
// and the recurrence is a GraphBuilder::While over the state (t, h[, c], Y):
//   x = gather(XP, t')          t' = t forward, seq-1-t reverse
//   h', c' = cell(x, h, c)      (the ONNX equations, gate by gate)
//   Y = scatter_add(Y, t', h')  (Y starts at zeros: row t' is written once)
// so a long sequence needs no unrolling, and reverse mode differentiates the loop
// (backpropagation through time) with the rules of gather and scatter_add.
// sequence_lens (a constant, or a tensor computed in the graph) masks the steps
// past each sequence's end: there the state is carried and Y is zero, as the spec
// says and torch's packed sequences compute (for reverse, the masked steps come
// first and leave the initial state untouched), so Y_h is each sequence's state
// at its length. The sequence length and the
// batch may be dim symbols (or unknown): then the zero states, Y's start and the
// trip count come from shape_of(X) at run time (see DynamicOperands); the other
// dims are static.
// Activations are exact compositions of primitives (see Apply).
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/dim_symbol.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"

namespace kgrad {
namespace onnx_import {
namespace {

enum class Cell { kRnn, kGru, kLstm };

int NumGates(Cell k) { return k == Cell::kLstm ? 4 : k == Cell::kGru ? 3 : 1; }
int NumActivations(Cell k) { return k == Cell::kLstm ? 3 : k == Cell::kGru ? 2 : 1; }

enum class ActFn {
  kSigmoid,
  kTanh,
  kRelu,
  kHardSigmoid,
  kLeakyRelu,
  kElu,
  kSoftsign,
  kSoftplus,
  kAffine,
  kScaledTanh,
  kThresholdedRelu
};

struct ActInfo {
  const char* name;
  ActFn fn;
  bool takes_alpha, takes_beta;
  double alpha, beta;  // the defaults of the ONNX operators of the same name
};

constexpr ActInfo kActivations[] = {
    {"Sigmoid", ActFn::kSigmoid, false, false, 0, 0},
    {"Tanh", ActFn::kTanh, false, false, 0, 0},
    {"Relu", ActFn::kRelu, false, false, 0, 0},
    {"HardSigmoid", ActFn::kHardSigmoid, true, true, 0.2, 0.5},
    {"LeakyRelu", ActFn::kLeakyRelu, true, false, 0.01, 0},
    {"Elu", ActFn::kElu, true, false, 1.0, 0},
    {"Softsign", ActFn::kSoftsign, false, false, 0, 0},
    {"Softplus", ActFn::kSoftplus, false, false, 0, 0},
    {"Affine", ActFn::kAffine, true, true, 1.0, 0.0},
    {"ScaledTanh", ActFn::kScaledTanh, true, true, 1.0, 1.0},
    {"ThresholdedRelu", ActFn::kThresholdedRelu, true, false, 1.0, 0},
};

struct Activation {
  ActFn fn;
  double alpha, beta;
};

struct RnnSpec {
  Cell kind;
  int64_t hidden = 0;
  int dirs = 1;
  bool reverse = false;          // direction == "reverse"
  std::vector<Activation> acts;  // NumActivations(kind) per direction
  std::optional<double> clip;
  bool input_forget = false;
  bool linear_before_reset = false;
  int64_t layout = 0;
  int64_t seq = 0, batch = 0, input = 0;  // seq and batch may be symbols or ?
  DType dtype = DType::kFloat32;
};

// The activations (default: the cell's), alpha and beta consumed in order by
// those activations that take them (as onnxruntime reads the lists).
absl::Status ParseActivations(NodeContext& c, RnnSpec& s) {
  const int n = NumActivations(s.kind);
  std::vector<std::string> names;
  const onnx::AttributeProto* a = c.Attr("activations");
  if (a != nullptr) {
    if (a->type() != onnx::AttributeProto::STRINGS)
      return c.Error("attribute 'activations' must be strings");
    names.assign(a->strings().begin(), a->strings().end());
  } else {
    names = s.kind == Cell::kLstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
            : s.kind == Cell::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                   : std::vector<std::string>{"Tanh"};
  }
  if (static_cast<int>(names.size()) == n && s.dirs == 2) {  // one list for both directions
    const std::vector<std::string> once = names;
    names.insert(names.end(), once.begin(), once.end());
  }
  if (static_cast<int>(names.size()) != n * s.dirs) {
    return c.Error(absl::StrCat("attribute 'activations' has ", names.size(), " entries, expected ",
                                n * s.dirs, " (", n, " per direction)"));
  }
  std::vector<float> alphas, betas;
  const std::pair<const char*, std::vector<float>*> lists[] = {{"activation_alpha", &alphas},
                                                               {"activation_beta", &betas}};
  for (const auto& [attr, list] : lists) {
    const onnx::AttributeProto* v = c.Attr(attr);
    if (v == nullptr) continue;
    if (v->type() != onnx::AttributeProto::FLOATS)
      return c.Error(absl::StrCat("attribute '", attr, "' must be floats"));
    list->assign(v->floats().begin(), v->floats().end());
  }
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    const ActInfo* info = nullptr;
    for (const ActInfo& k : kActivations) {
      if (absl::EqualsIgnoreCase(k.name, name)) info = &k;
    }
    if (info == nullptr) {
      std::vector<std::string> known;
      for (const ActInfo& k : kActivations) known.push_back(k.name);
      return c.Error(absl::StrCat("unknown activation '", name,
                                  "' (supported: ", absl::StrJoin(known, ", "), ")"));
    }
    Activation act{info->fn, info->alpha, info->beta};
    if (info->takes_alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (info->takes_beta && next_beta < betas.size()) act.beta = betas[next_beta++];
    s.acts.push_back(act);
  }
  // Left-over values mean the writer indexed the lists some other way: refuse
  // rather than guess.
  if (next_alpha != alphas.size() || next_beta != betas.size()) {
    return c.Error(
        absl::StrCat("activation_alpha/activation_beta have ", alphas.size(), "/", betas.size(),
                     " values but the activations take ", next_alpha, "/", next_beta,
                     " (the values are consumed in order by the activations that use them)"));
  }
  return absl::OkStatus();
}

// f(x) for one ONNX activation, an exact composition of primitives.
absl::StatusOr<ImportedValue> Apply(NodeContext& c, const Activation& a, DType dt,
                                    const ImportedValue& x) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue alpha, c.Scalar(dt, a.alpha));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue beta, c.Scalar(dt, a.beta));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue zero, c.Scalar(dt, 0));
  switch (a.fn) {
    case ActFn::kSigmoid:
      return c.Emit(PrimId::kSigmoid, {x});
    case ActFn::kTanh:
      return c.Emit(PrimId::kTanh, {x});
    case ActFn::kRelu:
      return c.Emit(PrimId::kRelu, {x});
    case ActFn::kSoftplus:
      return c.Emit(PrimId::kSoftplus, {x});  // ln(1 + e^x)
    case ActFn::kHardSigmoid:  // the shared forms of onnx_activation_ops.cc
      return HardSigmoidOf(c, x, a.alpha, a.beta);
    case ActFn::kLeakyRelu: return LeakyReluOf(c, x, a.alpha);
    case ActFn::kThresholdedRelu: return ThresholdedReluOf(c, x, a.alpha);
    case ActFn::kElu: {  // x < 0 ? alpha (e^x - 1) : x; expm1 of min(x, 0) so that
                         // the branch not taken never overflows (inf * 0 in the gradient)
      KGRAD_ASSIGN_OR_RETURN(ImportedValue neg, c.Emit(PrimId::kLess, {x, zero}));
      KGRAD_ASSIGN_OR_RETURN(ImportedValue xn, c.Emit(PrimId::kMinimum, {x, zero}));
      KGRAD_ASSIGN_OR_RETURN(ImportedValue e, c.Emit(PrimId::kExpm1, {xn}));
      KGRAD_ASSIGN_OR_RETURN(e, c.Emit(PrimId::kMul, {e, alpha}));
      return c.Emit(PrimId::kSelect, {neg, e, x});
    }
    case ActFn::kSoftsign: return SoftsignOf(c, x);
    case ActFn::kAffine: {  // alpha x + beta
      KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Emit(PrimId::kMul, {x, alpha}));
      return c.Emit(PrimId::kAdd, {y, beta});
    }
    case ActFn::kScaledTanh: {  // alpha tanh(beta x)
      KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Emit(PrimId::kMul, {x, beta}));
      KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kTanh, {y}));
      return c.Emit(PrimId::kMul, {y, alpha});
    }
  }
  return c.Error("internal: unhandled activation");
}

// Clip (when given) bounds the input of every activation to [-clip, clip].
absl::StatusOr<ImportedValue> Activate(NodeContext& c, const RnnSpec& s, const Activation& a,
                                       ImportedValue x) {
  if (s.clip.has_value()) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue lo, c.Scalar(s.dtype, -*s.clip));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue hi, c.Scalar(s.dtype, *s.clip));
    KGRAD_ASSIGN_OR_RETURN(x, c.Emit(PrimId::kMaximum, {x, lo}));
    KGRAD_ASSIGN_OR_RETURN(x, c.Emit(PrimId::kMinimum, {x, hi}));
  }
  return Apply(c, a, s.dtype, x);
}

// The parts of `v` along `axis`, each `size` long.
absl::StatusOr<std::vector<ImportedValue>> Split(NodeContext& c, const ImportedValue& v,
                                                 int64_t axis, std::vector<int64_t> sizes) {
  const size_t n = sizes.size();
  KGRAD_ASSIGN_OR_RETURN(
      ImportedValue t, c.Emit(PrimId::kSplit, {v}, {{"axis", axis}, {"sizes", std::move(sizes)}}));
  std::vector<ImportedValue> parts;
  for (size_t i = 0; i < n; ++i) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue p, c.Item(t, static_cast<int64_t>(i)));
    parts.push_back(p);
  }
  return parts;
}

absl::StatusOr<ImportedValue> Take(NodeContext& c, const ImportedValue& v, int64_t i) {
  return c.Emit(PrimId::kGather, {v, c.Const(Tensor::FromScalar<int64_t>(i))},
                {{"axis", int64_t{0}}});
}

absl::StatusOr<ImportedValue> MatMulT(NodeContext& c, const ImportedValue& a,
                                      const ImportedValue& b) {
  return c.Emit(PrimId::kMatMul, {a, b}, {{"transpose_b", true}});
}

absl::StatusOr<ImportedValue> Zeros(NodeContext& c, DType dt, std::vector<int64_t> shape) {
  return c.Emit(PrimId::kFill, {}, {{"shape", std::move(shape)}, {"value", 0.0}, {"dtype", dt}});
}

// The node's inputs, as [seq, batch, ...] whatever the layout.
struct RnnInputs {
  ImportedValue x;                      // [S, B, I]
  ImportedValue w, r;                   // [D, G*H, I], [D, G*H, H]
  std::optional<ImportedValue> b;       // [D, 2*G*H]
  std::optional<ImportedValue> lens;    // int64 [B, 1] when some sequence is short
  std::optional<ImportedValue> h0, c0;  // [D, B, H]
  std::optional<ImportedValue> p;       // [D, 3*H]
  ImportedValue steps, last;            // int64 scalars: S and S - 1
  ImportedValue zero_h, zero_y;         // zeros [B, H] and [S, B, H]
};

// One direction's operands, computed before its loop.
struct Direction {
  bool reverse = false;
  const Activation* acts = nullptr;            // NumActivations(kind) of them
  ImportedValue xp;                            // [S, B, G*H]: X W^T + the biases that add to it
  ImportedValue r;                             // [G*H, H] (LSTM, RNN; GRU uses r_zr, r_h)
  ImportedValue r_zr, r_h;                     // GRU: [2H, H], [H, H]
  std::optional<ImportedValue> rbh;            // GRU with linear_before_reset: Rb of the h gate
  std::optional<ImportedValue> p_i, p_o, p_f;  // LSTM peepholes [H]
  ImportedValue h0, c0;                        // [B, H]
  ImportedValue y0;                            // [S, B, H] zeros
  ImportedValue steps, last;                   // int64 scalars: S and S - 1
};

absl::StatusOr<Direction> MakeDirection(NodeContext& c, const RnnSpec& s, const RnnInputs& in,
                                        int d) {
  const int64_t h = s.hidden, gh = NumGates(s.kind) * h;
  Direction dir;
  dir.reverse = s.reverse || d == 1;
  dir.acts = &s.acts[d * NumActivations(s.kind)];
  KGRAD_ASSIGN_OR_RETURN(ImportedValue w, Take(c, in.w, d));
  KGRAD_ASSIGN_OR_RETURN(dir.r, Take(c, in.r, d));
  const bool fixed = s.seq >= 0 && s.batch >= 0;
  ImportedValue x2 = in.x;  // [S, B, I]: a batched matmul when S and B are not static
  if (fixed) {
    KGRAD_ASSIGN_OR_RETURN(x2, c.Emit(PrimId::kReshape, {in.x},
                                      {{"shape", std::vector<int64_t>{s.seq * s.batch, s.input}}}));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue xp, MatMulT(c, x2, w));
  if (in.b.has_value()) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue bd, Take(c, *in.b, d));
    KGRAD_ASSIGN_OR_RETURN(std::vector<ImportedValue> wr, Split(c, bd, 0, {gh, gh}));
    ImportedValue rb = wr[1];
    if (s.kind == Cell::kGru && s.linear_before_reset) {
      // Rb of the h gate is multiplied by r: it stays in the loop.
      KGRAD_ASSIGN_OR_RETURN(std::vector<ImportedValue> parts, Split(c, rb, 0, {2 * h, h}));
      dir.rbh = parts[1];
      KGRAD_ASSIGN_OR_RETURN(ImportedValue z, Zeros(c, s.dtype, {h}));
      KGRAD_ASSIGN_OR_RETURN(rb, c.Emit(PrimId::kConcat, {parts[0], z}, {{"axis", int64_t{0}}}));
    }
    KGRAD_ASSIGN_OR_RETURN(ImportedValue bias, c.Emit(PrimId::kAdd, {wr[0], rb}));
    KGRAD_ASSIGN_OR_RETURN(xp, c.Emit(PrimId::kAdd, {xp, bias}));
  }
  dir.xp = xp;
  if (fixed) {
    KGRAD_ASSIGN_OR_RETURN(dir.xp, c.Emit(PrimId::kReshape, {xp},
                                          {{"shape", std::vector<int64_t>{s.seq, s.batch, gh}}}));
  }
  if (s.kind == Cell::kGru) {
    KGRAD_ASSIGN_OR_RETURN(std::vector<ImportedValue> parts, Split(c, dir.r, 0, {2 * h, h}));
    dir.r_zr = parts[0];
    dir.r_h = parts[1];
  }
  if (in.p.has_value()) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue pd, Take(c, *in.p, d));
    KGRAD_ASSIGN_OR_RETURN(std::vector<ImportedValue> parts, Split(c, pd, 0, {h, h, h}));
    dir.p_i = parts[0];
    dir.p_o = parts[1];
    dir.p_f = parts[2];
  }
  for (auto [init, out] : {std::pair{&in.h0, &dir.h0}, std::pair{&in.c0, &dir.c0}}) {
    if (init->has_value()) {
      KGRAD_ASSIGN_OR_RETURN(*out, Take(c, **init, d));
    } else {
      *out = in.zero_h;
    }
  }
  dir.y0 = in.zero_y;
  dir.steps = in.steps;
  dir.last = in.last;
  return dir;
}

struct CellState {
  ImportedValue h, c;
};

// x [B, H] + peephole * c (when there are peepholes).
absl::StatusOr<ImportedValue> Peep(NodeContext& b, const ImportedValue& x,
                                   const std::optional<ImportedValue>& p, const ImportedValue& c) {
  if (!p.has_value()) return x;
  KGRAD_ASSIGN_OR_RETURN(ImportedValue pc, b.Emit(PrimId::kMul, {*p, c}));
  return b.Emit(PrimId::kAdd, {x, pc});
}

// LSTM, gates iofc: C = f C_prev + i g(c~), H = o h(C); with input_forget, f = 1 - i.
absl::StatusOr<CellState> LstmStep(NodeContext& b, const RnnSpec& s, const Direction& d,
                                   const ImportedValue& x, const CellState& prev) {
  const int64_t h = s.hidden;
  KGRAD_ASSIGN_OR_RETURN(ImportedValue g, MatMulT(b, prev.h, d.r));
  KGRAD_ASSIGN_OR_RETURN(g, b.Emit(PrimId::kAdd, {x, g}));
  KGRAD_ASSIGN_OR_RETURN(std::vector<ImportedValue> q, Split(b, g, 1, {h, h, h, h}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue gi, Peep(b, q[0], d.p_i, prev.c));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue i, Activate(b, s, d.acts[0], gi));
  ImportedValue f;
  if (s.input_forget) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue one, b.Scalar(s.dtype, 1));
    KGRAD_ASSIGN_OR_RETURN(f, b.Emit(PrimId::kSub, {one, i}));
  } else {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue gf, Peep(b, q[2], d.p_f, prev.c));
    KGRAD_ASSIGN_OR_RETURN(f, Activate(b, s, d.acts[0], gf));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue cc, Activate(b, s, d.acts[1], q[3]));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue fc, b.Emit(PrimId::kMul, {f, prev.c}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue ic, b.Emit(PrimId::kMul, {i, cc}));
  CellState next;
  KGRAD_ASSIGN_OR_RETURN(next.c, b.Emit(PrimId::kAdd, {fc, ic}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue go, Peep(b, q[1], d.p_o, next.c));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue o, Activate(b, s, d.acts[0], go));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue hc,
                         Apply(b, d.acts[2], s.dtype, next.c));  // h() is not clipped
  KGRAD_ASSIGN_OR_RETURN(next.h, b.Emit(PrimId::kMul, {o, hc}));
  return next;
}

// GRU, gates zrh: H = (1 - z) h~ + z H_prev, with
//   h~ = g(x_h + (r H_prev) Rh^T + Rbh)        linear_before_reset = 0 (Rbh in x_h)
//   h~ = g(x_h + r (H_prev Rh^T + Rbh))        linear_before_reset = 1
absl::StatusOr<CellState> GruStep(NodeContext& b, const RnnSpec& s, const Direction& d,
                                  const ImportedValue& x, const CellState& prev) {
  const int64_t h = s.hidden;
  KGRAD_ASSIGN_OR_RETURN(std::vector<ImportedValue> xs, Split(b, x, 1, {h, h, h}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue hzr, MatMulT(b, prev.h, d.r_zr));
  KGRAD_ASSIGN_OR_RETURN(std::vector<ImportedValue> hs, Split(b, hzr, 1, {h, h}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue gz, b.Emit(PrimId::kAdd, {xs[0], hs[0]}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue gr, b.Emit(PrimId::kAdd, {xs[1], hs[1]}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue z, Activate(b, s, d.acts[0], gz));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue r, Activate(b, s, d.acts[0], gr));
  ImportedValue gh;
  if (s.linear_before_reset) {
    KGRAD_ASSIGN_OR_RETURN(gh, MatMulT(b, prev.h, d.r_h));
    if (d.rbh.has_value()) {
      KGRAD_ASSIGN_OR_RETURN(gh, b.Emit(PrimId::kAdd, {gh, *d.rbh}));
    }
    KGRAD_ASSIGN_OR_RETURN(gh, b.Emit(PrimId::kMul, {r, gh}));
  } else {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue rh, b.Emit(PrimId::kMul, {r, prev.h}));
    KGRAD_ASSIGN_OR_RETURN(gh, MatMulT(b, rh, d.r_h));
  }
  KGRAD_ASSIGN_OR_RETURN(gh, b.Emit(PrimId::kAdd, {xs[2], gh}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue hh, Activate(b, s, d.acts[1], gh));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue one, b.Scalar(s.dtype, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue zc, b.Emit(PrimId::kSub, {one, z}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue a, b.Emit(PrimId::kMul, {zc, hh}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue zh, b.Emit(PrimId::kMul, {z, prev.h}));
  CellState next;
  KGRAD_ASSIGN_OR_RETURN(next.h, b.Emit(PrimId::kAdd, {a, zh}));
  return next;
}

// RNN: H = f(x + H_prev R^T).
absl::StatusOr<CellState> RnnStep(NodeContext& b, const RnnSpec& s, const Direction& d,
                                  const ImportedValue& x, const CellState& prev) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue g, MatMulT(b, prev.h, d.r));
  KGRAD_ASSIGN_OR_RETURN(g, b.Emit(PrimId::kAdd, {x, g}));
  CellState next;
  KGRAD_ASSIGN_OR_RETURN(next.h, Activate(b, s, d.acts[0], g));
  return next;
}

// The loop state: (t, h, c, Y); c is carried (unchanged) by GRU and RNN too.
struct LoopTypes {
  AbstractPtr t, h, c, y;
};

// One iteration: the next state from `st`.
absl::StatusOr<std::vector<AnfNode*>> StepBody(NodeContext& c, const RnnSpec& s, const Direction& d,
                                               const std::optional<ImportedValue>& lens,
                                               const LoopTypes& ty, GraphBuilder& bb,
                                               absl::Span<AnfNode* const> st) {
  Scope scope(&bb, &c.scope());
  NodeContext b(c.importer(), scope, c.node());
  ImportedValue t{st[0], ty.t, std::nullopt};
  CellState prev{{st[1], ty.h, std::nullopt}, {st[2], ty.c, std::nullopt}};
  ImportedValue y{st[3], ty.y, std::nullopt};
  ImportedValue idx = t;
  if (d.reverse) {
    KGRAD_ASSIGN_OR_RETURN(idx, b.Emit(PrimId::kSub, {d.last, t}));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x,
                         b.Emit(PrimId::kGather, {d.xp, idx}, {{"axis", int64_t{0}}}));
  absl::StatusOr<CellState> next = s.kind == Cell::kLstm  ? LstmStep(b, s, d, x, prev)
                                   : s.kind == Cell::kGru ? GruStep(b, s, d, x, prev)
                                                          : RnnStep(b, s, d, x, prev);
  if (!next.ok()) return next.status();
  if (s.kind != Cell::kLstm) next->c = prev.c;
  ImportedValue out = next->h;
  if (lens.has_value()) {  // past a sequence's end: state carried, output zero
    KGRAD_ASSIGN_OR_RETURN(ImportedValue m, b.Emit(PrimId::kLess, {idx, *lens}));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue zero, b.Scalar(s.dtype, 0));
    KGRAD_ASSIGN_OR_RETURN(out, b.Emit(PrimId::kSelect, {m, next->h, zero}));
    KGRAD_ASSIGN_OR_RETURN(next->h, b.Emit(PrimId::kSelect, {m, next->h, prev.h}));
    KGRAD_ASSIGN_OR_RETURN(next->c, b.Emit(PrimId::kSelect, {m, next->c, prev.c}));
  }
  KGRAD_ASSIGN_OR_RETURN(y, b.Emit(PrimId::kScatterAdd, {y, idx, out}, {{"axis", int64_t{0}}}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue t1,
                         b.Emit(PrimId::kAdd, {t, b.Const(Tensor::FromScalar<int64_t>(1))}));
  return std::vector<AnfNode*>{b.NodeOf(t1), b.NodeOf(next->h), b.NodeOf(next->c), b.NodeOf(y)};
}

// Runs one direction: its Y [S, B, H] and final h, c [B, H].
absl::StatusOr<std::vector<ImportedValue>> RunDirection(NodeContext& c, const RnnSpec& s,
                                                        const Direction& d,
                                                        const std::optional<ImportedValue>& lens) {
  ImportedValue t0 = c.Const(Tensor::FromScalar<int64_t>(0));
  const ImportedValue& y0 = d.y0;
  // Broadened: the counter starts as the constant 0 but is not 0 in the body.
  LoopTypes ty{Broaden(t0.type), Broaden(d.h0.type), Broaden(d.c0.type), Broaden(y0.type)};
  const ImportedValue& seq = d.steps;
  absl::Status err;
  auto keep = [&](absl::Status st) {
    if (err.ok()) err = std::move(st);
  };
  std::vector<AnfNode*> final_state = c.b().While(
      {c.NodeOf(t0), c.NodeOf(d.h0), c.NodeOf(d.c0), c.NodeOf(y0)},
      [&](GraphBuilder& lb, absl::Span<AnfNode* const> st) -> AnfNode* {
        Scope scope(&lb, &c.scope());
        NodeContext lc(c.importer(), scope, c.node());
        absl::StatusOr<ImportedValue> more =
            lc.Emit(PrimId::kLess, {ImportedValue{st[0], ty.t, std::nullopt}, seq});
        if (more.ok()) more = lc.Emit(PrimId::kTensorToScalar, {*more});
        if (!more.ok()) {
          keep(more.status());
          return lb.Bool(false);
        }
        return lc.NodeOf(*more);
      },
      [&](GraphBuilder& bb, absl::Span<AnfNode* const> st) -> std::vector<AnfNode*> {
        absl::StatusOr<std::vector<AnfNode*>> next = StepBody(c, s, d, lens, ty, bb, st);
        if (next.ok()) return *next;
        keep(next.status());
        return std::vector<AnfNode*>(st.begin(), st.end());
      },
      absl::AsciiStrToLower(c.node().op_type()));
  KGRAD_RETURN_IF_ERROR(err);
  KGRAD_RETURN_IF_ERROR(c.b().status());
  return std::vector<ImportedValue>{{final_state[3], ty.y, std::nullopt},
                                    {final_state[1], ty.h, std::nullopt},
                                    {final_state[2], ty.c, std::nullopt}};
}

// `v` must be a tensor of s.dtype and `shape`: exactly its static dims; where
// `shape` has a symbol or ?, a dim that may equal it.
absl::Status ExpectShape(NodeContext& c, const RnnSpec& s, const ImportedValue& v, const char* what,
                         const Shape& shape) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(v));
  bool ok = t->dtype() == s.dtype && t->rank() == static_cast<int>(shape.size());
  for (int i = 0; ok && i < t->rank(); ++i) {
    ok = shape[i] >= 0 ? t->shape()[i] == shape[i] : UnifyDims(shape[i], t->shape()[i]).has_value();
  }
  if (!ok) {
    return c.Error(absl::StrCat(what, " must be ", DTypeName(s.dtype), ShapeToString(shape),
                                ", got ", t->ToString()));
  }
  return absl::OkStatus();
}

// Optional input i, checked against `shape` ([D, B, ...] as the layout writes it),
// returned as [D, B, ...].
absl::StatusOr<std::optional<ImportedValue>> StateInput(NodeContext& c, const RnnSpec& s, int i,
                                                        const char* what, int64_t width) {
  if (!c.HasInput(i)) return std::optional<ImportedValue>();
  KGRAD_ASSIGN_OR_RETURN(ImportedValue v, c.Input(i));
  if (s.layout == 0) {
    KGRAD_RETURN_IF_ERROR(ExpectShape(c, s, v, what, {s.dirs, s.batch, width}));
    return std::optional<ImportedValue>(v);
  }
  KGRAD_RETURN_IF_ERROR(ExpectShape(c, s, v, what, {s.batch, s.dirs, width}));
  KGRAD_ASSIGN_OR_RETURN(
      v, c.Emit(PrimId::kTranspose, {v}, {{"perm", std::vector<int64_t>{1, 0, 2}}}));
  return std::optional<ImportedValue>(v);
}

// sequence_lens (int32 [B]) as an int64 [B, 1] that step t' compares with (t' <
// length: inside the sequence). A constant is checked against [0, S] and dropped
// when every sequence is full; a tensor computed in the graph (pack_padded_sequence
// exports Cast(TopK(lengths))) is cast and reshaped at run time, where a length
// outside [0, S] acts as 0 or S (ONNX leaves such lengths undefined).
absl::StatusOr<std::optional<ImportedValue>> SequenceLengths(NodeContext& c, const RnnSpec& s) {
  if (!c.HasInput(4)) return std::optional<ImportedValue>();
  KGRAD_ASSIGN_OR_RETURN(ImportedValue v, c.Input(4));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(v));
  if ((t->dtype() != DType::kInt32 && t->dtype() != DType::kInt64) || t->rank() != 1 ||
      !UnifyDims(s.batch, t->shape()[0]).has_value()) {
    return c.Error(absl::StrCat("sequence_lens must be int32", ShapeToString(Shape{s.batch}),
                                " (one length per sequence), got ", t->ToString()));
  }
  if (!v.constant.has_value()) {
    if (t->dtype() != DType::kInt64) {
      KGRAD_ASSIGN_OR_RETURN(v, c.Emit(PrimId::kCast, {v}, {{"dtype", DType::kInt64}}));
    }
    KGRAD_ASSIGN_OR_RETURN(v, c.Emit(PrimId::kExpandDims, {v}, {{"axis", int64_t{1}}}));
    return std::optional<ImportedValue>(v);
  }
  const Tensor& lens = *v.constant;
  const int64_t batch = lens.NumElements();
  bool full = s.seq >= 0;
  for (int64_t b = 0; b < batch; ++b) {
    const double len = lens.ElementAsDouble(b);
    if (len < 0 || (s.seq >= 0 && len > s.seq)) {
      return c.Error(absl::StrCat("sequence_lens[", b, "] = ", len, " is outside [0, ",
                                  s.seq >= 0 ? std::to_string(s.seq) : "seq_length", "]"));
    }
    full = full && len == s.seq;
  }
  if (full) return std::optional<ImportedValue>();
  std::vector<int64_t> v64(batch);
  for (int64_t b = 0; b < batch; ++b) v64[b] = static_cast<int64_t>(lens.ElementAsDouble(b));
  return std::optional<ImportedValue>(c.Const(Tensor::FromVector<int64_t>({batch, 1}, v64)));
}

// The trip count and the zeros of a static [S, B, ...].
absl::Status StaticOperands(NodeContext& c, const RnnSpec& s, RnnInputs& in) {
  in.steps = c.Const(Tensor::FromScalar<int64_t>(s.seq));
  in.last = c.Const(Tensor::FromScalar<int64_t>(s.seq - 1));
  KGRAD_ASSIGN_OR_RETURN(in.zero_h, Zeros(c, s.dtype, {s.batch, s.hidden}));
  KGRAD_ASSIGN_OR_RETURN(in.zero_y, Zeros(c, s.dtype, {s.seq, s.batch, s.hidden}));
  return absl::OkStatus();
}

// The same when S or B is a symbol, from X's shape [S, B, I] at run time (no
// gradient path: shape_of has none); the symbols stay in the types:
//   zero_y = dynamic_fill([S, B, H]), zero_h = dynamic_fill([B, H]), steps = S.
absl::Status DynamicOperands(NodeContext& c, const RnnSpec& s, RnnInputs& in) {
  auto dims = [&](const ImportedValue& shape, int64_t begin, int64_t end) {
    return c.Emit(PrimId::kSlice, {shape},
                  {{"begin", std::vector<int64_t>{begin}}, {"end", std::vector<int64_t>{end}},
                   {"strides", std::vector<int64_t>{1}}});
  };
  auto zeros = [&](const ImportedValue& leading) -> absl::StatusOr<ImportedValue> {
    ImportedValue hidden = c.Const(Tensor::FromVector<int64_t>({1}, {s.hidden}));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue shape,
                           c.Emit(PrimId::kConcat, {leading, hidden}, {{"axis", int64_t{0}}}));
    return c.Emit(PrimId::kDynamicFill, {shape}, {{"value", 0.0}, {"dtype", s.dtype}});
  };
  KGRAD_ASSIGN_OR_RETURN(ImportedValue shape, c.Emit(PrimId::kShapeOf, {in.x}));  // [T, B, I]
  KGRAD_ASSIGN_OR_RETURN(ImportedValue tb, dims(shape, 0, 2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue b, dims(shape, 1, 2));
  KGRAD_ASSIGN_OR_RETURN(in.zero_y, zeros(tb));
  KGRAD_ASSIGN_OR_RETURN(in.zero_h, zeros(b));
  KGRAD_ASSIGN_OR_RETURN(in.steps,
                         c.Emit(PrimId::kGather, {shape, c.Const(Tensor::FromScalar<int64_t>(0))},
                                {{"axis", int64_t{0}}}));
  KGRAD_ASSIGN_OR_RETURN(
      in.last, c.Emit(PrimId::kSub, {in.steps, c.Const(Tensor::FromScalar<int64_t>(1))}));
  return absl::OkStatus();
}

// The attributes (except the activations) and X's dims.
absl::StatusOr<RnnSpec> ParseSpec(NodeContext& c, Cell kind) {
  RnnSpec s;
  s.kind = kind;
  KGRAD_ASSIGN_OR_RETURN(std::string direction, c.String("direction", "forward"));
  if (direction == "bidirectional") {
    s.dirs = 2;
  } else if (direction == "reverse") {
    s.reverse = true;
  } else if (direction != "forward") {
    return c.Error(
        absl::StrCat("direction must be forward, reverse or bidirectional, got '", direction, "'"));
  }
  KGRAD_ASSIGN_OR_RETURN(s.layout, c.Int("layout", 0));
  if (s.layout != 0 && s.layout != 1)
    return c.Error(absl::StrCat("layout must be 0 or 1, got ", s.layout));
  if (c.HasAttr("clip")) {
    KGRAD_ASSIGN_OR_RETURN(double clip, c.Float("clip", 0));
    if (!(clip > 0)) return c.Error(absl::StrCat("clip must be positive, got ", clip));
    s.clip = clip;
  }
  KGRAD_ASSIGN_OR_RETURN(int64_t input_forget, c.Int("input_forget", 0));
  if (kind != Cell::kLstm && c.HasAttr("input_forget"))
    return c.Error("input_forget is an LSTM attribute");
  s.input_forget = input_forget != 0;
  KGRAD_ASSIGN_OR_RETURN(int64_t lbr, c.Int("linear_before_reset", 0));
  if (kind != Cell::kGru && c.HasAttr("linear_before_reset"))
    return c.Error("linear_before_reset is a GRU attribute");
  s.linear_before_reset = lbr != 0;
  KGRAD_RETURN_IF_ERROR(ParseActivations(c, s));
  return s;
}

// Reads and checks the inputs; fills in the dims of `s`.
absl::StatusOr<RnnInputs> ReadInputs(NodeContext& c, RnnSpec& s) {
  RnnInputs in;
  KGRAD_ASSIGN_OR_RETURN(in.x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(in.w, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(in.r, c.Input(2));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, c.TensorType(in.x));
  if (tx->dtype() != DType::kFloat32 && tx->dtype() != DType::kFloat64) {
    return c.Error(absl::StrCat("X must be float32 or float64, got ", tx->ToString()));
  }
  if (tx->rank() != 3 || tx->shape()[2] < 0) {
    return c.Error(absl::StrCat("X must have rank 3 and a static input size, got ", tx->ToString()));
  }
  s.dtype = tx->dtype();
  s.seq = tx->shape()[s.layout == 0 ? 0 : 1];
  s.batch = tx->shape()[s.layout == 0 ? 1 : 0];
  s.input = tx->shape()[2];
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tr, c.TensorType(in.r));
  if (tr->rank() != 3 || !tr->shape_known())
    return c.Error(absl::StrCat("R must have a static rank-3 shape, got ", tr->ToString()));
  const int64_t hidden = tr->shape()[2];
  KGRAD_ASSIGN_OR_RETURN(s.hidden, c.Int("hidden_size", hidden));
  if (s.hidden != hidden || s.hidden <= 0) {
    return c.Error(absl::StrCat("hidden_size is ", s.hidden, " but R ", tr->ToString(),
                                " has hidden size ", hidden));
  }
  const int64_t gh = NumGates(s.kind) * s.hidden;
  KGRAD_RETURN_IF_ERROR(ExpectShape(c, s, in.w, "W", {s.dirs, gh, s.input}));
  // The largest tensor formed is XP [S, B, G*H] (declared shapes may be hostile).
  int64_t xp = 0;
  if (s.seq >= 0 && s.batch >= 0 &&
      (__builtin_mul_overflow(s.seq, s.batch, &xp) || __builtin_mul_overflow(xp, gh, &xp))) {
    return c.Error(absl::StrCat("X ", tx->ToString(), " with ", gh, " gate units is too large"));
  }
  KGRAD_RETURN_IF_ERROR(ExpectShape(c, s, in.r, "R", {s.dirs, gh, s.hidden}));
  if (c.HasInput(3)) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue b, c.Input(3));
    KGRAD_RETURN_IF_ERROR(ExpectShape(c, s, b, "B", {s.dirs, 2 * gh}));
    in.b = b;
  }
  KGRAD_ASSIGN_OR_RETURN(in.lens, SequenceLengths(c, s));
  KGRAD_ASSIGN_OR_RETURN(in.h0, StateInput(c, s, 5, "initial_h", s.hidden));
  KGRAD_ASSIGN_OR_RETURN(in.c0, StateInput(c, s, 6, "initial_c", s.hidden));
  if (c.HasInput(7)) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue p, c.Input(7));
    KGRAD_RETURN_IF_ERROR(ExpectShape(c, s, p, "P", {s.dirs, 3 * s.hidden}));
    in.p = p;
  }
  if (s.layout == 1) {
    KGRAD_ASSIGN_OR_RETURN(
        in.x, c.Emit(PrimId::kTranspose, {in.x}, {{"perm", std::vector<int64_t>{1, 0, 2}}}));
  }
  KGRAD_RETURN_IF_ERROR(s.seq >= 0 && s.batch >= 0 ? StaticOperands(c, s, in)
                                                   : DynamicOperands(c, s, in));
  return in;
}

// Stacks per-direction values along a new axis `axis`.
absl::StatusOr<ImportedValue> Stack(NodeContext& c, const std::vector<ImportedValue>& parts,
                                    int64_t axis) {
  std::vector<ImportedValue> expanded;
  for (const ImportedValue& p : parts) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue e, c.Emit(PrimId::kExpandDims, {p}, {{"axis", axis}}));
    expanded.push_back(e);
  }
  if (expanded.size() == 1) return expanded[0];
  return c.Emit(PrimId::kConcat, expanded, {{"axis", axis}});
}

// LSTM / GRU / RNN: outputs Y, Y_h (and Y_c for LSTM).
template <Cell kind>
Outputs Recurrent(NodeContext& c) {
  const bool lstm = kind == Cell::kLstm;
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(3, lstm ? 8 : 6));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(lstm ? 3 : 2));
  if (c.HasAttr("layout") && c.opset() < 14) return c.Error("attribute 'layout' needs opset 14");
  KGRAD_ASSIGN_OR_RETURN(RnnSpec s, ParseSpec(c, kind));
  KGRAD_ASSIGN_OR_RETURN(RnnInputs in, ReadInputs(c, s));
  std::vector<ImportedValue> ys, hs, cs;
  for (int d = 0; d < s.dirs; ++d) {
    KGRAD_ASSIGN_OR_RETURN(Direction dir, MakeDirection(c, s, in, d));
    KGRAD_ASSIGN_OR_RETURN(std::vector<ImportedValue> r, RunDirection(c, s, dir, in.lens));
    ys.push_back(r[0]);
    hs.push_back(r[1]);
    cs.push_back(r[2]);
  }
  std::vector<ImportedValue> outs(lstm ? 3 : 2);
  KGRAD_ASSIGN_OR_RETURN(outs[0], Stack(c, ys, 1));  // [S, D, B, H]
  KGRAD_ASSIGN_OR_RETURN(outs[1], Stack(c, hs, 0));  // [D, B, H]
  if (lstm) {
    KGRAD_ASSIGN_OR_RETURN(outs[2], Stack(c, cs, 0));
  }
  if (s.layout == 1) {
    KGRAD_ASSIGN_OR_RETURN(outs[0], c.Emit(PrimId::kTranspose, {outs[0]},
                                           {{"perm", std::vector<int64_t>{2, 0, 1, 3}}}));
    for (size_t k = 1; k < outs.size(); ++k) {
      KGRAD_ASSIGN_OR_RETURN(outs[k], c.Emit(PrimId::kTranspose, {outs[k]},
                                             {{"perm", std::vector<int64_t>{1, 0, 2}}}));
    }
  }
  return outs;
}

}  // namespace

void AddRnnOps(OpTable* t) {
  AddMappings(t, {{"LSTM", Recurrent<Cell::kLstm>}, {"GRU", Recurrent<Cell::kGru>},
                  {"RNN", Recurrent<Cell::kRnn>}});
}

}  // namespace onnx_import
}  // namespace kgrad
