// ONNX GridSample (opsets 16 and 20) composed of primitives, as torch's
// F.grid_sample computes it (aten/src/ATen/native/GridSampler.h), so that the
// gradients with respect to the input and the grid are the primitives' own:
//
//   X [N, C, (D,) H, W], grid [N, (D_out,) H_out, W_out, nsp] whose last axis
//   holds (x, y(, z)) for the axes (W, H(, D)), each in [-1, 1] over the input.
//   unnormalise:  align_corners: (g + 1) / 2 * (size - 1), else ((g + 1) * size - 1) / 2
//   padding:      border: clip to [0, size - 1]; reflection: reflect about the
//                 borders (the pixel edges without align_corners), then clip;
//                 zeros: taps outside the input read 0
//   linear:       the 2^nsp corners floor(c), floor(c) + 1 weighted (1 - t, t)
//   nearest:      round half to even
//   cubic (2-D):  taps floor(c) - 1 .. floor(c) + 2, cubic convolution weights with
//                 A = -0.75, each tap's position padded as above (torch pads the taps
//                 of bicubic, the coordinate of the others)
//
// Each tap is a gather_elements from X flattened to [N, C, cells] at the tap's
// flat position (clamped into the input, its weight masked to 0 outside),
// times its weight; the taps are summed. floor and round have zero derivative,
// so d/dgrid flows through the weights (and reflection's abs and the clips), as
// in torch.
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"

namespace kgrad {
namespace onnx_import {
namespace {

using Value = ImportedValue;

constexpr double kCubicA = -0.75;  // torch's and ONNX's cubic convolution constant

enum class Mode { kLinear, kNearest, kCubic };
enum class Padding { kZeros, kBorder, kReflection };

struct GridSpec {
  Mode mode;
  Padding padding;
  bool align;
  DType dtype;
  Shape x, grid;  // static
  int nsp;        // spatial axes: 2 or 3
};

// One tap along one axis: its position (a float tensor of whole numbers, [N, P])
// and weight (none: 1).
struct Tap {
  Value pos;
  std::optional<Value> weight;
};

// The emitting context of one node with the element type's constants.
class Emitter {
 public:
  Emitter(NodeContext& c, DType dtype) : c_(c), dtype_(dtype) {}

  absl::StatusOr<Value> K(double v) { return c_.Scalar(dtype_, v); }
  absl::StatusOr<Value> Op(PrimId id, std::vector<Value> args, AttrMap attrs = {}) {
    return c_.Emit(id, args, std::move(attrs));
  }
  // a (op) k for a constant k.
  absl::StatusOr<Value> OpK(PrimId id, const Value& a, double k) {
    KGRAD_ASSIGN_OR_RETURN(Value kv, K(k));
    return Op(id, {a, kv});
  }
  // a (op) k with the constant first.
  absl::StatusOr<Value> KOp(PrimId id, double k, const Value& a) {
    KGRAD_ASSIGN_OR_RETURN(Value kv, K(k));
    return Op(id, {kv, a});
  }
  NodeContext& c() { return c_; }

