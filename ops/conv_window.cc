#include "ops/conv_window.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/dtype.h"
#include "core/status_macros.h"

namespace kgrad {
namespace ops {
namespace {

constexpr const char* kAxisNames[2] = {"height", "width"};
// Attribute values beyond this are nonsense and could overflow int64 arithmetic.
constexpr int64_t kMaxAttrValue = kMaxElements;

bool Known(int64_t d) { return d >= 0; }

// ----- Attributes -----------------------------------------------------------------
absl::Status BadAttr(const std::string& name, const std::vector<int64_t>& v,
                     absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be ", expected,
                                                 ", got [", absl::StrJoin(v, ", "), "]"));
}

// Two values, each in [min, kMaxAttrValue].
absl::StatusOr<std::array<int64_t, 2>> PairAttr(const Primitive& p, const std::string& name,
                                                int64_t min) {
  const std::vector<int64_t>& v = p.GetInts(name);
  std::string expected = absl::StrCat("2 values [h, w], each >= ", min);
  if (v.size() != 2) return BadAttr(name, v, expected);
  for (int64_t x : v) {
    if (x < min || x > kMaxAttrValue) return BadAttr(name, v, expected);
  }
  return std::array<int64_t, 2>{v[0], v[1]};
}

// padding: [pad_h, pad_w] (symmetric) or [top, bottom, left, right]; each >= 0.
absl::Status ParsePadding(const Primitive& p, Window* w) {
  const std::vector<int64_t>& v = p.GetInts("padding");
  const char* expected = "[pad_h, pad_w] or [top, bottom, left, right], each >= 0";
  if (v.size() != 2 && v.size() != 4) return BadAttr("padding", v, expected);
  for (int64_t x : v) {
    if (x < 0 || x > kMaxAttrValue) return BadAttr("padding", v, expected);
  }
  if (v.size() == 2) {
    w->pad_lo = w->pad_hi = {v[0], v[1]};
  } else {
    w->pad_lo = {v[0], v[2]};
    w->pad_hi = {v[1], v[3]};
  }
  return absl::OkStatus();
}

// ----- The ops ---------------------------------------------------------------------
// The part a tensor plays: x [N,C,H,W], the filter w, or y, the forward output
// (also the shape of the gradient dy).
enum class Part { kX, kW, kY };

// One op of the family: what its inputs hold, which input plays which part (-1:
// none; ddx is shaped like x), and which part its output is shaped like.
struct OpSpec {
  PrimId id;
  bool conv;
  int count;
  std::array<const char*, 3> names;  // for messages
  int x, w, dy, ddx;
  // What dy or ddx must be shaped like: a literal, so that no string is built
  // unless there is an error.
  const char* other_is;
  Part out;
};

constexpr OpSpec kOps[] = {
    {PrimId::kConv2d, true, 2, {"NCHW input", "OIHW filter"}, 0, 1, -1, -1, nullptr, Part::kY},
    {PrimId::kConv2dBackpropInput,
     true,
     3,
     {"NCHW gradient", "OIHW filter", "NCHW input-shape"},
     2,
     1,
     0,
     -1,
     "the conv2d output of inputs 2 and 1",
     Part::kX},
    {PrimId::kConv2dBackpropFilter,
     true,
     3,
     {"NCHW input", "NCHW gradient", "OIHW filter-shape"},
     0,
     2,
     1,
     -1,
     "the conv2d output of inputs 0 and 2",
     Part::kW},
    {PrimId::kMaxPool2d, false, 1, {"NCHW input"}, 0, -1, -1, -1, nullptr, Part::kY},
    {PrimId::kAvgPool2d, false, 1, {"NCHW input"}, 0, -1, -1, -1, nullptr, Part::kY},
    {PrimId::kMaxPool2dGrad,
     false,
     2,
     {"NCHW input", "NCHW gradient"},
     0,
     -1,
     1,
     -1,
     "the pooled shape of input 0",
     Part::kX},
    {PrimId::kMaxPool2dGradGrad,
     false,
     2,
     {"NCHW input", "NCHW input-gradient"},
     0,
     -1,
     -1,
     1,
     "like input 0",
     Part::kY},
    {PrimId::kAvgPool2dGrad,
     false,
     2,
     {"NCHW gradient", "NCHW input-shape"},
     1,
     -1,
     0,
     -1,
     "the pooled shape of input 1",
     Part::kX},
};

const OpSpec* FindSpec(PrimId id) {
  for (const OpSpec& s : kOps) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

// The spec of op `id` applied to `count` inputs (callers index by part).
absl::StatusOr<const OpSpec*> SpecOf(PrimId id, size_t count) {
  const OpSpec* s = FindSpec(id);
  if (s == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(PrimIdName(id), " is not a convolution or pooling op"));
  }
  if (count != static_cast<size_t>(s->count)) {
    return absl::InvalidArgumentError(
        absl::StrCat(PrimIdName(id), " takes ", s->count, " inputs, got ", count));
  }
  return s;
}

// `y` merged with the op's dy, if it has one: error where they differ.
absl::StatusOr<Shape> MatchDy(const OpSpec& s, absl::Span<const Shape* const> in, const Shape& y) {
  if (s.dy < 0) return y;
  return MatchShape(s.dy, *in[s.dy], y, s.other_is);
}

// The shapes of kernel inputs (at most 3 in the family; no allocation).
struct TensorShapes {
  std::array<const Shape*, 3> shapes{};
  size_t size = 0;

