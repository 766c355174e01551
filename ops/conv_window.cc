#include "ops/conv_window.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/dtype.h"
#include "core/status_macros.h"

namespace kgrad {
namespace ops {
namespace {

constexpr const char* kAxisNames[kMaxSpatial] = {"depth", "height", "width"};
// Attribute values beyond this are nonsense and could overflow int64 arithmetic.
constexpr int64_t kMaxAttrValue = kMaxElements;

bool Known(int64_t d) { return d >= 0; }

// The name of `axis` in messages; a 1-D window's one axis is its length.
const char* AxisName(const Window& w, int axis) {
  return w.spatial == 1 ? "length" : kAxisNames[axis];
}

// ----- Attributes -----------------------------------------------------------------
absl::Status BadAttr(const std::string& name, const std::vector<int64_t>& v,
                     absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be ", expected,
                                                 ", got [", absl::StrJoin(v, ", "), "]"));
}

// `spatial` values, each in [min, kMaxAttrValue], into the used axes of `out`;
// an empty list keeps `out` (the default) when `optional`.
absl::Status AxesAttr(const Primitive& p, const std::string& name, int spatial, int64_t min,
                      bool optional, Axes* out) {
  const std::vector<int64_t>& v = p.GetInts(name);
  if (optional && v.empty()) return absl::OkStatus();
  if (static_cast<int>(v.size()) != spatial) {
    return BadAttr(name, v, absl::StrCat(spatial, " value", spatial > 1 ? "s" : "",
                                         " (one per spatial axis), each >= ", min));
  }
  for (int64_t x : v) {
    if (x < min || x > kMaxAttrValue) {
      return BadAttr(name, v, absl::StrCat(spatial, " values, each >= ", min));
    }
  }
  std::copy(v.begin(), v.end(), out->begin() + (kMaxSpatial - spatial));
  return absl::OkStatus();
}

// padding: none, one value per used axis (symmetric), or (begin, end) per used
// axis in axis order ([top, bottom, left, right] in 2-D); each >= 0.
absl::Status ParsePadding(const Primitive& p, Window* w) {
  const std::vector<int64_t>& v = p.GetInts("padding");
  const int s = w->spatial;
  if (v.empty()) return absl::OkStatus();
  const std::string expected = absl::StrCat(
      s, " values (symmetric) or ", 2 * s, " (begin, end per spatial axis), each >= 0");
  if (v.size() != static_cast<size_t>(s) && v.size() != static_cast<size_t>(2 * s)) {
    return BadAttr("padding", v, expected);
  }
  for (int64_t x : v) {
    if (x < 0 || x > kMaxAttrValue) return BadAttr("padding", v, expected);
  }
  const bool pairs = v.size() == static_cast<size_t>(2 * s);
  for (int i = 0; i < s; ++i) {
    w->pad_lo[w->first() + i] = pairs ? v[2 * i] : v[i];
    w->pad_hi[w->first() + i] = pairs ? v[2 * i + 1] : v[i];
  }
  return absl::OkStatus();
}

// A window over `spatial` axes (1 to 3) with trivial leading axes.
absl::StatusOr<Window> EmptyWindow(int spatial) {
  if (spatial < 1 || spatial > kMaxSpatial) {
    return absl::InvalidArgumentError(
        absl::StrCat("windows span 1, 2 or 3 spatial axes, got ", spatial));
  }
  Window w;
  w.spatial = spatial;
  for (int a = w.first(); a < kMaxSpatial; ++a) w.kernel[a] = kUnknownDim;
  for (int a = 0; a < w.first(); ++a) w.kernel[a] = 1;
  return w;
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
    {PrimId::kConv2d, true, 2, {"(N, C, spatial...) input", "(O, C/groups, kernel...) filter"}, 0, 1, -1, -1, nullptr, Part::kY},
    {PrimId::kConv2dBackpropInput,
     true,
     3,
     {"(N, O, spatial...) gradient", "(O, C/groups, kernel...) filter", "(N, C, spatial...) input-shape"},
     2,
     1,
     0,
     -1,
     "the conv2d output of inputs 2 and 1",
     Part::kX},
    {PrimId::kConv2dBackpropFilter,
     true,
     3,
     {"(N, C, spatial...) input", "(N, O, spatial...) gradient", "(O, C/groups, kernel...) filter-shape"},
     0,
     2,
     1,
     -1,
     "the conv2d output of inputs 0 and 2",
     Part::kW},
    {PrimId::kMaxPool2d, false, 1, {"(N, C, spatial...) input"}, 0, -1, -1, -1, nullptr, Part::kY},
    {PrimId::kAvgPool2d, false, 1, {"(N, C, spatial...) input"}, 0, -1, -1, -1, nullptr, Part::kY},
    {PrimId::kMaxPool2dGrad,
     false,
     2,
     {"(N, C, spatial...) input", "(N, C, spatial...) gradient"},
     0,
     -1,
     1,
     -1,
     "the pooled shape of input 0",
     Part::kX},
    {PrimId::kMaxPool2dGradGrad,
     false,
     2,
     {"(N, C, spatial...) input", "(N, C, spatial...) input-gradient"},
     0,
     -1,
     -1,
     1,
     "like input 0",
     Part::kY},
    {PrimId::kAvgPool2dGrad,
     false,
     2,
     {"(N, C, spatial...) gradient", "(N, C, spatial...) input-shape"},
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
  const int spatial = static_cast<int>(w.size()) - 2;
  if (Known(x[1]) && x[1] % groups != 0) {
    return NotDivisible(xi, "a tensor whose channel count (dim 1)", x, x[1], groups);
  }
  if (Known(w[0]) && w[0] % groups != 0) {
    return NotDivisible(wi, "a filter whose output channel count (dim 0)", w, w[0], groups);
  }
  for (int a = 0; a < spatial; ++a) {
    if (Known(w[2 + a]) && w[2 + a] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("input ", wi, " must be a filter whose kernel is at least 1 along every ",
                       "spatial axis, got ", ShapeToString(w)));
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
// The used axes of `s` (a [N, C, spatial...] shape) into d, h, w (trivial ones 1).
Axes SpatialOf(const Shape& s, int spatial) {
  Axes a{1, 1, 1};
  for (int i = 0; i < spatial; ++i) a[kMaxSpatial - spatial + i] = s[2 + i];
  return a;
}

// The window counts along the three axes of an input of sizes `in`.
absl::StatusOr<Axes> WindowCounts(const Window& w, const Axes& in, bool pool) {
  Axes out{1, 1, 1};
  for (int a = w.first(); a < kMaxSpatial; ++a) {
    KGRAD_ASSIGN_OR_RETURN(out[a], WindowCount(w, a, in[a], pool));
  }
  return out;
}

absl::StatusOr<PoolGeom> MakePoolGeom(const Primitive& p, const Shape& x) {
  PoolGeom g;
  const int spatial = static_cast<int>(x.size()) - 2;
  KGRAD_ASSIGN_OR_RETURN(g.win, PoolAttrs(p, spatial));
  g.n = x[0], g.c = x[1];
  const Axes in = SpatialOf(x, spatial);
  g.d = in[kD], g.h = in[kH], g.w = in[kW];
  KGRAD_ASSIGN_OR_RETURN(Axes out, WindowCounts(g.win, in, /*pool=*/true));
  g.od = out[kD], g.oh = out[kH], g.ow = out[kW];
  if (p.id() == PrimId::kAvgPool2d || p.id() == PrimId::kAvgPool2dGrad) {
    g.count_include_pad = p.GetBool("count_include_pad");
  }
  return g;
}

}  // namespace

absl::StatusOr<Window> ConvAttrs(const Primitive& p, int spatial) {
  KGRAD_ASSIGN_OR_RETURN(Window w, EmptyWindow(spatial));
  KGRAD_RETURN_IF_ERROR(AxesAttr(p, "stride", spatial, 1, /*optional=*/true, &w.stride));
  KGRAD_RETURN_IF_ERROR(AxesAttr(p, "dilation", spatial, 1, /*optional=*/true, &w.dilation));
  KGRAD_RETURN_IF_ERROR(ParsePadding(p, &w));
  w.groups = p.GetInt("groups");
  if (w.groups < 1 || w.groups > kMaxAttrValue) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'groups' must be >= 1, got ", w.groups));
  }
  return w;
}

absl::StatusOr<Window> PoolAttrs(const Primitive& p, int spatial) {
  KGRAD_ASSIGN_OR_RETURN(Window w, EmptyWindow(spatial));
  KGRAD_RETURN_IF_ERROR(AxesAttr(p, "kernel", spatial, 1, /*optional=*/false, &w.kernel));
  if (p.GetInts("stride").empty()) {
    w.stride = w.kernel;  // non-overlapping windows
  } else {
    KGRAD_RETURN_IF_ERROR(AxesAttr(p, "stride", spatial, 1, /*optional=*/false, &w.stride));
  }
  KGRAD_RETURN_IF_ERROR(ParsePadding(p, &w));
  return w;
}

absl::StatusOr<int64_t> WindowCount(const Window& w, int axis, int64_t in, bool pool) {
  const char* name = AxisName(w, axis);
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

Shape SpatialShape(int64_t a, int64_t b, const Axes& s, int spatial) {
  Shape out = {a, b};
  out.insert(out.end(), s.end() - spatial, s.end());
  return out;
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
    if (i == 0 && !WindowRank(t.rank())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input 0 must be a rank-3, 4 or 5 ", s->names[0], " tensor, got ", t.TypeString()));
    }
    if (t.rank() != in[0]->rank()) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be a rank-",
                                                     in[0]->rank(), " ", s->names[i],
                                                     " tensor like input 0, got ", t.TypeString()));
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
  const int spatial = win.spatial;
  const Axes in = SpatialOf(x, spatial), k = SpatialOf(w, spatial);
  g.n = x[0], g.c = x[1], g.d = in[kD], g.h = in[kH], g.w = in[kW];
  g.o = w[0], g.kd = k[kD], g.kh = k[kH], g.kw = k[kW];
  g.cg = Known(g.c) ? g.c / groups : w[1];
  g.og = Known(g.o) ? g.o / groups : kUnknownDim;
  g.win = win;
  g.win.kernel = k;
  KGRAD_ASSIGN_OR_RETURN(Axes out, WindowCounts(g.win, in, /*pool=*/false));
  g.od = out[kD], g.oh = out[kH], g.ow = out[kW];
  return g;
}

absl::StatusOr<ConvGeom> ConvOpGeom(const Primitive& p, absl::Span<const Shape* const> in) {
  KGRAD_ASSIGN_OR_RETURN(const OpSpec* s, SpecOf(p.id(), in.size()));
  if (!s->conv)
    return absl::InvalidArgumentError(absl::StrCat(PrimIdName(p.id()), " is not a convolution"));
  if (!WindowRank(static_cast<int>(in[0]->size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("input 0 must have rank 3, 4 or 5, got ", ShapeToString(*in[0])));
  }
  for (const Shape* s : in) {
    if (s->size() != in[0]->size()) {
      return absl::InvalidArgumentError("the inputs must have the same rank");
    }
  }
  KGRAD_ASSIGN_OR_RETURN(Window win, ConvAttrs(p, static_cast<int>(in[0]->size()) - 2));
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
  for (const Shape* t : in) {
    if (!WindowRank(static_cast<int>(t->size())) || t->size() != in[0]->size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the inputs must have the same rank, 3, 4 or 5, got ", ShapeToString(*t)));
    }
  }
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