 private:
  NodeContext& c_;
  DType dtype_;
};

absl::StatusOr<GridSpec> ReadSpec(NodeContext& c, const AbstractTensor* tx, const AbstractTensor* tg) {
  GridSpec s;
  KGRAD_ASSIGN_OR_RETURN(std::string mode, c.String("mode", c.opset() >= 20 ? "linear" : "bilinear"));
  KGRAD_ASSIGN_OR_RETURN(std::string padding, c.String("padding_mode", "zeros"));
  KGRAD_ASSIGN_OR_RETURN(int64_t align, c.Int("align_corners", 0));
  if (mode == "bilinear" || mode == "linear") {
    s.mode = Mode::kLinear;
  } else if (mode == "nearest") {
    s.mode = Mode::kNearest;
  } else if (mode == "bicubic" || mode == "cubic") {
    s.mode = Mode::kCubic;
  } else {
    return c.Error(absl::StrCat("mode must be bilinear/linear, nearest or bicubic/cubic, got '", mode, "'"));
  }
  if (padding == "zeros") {
    s.padding = Padding::kZeros;
  } else if (padding == "border") {
    s.padding = Padding::kBorder;
  } else if (padding == "reflection") {
    s.padding = Padding::kReflection;
  } else {
    return c.Error(absl::StrCat("padding_mode must be zeros, border or reflection, got '", padding, "'"));
  }
  if (align != 0 && align != 1) return c.Error(absl::StrCat("align_corners must be 0 or 1, got ", align));
  s.align = align != 0;
  if (tx->dtype() != DType::kFloat32 && tx->dtype() != DType::kFloat64) {
    return c.Error(absl::StrCat("X must be float32 or float64, got ", tx->ToString()));
  }
  if ((tx->rank() != 4 && tx->rank() != 5) || !tx->shape_known() || !tg->shape_known()) {
    return c.Error(absl::StrCat("needs X of static shape [N, C, H, W] or [N, C, D, H, W] and a static grid, got ",
                                tx->ToString(), " and ", tg->ToString()));
  }
  s.nsp = tx->rank() - 2;
  s.dtype = tx->dtype();
  s.x = tx->shape();
  s.grid = tg->shape();
  if (tg->rank() != tx->rank() || s.grid[0] != s.x[0] || s.grid.back() != s.nsp ||
      (tg->dtype() != DType::kFloat32 && tg->dtype() != DType::kFloat64)) {
    return c.Error(absl::StrCat("grid must be a float [N, ", s.nsp == 2 ? "H_out, W_out" : "D_out, H_out, W_out",
                                ", ", s.nsp, "] tensor for X ", tx->ToString(), ", got ", tg->ToString()));
  }
  if (s.mode == Mode::kCubic && s.nsp != 2) return c.Error("cubic mode samples 2-D inputs only (as torch)");
  for (int64_t d : s.x) {
    if (d == 0) return c.Error(absl::StrCat("X must not be empty, got ", tx->ToString()));
  }
  return s;
}

// The reflection of c about twice_low / 2 and twice_high / 2 (torch's
// reflect_coordinates): with span = (high - low) / 2 and m = |c - low / 2|,
// m mod span from the low border on even flips, from the high one on odd.
absl::StatusOr<Value> Reflect(Emitter& e, const Value& c, double twice_low, double twice_high) {
  if (twice_low == twice_high) return e.OpK(PrimId::kMul, c, 0.0);  // size 1: always 0
  const double lo = twice_low / 2, span = (twice_high - twice_low) / 2;
  KGRAD_ASSIGN_OR_RETURN(Value m, e.OpK(PrimId::kSub, c, lo));
  KGRAD_ASSIGN_OR_RETURN(m, e.Op(PrimId::kAbs, {m}));
  KGRAD_ASSIGN_OR_RETURN(Value q, e.OpK(PrimId::kDiv, m, span));
  KGRAD_ASSIGN_OR_RETURN(Value flips, e.Op(PrimId::kFloor, {q}));
  KGRAD_ASSIGN_OR_RETURN(Value whole, e.OpK(PrimId::kMul, flips, span));
  KGRAD_ASSIGN_OR_RETURN(Value extra, e.Op(PrimId::kSub, {m, whole}));
  KGRAD_ASSIGN_OR_RETURN(Value half, e.OpK(PrimId::kMul, flips, 0.5));
  KGRAD_ASSIGN_OR_RETURN(Value half_floor, e.Op(PrimId::kFloor, {half}));
  KGRAD_ASSIGN_OR_RETURN(Value even, e.Op(PrimId::kEqual, {half, half_floor}));
  KGRAD_ASSIGN_OR_RETURN(Value up, e.OpK(PrimId::kAdd, extra, lo));
  KGRAD_ASSIGN_OR_RETURN(Value down, e.KOp(PrimId::kSub, span + lo, extra));
  return e.Op(PrimId::kSelect, {even, up, down});
}

// torch's compute_coordinates: border and reflection map c into [0, size - 1];
// zeros leaves it. The clip's maximum and minimum take c as their first operand,
// so that a c exactly on a border gets no gradient, as in torch.
absl::StatusOr<Value> PadCoordinate(Emitter& e, const GridSpec& s, const Value& c, int64_t size) {
  if (s.padding == Padding::kZeros) return c;
  Value v = c;
  if (s.padding == Padding::kReflection) {
    const double n = static_cast<double>(size);
    KGRAD_ASSIGN_OR_RETURN(v, s.align ? Reflect(e, v, 0, 2 * (n - 1)) : Reflect(e, v, -1, 2 * n - 1));
  }
  KGRAD_ASSIGN_OR_RETURN(v, e.OpK(PrimId::kMaximum, v, 0.0));
  return e.OpK(PrimId::kMinimum, v, static_cast<double>(size - 1));
}

// Grid component `comp` as [N, P] source coordinates along an input axis of
// length `size`.
absl::StatusOr<Value> SourceCoordinate(Emitter& e, const GridSpec& s, const Value& grid, int comp, int64_t size) {
  const int rank = static_cast<int>(s.grid.size());
  std::vector<int64_t> begin(rank, 0), end(s.grid.begin(), s.grid.end());
  begin.back() = comp;
  end.back() = comp + 1;
  KGRAD_ASSIGN_OR_RETURN(Value g, e.Op(PrimId::kSlice, {grid}, {{"begin", begin}, {"end", end}}));
  const int64_t points = NumElementsOf(s.grid) / s.nsp;
  KGRAD_ASSIGN_OR_RETURN(g, e.Op(PrimId::kReshape, {g}, {{"shape", std::vector<int64_t>{s.x[0], points / s.x[0]}}}));
  const double n = static_cast<double>(size);
  KGRAD_ASSIGN_OR_RETURN(Value g1, e.OpK(PrimId::kAdd, g, 1.0));
  if (s.align) return e.OpK(PrimId::kMul, g1, (n - 1) / 2);
  KGRAD_ASSIGN_OR_RETURN(Value scaled, e.OpK(PrimId::kMul, g1, n / 2));
  return e.OpK(PrimId::kSub, scaled, 0.5);
}

// The cubic convolution weights of the taps at floor(c) - 1 .. floor(c) + 2 for
// t = c - floor(c): conv2(t + 1), conv1(t), conv1(1 - t), conv2(2 - t) with
//   conv1(x) = ((A + 2) x - (A + 3)) x^2 + 1,   conv2(x) = ((A x - 5A) x + 8A) x - 4A.
absl::StatusOr<std::vector<Value>> CubicWeights(Emitter& e, const Value& t) {
  auto conv1 = [&](const Value& x) -> absl::StatusOr<Value> {
    KGRAD_ASSIGN_OR_RETURN(Value a, e.OpK(PrimId::kMul, x, kCubicA + 2));
    KGRAD_ASSIGN_OR_RETURN(a, e.OpK(PrimId::kSub, a, kCubicA + 3));
    KGRAD_ASSIGN_OR_RETURN(a, e.Op(PrimId::kMul, {a, x}));
    KGRAD_ASSIGN_OR_RETURN(a, e.Op(PrimId::kMul, {a, x}));
    return e.OpK(PrimId::kAdd, a, 1.0);
  };
  auto conv2 = [&](const Value& x) -> absl::StatusOr<Value> {
    KGRAD_ASSIGN_OR_RETURN(Value a, e.OpK(PrimId::kMul, x, kCubicA));
    KGRAD_ASSIGN_OR_RETURN(a, e.OpK(PrimId::kSub, a, 5 * kCubicA));
    KGRAD_ASSIGN_OR_RETURN(a, e.Op(PrimId::kMul, {a, x}));
    KGRAD_ASSIGN_OR_RETURN(a, e.OpK(PrimId::kAdd, a, 8 * kCubicA));
    KGRAD_ASSIGN_OR_RETURN(a, e.Op(PrimId::kMul, {a, x}));
    return e.OpK(PrimId::kSub, a, 4 * kCubicA);
  };
  KGRAD_ASSIGN_OR_RETURN(Value t1, e.OpK(PrimId::kAdd, t, 1.0));
  KGRAD_ASSIGN_OR_RETURN(Value u, e.KOp(PrimId::kSub, 1.0, t));
  KGRAD_ASSIGN_OR_RETURN(Value u1, e.OpK(PrimId::kAdd, u, 1.0));
  std::vector<Value> w(4);
  KGRAD_ASSIGN_OR_RETURN(w[0], conv2(t1));
  KGRAD_ASSIGN_OR_RETURN(w[1], conv1(t));
  KGRAD_ASSIGN_OR_RETURN(w[2], conv1(u));
  KGRAD_ASSIGN_OR_RETURN(w[3], conv2(u1));
  return w;
}

// The taps of one axis for source coordinates `c` along an input axis of `size`.
absl::StatusOr<std::vector<Tap>> AxisTaps(Emitter& e, const GridSpec& s, const Value& c, int64_t size) {
  if (s.mode == Mode::kCubic) {
    KGRAD_ASSIGN_OR_RETURN(Value p0, e.Op(PrimId::kFloor, {c}));
    KGRAD_ASSIGN_OR_RETURN(Value t, e.Op(PrimId::kSub, {c, p0}));
    KGRAD_ASSIGN_OR_RETURN(std::vector<Value> w, CubicWeights(e, t));
    std::vector<Tap> taps;
    for (int k = 0; k < 4; ++k) {
      KGRAD_ASSIGN_OR_RETURN(Value p, e.OpK(PrimId::kAdd, p0, k - 1.0));
      KGRAD_ASSIGN_OR_RETURN(p, PadCoordinate(e, s, p, size));
      taps.push_back({p, w[k]});
    }
    return taps;
  }
  KGRAD_ASSIGN_OR_RETURN(Value pc, PadCoordinate(e, s, c, size));
  if (s.mode == Mode::kNearest) {
    KGRAD_ASSIGN_OR_RETURN(Value p, e.Op(PrimId::kRound, {pc}));
    return std::vector<Tap>{{p, std::nullopt}};
  }
  KGRAD_ASSIGN_OR_RETURN(Value p0, e.Op(PrimId::kFloor, {pc}));
  KGRAD_ASSIGN_OR_RETURN(Value p1, e.OpK(PrimId::kAdd, p0, 1.0));
  KGRAD_ASSIGN_OR_RETURN(Value w1, e.Op(PrimId::kSub, {pc, p0}));
  KGRAD_ASSIGN_OR_RETURN(Value w0, e.KOp(PrimId::kSub, 1.0, w1));
  return std::vector<Tap>{{p0, w0}, {p1, w1}};
}

// X flattened to [N, C, cells] read at one combination of taps (one per axis),
// times the taps' weights, 0 where a tap lies outside the input: [N, C, P].
absl::StatusOr<Value> ReadTaps(Emitter& e, const GridSpec& s, const Value& xflat, const std::vector<const Tap*>& taps) {
  std::optional<Value> index, weight, inside;
  int64_t stride = 1;
  for (int i = s.nsp - 1; i >= 0; --i) {
    const int64_t size = s.x[2 + i];
    const Tap& t = *taps[i];
    KGRAD_ASSIGN_OR_RETURN(Value lo_ok, e.OpK(PrimId::kGreaterEqual, t.pos, 0.0));
    KGRAD_ASSIGN_OR_RETURN(Value hi_ok, e.OpK(PrimId::kLessEqual, t.pos, static_cast<double>(size - 1)));
    KGRAD_ASSIGN_OR_RETURN(Value ok, e.Op(PrimId::kLogicalAnd, {lo_ok, hi_ok}));
    if (inside.has_value()) {
      KGRAD_ASSIGN_OR_RETURN(ok, e.Op(PrimId::kLogicalAnd, {*inside, ok}));
    }
    inside = ok;
    KGRAD_ASSIGN_OR_RETURN(Value p, e.OpK(PrimId::kMaximum, t.pos, 0.0));
    KGRAD_ASSIGN_OR_RETURN(p, e.OpK(PrimId::kMinimum, p, static_cast<double>(size - 1)));
    KGRAD_ASSIGN_OR_RETURN(p, e.OpK(PrimId::kMul, p, static_cast<double>(stride)));
    if (index.has_value()) {
      KGRAD_ASSIGN_OR_RETURN(p, e.Op(PrimId::kAdd, {*index, p}));
    }
    index = p;
    if (t.weight.has_value()) {
      Value w = *t.weight;
      if (weight.has_value()) {
        KGRAD_ASSIGN_OR_RETURN(w, e.Op(PrimId::kMul, {*weight, w}));
      }
      weight = w;
    }
    stride *= size;
  }
  // Positions are whole numbers below 2^53: the cast to int64 is exact.
  KGRAD_ASSIGN_OR_RETURN(Value idx, e.Op(PrimId::kCast, {*index}, {{"dtype", DType::kInt64}}));
  const int64_t n = s.x[0], ch = s.x[1], points = NumElementsOf(s.grid) / s.nsp / n;
  KGRAD_ASSIGN_OR_RETURN(idx, e.Op(PrimId::kExpandDims, {idx}, {{"axis", int64_t{1}}}));
  KGRAD_ASSIGN_OR_RETURN(idx, e.Op(PrimId::kBroadcastTo, {idx}, {{"shape", std::vector<int64_t>{n, ch, points}}}));
  KGRAD_ASSIGN_OR_RETURN(Value v, e.Op(PrimId::kGatherElements, {xflat, idx}, {{"axis", int64_t{2}}}));
  KGRAD_ASSIGN_OR_RETURN(Value factor, e.Op(PrimId::kCast, {*inside}, {{"dtype", s.dtype}}));
  if (weight.has_value()) {
    KGRAD_ASSIGN_OR_RETURN(factor, e.Op(PrimId::kMul, {factor, *weight}));
  }
  KGRAD_ASSIGN_OR_RETURN(factor, e.Op(PrimId::kExpandDims, {factor}, {{"axis", int64_t{1}}}));
  return e.Op(PrimId::kMul, {v, factor});
}

// GridSample(X, grid){mode, padding_mode, align_corners}.
Outputs GridSample(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(Value x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(Value grid, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, c.TensorType(x));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tg, c.TensorType(grid));
  KGRAD_ASSIGN_OR_RETURN(GridSpec s, ReadSpec(c, tx, tg));
  Emitter e(c, s.dtype);
  if (tg->dtype() != s.dtype) {
    KGRAD_ASSIGN_OR_RETURN(grid, e.Op(PrimId::kCast, {grid}, {{"dtype", s.dtype}}));
  }
  const int64_t n = s.x[0], ch = s.x[1], cells = NumElementsOf(s.x) / (n * ch);
  // Per input axis i (X axis 2 + i), the grid component nsp - 1 - i (x is W).
  std::vector<std::vector<Tap>> taps(s.nsp);
  for (int i = 0; i < s.nsp; ++i) {
    KGRAD_ASSIGN_OR_RETURN(Value src, SourceCoordinate(e, s, grid, s.nsp - 1 - i, s.x[2 + i]));
    KGRAD_ASSIGN_OR_RETURN(taps[i], AxisTaps(e, s, src, s.x[2 + i]));
  }
  KGRAD_ASSIGN_OR_RETURN(Value xflat, e.Op(PrimId::kReshape, {x}, {{"shape", std::vector<int64_t>{n, ch, cells}}}));
  std::optional<Value> acc;
  std::vector<size_t> at(s.nsp, 0);  // the combination of taps, odometer order
  while (true) {
    std::vector<const Tap*> pick(s.nsp);
    for (int i = 0; i < s.nsp; ++i) pick[i] = &taps[i][at[i]];
    KGRAD_ASSIGN_OR_RETURN(Value v, ReadTaps(e, s, xflat, pick));
    if (acc.has_value()) {
      KGRAD_ASSIGN_OR_RETURN(v, e.Op(PrimId::kAdd, {*acc, v}));
    }
    acc = v;
    int i = s.nsp - 1;
    while (i >= 0 && ++at[i] == taps[i].size()) at[i--] = 0;
    if (i < 0) break;
  }
  std::vector<int64_t> out = {n, ch};
  for (size_t d = 1; d + 1 < s.grid.size(); ++d) out.push_back(s.grid[d]);
  return OneOutput(e.Op(PrimId::kReshape, {*acc}, {{"shape", out}}));
}

}  // namespace

void AddGridSampleOps(OpTable* t) { AddMappings(t, {{"GridSample", GridSample}}); }

}  // namespace onnx_import
}  // namespace kgrad