  explicit TensorShapes(absl::Span<const Tensor* const> in) : size(in.size()) {
    for (size_t i = 0; i < size && i < shapes.size(); ++i) shapes[i] = &in[i]->shape();
  }
  absl::Span<const Shape* const> span() const { return {shapes.data(), size}; }
};

// ----- Convolution ---------------------------------------------------------------------
// "input 0 must be a tensor whose channel count (dim 1) is divisible by groups=2,
// got [1,3,5,5]: 3 is not divisible by groups=2".
absl::Status NotDivisible(int i, absl::string_view whose, const Shape& s, int64_t dim,
                          int64_t groups) {
  return absl::InvalidArgumentError(
      absl::StrCat("input ", i, " must be ", whose, " is divisible by groups=", groups, ", got ",
                   ShapeToString(s), ": ", dim, " is not divisible by groups=", groups));
}

// The rules between x [N,C,H,W] (input xi) and w [O,C/groups,KH,KW] (input wi)
// that their known dims decide.
absl::Status CheckFilter(int64_t groups, const Shape& x, int xi, const Shape& w, int wi) {
  if (Known(x[1]) && x[1] % groups != 0) {
    return NotDivisible(xi, "a tensor whose channel count (dim 1)", x, x[1], groups);
  }
  if (Known(w[0]) && w[0] % groups != 0) {
    return NotDivisible(wi, "a filter whose output channel count (dim 0)", w, w[0], groups);
  }
  for (int a = 0; a < 2; ++a) {
    if (Known(w[2 + a]) && w[2 + a] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("input ", wi, " must be a filter with a kernel ", kAxisNames[a],
                       " >= 1 (a kernel of at least 1x1), got ", ShapeToString(w)));
    }
  }
  if (Known(x[1]) && Known(w[1]) && w[1] != x[1] / groups) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", wi, " (filter) must have C/groups = ", x[1] / groups,
                     " input channels (dim 1) for input ", xi, " of ", x[1],
                     " channels and groups=", groups, ", got ", ShapeToString(w)));
  }
  return absl::OkStatus();
}

// ----- Pooling ---------------------------------------------------------------------------
absl::StatusOr<PoolGeom> MakePoolGeom(const Primitive& p, const Shape& x) {
  PoolGeom g;
  KGRAD_ASSIGN_OR_RETURN(g.win, PoolAttrs(p));
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  KGRAD_ASSIGN_OR_RETURN(g.oh, WindowCount(g.win, 0, g.h, /*pool=*/true));
  KGRAD_ASSIGN_OR_RETURN(g.ow, WindowCount(g.win, 1, g.w, /*pool=*/true));
  if (p.id() == PrimId::kAvgPool2d || p.id() == PrimId::kAvgPool2dGrad) {
    g.count_include_pad = p.GetBool("count_include_pad");
  }
  return g;
}

}  // namespace

absl::StatusOr<Window> ConvAttrs(const Primitive& p) {
  Window w;
  KGRAD_ASSIGN_OR_RETURN(w.stride, PairAttr(p, "stride", 1));
  KGRAD_ASSIGN_OR_RETURN(w.dilation, PairAttr(p, "dilation", 1));
  KGRAD_RETURN_IF_ERROR(ParsePadding(p, &w));
  w.groups = p.GetInt("groups");
  if (w.groups < 1 || w.groups > kMaxAttrValue) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'groups' must be >= 1, got ", w.groups));
  }
  return w;
}

absl::StatusOr<Window> PoolAttrs(const Primitive& p) {
  Window w;
  KGRAD_ASSIGN_OR_RETURN(w.kernel, PairAttr(p, "kernel", 1));
  if (p.GetInts("stride").empty()) {
    w.stride = w.kernel;  // non-overlapping windows
  } else {
    KGRAD_ASSIGN_OR_RETURN(w.stride, PairAttr(p, "stride", 1));
  }
  KGRAD_RETURN_IF_ERROR(ParsePadding(p, &w));
  return w;
}

absl::StatusOr<int64_t> WindowCount(const Window& w, int axis, int64_t in, bool pool) {
  const char* name = kAxisNames[axis];
  const int64_t k = w.kernel[axis], d = w.dilation[axis], s = w.stride[axis];
  const int64_t lo = w.pad_lo[axis], hi = w.pad_hi[axis];
  if (pool && lo >= k) {
    return absl::InvalidArgumentError(absl::StrCat("the first pooling window along the ", name,
                                                   " lies entirely in the padding (padding ", lo,
                                                   " >= kernel ", k, ")"));
  }
  if (!Known(in) || !Known(k)) return kUnknownDim;
  if (k > 1 && d > kMaxAttrValue / (k - 1)) {
    return absl::InvalidArgumentError(absl::StrCat("the dilated kernel ", name, " (kernel ", k,
                                                   ", dilation ", d, ") is too large"));
  }
  const int64_t eff = d * (k - 1) + 1;
  const int64_t padded = in + lo + hi;
  if (padded < eff) {
    return absl::InvalidArgumentError(
        absl::StrCat("the padded input ", name, " ", padded, " (", in, " + ", lo, " + ", hi,
                     ") is smaller than the ", d > 1 ? "dilated " : "", "kernel ", name, " ", eff));
  }
  const int64_t count = (padded - eff) / s + 1;
  const int64_t last_start = (count - 1) * s - lo;
  if (pool && last_start >= in) {
    return absl::InvalidArgumentError(
        absl::StrCat("the last pooling window along the ", name, " starts at ", last_start,
                     ", past the input ", name, " ", in, ": it lies entirely in the padding"));
  }
  return count;
}

absl::Span<const char* const> InputNames(PrimId id) {
  const OpSpec* s = FindSpec(id);
  if (s == nullptr) return {};
  return absl::MakeConstSpan(s->names.data(), s->count);
}

absl::Status CheckKernelInputs(PrimId id, absl::Span<const Tensor* const> in) {
  KGRAD_ASSIGN_OR_RETURN(const OpSpec* s, SpecOf(id, in.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = *in[i];
    if (t.rank() != 4) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be a rank-4 ", s->names[i],
                                                     " tensor, got ", t.TypeString()));
    }
    if (t.dtype() != in[0]->dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be ",
                                                     DTypeName(in[0]->dtype()),
                                                     " like input 0, got ", t.TypeString()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Shape> MatchShape(int i, const Shape& got, const Shape& expected,
                                 absl::string_view what) {
  Shape out = expected;
  for (size_t k = 0; k < got.size() && k < out.size(); ++k) {
    if (Known(got[k]) && Known(out[k]) && got[k] != out[k]) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be shaped ",
                                                     ShapeToString(expected), " (", what, "), got ",
                                                     ShapeToString(got)));
    }
    if (!Known(out[k])) out[k] = got[k];
  }
  return out;
}

absl::StatusOr<ConvGeom> MakeConvGeom(const Window& win, const Shape& x, int xi, const Shape& w,
                                      int wi) {
  const int64_t groups = win.groups;
  KGRAD_RETURN_IF_ERROR(CheckFilter(groups, x, xi, w, wi));
  ConvGeom g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = w[0], g.kh = w[2], g.kw = w[3];
  g.cg = Known(g.c) ? g.c / groups : w[1];
  g.og = Known(g.o) ? g.o / groups : kUnknownDim;
  g.win = win;
  g.win.kernel = {g.kh, g.kw};
  KGRAD_ASSIGN_OR_RETURN(g.oh, WindowCount(g.win, 0, g.h, /*pool=*/false));
  KGRAD_ASSIGN_OR_RETURN(g.ow, WindowCount(g.win, 1, g.w, /*pool=*/false));
  return g;
}

absl::StatusOr<ConvGeom> ConvOpGeom(const Primitive& p, absl::Span<const Shape* const> in) {
  KGRAD_ASSIGN_OR_RETURN(const OpSpec* s, SpecOf(p.id(), in.size()));
  if (!s->conv)
    return absl::InvalidArgumentError(absl::StrCat(PrimIdName(p.id()), " is not a convolution"));
  KGRAD_ASSIGN_OR_RETURN(Window win, ConvAttrs(p));
  KGRAD_ASSIGN_OR_RETURN(ConvGeom g, MakeConvGeom(win, *in[s->x], s->x, *in[s->w], s->w));
  KGRAD_ASSIGN_OR_RETURN(Shape y, MatchDy(*s, in, g.y_shape()));
  g.n = y[0];  // the batch may be known from dy alone
  return g;
}

absl::StatusOr<ConvGeom> ConvKernelGeom(const Primitive& p, absl::Span<const Tensor* const> in) {
  KGRAD_RETURN_IF_ERROR(CheckKernelInputs(p.id(), in));
  return ConvOpGeom(p, TensorShapes(in).span());
}

absl::StatusOr<PoolGeom> PoolOpGeom(const Primitive& p, absl::Span<const Shape* const> in) {
  KGRAD_ASSIGN_OR_RETURN(const OpSpec* s, SpecOf(p.id(), in.size()));
  if (s->conv)
    return absl::InvalidArgumentError(absl::StrCat(PrimIdName(p.id()), " is not a pooling op"));
  Shape x = *in[s->x];
  if (s->ddx >= 0) {
    KGRAD_ASSIGN_OR_RETURN(x, MatchShape(s->ddx, *in[s->ddx], x, s->other_is));
  }
  KGRAD_ASSIGN_OR_RETURN(PoolGeom g, MakePoolGeom(p, x));
  KGRAD_ASSIGN_OR_RETURN(Shape y, MatchDy(*s, in, g.y_shape()));
  g.n = y[0], g.c = y[1];  // may be known from dy alone
  return g;
}

absl::StatusOr<PoolGeom> PoolKernelGeom(const Primitive& p, absl::Span<const Tensor* const> in) {
  KGRAD_RETURN_IF_ERROR(CheckKernelInputs(p.id(), in));
  return PoolOpGeom(p, TensorShapes(in).span());
}

Shape OutputShape(PrimId id, const ConvGeom& g) {
  const OpSpec* s = FindSpec(id);
  Part out = s != nullptr ? s->out : Part::kY;
  return out == Part::kX ? g.x_shape() : out == Part::kW ? g.w_shape() : g.y_shape();
}

Shape OutputShape(PrimId id, const PoolGeom& g) {
  const OpSpec* s = FindSpec(id);
  return s != nullptr && s->out == Part::kX ? g.x_shape() : g.y_shape();
}

}  // namespace ops
}  // namespace kgrad
